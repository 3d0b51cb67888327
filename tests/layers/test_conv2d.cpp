// Tests of oar/layers/conv2d.hpp: the constexpr facts (output dims, FLOPs, workspace, weight
// [OutC, InC, K, K]), check() rejections, forward and backward values through a float Network
// against a direct convolution loop written here, and finite-difference gradient checks in double
// for several kernel / stride / padding combinations, the course's Conv2D<1,20,5,1,2> among them.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/layers/conv2d.hpp>  // the header under test

#include <cmath>    // std::abs
#include <cstddef>  // std::size_t, std::ptrdiff_t
#include <span>     // std::span: the bias, or zeros without one
#include <string>   // std::string
#include <type_traits>  // std::is_same_v
#include <vector>   // std::vector

#include <oar/nn/network.hpp>         // Network: runs the layer with its parameters
#include <oar/nn/sequential.hpp>      // Sequential
#include <oar/layers/activation.hpp>  // ReLU: the fused epilogue
#include <oar/testing/gradcheck.hpp>  // gradcheck_layer

#include "support/fused_relu.hpp"  // oar_test::check_fused_relu
#include "support/random.hpp"  // oar_test::fill_random: seeded inputs and parameters

namespace {

using oar_test::fill_random;

using Course = oar::Conv2D<1, 20, 5, 1, 2>;
constexpr oar::Dims mnist = oar::make_dims(1, 28, 28);

/// Forward and backward of Conv2D<InC, OutC, K, S, P, HasBias> on (InC, H, W) through a float
/// Network, against direct loops: y, dW, db (with a bias) and dx.
template <std::size_t InC, std::size_t OutC, oar::Size2 K, oar::Size2 S, oar::Size2 P, std::size_t H, std::size_t W,
          oar::Bias HasBias = oar::Bias::yes>
void check_rect_against_direct_loops() {
    constexpr bool has_bias = HasBias == oar::Bias::yes;
    INFO("Conv2D<", InC, ",", OutC, ",", K.h, "x", K.w, ",", S.h, "x", S.w, ",", P.h, "x", P.w, ", bias ", has_bias,
         "> on (", InC, ",", H, ",", W, ")");
    constexpr std::size_t batch = 2;
    constexpr std::size_t OH = (H + 2 * P.h - K.h) / S.h + 1, OW = (W + 2 * P.w - K.w) / S.w + 1;
    oar::Network<oar::Sequential<oar::Conv2D<InC, OutC, K, S, P, HasBias>>, oar::Shape<InC, H, W>> net(11);
    auto& ps = net.parameters();
    CHECK(ps.entries().size() == (has_bias ? 2u : 1u));
    std::vector<float> no_bias(OutC, 0.0f);
    if constexpr (has_bias) fill_random(ps.value(ps.entry("0.bias")), 3);
    const auto w = ps.value(ps.entry("0.weight"));  // (OutC, InC, KH, KW)
    const std::span<const float> b = has_bias ? ps.value(ps.entry("0.bias")) : std::span<const float>(no_bias);
    oar::Tensor x(batch, oar::make_dims(InC, H, W)), dy(batch, oar::make_dims(OutC, OH, OW)),
        dx(batch, oar::make_dims(InC, H, W));
    fill_random(x.span(), 4);
    fill_random(dy.span(), 5);
    for (auto& v : dx.span()) v = 1e6f;  // backward must overwrite dx, not add to it
    const auto y = net.forward(x.view());
    REQUIRE(y.dims() == oar::make_dims(OutC, OH, OW));
    net.backward(dy.view(), dx.view());
    const auto dw = ps.grad(ps.entry("0.weight"));
    const std::span<const float> db = has_bias ? ps.grad(ps.entry("0.bias")) : std::span<const float>(no_bias);

    std::vector<double> want_dw(w.size(), 0.0), want_db(OutC, 0.0), want_dx(x.size(), 0.0);
    std::size_t bad_y = 0;
    for (std::size_t s = 0; s < batch; ++s)
        for (std::size_t o = 0; o < OutC; ++o)
            for (std::size_t oy = 0; oy < OH; ++oy)
                for (std::size_t ox = 0; ox < OW; ++ox) {
                    const std::size_t yi = ((s * OutC + o) * OH + oy) * OW + ox;
                    double acc = b[o];
                    want_db[o] += dy[yi];
                    for (std::size_t c = 0; c < InC; ++c)
                        for (std::size_t ky = 0; ky < K.h; ++ky)
                            for (std::size_t kx = 0; kx < K.w; ++kx) {
                                const auto iy = static_cast<std::ptrdiff_t>(oy * S.h + ky) - static_cast<std::ptrdiff_t>(P.h);
                                const auto ix = static_cast<std::ptrdiff_t>(ox * S.w + kx) - static_cast<std::ptrdiff_t>(P.w);
                                if (iy < 0 || ix < 0 || iy >= static_cast<std::ptrdiff_t>(H) ||
                                    ix >= static_cast<std::ptrdiff_t>(W))
                                    continue;
                                const std::size_t xi = ((s * InC + c) * H + static_cast<std::size_t>(iy)) * W +
                                                       static_cast<std::size_t>(ix);
                                const std::size_t wi = ((o * InC + c) * K.h + ky) * K.w + kx;
                                acc += static_cast<double>(w[wi]) * x[xi];
                                want_dw[wi] += static_cast<double>(dy[yi]) * x[xi];
                                want_dx[xi] += static_cast<double>(dy[yi]) * w[wi];
                            }
                    bad_y += std::abs(y[yi] - acc) > 1e-5;
                }
    std::size_t bad_dw = 0, bad_db = 0, bad_dx = 0;
    for (std::size_t i = 0; i < w.size(); ++i) bad_dw += std::abs(dw[i] - want_dw[i]) > 1e-4;
    if constexpr (has_bias)
        for (std::size_t o = 0; o < OutC; ++o) bad_db += std::abs(db[o] - want_db[o]) > 1e-4;
    for (std::size_t i = 0; i < x.size(); ++i) bad_dx += std::abs(dx[i] - want_dx[i]) > 1e-5;
    CHECK(bad_y == 0);
    CHECK(bad_dw == 0);
    CHECK(bad_db == 0);
    CHECK(bad_dx == 0);
}

template <std::size_t InC, std::size_t OutC, std::size_t K, std::size_t S, std::size_t P, std::size_t H,
          std::size_t W>
void check_against_direct_loops() {
    check_rect_against_direct_loops<InC, OutC, K, S, P, H, W>();
}

template <class L, class In>
void check_conv2d_gradients(const oar::testing::GradcheckOptions& o = {}) {
    const auto r = oar::testing::gradcheck_layer<L, In>(o);
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.checked > 0);
}

}  // namespace

