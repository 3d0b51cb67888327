// Tests of oar/kernels/cpu/elementwise.hpp: relu/sigmoid/tanh through kernel<op::map> and
// kernel<op::map_backward>, on lengths that use whole vectors, only a partial one, or both,
// against std:: functions in long double; in-place maps; special values (NaN, +-inf, saturation);
// and a scalar-only functor taking the scalar loop; relu_mask (the fused ReLU's backward from its
// output) against map_backward(relu_fn) from its input, bit for bit.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cpu/elementwise.hpp>  // the header under test

#include <bit>      // std::bit_cast
#include <cmath>    // std::exp, std::tanh, std::isnan
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t, std::uint32_t
#include <limits>   // std::numeric_limits
#include <string>   // std::string
#include <vector>   // std::vector

#include "support/random.hpp"  // oar_test::rand_unit: seeded inputs

namespace {

using oar_test::rand_unit;

/// Inputs in [-8, 8), with exact zeros sprinkled in (relu's kink).
template <class T>
std::vector<T> inputs(std::size_t n, std::uint64_t seed) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = i % 7 == 3 ? T(0) : static_cast<T>(8.0 * rand_unit(seed));
    return v;
}

long double ref_sigmoid(long double x) { return 1.0L / (1.0L + std::exp(-x)); }

struct ElementwiseReference {
    const char* name;
    long double (*f)(long double);
    long double (*df)(long double);  // derivative at x
};
const ElementwiseReference references[] = {
    {"relu", [](long double x) { return x < 0 ? 0.0L : x; }, [](long double x) { return x > 0 ? 1.0L : 0.0L; }},
    {"sigmoid", ref_sigmoid, [](long double x) { return ref_sigmoid(x) * (1 - ref_sigmoid(x)); }},
    {"tanh", [](long double x) { return std::tanh(x); },
     [](long double x) { return 1 - std::tanh(x) * std::tanh(x); }},
};

/// Checks map and map_backward of functor F against reference `r` for length n.
template <class T, class F>
void check_functor(const F& f, const ElementwiseReference& r, std::size_t n) {
    INFO(r.name, " n=", n, " T=", sizeof(T) == 4 ? "float" : "double");
    const auto x = inputs<T>(n, 100 + n);
    std::vector<T> dy(n), y(n + 1, T(-3)), dx(n + 1, T(-3));
    std::uint64_t s = 7 + n;
    for (auto& v : dy) v = static_cast<T>(rand_unit(s));
    oar::kernel<oar::op::map, oar::basic_cpu<T>>::run(f, x.data(), y.data(), n);
    oar::kernel<oar::op::map_backward, oar::basic_cpu<T>>::run(f, x.data(), y.data(), dy.data(), dx.data(), n);

    // A few ulps of the result, plus an absolute floor for values near zero; the backward of
    // sigmoid/tanh is computed from y, so it inherits y's rounding: allow for it.
    const long double u = std::numeric_limits<T>::epsilon();
    std::size_t bad_y = 0, bad_dx = 0;
    std::string first;
    for (std::size_t i = 0; i < n; ++i) {
        const long double want_y = r.f(x[i]);
        const long double want_dx = r.df(x[i]) * dy[i];
        const long double ey = std::abs(y[i] - want_y), edx = std::abs(dx[i] - want_dx);
        if (!(ey <= 8 * u * std::abs(want_y) + 4 * u * u)) {
            if (bad_y++ == 0) first = "y[" + std::to_string(i) + "] x=" + std::to_string(static_cast<double>(x[i]));
        }
        if (!(edx <= 8 * u * (std::abs(want_dx) + std::abs(static_cast<long double>(dy[i]))) + 4 * u * u)) {
            if (bad_dx++ == 0)
                first += " dx[" + std::to_string(i) + "] x=" + std::to_string(static_cast<double>(x[i]));
        }
    }
    INFO(first);
    CHECK(bad_y == 0);
    CHECK(bad_dx == 0);
    CHECK(y[n] == T(-3));  // nothing written past n
    CHECK(dx[n] == T(-3));
}

