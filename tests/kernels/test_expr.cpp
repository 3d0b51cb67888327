// Tests of oar/kernels/expr.hpp: a chain of elementwise functors run by the CPU map kernels gives
// the bits of the functors mapped one after the other (forward, and backward through the stored
// intermediate values), on lengths that use the SIMD body, the scalar tail and several chunks;
// its backward matches central differences in double; settings are kept; a part without a SIMD
// body sends the whole chain to the scalar loop.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/expr.hpp>  // the header under test

#include <oar/kernels/cpu/elementwise.hpp>  // the functors, op::map / op::map_backward on cpu

#include <cmath>    // std::abs
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t
#include <string>   // std::string: labels
#include <vector>   // std::vector

#include "support/random.hpp"  // oar_test::rand_unit: seeded inputs

namespace {

using oar_test::rand_unit;

template <class T>
std::vector<T> inputs(std::size_t n, std::uint64_t seed, double scale) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = i % 11 == 5 ? T(0) : static_cast<T>(scale * rand_unit(seed));
    return v;
}

template <class T>
using map = oar::kernel<oar::op::map, oar::basic_cpu<T>>;
template <class T>
using map_backward = oar::kernel<oar::op::map_backward, oar::basic_cpu<T>>;

/// The chain of f1, f2, f3 through one map and one map_backward against the three functors mapped
/// one after the other (the layer-by-layer path), compared bit for bit.
template <class T, class F1, class F2, class F3>
void check_chain_bits(const char* tag, F1 f1, F2 f2, F3 f3, std::size_t n) {
    INFO("n=", n, " T=", std::string(sizeof(T) == 4 ? "float" : "double"), " chain ", std::string(tag));
    const auto c = oar::expr::then(f1, f2, f3);
    static_assert(decltype(c)::length == 3);
    const auto x = inputs<T>(n, 40 + n, 6.0);
    const auto dy = inputs<T>(n, 90 + n, 1.0);
    // layer by layer
    std::vector<T> a1(n), a2(n), y(n), d2(n), d1(n), dx(n);
    map<T>::run(f1, x.data(), a1.data(), n);
    map<T>::run(f2, a1.data(), a2.data(), n);
    map<T>::run(f3, a2.data(), y.data(), n);
    map_backward<T>::run(f3, a2.data(), y.data(), dy.data(), d2.data(), n);
    map_backward<T>::run(f2, a1.data(), a2.data(), d2.data(), d1.data(), n);
    map_backward<T>::run(f1, x.data(), a1.data(), d1.data(), dx.data(), n);
    // one pass each
    std::vector<T> yc(n), dxc(n);
    map<T>::run(c, x.data(), yc.data(), n);
    map_backward<T>::run(c, x.data(), yc.data(), dy.data(), dxc.data(), n);
    CHECK(yc == y);
    CHECK(dxc == dx);
    // in place, as a network runs the backward on its gradient buffer
    std::vector<T> g = dy;
    map_backward<T>::run(c, x.data(), yc.data(), g.data(), g.data(), n);
    CHECK(g == dx);
    std::size_t nonzero = 0;
    for (T v : dx) nonzero += v != T(0);
    if (n >= 37) CHECK(nonzero > n / 4);  // the gradients flow (not all masked away)
}

/// A functor with only scalar members.
struct scalar_square {
    template <class T>
    T operator()(T x) const { return x * x; }
    template <class T>
    T backward(T x, T, T dy) const { return T(2) * x * dy; }
};

}  // namespace

TEST_CASE("a chain of three functors gives the bits of the three maps, forward and backward") {
    using namespace oar;
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{37}, std::size_t{1000}, std::size_t{70001}}) {
        check_chain_bits<float>("leaky tanh hardswish", leaky_relu_fn{0.2f}, tanh_fn{}, hardswish_fn{}, n);
        check_chain_bits<float>("relu sigmoid elu", relu_fn{}, sigmoid_fn{}, elu_fn{0.5f}, n);
        check_chain_bits<float>("gelu leaky(-0.3) relu", gelu_fn{}, leaky_relu_fn{-0.3f}, relu_fn{}, n);
        check_chain_bits<double>("hardswish gelu tanh", hardswish_fn{}, gelu_fn{}, tanh_fn{}, n);
    }
}