// ---- constexpr facts
static_assert(oar::Layer<Course> && oar::ParametricLayer<Course>);
static_assert(Course::name == "Conv2D" && Course::num_params == 2);
static_assert(Course::output_dims(mnist) == oar::make_dims(20, 28, 28), "padding 2 keeps 28x28");
static_assert(Course::flops(mnist) == 20 * 28 * 28 * (2 * 25 + 1));
static_assert(Course::workspace(mnist) == 2 * 25 * 784, "columns and their gradient");
static_assert(Course::params(mnist)[0].name == "weight");
static_assert(Course::params(mnist)[0].dims == oar::make_dims(20, 1, 5, 5), "[OutC, InC, K, K]");
static_assert(Course::params(mnist)[0].init == oar::init_kind::kaiming_normal);
static_assert(Course::params(mnist)[0].fan_in == 25 && Course::params(mnist)[0].fan_out == 500);
static_assert(Course::params(mnist)[1].name == "bias");
static_assert(Course::params(mnist)[1].dims == oar::make_dims(20));
static_assert(Course::params(mnist)[1].init == oar::init_kind::zeros);
static_assert(Course::bias_offset == 512, "500 weights rounded up to whole cache lines");
static_assert(oar::Conv2D<3, 8, 3, 2, 1>::output_dims(oar::make_dims(3, 7, 6)) == oar::make_dims(8, 4, 3));
static_assert(oar::Conv2D<2, 4, 3>::output_dims(oar::make_dims(2, 5, 9)) == oar::make_dims(4, 3, 7));
static_assert(oar::Conv2D<20, 50, 5>::output_dims(oar::make_dims(20, 14, 14)) == oar::make_dims(50, 10, 10));
static_assert(oar::Conv2D<20, 50, 5>::params(oar::make_dims(20, 14, 14))[0].dims == oar::make_dims(50, 20, 5, 5));
static_assert(oar::Conv2D<20, 50, 5>::flops(oar::make_dims(20, 14, 14)) == 50 * 100 * (2 * 500 + 1));
static_assert(Course::check(mnist).ok());
static_assert(oar::Conv2D<1, 4, 5>::check(oar::make_dims(1, 5, 5)).ok(), "a window exactly the image size fits");