// Lengths: 0, only the scalar tail, exactly one or two vectors, and vectors plus a tail, for
// widths of 16 floats / 8 doubles (AVX-512) as well as narrower ISAs.
constexpr std::size_t lengths[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100};

/// A functor with no SIMD body: the map kernels must use the scalar loop for it.
struct square_fn {
    template <class T>
    T operator()(T x) const { return x * x; }
    template <class T>
    T backward(T x, T, T dy) const { return 2 * x * dy; }
};

}  // namespace

static_assert(oar::SimdFunctor<oar::relu_fn, float> && oar::SimdFunctor<oar::relu_fn, double>);
static_assert(oar::SimdFunctor<oar::sigmoid_fn, float> && oar::SimdFunctor<oar::tanh_fn, double>);
static_assert(!oar::SimdFunctor<square_fn, float>);

TEST_CASE("relu, sigmoid and tanh maps and their backward match std:: functions on SIMD and tail lengths") {
    for (std::size_t n : lengths) {
        check_functor<float>(oar::relu_fn{}, references[0], n);
        check_functor<float>(oar::sigmoid_fn{}, references[1], n);
        check_functor<float>(oar::tanh_fn{}, references[2], n);
        check_functor<double>(oar::relu_fn{}, references[0], n);
        check_functor<double>(oar::sigmoid_fn{}, references[1], n);
        check_functor<double>(oar::tanh_fn{}, references[2], n);
    }
}

TEST_CASE("a value's bits do not depend on its position: the last partial vector goes through the SIMD body too") {
    // The same x at index 0 (in a whole vector) and at the last index (in the partial last vector).
    constexpr std::size_t n = 35;
    for (float v : {-7.5f, -0.3f, 0.0f, 0.2f, 3.0f, 12.0f}) {
        std::vector<float> x(n, 0.5f), y(n);
        x.front() = v;
        x.back() = v;
        oar::kernel<oar::op::map, oar::cpu>::run(oar::sigmoid_fn{}, x.data(), y.data(), n);
        CHECK(y.front() == y.back());
        oar::kernel<oar::op::map, oar::cpu>::run(oar::tanh_fn{}, x.data(), y.data(), n);
        CHECK(y.front() == y.back());
        oar::kernel<oar::op::map, oar::cpu>::run(oar::gelu_fn{}, x.data(), y.data(), n);
        CHECK(y.front() == y.back());
        std::vector<float> dy(n, 0.25f), dx(n);
        oar::kernel<oar::op::map_backward, oar::cpu>::run(oar::gelu_fn{}, x.data(), y.data(), dy.data(), dx.data(), n);
        CHECK(dx.front() == dx.back());
        oar::kernel<oar::op::map, oar::cpu>::run(oar::relu_fn{}, x.data(), y.data(), n);
        CHECK(y.front() == y.back());
    }
}

TEST_CASE("map runs in place when x and y are the same buffer") {
    for (std::size_t n : {5u, 16u, 37u}) {
        auto x = inputs<float>(n, 3);
        const auto orig = x;
        oar::kernel<oar::op::map, oar::cpu>::run(oar::tanh_fn{}, x.data(), x.data(), n);
        for (std::size_t i = 0; i < n; ++i) CHECK(std::abs(x[i] - std::tanh(orig[i])) <= 1e-6f);
        auto z = inputs<double>(n, 4);
        const auto zo = z;
        oar::kernel<oar::op::map, oar::cpu64>::run(oar::relu_fn{}, z.data(), z.data(), n);
        for (std::size_t i = 0; i < n; ++i) CHECK(z[i] == (zo[i] < 0 ? 0.0 : zo[i]));
    }
}

TEST_CASE("relu passes NaN through and its backward is zero at x = 0, in the SIMD body and the tail") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    constexpr std::size_t n = 35;  // index 2 lies in a vector, index 34 in the tail
    std::vector<float> x(n, -1.0f), y(n), dy(n, 1.0f), dx(n);
    x[2] = nan;
    x[34] = nan;
    x[5] = 0.0f;
    x[33] = 0.0f;
    oar::kernel<oar::op::map, oar::cpu>::run(oar::relu_fn{}, x.data(), y.data(), n);
    oar::kernel<oar::op::map_backward, oar::cpu>::run(oar::relu_fn{}, x.data(), y.data(), dy.data(), dx.data(), n);
    CHECK(std::isnan(y[2]));
    CHECK(std::isnan(y[34]));
    CHECK(y[5] == 0.0f);
    CHECK(dx[5] == 0.0f);
    CHECK(dx[33] == 0.0f);
    CHECK(dx[0] == 0.0f);
}

