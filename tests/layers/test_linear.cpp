// Tests of oar/layers/linear.hpp: the constexpr facts (output dims, FLOPs, parameter specs in
// Paddle's [In, Out] layout), check() rejections, forward and backward values through a float
// Network against naive loops written here, gradient accumulation, and finite-difference
// gradient checks in double.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/layers/linear.hpp>  // the header under test

#include <cmath>    // std::abs
#include <cstddef>  // std::size_t
#include <vector>   // std::vector

#include <oar/nn/network.hpp>         // Network: runs the layer with its parameters
#include <oar/nn/sequential.hpp>      // Sequential
#include <oar/layers/activation.hpp>  // ReLU: the fused epilogue
#include <oar/testing/gradcheck.hpp>  // gradcheck_layer

#include "support/fused_relu.hpp"  // oar_test::check_fused_relu
#include "support/random.hpp"  // oar_test::fill_random: seeded inputs and parameters

namespace {

using oar_test::fill_random;

using L35 = oar::Linear<3, 5>;

}  // namespace

// ---- constexpr facts
static_assert(oar::Layer<L35> && oar::ParametricLayer<L35>);
static_assert(L35::name == "Linear");
static_assert(L35::in_features == 3 && L35::out_features == 5 && L35::num_params == 2);
static_assert(L35::output_dims(oar::make_dims(3)) == oar::make_dims(5));
static_assert(L35::output_dims(oar::make_dims(4, 3)) == oar::make_dims(4, 5), "maps the last dimension only");
static_assert(L35::flops(oar::make_dims(3)) == 2 * 3 * 5 + 5, "a multiply-add counts 2, plus the bias");
static_assert(L35::flops(oar::make_dims(4, 3)) == 4 * (2 * 3 * 5 + 5));
static_assert(L35::workspace(oar::make_dims(3)) == 0);
static_assert(L35::params(oar::make_dims(3))[0].name == "weight");
static_assert(L35::params(oar::make_dims(3))[0].dims == oar::make_dims(3, 5), "Paddle's layout [In, Out]");
static_assert(L35::params(oar::make_dims(3))[0].init == oar::init_kind::xavier_uniform);
static_assert(L35::params(oar::make_dims(3))[0].fan_in == 3 && L35::params(oar::make_dims(3))[0].fan_out == 5);
static_assert(L35::params(oar::make_dims(3))[1].name == "bias");
static_assert(L35::params(oar::make_dims(3))[1].dims == oar::make_dims(5));
static_assert(L35::params(oar::make_dims(3))[1].init == oar::init_kind::zeros);
static_assert(L35::bias_offset == 16, "the bias starts on the cache line after the 15 weights");
static_assert(oar::Linear<100, 1>::bias_offset == 112);
static_assert(L35::check(oar::make_dims(3)).ok());
static_assert(L35::check(oar::make_dims(7, 3)).ok());

TEST_CASE("Linear::check rejects a wrong feature count with the expected and the actual value") {
    constexpr auto c = L35::check(oar::make_dims(4));
    static_assert(c.kind == oar::check_kind::features && c.expected == 3 && c.got == 4);
    const auto r = oar::Linear<784, 10>::check(oar::make_dims(1, 28, 28));
    CHECK_FALSE(r.ok());
    CHECK(r.kind == oar::check_kind::features);
    CHECK(r.expected == 784);
    CHECK(r.got == 28);
}

TEST_CASE("Linear forward computes y = x W + b with W stored [In, Out]") {
    constexpr std::size_t In = 7, Out = 19, batch = 5;  // Out reaches SIMD tiles and a scalar edge
    oar::Network<oar::Sequential<oar::Linear<In, Out>>, oar::Shape<In>> net(3);
    const auto sd = net.state_dict();
    REQUIRE(sd.size() == 2);
    CHECK(sd[0].key == "0.weight");
    CHECK(sd[0].dims == oar::make_dims(In, Out));
    CHECK(sd[1].key == "0.bias");
    CHECK(sd[1].dims == oar::make_dims(Out));
    fill_random(net.parameters().value(net.parameters().entry("0.bias")), 17);  // a non-zero bias
    const auto W = net.state_dict()[0].values;
    const auto b = net.state_dict()[1].values;

    oar::Tensor x(batch, oar::make_dims(In));
    fill_random(x.span(), 5);
    const auto y = net.forward(x.view());
    REQUIRE(y.batch() == batch);
    REQUIRE(y.dims() == oar::make_dims(Out));
    std::size_t bad = 0;
    for (std::size_t s = 0; s < batch; ++s)
        for (std::size_t o = 0; o < Out; ++o) {
            double want = b[o];
            for (std::size_t i = 0; i < In; ++i) want += static_cast<double>(x[s * In + i]) * W[i * Out + o];
            bad += std::abs(y[s * Out + o] - want) > 1e-5;
        }
    CHECK(bad == 0);
}