TEST_CASE("a chain of one functor is the functor, bit for bit") {
    const std::size_t n = 133;
    const auto x = inputs<float>(n, 3, 5.0);
    const auto dy = inputs<float>(n, 4, 1.0);
    std::vector<float> y1(n), y2(n), d1(n), d2(n);
    const oar::gelu_fn f;
    const auto c = oar::expr::then(f);
    static_assert(decltype(c)::length == 1);
    map<float>::run(f, x.data(), y1.data(), n);
    map<float>::run(c, x.data(), y2.data(), n);
    map_backward<float>::run(f, x.data(), y1.data(), dy.data(), d1.data(), n);
    map_backward<float>::run(c, x.data(), y2.data(), dy.data(), d2.data(), n);
    CHECK(y1 == y2);
    CHECK(d1 == d2);
}

TEST_CASE("a chain keeps its parts' settings and evaluates them in order") {
    const auto c = oar::expr::then(oar::leaky_relu_fn{0.5f}, oar::elu_fn{2.0f});
    CHECK(c.head.slope == 0.5f);
    CHECK(c.tail.head.alpha == 2.0f);
    CHECK(c(-1.0f) == oar::elu_fn{2.0f}(-0.5f));
    CHECK(c(3.0f) == 3.0f);
    const auto d = oar::expr::then(oar::elu_fn{2.0f}, oar::leaky_relu_fn{0.5f});  // the other order differs
    CHECK(d(-1.0f) == 0.5f * oar::elu_fn{2.0f}(-1.0f));
    CHECK(c(-1.0f) != d(-1.0f));
}

TEST_CASE("the chain's backward matches central differences of its forward in double") {
    const auto c = oar::expr::then(oar::gelu_fn{}, oar::elu_fn{0.7f}, oar::tanh_fn{}, oar::hardswish_fn{},
                                   oar::leaky_relu_fn{0.1f}, oar::sigmoid_fn{});
    static_assert(decltype(c)::length == 6);
    const std::size_t n = 45;  // SIMD body and tail
    auto x = inputs<double>(n, 12, 4.0);
    for (double& v : x)
        if (std::abs(std::abs(v) - 3.0) < 1e-3 || std::abs(v) < 1e-3) v += 0.01;  // off the kinks
    std::vector<double> y(n), dx(n), ones(n, 1.0);
    map<double>::run(c, x.data(), y.data(), n);
    map_backward<double>::run(c, x.data(), y.data(), ones.data(), dx.data(), n);
    std::size_t bad = 0;
    const double h = 1e-6;
    for (std::size_t i = 0; i < n; ++i) {
        const double numeric = (c(x[i] + h) - c(x[i] - h)) / (2 * h);
        if (std::abs(numeric - dx[i]) > 1e-7 + 1e-6 * std::abs(numeric)) {
            ++bad;
            INFO("x=", x[i], " analytic ", dx[i], " numeric ", numeric);
            CHECK(false);
        }
    }
    CHECK(bad == 0);
}

TEST_CASE("ReLU, LeakyReLU and Hardswish say their forward is cheap to recompute; the others do not") {
    static_assert(oar::expr::cheap_forward<oar::relu_fn> && oar::expr::cheap_forward<oar::leaky_relu_fn> &&
                  oar::expr::cheap_forward<oar::hardswish_fn>);
    static_assert(!oar::expr::cheap_forward<oar::gelu_fn> && !oar::expr::cheap_forward<oar::tanh_fn> &&
                  !oar::expr::cheap_forward<oar::sigmoid_fn> && !oar::expr::cheap_forward<oar::elu_fn> &&
                  !oar::expr::cheap_forward<scalar_square>);
}

TEST_CASE("a part without SIMD members sends the whole chain to the scalar loop") {
    using C = oar::expr::chain<oar::relu_fn, scalar_square>;
    static_assert(oar::SimdFunctor<oar::expr::chain<oar::relu_fn, oar::tanh_fn>, float>);
    static_assert(!oar::SimdFunctor<C, float>);
    const C c{};
    const std::vector<float> x{-2.0f, -0.5f, 0.0f, 1.5f, 3.0f, -1.0f, 2.0f, 0.25f, 4.0f};
    std::vector<float> y(x.size()), dx(x.size()), dy(x.size(), 1.0f);
    map<float>::run(c, x.data(), y.data(), x.size());
    map_backward<float>::run(c, x.data(), y.data(), dy.data(), dx.data(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        const float r = x[i] > 0 ? x[i] : 0.0f;
        CHECK(y[i] == r * r);
        CHECK(dx[i] == (x[i] > 0 ? 2.0f * r : 0.0f));
    }
}
