// SGD against p -= lr * (g + l2 * p), written out in double.
#include <oar/optim/sgd.hpp>

#include <doctest/doctest.h>

#include "optim_test_util.hpp"

using namespace oar;

TEST_CASE("SGD with L2 decay follows p -= lr * (g + coeff * p) over several steps") {
    auto p = optim_test::make_params();
    auto ref = optim_test::values(p);
    const double lr = 0.1, l2 = 0.01;
    SGD<> opt(p, {.learning_rate = 0.1f, .weight_decay = L2Decay(0.01f)});
    for (std::size_t t = 1; t <= 4; ++t) {
        optim_test::set_grads(p, t);
        const auto g = optim_test::grads(p);
        for (std::size_t i = 0; i < ref.size(); ++i) ref[i] -= lr * (g[i] + l2 * ref[i]);
        opt.step();
        for (std::size_t i = 0; i < ref.size(); ++i) CHECK(p.values()[i] == doctest::Approx(ref[i]).epsilon(1e-6));
    }
    CHECK(opt.state().empty());
}

TEST_CASE("SGD's defaults are Paddle's: learning rate 0.001, no decay") {
    auto p = optim_test::make_params();
    SGD<> opt(p);
    CHECK(opt.learning_rate() == 0.001f);
    CHECK(opt.l2_decay() == 0.0f);
}
