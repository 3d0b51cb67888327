// Tests of oar/layers/pool2d.hpp: MaxPool2D and AvgPool2D constexpr facts (floor-mode output dims,
// FLOPs, no parameters), check() rejections, forward values through a Network against naive
// loops, and finite-difference gradient checks in double (overlapping and non-overlapping windows).
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/layers/pool2d.hpp>  // the header under test

#include <cmath>    // std::abs
#include <cstddef>  // std::size_t

#include <oar/nn/network.hpp>         // Network: runs the layer
#include <oar/nn/sequential.hpp>      // Sequential
#include <oar/testing/gradcheck.hpp>  // gradcheck_layer

#include "support/random.hpp"  // oar_test::fill_random: seeded inputs

namespace {

using oar_test::fill_random;

template <class L, class In>
void check_pool2d_gradients() {
    const auto r = oar::testing::gradcheck_layer<L, In>();
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.checked == 2 * In::size);  // inputs only: no parameters
}

/// Runs pooling layer L on (C,H,W) through a float Network and compares with naive max / mean.
template <class L, std::size_t C, std::size_t H, std::size_t W, std::size_t K, std::size_t S, bool is_max>
void check_forward() {
    constexpr std::size_t batch = 2, OH = (H - K) / S + 1, OW = (W - K) / S + 1;
    oar::Network<oar::Sequential<L>, oar::Shape<C, H, W>> net;
    oar::Tensor x(batch, oar::make_dims(C, H, W));
    fill_random(x.span(), 9);
    const auto y = net.forward(x.view());
    REQUIRE(y.dims() == oar::make_dims(C, OH, OW));
    std::size_t bad = 0;
    for (std::size_t p = 0; p < batch * C; ++p)
        for (std::size_t oy = 0; oy < OH; ++oy)
            for (std::size_t ox = 0; ox < OW; ++ox) {
                double m = -1e300, s = 0.0;
                for (std::size_t ky = 0; ky < K; ++ky)
                    for (std::size_t kx = 0; kx < K; ++kx) {
                        const double v = x[(p * H + oy * S + ky) * W + ox * S + kx];
                        m = v > m ? v : m;
                        s += v;
                    }
                const double want = is_max ? m : s / static_cast<double>(K * K);
                bad += std::abs(y[(p * OH + oy) * OW + ox] - want) > 1e-6;
            }
    CHECK(bad == 0);
}

}  // namespace

// ---- constexpr facts
static_assert(oar::Layer<oar::MaxPool2D<2>> && !oar::ParametricLayer<oar::MaxPool2D<2>>);
static_assert(oar::Layer<oar::AvgPool2D<3, 2>> && !oar::ParametricLayer<oar::AvgPool2D<3, 2>>);
static_assert(oar::MaxPool2D<2>::name == "MaxPool2D" && oar::AvgPool2D<2>::name == "AvgPool2D");
static_assert(oar::MaxPool2D<2>::output_dims(oar::make_dims(20, 28, 28)) == oar::make_dims(20, 14, 14));
static_assert(oar::MaxPool2D<2>::output_dims(oar::make_dims(3, 7, 5)) == oar::make_dims(3, 3, 2), "floor mode");
static_assert(oar::AvgPool2D<3, 2>::output_dims(oar::make_dims(1, 7, 8)) == oar::make_dims(1, 3, 3));
static_assert(oar::MaxPool2D<3, 1>::output_dims(oar::make_dims(2, 5, 6)) == oar::make_dims(2, 3, 4));
static_assert(oar::MaxPool2D<2>::flops(oar::make_dims(20, 28, 28)) == 20 * 14 * 14 * 4);
static_assert(oar::AvgPool2D<3, 2>::flops(oar::make_dims(1, 7, 8)) == 9 * 9);
static_assert(oar::MaxPool2D<2>::workspace(oar::make_dims(20, 28, 28)) == 0);
static_assert(oar::MaxPool2D<2>::check(oar::make_dims(1, 2, 2)).ok());

TEST_CASE("pooling check rejects a wrong rank and an image smaller than the window, with numbers") {
    constexpr auto rank = oar::MaxPool2D<2>::check(oar::make_dims(784));
    static_assert(rank.kind == oar::check_kind::rank && rank.expected == 3 && rank.got == 1);
    constexpr auto height = oar::AvgPool2D<3>::check(oar::make_dims(4, 2, 9));
    static_assert(height.kind == oar::check_kind::spatial && height.expected == 3 && height.got == 2);
    constexpr auto width = oar::MaxPool2D<4, 1>::check(oar::make_dims(4, 9, 3));
    static_assert(width.kind == oar::check_kind::spatial && width.expected == 4 && width.got == 3);
    const auto r = oar::AvgPool2D<5>::check(oar::make_dims(1, 4, 4));
    CHECK(r.kind == oar::check_kind::spatial);
    CHECK(r.expected == 5);
    CHECK(r.got == 4);
}

