// Adam against the textbook bias-corrected form (Kingma & Ba) in double, which Paddle's
// lr_t / eps_t formulation must equal.
#include <oar/optim/adam.hpp>

#include <doctest/doctest.h>

#include <cmath>

#include "optim_test_util.hpp"

using namespace oar;

TEST_CASE("Adam equals the bias-corrected textbook update, with L2 decay added to the gradient") {
    auto p = optim_test::make_params();
    auto ref = optim_test::values(p);
    std::vector<double> m(ref.size(), 0.0), v(ref.size(), 0.0);
    const double lr = 0.01, b1 = 0.8, b2 = 0.99, eps = 1e-6, l2 = 0.05;
    Adam<> opt(p, {.learning_rate = 0.01f, .beta1 = 0.8f, .beta2 = 0.99f, .epsilon = 1e-6f,
                   .weight_decay = L2Decay(0.05f)});
    for (std::size_t t = 1; t <= 6; ++t) {
        optim_test::set_grads(p, t);
        const auto g = optim_test::grads(p);
        for (std::size_t i = 0; i < ref.size(); ++i) {
            const double gd = g[i] + l2 * ref[i];
            m[i] = b1 * m[i] + (1 - b1) * gd;
            v[i] = b2 * v[i] + (1 - b2) * gd * gd;
            const double mhat = m[i] / (1 - std::pow(b1, double(t))), vhat = v[i] / (1 - std::pow(b2, double(t)));
            ref[i] -= lr * mhat / (std::sqrt(vhat) + eps);
        }
        opt.step();
        for (std::size_t i = 0; i < ref.size(); ++i) CHECK(p.values()[i] == doctest::Approx(ref[i]).epsilon(1e-5));
    }
    CHECK(opt.step_count() == 6);
    REQUIRE(opt.state().size() == 2);
    CHECK(opt.state()[0].first == "moment1");
    CHECK(opt.state()[1].first == "moment2");
}

TEST_CASE("Adam's defaults are Paddle's, and the step count can be restored for resume") {
    auto p = optim_test::make_params();
    Adam<> a(p);
    CHECK(a.learning_rate() == 0.001f);
    auto q = optim_test::make_params();
    auto r = optim_test::make_params();
    Adam<> b(q), c(r);
    for (std::size_t t = 1; t <= 3; ++t) {
        optim_test::set_grads(q, t);
        b.step();
    }
    // c continues as if it had taken 2 steps with the same moments: restore both.
    for (std::size_t t = 1; t <= 2; ++t) {
        optim_test::set_grads(r, t);
        c.step();
    }
    Adam<> d(r);
    d.set_step_count(c.step_count());
    for (std::size_t k = 0; k < 2; ++k)
        std::copy(c.state()[k].second.begin(), c.state()[k].second.end(), d.state()[k].second.begin());
    optim_test::set_grads(r, 3);
    d.step();
    for (std::size_t i = 0; i < q.values().size(); ++i) CHECK(r.values()[i] == q.values()[i]);
}