TEST_CASE("Conv2D::check rejects a wrong rank, channel count or too small an image, with numbers") {
    constexpr auto rank = Course::check(oar::make_dims(28, 28));
    static_assert(rank.kind == oar::check_kind::rank && rank.expected == 3 && rank.got == 2);
    constexpr auto channels = Course::check(oar::make_dims(3, 28, 28));
    static_assert(channels.kind == oar::check_kind::channels && channels.expected == 1 && channels.got == 3);
    constexpr auto height = oar::Conv2D<1, 4, 5>::check(oar::make_dims(1, 4, 9));
    static_assert(height.kind == oar::check_kind::spatial && height.expected == 5 && height.got == 4);
    constexpr auto width = oar::Conv2D<1, 4, 5, 1, 1>::check(oar::make_dims(1, 9, 2));
    static_assert(width.kind == oar::check_kind::spatial && width.expected == 5 && width.got == 4,
                  "the padded width is what must hold the window");
    const auto r = oar::Conv2D<20, 50, 5>::check(oar::make_dims(6, 12, 12));
    CHECK(r.kind == oar::check_kind::channels);
    CHECK(r.expected == 20);
    CHECK(r.got == 6);
}

TEST_CASE("Conv2D forward and backward match a direct convolution loop") {
    check_against_direct_loops<1, 20, 5, 1, 2, 8, 8>();  // the course's first layer on a small image
    check_against_direct_loops<2, 3, 3, 1, 0, 6, 5>();
    check_against_direct_loops<3, 4, 3, 2, 1, 7, 6>();
    check_against_direct_loops<2, 2, 1, 1, 0, 4, 3>();
    check_against_direct_loops<1, 2, 4, 3, 2, 9, 8>();
}

// ---- rectangular windows, per-axis strides and padding, no bias
using Rect = oar::Conv2D<3, 4, oar::Size2{3, 5}, oar::Size2{1, 2}, oar::Size2{1, 2}>;
using NoBias = oar::Conv2D<2, 3, 3, 1, 1, oar::Bias::no>;
static_assert(Rect::output_dims(oar::make_dims(3, 7, 9)) == oar::make_dims(4, 7, 5), "(7+2-3)/1+1, (9+4-5)/2+1");
static_assert(Rect::params(oar::make_dims(3, 7, 9))[0].dims == oar::make_dims(4, 3, 3, 5), "[OutC, InC, KH, KW]");
static_assert(Rect::params(oar::make_dims(3, 7, 9))[0].fan_in == 45 && Rect::params(oar::make_dims(3, 7, 9))[0].fan_out == 60);
static_assert(Rect::flops(oar::make_dims(3, 7, 9)) == 4 * 35 * (2 * 45 + 1));
static_assert(std::is_same_v<oar::Conv2D<1, 2, 3>, oar::Conv2D<1, 2, oar::Size2{3, 3}, oar::Size2{1}, 0>>,
              "one number is the same size along both axes");
static_assert(NoBias::num_params == 1 && NoBias::params(oar::make_dims(2, 5, 5)).size() == 1);
static_assert(NoBias::params(oar::make_dims(2, 5, 5))[0].name == "weight");
static_assert(NoBias::flops(oar::make_dims(2, 5, 5)) == 3 * 25 * (2 * 18));
static_assert(oar::Conv2D<1, 4, oar::Size2{5, 2}>::check(oar::make_dims(1, 4, 9)).kind == oar::check_kind::spatial);
static_assert(oar::Conv2D<1, 4, oar::Size2{2, 5}>::check(oar::make_dims(1, 4, 4)).expected == 5);

TEST_CASE("Conv2D with rectangular windows, per-axis strides and padding, or no bias matches a direct loop") {
    check_rect_against_direct_loops<3, 4, oar::Size2{3, 5}, oar::Size2{1, 2}, oar::Size2{1, 2}, 7, 9>();
    check_rect_against_direct_loops<2, 3, oar::Size2{1, 3}, 1, oar::Size2{0, 1}, 5, 6>();  // stride 1, not square
    check_rect_against_direct_loops<2, 2, 3, oar::Size2{2, 1}, 1, 7, 5>();                 // square kernel, strides differ
    check_rect_against_direct_loops<2, 3, 3, 1, 1, 6, 5, oar::Bias::no>();                 // implicit-GEMM path
    check_rect_against_direct_loops<8, 9, 3, 1, 1, 6, 5, oar::Bias::no>();                 // flipped-weight dx
    check_rect_against_direct_loops<2, 3, oar::Size2{2, 3}, 2, oar::Size2{1, 0}, 6, 7, oar::Bias::no>();
    check_rect_against_direct_loops<8, 8, 5, 1, 2, 6, 6, oar::Bias::no>();  // Winograd where it applies
}

