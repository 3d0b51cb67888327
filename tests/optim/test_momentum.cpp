// Momentum (and Nesterov) against Paddle's formulas written out in double.
#include <oar/optim/momentum.hpp>

#include <doctest/doctest.h>

#include "optim_test_util.hpp"

using namespace oar;

TEST_CASE("Momentum follows v = mu v + g', p -= lr v, with and without Nesterov") {
    for (bool nesterov : {false, true}) {
        auto p = optim_test::make_params();
        auto ref = optim_test::values(p);
        std::vector<double> v(ref.size(), 0.0);
        const double lr = 0.05, mu = 0.9, l2 = 0.02;
        Momentum<> opt(p, {.learning_rate = 0.05f, .momentum = 0.9f, .use_nesterov = nesterov,
                           .weight_decay = L2Decay(0.02f)});
        for (std::size_t t = 1; t <= 5; ++t) {
            optim_test::set_grads(p, t);
            const auto g = optim_test::grads(p);
            for (std::size_t i = 0; i < ref.size(); ++i) {
                const double gd = g[i] + l2 * ref[i];
                v[i] = mu * v[i] + gd;
                ref[i] -= lr * (nesterov ? gd + mu * v[i] : v[i]);
            }
            opt.step();
            for (std::size_t i = 0; i < ref.size(); ++i)
                CHECK(p.values()[i] == doctest::Approx(ref[i]).epsilon(1e-6));
        }
        REQUIRE(opt.state().size() == 1);
        CHECK(opt.state()[0].first == "velocity");
        CHECK(opt.state()[0].second[0] == doctest::Approx(v[0]).epsilon(1e-5));
    }
}

TEST_CASE("Momentum's defaults are Paddle's: momentum 0.9, learning rate 0.001") {
    auto p = optim_test::make_params();
    optim_test::set_grads(p, 1);
    const auto before = optim_test::values(p);
    const auto g = optim_test::grads(p);
    Momentum<> opt(p);
    opt.step();
    opt.step();  // second step: v = 0.9 g + g
    for (std::size_t i = 0; i < before.size(); ++i)
        CHECK(p.values()[i] == doctest::Approx(before[i] - 0.001 * (g[i] + 1.9 * g[i])).epsilon(1e-6));
}