TEST_CASE("Linear on a rank-2 input applies the same W and b to every row of every sample") {
    constexpr std::size_t R = 3, In = 4, Out = 6, batch = 2;
    oar::Network<oar::Sequential<oar::Linear<In, Out>>, oar::Shape<R, In>> net(4);
    fill_random(net.parameters().value(net.parameters().entry("0.bias")), 18);
    const auto W = net.state_dict()[0].values;
    const auto b = net.state_dict()[1].values;
    oar::Tensor x(batch, oar::make_dims(R, In));
    fill_random(x.span(), 6);
    const auto y = net.forward(x.view());
    REQUIRE(y.dims() == oar::make_dims(R, Out));
    for (std::size_t row = 0; row < batch * R; ++row)
        for (std::size_t o = 0; o < Out; ++o) {
            double want = b[o];
            for (std::size_t i = 0; i < In; ++i) want += static_cast<double>(x[row * In + i]) * W[i * Out + o];
            CHECK(std::abs(y[row * Out + o] - want) < 1e-5);
        }
}

TEST_CASE("Linear backward gives dW = x^T dy, db = sum dy, dx = dy W^T, and parameter gradients accumulate") {
    constexpr std::size_t In = 9, Out = 17, batch = 3;
    oar::Network<oar::Sequential<oar::Linear<In, Out>>, oar::Shape<In>> net(5);
    const auto& ps = net.parameters();
    const auto W = net.state_dict()[0].values;
    oar::Tensor x(batch, oar::make_dims(In)), dy(batch, oar::make_dims(Out)), dx(batch, oar::make_dims(In));
    fill_random(x.span(), 7);
    fill_random(dy.span(), 8);
    for (auto& v : dx.span()) v = 1e6f;  // backward must overwrite dx, not add to it
    net.forward(x.view());
    net.clear_grad();
    net.backward(dy.view(), dx.view());
    const auto dW = ps.grad(ps.entry("0.weight"));
    const auto db = ps.grad(ps.entry("0.bias"));
    std::vector<double> want_dW(In * Out, 0.0), want_db(Out, 0.0);
    for (std::size_t s = 0; s < batch; ++s)
        for (std::size_t o = 0; o < Out; ++o) {
            want_db[o] += dy[s * Out + o];
            for (std::size_t i = 0; i < In; ++i) want_dW[i * Out + o] += static_cast<double>(x[s * In + i]) * dy[s * Out + o];
        }
    for (std::size_t k = 0; k < In * Out; ++k) CHECK(std::abs(dW[k] - want_dW[k]) < 1e-5);
    for (std::size_t o = 0; o < Out; ++o) CHECK(std::abs(db[o] - want_db[o]) < 1e-5);
    for (std::size_t s = 0; s < batch; ++s)
        for (std::size_t i = 0; i < In; ++i) {
            double want = 0.0;
            for (std::size_t o = 0; o < Out; ++o) want += static_cast<double>(dy[s * Out + o]) * W[i * Out + o];
            CHECK(std::abs(dx[s * In + i] - want) < 1e-5);
        }

    net.backward(dy.view());  // a second backward adds the same gradients again
    for (std::size_t k = 0; k < In * Out; ++k) CHECK(std::abs(dW[k] - 2 * want_dW[k]) < 2e-5);
    for (std::size_t o = 0; o < Out; ++o) CHECK(std::abs(db[o] - 2 * want_db[o]) < 2e-5);
    net.clear_grad();
    for (float g : ps.grads()) CHECK(g == 0.0f);
}

TEST_CASE("Linear gradients match finite differences") {
    using oar::testing::gradcheck_layer;
    SUBCASE("Linear<5, 3> on [5]") {
        const auto r = gradcheck_layer<oar::Linear<5, 3>, oar::Shape<5>>();
        INFO(r.message);
        CHECK(r.ok);
        CHECK(r.checked == 2 * 5 + 15 + 3);
    }
    SUBCASE("Linear<4, 18> on [3, 4]") {
        const auto r = gradcheck_layer<oar::Linear<4, 18>, oar::Shape<3, 4>>();
        INFO(r.message);
        CHECK(r.ok);
        CHECK(r.checked == 2 * 12 + 72 + 18);
    }
    SUBCASE("Linear<33, 20> with batch 3") {
        oar::testing::GradcheckOptions o;
        o.batch = 3;
        const auto r = gradcheck_layer<oar::Linear<33, 20>, oar::Shape<33>>(o);
        INFO(r.message);
        CHECK(r.ok);
        CHECK(r.checked == 3 * 33 + 660 + 20);
    }
}


TEST_CASE("Linear with a fused ReLU gives the bits of Linear then ReLU, and matches finite differences") {
    SUBCASE("Linear<33, 20>") { oar_test::check_fused_relu<oar::Linear<33, 20>, oar::Shape<33>>(5); }
    SUBCASE("Linear<4, 18> on rows") { oar_test::check_fused_relu<oar::Linear<4, 18>, oar::Shape<3, 4>>(2); }
}

TEST_CASE("Linear's weight is stored transposed in PyTorch's layout, other layers' are not") {
    static_assert(oar::torch_transposed_weight<oar::Linear<784, 10>>::value);
    static_assert(!oar::torch_transposed_weight<oar::ReLU>::value);
    CHECK(oar::torch_transposed_weight<oar::Linear<3, 2>>::value);
}
