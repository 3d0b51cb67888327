// Tests of oar/layers/flatten.hpp: (C,H,W) -> (C*H*W) facts, the forward copy keeps the row-major
// order of every sample, and the backward passes gradients straight through (finite differences).
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/layers/flatten.hpp>  // the header under test

#include <cstddef>  // std::size_t

#include <oar/nn/network.hpp>         // Network: runs the layer
#include <oar/nn/sequential.hpp>      // Sequential
#include <oar/testing/gradcheck.hpp>  // gradcheck_layer

static_assert(oar::Layer<oar::Flatten> && !oar::ParametricLayer<oar::Flatten>);
static_assert(oar::Flatten::name == "Flatten");
static_assert(oar::Flatten::output_dims(oar::make_dims(50, 4, 4)) == oar::make_dims(800));
static_assert(oar::Flatten::output_dims(oar::make_dims(3, 5)) == oar::make_dims(15));
static_assert(oar::Flatten::output_dims(oar::make_dims(7)) == oar::make_dims(7));
static_assert(oar::Flatten::output_dims(oar::make_dims(2, 3, 4, 5)) == oar::make_dims(120));
static_assert(oar::Flatten::flops(oar::make_dims(50, 4, 4)) == 0 && oar::Flatten::workspace(oar::make_dims(3)) == 0);
static_assert(oar::Flatten::check(oar::make_dims(1, 28, 28)).ok() && oar::Flatten::check(oar::make_dims(3)).ok());

TEST_CASE("Flatten forward copies every sample in row-major order and backward copies the gradient back") {
    constexpr std::size_t batch = 3, C = 2, H = 3, W = 4;
    oar::Network<oar::Sequential<oar::Flatten>, oar::Shape<C, H, W>> net;
    oar::Tensor x(batch, oar::make_dims(C, H, W)), dx(batch, oar::make_dims(C, H, W));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - 7.0f;
    const auto y = net.forward(x.view());
    REQUIRE(y.dims() == oar::make_dims(C * H * W));
    REQUIRE(y.batch() == batch);
    for (std::size_t s = 0; s < batch; ++s)
        for (std::size_t c = 0; c < C; ++c)
            for (std::size_t h = 0; h < H; ++h)
                for (std::size_t w = 0; w < W; ++w)
                    CHECK(y[s * C * H * W + (c * H + h) * W + w] == x[((s * C + c) * H + h) * W + w]);
    oar::Tensor dy(batch, oar::make_dims(C * H * W));
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(i % 5) - 2.0f;
    for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = 1e6f;  // backward must overwrite dx
    net.backward(dy.view(), dx.view());
    for (std::size_t i = 0; i < dx.size(); ++i) CHECK(dx[i] == dy[i]);
}

TEST_CASE("Flatten gradients match finite differences") {
    const auto r = oar::testing::gradcheck_layer<oar::Flatten, oar::Shape<2, 3, 4>>();
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.checked == 2 * 24);
    const auto r2 = oar::testing::gradcheck_layer<oar::Flatten, oar::Shape<5, 2>>();
    INFO(r2.message);
    CHECK(r2.ok);
    CHECK(r2.checked > 0);
}

static_assert(oar::Layer<oar::Identity> && !oar::ParametricLayer<oar::Identity>);
static_assert(oar::Identity::output_dims(oar::make_dims(3, 4)) == oar::make_dims(3, 4) &&
              oar::Identity::flops(oar::make_dims(7)) == 0);

TEST_CASE("Identity passes values and gradients through unchanged, any shape") {
    oar::Network<oar::Sequential<oar::Identity>, oar::Shape<2, 3>> net;
    oar::Tensor x(2, oar::make_dims(2, 3)), dx(2, oar::make_dims(2, 3)), dy(2, oar::make_dims(2, 3));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 1.5f - 4.0f, dy[i] = static_cast<float>(i % 4);
    const auto y = net.forward(x.view());
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(y[i] == x[i]);
    net.backward(dy.view(), dx.view());
    for (std::size_t i = 0; i < dx.size(); ++i) CHECK(dx[i] == dy[i]);
    const auto r = oar::testing::gradcheck_layer<oar::Identity, oar::Shape<2, 3>>();
    INFO(r.message);
    CHECK(r.ok);
}
