// Tests of oar/layers/conv2d.hpp: the constexpr facts (output dims, FLOPs, workspace, weight
// [OutC, InC, K, K]), check() rejections, forward and backward values through a float Network
// against a direct convolution loop written here, and finite-difference gradient checks in double
// for several kernel / stride / padding combinations, the course's Conv2D<1,20,5,1,2> among them.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/layers/conv2d.hpp>  // the header under test

#include <cmath>    // std::abs
#include <cstddef>  // std::size_t, std::ptrdiff_t
#include <string>   // std::string
#include <vector>   // std::vector

#include <oar/nn/network.hpp>         // Network: runs the layer with its parameters
#include <oar/nn/sequential.hpp>      // Sequential
#include <oar/layers/activation.hpp>  // ReLU: the fused epilogue
#include <oar/testing/gradcheck.hpp>  // gradcheck_layer

#include "support/random.hpp"  // oar_test::fill_random: seeded inputs and parameters

namespace {

using oar_test::fill_random;

using Course = oar::Conv2D<1, 20, 5, 1, 2>;
constexpr oar::Dims mnist = oar::make_dims(1, 28, 28);

/// Forward and backward of Conv2D<InC, OutC, K, S, P> on (InC, H, W) through a float Network,
/// against direct loops: y, dW, db and dx.
template <std::size_t InC, std::size_t OutC, std::size_t K, std::size_t S, std::size_t P, std::size_t H,
          std::size_t W>
void check_against_direct_loops() {
    INFO("Conv2D<", InC, ",", OutC, ",", K, ",", S, ",", P, "> on (", InC, ",", H, ",", W, ")");
    constexpr std::size_t batch = 2;
    constexpr std::size_t OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
    oar::Network<oar::Sequential<oar::Conv2D<InC, OutC, K, S, P>>, oar::Shape<InC, H, W>> net(11);
    auto& ps = net.parameters();
    fill_random(ps.value(ps.entry("0.bias")), 3);
    const auto w = ps.value(ps.entry("0.weight"));  // (OutC, InC, K, K)
    const auto b = ps.value(ps.entry("0.bias"));
    oar::Tensor x(batch, oar::make_dims(InC, H, W)), dy(batch, oar::make_dims(OutC, OH, OW)),
        dx(batch, oar::make_dims(InC, H, W));
    fill_random(x.span(), 4);
    fill_random(dy.span(), 5);
    for (auto& v : dx.span()) v = 1e6f;  // backward must overwrite dx, not add to it
    const auto y = net.forward(x.view());
    REQUIRE(y.dims() == oar::make_dims(OutC, OH, OW));
    net.backward(dy.view(), dx.view());
    const auto dw = ps.grad(ps.entry("0.weight"));
    const auto db = ps.grad(ps.entry("0.bias"));

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
                        for (std::size_t ky = 0; ky < K; ++ky)
                            for (std::size_t kx = 0; kx < K; ++kx) {
                                const auto iy = static_cast<std::ptrdiff_t>(oy * S + ky) - static_cast<std::ptrdiff_t>(P);
                                const auto ix = static_cast<std::ptrdiff_t>(ox * S + kx) - static_cast<std::ptrdiff_t>(P);
                                if (iy < 0 || ix < 0 || iy >= static_cast<std::ptrdiff_t>(H) ||
                                    ix >= static_cast<std::ptrdiff_t>(W))
                                    continue;
                                const std::size_t xi = ((s * InC + c) * H + static_cast<std::size_t>(iy)) * W +
                                                       static_cast<std::size_t>(ix);
                                const std::size_t wi = ((o * InC + c) * K + ky) * K + kx;
                                acc += static_cast<double>(w[wi]) * x[xi];
                                want_dw[wi] += static_cast<double>(dy[yi]) * x[xi];
                                want_dx[xi] += static_cast<double>(dy[yi]) * w[wi];
                            }
                    bad_y += std::abs(y[yi] - acc) > 1e-5;
                }
    std::size_t bad_dw = 0, bad_db = 0, bad_dx = 0;
    for (std::size_t i = 0; i < w.size(); ++i) bad_dw += std::abs(dw[i] - want_dw[i]) > 1e-4;
    for (std::size_t o = 0; o < OutC; ++o) bad_db += std::abs(db[o] - want_db[o]) > 1e-4;
    for (std::size_t i = 0; i < x.size(); ++i) bad_dx += std::abs(dx[i] - want_dx[i]) > 1e-5;
    CHECK(bad_y == 0);
    CHECK(bad_dw == 0);
    CHECK(bad_db == 0);
    CHECK(bad_dx == 0);
}