TEST_CASE("sigmoid and tanh saturate without NaN for huge and infinite inputs") {
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> vals = {-inf, -1e4f, -100.0f, 100.0f, 1e4f, inf};
    for (std::size_t n : {6u, 38u}) {  // all tail, and mostly SIMD
        std::vector<float> x(n), ys(n), yt(n), dy(n, 1.0f), ds(n), dt(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = vals[i % vals.size()];
        oar::kernel<oar::op::map, oar::cpu>::run(oar::sigmoid_fn{}, x.data(), ys.data(), n);
        oar::kernel<oar::op::map, oar::cpu>::run(oar::tanh_fn{}, x.data(), yt.data(), n);
        oar::kernel<oar::op::map_backward, oar::cpu>::run(oar::sigmoid_fn{}, x.data(), ys.data(), dy.data(),
                                                          ds.data(), n);
        oar::kernel<oar::op::map_backward, oar::cpu>::run(oar::tanh_fn{}, x.data(), yt.data(), dy.data(), dt.data(),
                                                          n);
        for (std::size_t i = 0; i < n; ++i) {
            INFO("n=", n, " x=", x[i]);
            const bool neg = x[i] < 0;
            CHECK(ys[i] == (neg ? 0.0f : 1.0f));
            CHECK(yt[i] == (neg ? -1.0f : 1.0f));
            CHECK(std::abs(ds[i]) <= 1e-30f);
            CHECK(dt[i] == 0.0f);
        }
    }
}

TEST_CASE("a functor without a SIMD body is mapped by the scalar loop") {
    constexpr std::size_t n = 41;
    std::vector<double> x(n), y(n), dy(n, 0.5), dx(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<double>(i) - 20.0;
    oar::kernel<oar::op::map, oar::cpu64>::run(square_fn{}, x.data(), y.data(), n);
    oar::kernel<oar::op::map_backward, oar::cpu64>::run(square_fn{}, x.data(), y.data(), dy.data(), dx.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
        CHECK(y[i] == x[i] * x[i]);
        CHECK(dx[i] == x[i]);
    }
}

TEST_CASE("relu_mask on the ReLU's output gives the bits of the ReLU's backward on its input") {
    for (std::size_t n : {7u, 64u, 67u, 200003u}) {  // tail only, whole vectors, both, several pool chunks
        INFO("n=" << n);
        auto x = inputs<float>(n, 17);
        for (std::size_t i = 0; i < n; i += 2) x[i] = -x[i];
        x[n / 2] = std::numeric_limits<float>::quiet_NaN();
        x[n - 1] = -0.0f;
        x[0] = std::numeric_limits<float>::quiet_NaN();
        const auto dy = inputs<float>(n, 18);
        std::vector<float> y(n), want(n), got = dy;
        oar::kernel<oar::op::map, oar::cpu>::run(oar::relu_fn{}, x.data(), y.data(), n);
        oar::kernel<oar::op::map_backward, oar::cpu>::run(oar::relu_fn{}, x.data(), y.data(), dy.data(), want.data(), n);
        oar::kernel<oar::op::relu_mask, oar::cpu>::run(y.data(), got.data(), n);
        std::size_t bad = 0, cut = 0, kept = 0;
        for (std::size_t i = 0; i < n; ++i) {
            bad += std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]);
            cut += got[i] == 0.0f && dy[i] != 0.0f;
            kept += got[i] == dy[i] && dy[i] != 0.0f;
        }
        CHECK(bad == 0);
        CHECK(cut > n / 4);
        CHECK(kept > n / 4);
        CHECK(got[0] == 0.0f);  // NaN input: no gradient, as relu_fn::backward
    }
}