TEST_CASE("a Conv2D without bias has no bias in its state dict") {
    oar::Network<oar::Sequential<NoBias>, oar::Shape<2, 5, 5>> net(1);
    const auto& ps = net.parameters();
    REQUIRE(ps.entries().size() == 1);
    CHECK(ps.entries()[0].key == "0.weight");
    CHECK_THROWS(ps.entry("0.bias"));
    CHECK(decltype(net)::info::total_params == 3 * 2 * 9);
}

TEST_CASE("Conv2D with rectangular windows or no bias: gradients match finite differences") {
    SUBCASE("3x5 kernel, strides 1x2, padding 1x2") { check_conv2d_gradients<Rect, oar::Shape<3, 7, 9>>(); }
    SUBCASE("1x3 kernel, stride 1, padding 0x1") {
        check_conv2d_gradients<oar::Conv2D<2, 3, oar::Size2{1, 3}, 1, oar::Size2{0, 1}>, oar::Shape<2, 5, 6>>();
    }
    SUBCASE("no bias, stride 1") { check_conv2d_gradients<NoBias, oar::Shape<2, 5, 5>>(); }
    SUBCASE("no bias, 2x3 kernel, stride 2") {
        check_conv2d_gradients<oar::Conv2D<2, 3, oar::Size2{2, 3}, 2, oar::Size2{1, 0}, oar::Bias::no>, oar::Shape<2, 6, 7>>();
    }
}

TEST_CASE("Conv2D gradients match finite differences") {
    SUBCASE("Conv2D<1,20,5,1,2> on (1,8,8)") { check_conv2d_gradients<Course, oar::Shape<1, 8, 8>>(); }
    SUBCASE("Conv2D<2,3,3> on (2,6,5)") { check_conv2d_gradients<oar::Conv2D<2, 3, 3>, oar::Shape<2, 6, 5>>(); }
    SUBCASE("Conv2D<2,4,3,2,1> on (2,7,7)") { check_conv2d_gradients<oar::Conv2D<2, 4, 3, 2, 1>, oar::Shape<2, 7, 7>>(); }
    SUBCASE("Conv2D<3,2,1> on (3,4,4)") { check_conv2d_gradients<oar::Conv2D<3, 2, 1>, oar::Shape<3, 4, 4>>(); }
    SUBCASE("Conv2D<3,4,1,2,0> without bias on (3,7,7): ResNet8's 1x1 stride-2 shortcut") {
        check_conv2d_gradients<oar::Conv2D<3, 4, 1, 2, 0, oar::Bias::no>, oar::Shape<3, 7, 7>>();
    }
    SUBCASE("Conv2D<1,2,4,3,2> on (1,9,8)") { check_conv2d_gradients<oar::Conv2D<1, 2, 4, 3, 2>, oar::Shape<1, 9, 8>>(); }
    SUBCASE("Conv2D<8,3,3,1,1> on (8,5,6): the stride-1 weight gradient's GEMM (3x3, 8+ input channels)") {
        check_conv2d_gradients<oar::Conv2D<8, 3, 3, 1, 1>, oar::Shape<8, 5, 6>>();
    }
    SUBCASE("Conv2D<2,3,3,1,2> on (2,3,3): windows wholly in the padding") {
        check_conv2d_gradients<oar::Conv2D<2, 3, 3, 1, 2>, oar::Shape<2, 3, 3>>();
    }
}

TEST_CASE("Conv2D with a fused ReLU gives the bits of Conv2D then ReLU, and matches finite differences") {
    SUBCASE("the course's Conv2D<1,20,5,1,2>") { oar_test::check_fused_relu<Course, oar::Shape<1, 12, 12>>(3); }
    // The input gradient as a product with the flipped weights needs 8+ input channels; 9 in and 10
    // out take it and leave partial GEMM micro-tiles, with few weights for the finite differences.
    SUBCASE("Conv2D<9,10,5,1,2>: flipped-weight dx") { oar_test::check_fused_relu<oar::Conv2D<9, 10, 5, 1, 2>, oar::Shape<9, 7, 7>>(3); }
    SUBCASE("Conv2D<2,4,3,2,1>: the strided phase layout") { oar_test::check_fused_relu<oar::Conv2D<2, 4, 3, 2, 1>, oar::Shape<2, 7, 7>>(3); }
    SUBCASE("a 3x5 kernel with strides 1x2: im2col") { oar_test::check_fused_relu<Rect, oar::Shape<3, 7, 9>>(3); }
    SUBCASE("no bias, stride 1") { oar_test::check_fused_relu<NoBias, oar::Shape<2, 7, 7>>(3); }
}
