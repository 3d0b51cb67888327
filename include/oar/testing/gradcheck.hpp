// Finite-difference gradient checks in double precision, for oar's layers and losses and for
// users' own: a layer is bound alone in a Network on the cpu64 backend, the scalar
// L = sum(y * r) (r fixed random) is differentiated by central differences with respect to every
// input and parameter value, and compared with what backward() computed.
// A layer must be written over `typename B::value_type` (as oar's are) to be checked this way.
#pragma once

#include <algorithm>  // std::max
#include <cmath>      // std::abs
#include <cstddef>    // std::size_t
#include <cstdio>     // std::snprintf
#include <cstdint>    // std::uint64_t
#include <functional> // std::function
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

#include "../core/backend.hpp"    // cpu64
#include "../core/rng.hpp"        // CounterRng
#include "../core/tensor.hpp"     // basic_tensor
#include "../nn/network.hpp"      // Network
#include "../nn/sequential.hpp"   // Sequential

namespace oar::testing {

struct GradcheckOptions {
    double eps = 1e-6;           ///< central-difference step
    double rtol = 1e-6;          ///< |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|)
    double atol = 1e-8;
    std::size_t batch = 2;       ///< samples in the checked batch
    std::uint64_t seed = 7;      ///< network init, input and r
    double input_scale = 1.0;    ///< inputs ~ U(-scale, scale)
    std::size_t max_checks = 0;  ///< per tensor; 0 = every value (else evenly strided)
    bool train = true;           ///< train or eval mode
};

struct GradcheckResult {
    bool ok = true;
    std::size_t checked = 0;     ///< values compared
    double max_abs_error = 0.0;
    double max_rel_error = 0.0;
    std::string worst;           ///< where the largest violation (or error) was: "input[12]", "0.weight[3]"
    std::string message;         ///< first failure, with both values
};

/// Compares `analytic` with central differences of f at x (x is perturbed and restored).
/// `name` labels the values in the result.
inline void compare_gradient(const std::function<double()>& f, std::span<double> x, std::span<const double> analytic,
                             const std::string& name, const GradcheckOptions& o, GradcheckResult& r) {
    const std::size_t n = x.size();
    const std::size_t stride = (o.max_checks == 0 || n <= o.max_checks) ? 1 : (n + o.max_checks - 1) / o.max_checks;
    for (std::size_t i = 0; i < n; i += stride) {
        const double keep = x[i];
        x[i] = keep + o.eps;
        const double up = f();
        x[i] = keep - o.eps;
        const double down = f();
        x[i] = keep;
        const double numeric = (up - down) / (2.0 * o.eps);
        const double a = analytic[i];
        const double err = std::abs(a - numeric);
        const double scale = std::max(std::abs(a), std::abs(numeric));
        const double rel = scale > 0 ? err / scale : 0.0;
        ++r.checked;
        if (err > r.max_abs_error) {
            r.max_abs_error = err;
            r.worst = name + "[" + std::to_string(i) + "]";
        }
        r.max_rel_error = std::max(r.max_rel_error, err > o.atol ? rel : 0.0);
        if (!(err <= o.atol + o.rtol * scale) && r.ok) {
            r.ok = false;
            char buf[160];
            std::snprintf(buf, sizeof buf, "]: analytic %.17g, numeric %.17g (error %.3g, allowed %.3g)", a, numeric,
                          err, o.atol + o.rtol * scale);
            r.message = name + "[" + std::to_string(i) + buf;
        }
    }
}

/// Checks a whole network type's backward (input and every parameter) against finite differences.
/// Net must be a Network<Sequential<...>, Shape<...>, cpu64>.
template <class Net>
GradcheckResult gradcheck_network(const GradcheckOptions& o = {}) {
    using T = typename Net::value_type;
    static_assert(std::is_same_v<T, double>, "oar: gradcheck_network needs a Network on the cpu64 backend");
    using info = typename Net::info;
    constexpr Dims in = info::dims[0];
    constexpr Dims out = info::dims[info::num_layers];

    Net net(o.seed);
    if (o.train) net.train();
    else net.eval();
    const CounterRng rng{o.seed ^ 0x9E3779B97F4A7C15ull};
    basic_tensor<double> x(o.batch, in), r(o.batch, out), dx(o.batch, in);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = (2.0 * rng.uniform(1, i) - 1.0) * o.input_scale;
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = 2.0 * rng.uniform(2, i) - 1.0;

    const std::uint64_t step = net.step();
    auto loss = [&] {
        net.set_step(step);  // the same dropout mask for every evaluation
        auto y = net.forward(x.view());
        // Summed in long double: the rounding of a double sum, divided by 2 eps, would be
        // comparable with small gradients and fail correct layers.
        long double s = 0.0L;
        for (std::size_t i = 0; i < y.size(); ++i) s += static_cast<long double>(y[i]) * r[i];
        return static_cast<double>(s);
    };
    loss();
    net.clear_grad();
    net.backward(r.view(), dx.view());
    const std::vector<double> param_grads(net.parameters().grads().begin(), net.parameters().grads().end());

    GradcheckResult res;
    compare_gradient(loss, x.span(), dx.span(), "input", o, res);
    for (const auto& e : net.parameters().entries()) {
        auto values = net.parameters().value(e);
        compare_gradient(loss, values, std::span<const double>(param_grads.data() + e.offset, e.size), e.key, o, res);
    }
    return res;
}

/// Checks one layer type L on per-sample input shape In.
template <class L, ShapeType In>
GradcheckResult gradcheck_layer(const GradcheckOptions& o = {}) {
    return gradcheck_network<Network<Sequential<L>, In, cpu64>>(o);
}

}  // namespace oar::testing
