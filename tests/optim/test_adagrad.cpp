// Adagrad against Paddle's formula written out in double.
#include <oar/optim/adagrad.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "optim_test_util.hpp"

using namespace oar;

TEST_CASE("Adagrad follows m += g'^2, p -= lr g' / (sqrt(m) + eps)") {
    auto p = optim_test::make_params();
    auto ref = optim_test::values(p);
    std::vector<double> m = ref;
    std::fill(m.begin(), m.end(), 0.1);  // (not the (n, value) constructor: g++ 12 -Wfree-nonheap-object false positive)
    const double lr = 0.2, eps = 1e-6, l2 = 0.01;
    Adagrad<> opt(p, {.learning_rate = 0.2f, .initial_accumulator_value = 0.1f, .weight_decay = L2Decay(0.01f)});
    for (std::size_t t = 1; t <= 5; ++t) {
        optim_test::set_grads(p, t);
        const auto g = optim_test::grads(p);
        for (std::size_t i = 0; i < ref.size(); ++i) {
            const double gd = g[i] + l2 * ref[i];
            m[i] += gd * gd;
            ref[i] -= lr * gd / (std::sqrt(m[i]) + eps);
        }
        opt.step();
        for (std::size_t i = 0; i < ref.size(); ++i) CHECK(p.values()[i] == doctest::Approx(ref[i]).epsilon(1e-5));
    }
    CHECK(opt.state()[0].first == "moment");
}
