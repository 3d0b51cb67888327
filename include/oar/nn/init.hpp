// Parameter initialisation, drawn from counter-based streams: parameter tensor t of a network
// seeded s always gets the same values, whatever else was drawn before. Two schemes: Paddle's
// defaults (the library's default) and PyTorch's (for comparing with, or reproducing, torch runs).
#pragma once

#include <cmath>    // std::sqrt
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t
#include <span>     // std::span

#include "../core/layer_concepts.hpp"  // ParamSpec, init_kind
#include "../core/rng.hpp"             // CounterRng, rng_stream

namespace oar {

/// Which framework's default initialisation a network draws.
///   paddle: each ParamSpec's own init_kind (Linear W XavierUniform, Conv2D W N(0, sqrt(2/fan_in)),
///           biases 0), as paddle.nn does;
///   torch:  every parameter, weights and biases, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as
///           torch.nn.Linear / Conv2d's reset_parameters (kaiming_uniform_ with a = sqrt(5)) do.
enum class init_scheme { paddle, torch };

/// Fills `out` (spec.dims.size() values) for parameter tensor number `index` of a network.
template <class T>
void initialize(const ParamSpec& spec, std::span<T> out, const CounterRng& rng, std::size_t index,
                init_scheme scheme = init_scheme::paddle) {
    const std::uint64_t stream = rng_stream::init + index;
    if (spec.init == init_kind::ones) {  // a normalisation's scale: ones in Paddle and torch alike
        for (auto& v : out) v = T(1);
        return;
    }
    if (scheme == init_scheme::torch) {
        const double a = spec.fan_in ? 1.0 / std::sqrt(static_cast<double>(spec.fan_in)) : 0.0;
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>((2.0 * rng.uniform(stream, i) - 1.0) * a);
        return;
    }
    switch (spec.init) {
        case init_kind::zeros:
            for (auto& v : out) v = T(0);
            break;
        case init_kind::ones:
            break;  // above
        case init_kind::xavier_uniform: {  // U(-a, a), a = sqrt(6 / (fan_in + fan_out))
            const double a = std::sqrt(6.0 / static_cast<double>(spec.fan_in + spec.fan_out));
            for (std::size_t i = 0; i < out.size(); ++i)
                out[i] = static_cast<T>((2.0 * rng.uniform(stream, i) - 1.0) * a);
            break;
        }
        case init_kind::kaiming_normal: {  // N(0, sqrt(2 / fan_in)), Paddle's Conv2D default
            const double sd = std::sqrt(2.0 / static_cast<double>(spec.fan_in));
            for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(rng.normal(stream, i) * sd);
            break;
        }
    }
}

}  // namespace oar
