// MSELoss: Paddle's square_error_cost + mean, its gradient, and shape errors.
#include <oar/loss/mse.hpp>

#include <doctest/doctest.h>

#include <oar/core/rng.hpp>
#include <oar/testing/gradcheck.hpp>

#include <vector>

using namespace oar;

TEST_CASE("MSE is the mean of squared differences over every element") {
    Tensor p(2, make_dims(2)), t(2, make_dims(2));
    const float pv[4] = {1, 2, 3, 4}, tv[4] = {0, 2, 5, 1};
    std::copy(pv, pv + 4, p.data());
    std::copy(tv, tv + 4, t.data());
    MSELoss<> mse;
    CHECK(mse(p, t) == doctest::Approx((1.0 + 0.0 + 4.0 + 9.0) / 4.0));
    const float expected[4] = {2 * 1 / 4.f, 0, 2 * -2 / 4.f, 2 * 3 / 4.f};
    for (std::size_t i = 0; i < 4; ++i) CHECK(mse.backward()[i] == doctest::Approx(expected[i]));
}

TEST_CASE("MSE's gradient matches finite differences in double precision") {
    basic_tensor<double> p(3, make_dims(4)), t(3, make_dims(4));
    const CounterRng rng{8};
    for (std::size_t i = 0; i < p.size(); ++i) {
        p[i] = rng.uniform(1, i);
        t[i] = rng.uniform(2, i);
    }
    for (Reduction red : {Reduction::mean, Reduction::sum}) {
        MSELoss<cpu64> mse(red);
        mse(p.view(), t.view());
        const std::vector<double> analytic(mse.backward().span().begin(), mse.backward().span().end());
        testing::GradcheckResult r;
        testing::compare_gradient([&] { return mse(p.view(), t.view()); }, p.span(), analytic, "pred", {}, r);
        INFO(r.message);
        CHECK(r.ok);
        CHECK(r.checked == 12);
    }
}

TEST_CASE("MSE refuses predictions and targets of different sizes") {
    MSELoss<> mse;
    CHECK_THROWS_WITH_AS(mse(Tensor(2, make_dims(1)), Tensor(3, make_dims(1))),
                         doctest::Contains("prediction [2, 1] and target [3, 1] differ"), shape_error);
}
