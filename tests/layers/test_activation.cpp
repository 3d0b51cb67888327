// Tests of oar/layers/activation.hpp: ReLU, Sigmoid, Tanh and Softmax constexpr facts
// (shape-preserving, FLOPs, no parameters, never reject), forward values through a float Network
// against std:: functions, Softmax over the last dimension only, and finite-difference gradient
// checks in double.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/layers/activation.hpp>  // the header under test

#include <algorithm>  // std::min, std::max: Hardswish
#include <cmath>    // std::exp, std::tanh, std::abs, std::erf
#include <cstddef>  // std::size_t

#include <oar/nn/network.hpp>         // Network: runs the layer
#include <oar/nn/sequential.hpp>      // Sequential
#include <oar/testing/gradcheck.hpp>  // gradcheck_layer

#include "support/random.hpp"  // oar_test::fill_random: seeded inputs

namespace {

using oar_test::fill_random;

template <class L, class In>
void check_activation_gradients(double input_scale = 1.0) {
    oar::testing::GradcheckOptions o;
    o.input_scale = input_scale;
    const auto r = oar::testing::gradcheck_layer<L, In>(o);
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.checked == 2 * In::size);  // inputs only: no parameters
}

/// Forward of elementwise layer L on 3 samples of 37 values (vector body and tail) vs f.
template <class L, class F>
void check_elementwise_forward(F f) {
    constexpr std::size_t batch = 3, n = 37;
    oar::Network<oar::Sequential<L>, oar::Shape<n>> net;
    oar::Tensor x(batch, oar::make_dims(n));
    fill_random(x.span(), 21, 6.0);
    const auto y = net.forward(x.view());
    REQUIRE(y.dims() == oar::make_dims(n));
    std::size_t bad = 0;
    for (std::size_t i = 0; i < batch * n; ++i) bad += std::abs(y[i] - f(static_cast<double>(x[i]))) > 1e-6;
    CHECK(bad == 0);
}

}  // namespace

// ---- constexpr facts
static_assert(oar::Layer<oar::ReLU> && oar::Layer<oar::Sigmoid> && oar::Layer<oar::Tanh> && oar::Layer<oar::Softmax>);
static_assert(!oar::ParametricLayer<oar::ReLU> && !oar::ParametricLayer<oar::Softmax>);
static_assert(oar::ReLU::name == "ReLU" && oar::Sigmoid::name == "Sigmoid" && oar::Tanh::name == "Tanh" &&
              oar::Softmax::name == "Softmax");
static_assert(oar::ReLU::output_dims(oar::make_dims(20, 24, 24)) == oar::make_dims(20, 24, 24));
static_assert(oar::Softmax::output_dims(oar::make_dims(3, 10)) == oar::make_dims(3, 10));
static_assert(oar::ReLU::flops(oar::make_dims(20, 24, 24)) == 20 * 24 * 24);
static_assert(oar::Tanh::flops(oar::make_dims(7)) == 7 && oar::Sigmoid::flops(oar::make_dims(2, 3)) == 6);
static_assert(oar::Softmax::flops(oar::make_dims(10)) == 40);
static_assert(oar::ReLU::workspace(oar::make_dims(10)) == 0 && oar::Softmax::workspace(oar::make_dims(10)) == 0);

TEST_CASE("activation layers accept every input shape") {
    for (const auto d : {oar::make_dims(1), oar::make_dims(10), oar::make_dims(3, 4), oar::make_dims(1, 28, 28)}) {
        CHECK(oar::ReLU::check(d).ok());
        CHECK(oar::Sigmoid::check(d).ok());
        CHECK(oar::Tanh::check(d).ok());
        CHECK(oar::Softmax::check(d).ok());
    }
}

TEST_CASE("ReLU, Sigmoid and Tanh forward match std:: functions through a network") {
    check_elementwise_forward<oar::ReLU>([](double v) { return v < 0 ? 0.0 : v; });
    check_elementwise_forward<oar::Sigmoid>([](double v) { return 1.0 / (1.0 + std::exp(-v)); });
    check_elementwise_forward<oar::Tanh>([](double v) { return std::tanh(v); });
}