TEST_CASE("MaxPool2D and AvgPool2D forward match naive window loops through a network") {
    check_forward<oar::MaxPool2D<2>, 3, 6, 6, 2, 2, true>();
    check_forward<oar::MaxPool2D<3, 2>, 2, 7, 8, 3, 2, true>();
    check_forward<oar::AvgPool2D<2>, 3, 7, 5, 2, 2, false>();
    check_forward<oar::AvgPool2D<3, 1>, 1, 5, 6, 3, 1, false>();
}

TEST_CASE("MaxPool2D gradients match finite differences") {
    SUBCASE("MaxPool2D<2> on (2,6,6)") { check_pool2d_gradients<oar::MaxPool2D<2>, oar::Shape<2, 6, 6>>(); }
    SUBCASE("MaxPool2D<3,2> on (1,7,7), overlapping") { check_pool2d_gradients<oar::MaxPool2D<3, 2>, oar::Shape<1, 7, 7>>(); }
    SUBCASE("MaxPool2D<2> on (2,5,7), floor mode") { check_pool2d_gradients<oar::MaxPool2D<2>, oar::Shape<2, 5, 7>>(); }
}

TEST_CASE("AvgPool2D gradients match finite differences") {
    SUBCASE("AvgPool2D<2> on (2,6,6)") { check_pool2d_gradients<oar::AvgPool2D<2>, oar::Shape<2, 6, 6>>(); }
    SUBCASE("AvgPool2D<3,2> on (1,7,8), overlapping") { check_pool2d_gradients<oar::AvgPool2D<3, 2>, oar::Shape<1, 7, 8>>(); }
    SUBCASE("AvgPool2D<2,3> on (2,8,5), gaps") { check_pool2d_gradients<oar::AvgPool2D<2, 3>, oar::Shape<2, 8, 5>>(); }
}

// ---- AdaptiveAvgPool2D
static_assert(oar::Layer<oar::AdaptiveAvgPool2D<1, 1>> && !oar::ParametricLayer<oar::AdaptiveAvgPool2D<2, 3>>);
static_assert(oar::AdaptiveAvgPool2D<1, 1>::output_dims(oar::make_dims(64, 8, 8)) == oar::make_dims(64, 1, 1));
static_assert(oar::AdaptiveAvgPool2D<2, 3>::output_dims(oar::make_dims(4, 7, 9)) == oar::make_dims(4, 2, 3));
static_assert(oar::AdaptiveAvgPool2D<3>::output_dims(oar::make_dims(1, 5, 5)) == oar::make_dims(1, 3, 3));

TEST_CASE("AdaptiveAvgPool2D averages Paddle's windows: floor(i H / OH) to ceil((i + 1) H / OH)") {
    CHECK(oar::AdaptiveAvgPool2D<1>::check(oar::make_dims(10)).kind == oar::check_kind::rank);
    // (1, 5, 5) -> (2, 2): rows [0, 3) and [2, 5), the same for columns.
    oar::Network<oar::Sequential<oar::AdaptiveAvgPool2D<2, 2>>, oar::Shape<1, 5, 5>> net;
    oar::Tensor x(1, oar::make_dims(1, 5, 5));
    for (std::size_t i = 0; i < 25; ++i) x[i] = static_cast<float>(i);
    const auto y = net.forward(x.view());
    auto mean = [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
        double s = 0;
        for (std::size_t r = r0; r < r1; ++r)
            for (std::size_t c = c0; c < c1; ++c) s += x[r * 5 + c];
        return s / static_cast<double>((r1 - r0) * (c1 - c0));
    };
    CHECK(y[0] == doctest::Approx(mean(0, 3, 0, 3)).epsilon(1e-6));
    CHECK(y[1] == doctest::Approx(mean(0, 3, 2, 5)).epsilon(1e-6));
    CHECK(y[2] == doctest::Approx(mean(2, 5, 0, 3)).epsilon(1e-6));
    CHECK(y[3] == doctest::Approx(mean(2, 5, 2, 5)).epsilon(1e-6));
    // <1, 1>: global average pooling, one mean per channel.
    oar::Network<oar::Sequential<oar::AdaptiveAvgPool2D<1, 1>>, oar::Shape<1, 5, 5>> gap;
    CHECK(gap.forward(x.view())[0] == doctest::Approx(12.0).epsilon(1e-6));
}

TEST_CASE("AdaptiveAvgPool2D gradients match finite differences") {
    SUBCASE("<1,1> on (3,4,5)") { check_pool2d_gradients<oar::AdaptiveAvgPool2D<1, 1>, oar::Shape<3, 4, 5>>(); }
    SUBCASE("<2,3> on (2,7,9), uneven windows") { check_pool2d_gradients<oar::AdaptiveAvgPool2D<2, 3>, oar::Shape<2, 7, 9>>(); }
    SUBCASE("<4> on (1,5,5), overlapping windows") { check_pool2d_gradients<oar::AdaptiveAvgPool2D<4>, oar::Shape<1, 5, 5>>(); }
}

