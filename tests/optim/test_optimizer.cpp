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

namespace {

/// Five steps of `make(params)` with `own` set on "0.bias", against two optimizers without it: the
/// weight must follow the one decayed at the optimizer's coefficient, the bias the one decayed at
/// `own`, bit for bit (the update is elementwise, so a parameter's own coefficient changes nothing else).
template <class Make>
void check_own_regularizer(const char* name, Make make) {
    INFO(name);
    auto p = optim_test::make_params(), at_global = optim_test::make_params(), at_own = optim_test::make_params();
    auto opt = make(p, 0.3f);
    opt.set_regularizer("0.bias", L2Decay(0.05f));
    CHECK(opt.l2_decay("0.bias") == 0.05f);
    CHECK(opt.l2_decay("0.weight") == 0.3f);
    auto ref_global = make(at_global, 0.3f);
    auto ref_own = make(at_own, 0.05f);
    for (std::size_t t = 1; t <= 5; ++t) {
        for (auto* q : {&p, &at_global, &at_own}) optim_test::set_grads(*q, t);
        opt.step();
        ref_global.step();
        ref_own.step();
    }
    const auto& w = p.entries()[0];
    const auto& b = p.entries()[1];
    for (std::size_t i = 0; i < w.size; ++i) CHECK(p.value(w)[i] == at_global.value(w)[i]);
    for (std::size_t i = 0; i < b.size; ++i) CHECK(p.value(b)[i] == at_own.value(b)[i]);
    for (std::size_t i = 0; i < b.size; ++i) CHECK(p.value(b)[i] != at_global.value(b)[i]);  // it did matter
    for (std::size_t i = 7; i < 16; ++i) CHECK(p.values()[i] == 0.0f);                     // padding untouched
}

}  // namespace

TEST_CASE("set_regularizer: a parameter's own L2Decay (Paddle's ParamAttr regularizer) wins over the optimizer's, for that parameter only") {
    check_own_regularizer("SGD", [](ParameterSet& p, float c) { return SGD<>(p, {.learning_rate = 0.1f, .weight_decay = L2Decay(c)}); });
    check_own_regularizer("Momentum", [](ParameterSet& p, float c) {
        return Momentum<>(p, {.learning_rate = 0.1f, .momentum = 0.9f, .weight_decay = L2Decay(c)});
    });
    check_own_regularizer("Adagrad", [](ParameterSet& p, float c) { return Adagrad<>(p, {.learning_rate = 0.1f, .weight_decay = L2Decay(c)}); });
    check_own_regularizer("Adam", [](ParameterSet& p, float c) { return Adam<>(p, {.learning_rate = 0.1f, .weight_decay = L2Decay(c)}); });

    // Only one layer decayed, none elsewhere; L2Decay(0) exempts a parameter from the optimizer's.
    auto p = optim_test::make_params(), plain = optim_test::make_params();
    SGD<> opt(p, {.learning_rate = 0.1f});
    opt.set_regularizer("0.weight", L2Decay(0.5f));
    opt.set_regularizer("0.weight", L2Decay(0.0f));  // the last one counts
    SGD<> ref(plain, {.learning_rate = 0.1f});
    optim_test::set_grads(p, 1);
    optim_test::set_grads(plain, 1);
    opt.step();
    ref.step();
    CHECK(optim_test::values(p) == optim_test::values(plain));
}

TEST_CASE("set_regularizer refuses an unknown key, naming it and the parameters, and a bad coefficient") {
    auto p = optim_test::make_params();
    Adam<> opt(p);
    CHECK_THROWS_WITH_AS(opt.set_regularizer("3.weight", L2Decay(0.1f)),
                         "oar: Adam: set_regularizer: no parameter '3.weight' (the parameters: 0.weight, 0.bias)",
                         value_error);
    CHECK_THROWS_WITH_AS(opt.set_regularizer("0.bias", L2Decay(-1.0f)),
                         doctest::Contains("Adam: L2Decay coefficient of '0.bias' must be finite and >= 0"), value_error);
    CHECK_THROWS_AS(opt.l2_decay("nope"), value_error);
}