TEST_CASE("Softmax normalises each row of the last dimension separately") {
    constexpr std::size_t batch = 2, rows = 3, cols = 5;
    oar::Network<oar::Sequential<oar::Softmax>, oar::Shape<rows, cols>> net;
    oar::Tensor x(batch, oar::make_dims(rows, cols));
    fill_random(x.span(), 5, 4.0);
    const auto y = net.forward(x.view());
    for (std::size_t r = 0; r < batch * rows; ++r) {
        double s = 0.0;
        for (std::size_t j = 0; j < cols; ++j) s += std::exp(static_cast<double>(x[r * cols + j]));
        for (std::size_t j = 0; j < cols; ++j)
            CHECK(std::abs(y[r * cols + j] - std::exp(static_cast<double>(x[r * cols + j])) / s) < 1e-6);
    }
}

TEST_CASE("ReLU gradients match finite differences") {
    check_activation_gradients<oar::ReLU, oar::Shape<3, 5>>();
    check_activation_gradients<oar::ReLU, oar::Shape<2, 3, 7>>();
}

TEST_CASE("Sigmoid gradients match finite differences") {
    check_activation_gradients<oar::Sigmoid, oar::Shape<3, 5>>();
    check_activation_gradients<oar::Sigmoid, oar::Shape<19>>(4.0);
}

TEST_CASE("Tanh gradients match finite differences") {
    check_activation_gradients<oar::Tanh, oar::Shape<3, 5>>();
    check_activation_gradients<oar::Tanh, oar::Shape<19>>(3.0);
}

TEST_CASE("Softmax gradients match finite differences") {
    check_activation_gradients<oar::Softmax, oar::Shape<10>>();
    check_activation_gradients<oar::Softmax, oar::Shape<3, 5>>(3.0);
    check_activation_gradients<oar::Softmax, oar::Shape<2, 2, 4>>();
}

// ---- GELU, Hardswish, LeakyReLU, ELU (Paddle's defaults; settings as values)
static_assert(oar::Layer<oar::GELU> && oar::Layer<oar::Hardswish> && oar::Layer<oar::LeakyReLU> && oar::Layer<oar::ELU>);
static_assert(!oar::ParametricLayer<oar::LeakyReLU>);
static_assert(oar::LeakyReLU{}.negative_slope() == 0.01f && oar::LeakyReLU{0.2f}.negative_slope() == 0.2f);
static_assert(oar::ELU{}.alpha() == 1.0f && oar::ELU{0.5f}.alpha() == 0.5f);

TEST_CASE("GELU, Hardswish, LeakyReLU and ELU forward match their definitions through a network") {
    check_elementwise_forward<oar::GELU>([](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); });
    check_elementwise_forward<oar::Hardswish>([](double v) { return v * std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0; });
    check_elementwise_forward<oar::LeakyReLU>([](double v) { return v > 0 ? v : 0.01 * v; });
    check_elementwise_forward<oar::ELU>([](double v) { return v > 0 ? v : std::exp(v) - 1.0; });
}

TEST_CASE("a layer's settings are values: LeakyReLU{0.2f} and ELU{0.5f} in a network") {
    constexpr std::size_t n = 37;
    oar::Network<oar::Sequential<oar::LeakyReLU, oar::ELU>, oar::Shape<n>> net;
    net.layer<0>() = oar::LeakyReLU{0.2f};
    net.layer<1>() = oar::ELU{0.5f};
    oar::Tensor x(2, oar::make_dims(n));
    fill_random(x.span(), 8, 5.0);
    const auto y = net.forward(x.view());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < 2 * n; ++i) {
        const double l = x[i] > 0 ? static_cast<double>(x[i]) : static_cast<double>(0.2f * x[i]);
        const double want = l > 0 ? l : 0.5 * (std::exp(l) - 1.0);
        bad += std::abs(y[i] - want) > 1e-6;
    }
    CHECK(bad == 0);
}

TEST_CASE("GELU, Hardswish, LeakyReLU and ELU gradients match finite differences") {
    check_activation_gradients<oar::GELU, oar::Shape<3, 5>>(3.0);
    check_activation_gradients<oar::Hardswish, oar::Shape<19>>(5.0);  // both kinks (-3, 3) inside the range
    check_activation_gradients<oar::LeakyReLU, oar::Shape<3, 5>>();
    check_activation_gradients<oar::ELU, oar::Shape<19>>(3.0);
}
