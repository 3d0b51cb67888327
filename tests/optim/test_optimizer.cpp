// What the optimizers share: L2Decay, learning-rate checks and setting, clear_grad, the
// Optimizer concept.
#include <oar/optim/optimizer.hpp>

#include <doctest/doctest.h>

#include <oar/optim/adagrad.hpp>
#include <oar/optim/adam.hpp>
#include <oar/optim/momentum.hpp>
#include <oar/optim/sgd.hpp>

#include <limits>

#include "optim_test_util.hpp"

using namespace oar;

static_assert(Optimizer<SGD<>> && Optimizer<Momentum<>> && Optimizer<Adagrad<>> && Optimizer<Adam<>>);
static_assert(Optimizer<Adam<cpu64>>);
static_assert(!Optimizer<int>);

TEST_CASE("L2Decay defaults to no decay") {
    CHECK(L2Decay{}.coeff == 0.0f);
    CHECK(L2Decay(1e-5f).coeff == 1e-5f);
}

TEST_CASE("optimizers refuse negative or non-finite rates, naming the optimizer and the setting") {
    auto p = optim_test::make_params();
    CHECK_THROWS_WITH_AS(SGD<>(p, {.learning_rate = -1.0f}), doctest::Contains("SGD: learning_rate must be"),
                         value_error);
    CHECK_THROWS_WITH_AS(Adam<>(p, {.learning_rate = std::numeric_limits<float>::quiet_NaN()}),
                         doctest::Contains("Adam: learning_rate"), value_error);
    CHECK_THROWS_WITH_AS(Momentum<>(p, {.weight_decay = L2Decay(-0.1f)}), doctest::Contains("L2Decay coefficient"),
                         value_error);
    CHECK_THROWS_WITH_AS(Adam<>(p, {.beta1 = 1.0f}), doctest::Contains("beta1 and beta2 must be in [0, 1)"),
                         value_error);
    CHECK_THROWS_WITH_AS(Adagrad<>(p, {.epsilon = -1.0f}), doctest::Contains("Adagrad: epsilon"), value_error);
    SGD<> ok(p);
    CHECK_THROWS_AS(ok.set_learning_rate(std::numeric_limits<float>::infinity()), value_error);
}

TEST_CASE("learning rate can be read and changed, and clear_grad zeroes every gradient") {
    auto p = optim_test::make_params();
    optim_test::set_grads(p, 1);
    Adam<> opt(p, {.learning_rate = 0.01f});
    CHECK(opt.learning_rate() == 0.01f);
    opt.set_learning_rate(0.5f);
    CHECK(opt.learning_rate() == 0.5f);
    opt.clear_grad();
    for (float g : p.grads()) CHECK(g == 0.0f);
}

TEST_CASE("padding between tensors in the flat buffer stays zero through updates with decay") {
    auto p = optim_test::make_params();
    Adam<> opt(p, {.learning_rate = 0.1f, .weight_decay = L2Decay(0.5f)});
    for (std::size_t t = 1; t <= 5; ++t) {
        optim_test::set_grads(p, t);
        opt.step();
    }
    for (std::size_t i = 7; i < 16; ++i) CHECK(p.values()[i] == 0.0f);
    for (std::size_t i = 19; i < 32; ++i) CHECK(p.values()[i] == 0.0f);
}