template <class L, class In>
void check_gradients(const oar::testing::GradcheckOptions& o = {}) {
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

TEST_CASE("Conv2D gradients match finite differences") {
    SUBCASE("Conv2D<1,20,5,1,2> on (1,8,8)") { check_gradients<Course, oar::Shape<1, 8, 8>>(); }
    SUBCASE("Conv2D<2,3,3> on (2,6,5)") { check_gradients<oar::Conv2D<2, 3, 3>, oar::Shape<2, 6, 5>>(); }
    SUBCASE("Conv2D<2,4,3,2,1> on (2,7,7)") { check_gradients<oar::Conv2D<2, 4, 3, 2, 1>, oar::Shape<2, 7, 7>>(); }
    SUBCASE("Conv2D<3,2,1> on (3,4,4)") { check_gradients<oar::Conv2D<3, 2, 1>, oar::Shape<3, 4, 4>>(); }
    SUBCASE("Conv2D<1,2,4,3,2> on (1,9,8)") { check_gradients<oar::Conv2D<1, 2, 4, 3, 2>, oar::Shape<1, 9, 8>>(); }
    SUBCASE("Conv2D<2,3,3,1,2> on (2,3,3): windows wholly in the padding") {
        check_gradients<oar::Conv2D<2, 3, 3, 1, 2>, oar::Shape<2, 3, 3>>();
    }
}

namespace {
/// forward_relu / backward_relu of layer L against its forward and backward around the ReLU layer's
/// (relu_fn's map and map_backward), on the same parameters: every output bit equal. Then a
/// finite-difference check in double of Network<Sequential<L, ReLU>>, which runs them fused.
template <class L, class In>
void check_fused_relu(std::size_t batch) {
    using namespace oar;
    constexpr Dims in = In::dims, out = L::output_dims(In::dims);
    const auto specs = L::params(in);
    auto params = oar_test::random_vector<float>(param_block_size(specs), 51);
    const auto x = oar_test::random_vector<float>(batch * in.size(), 52);
    const auto dy = oar_test::random_vector<float>(batch * out.size(), 53);
    const std::size_t ny = batch * out.size();
    std::vector<float> pre(ny), y(ny), dmask(ny), g1(params.size(), 0.0f), dx1(batch * in.size());
    std::vector<float> fy(ny, 5.0f), fdy = dy, g2(params.size(), 0.0f), dx2(batch * in.size(), 5.0f);
    const L layer{};
    Context<cpu> ctx;
    ctx.params = params.data();
    ctx.grads = g1.data();
    layer.forward(ctx, in, x.data(), pre.data(), batch);
    kernel<op::map, cpu>::run(relu_fn{}, pre.data(), y.data(), ny);
    kernel<op::map_backward, cpu>::run(relu_fn{}, pre.data(), y.data(), dy.data(), dmask.data(), ny);
    layer.backward(ctx, in, x.data(), pre.data(), dmask.data(), dx1.data(), batch);
    ctx.grads = g2.data();
    layer.forward_relu(ctx, in, x.data(), fy.data(), batch);
    layer.backward_relu(ctx, in, x.data(), fy.data(), fdy.data(), dx2.data(), batch);
    std::size_t cut = 0;
    for (float v : pre) cut += v < 0.0f;
    CHECK(cut > ny / 8);  // the mask matters
    CHECK(fy == y);
    CHECK(fdy == dmask);
    CHECK(g2 == g1);
    CHECK(dx2 == dx1);
    using Net = Network<Sequential<L, ReLU>, In, cpu64>;
    static_assert(Net::fuses_relu(0));
    const auto r = testing::gradcheck_network<Net>({.batch = 2});
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.checked > 0);
}
}  // namespace

TEST_CASE("Conv2D with a fused ReLU gives the bits of Conv2D then ReLU, and matches finite differences") {
    SUBCASE("the course's Conv2D<1,20,5,1,2>") { check_fused_relu<Course, oar::Shape<1, 12, 12>>(3); }
    SUBCASE("Conv2D<20,20,5,1,2>: flipped-weight dx") { check_fused_relu<oar::Conv2D<20, 20, 5, 1, 2>, oar::Shape<20, 7, 7>>(3); }
    SUBCASE("Conv2D<2,4,3,2,1>: im2col") { check_fused_relu<oar::Conv2D<2, 4, 3, 2, 1>, oar::Shape<2, 7, 7>>(3); }
}
