// CrossEntropyLoss: value against log-sum-exp in long double, gradient against finite
// differences in double, stability for huge logits, and label / shape errors.
#include <oar/loss/cross_entropy.hpp>

#include <doctest/doctest.h>

#include <oar/core/rng.hpp>
#include <oar/testing/gradcheck.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

using namespace oar;

namespace {
long double reference_loss(const basic_tensor<double>& z, const std::vector<std::int64_t>& y, std::size_t classes) {
    long double total = 0;
    for (std::size_t r = 0; r < y.size(); ++r) {
        long double m = z[r * classes];
        for (std::size_t j = 0; j < classes; ++j) m = std::max<long double>(m, z[r * classes + j]);
        long double s = 0;
        for (std::size_t j = 0; j < classes; ++j) s += std::exp(static_cast<long double>(z[r * classes + j]) - m);
        total += std::log(s) + m - z[r * classes + static_cast<std::size_t>(y[r])];
    }
    return total / static_cast<long double>(y.size());
}
}  // namespace

TEST_CASE("cross-entropy equals mean log-sum-exp minus the label's logit") {
    basic_tensor<double> z(5, make_dims(7));
    const CounterRng rng{3};
    for (std::size_t i = 0; i < z.size(); ++i) z[i] = 6.0 * rng.uniform(1, i) - 3.0;
    const std::vector<std::int64_t> y{0, 6, 3, 3, 1};
    CrossEntropyLoss<cpu64> ce;
    CHECK(ce(z.view(), y) == doctest::Approx(static_cast<double>(reference_loss(z, y, 7))).epsilon(1e-12));
}

TEST_CASE("cross-entropy's gradient matches finite differences in double precision") {
    basic_tensor<double> z(4, make_dims(5));
    const CounterRng rng{4};
    for (std::size_t i = 0; i < z.size(); ++i) z[i] = 4.0 * rng.uniform(2, i) - 2.0;
    const std::vector<std::int64_t> y{4, 0, 2, 2};
    for (Reduction red : {Reduction::mean, Reduction::sum}) {
        CrossEntropyLoss<cpu64> ce(red);
        ce(z.view(), y);
        const std::vector<double> analytic(ce.backward().span().begin(), ce.backward().span().end());
        testing::GradcheckResult r;
        testing::compare_gradient([&] { return static_cast<double>(ce(z.view(), y)); }, z.span(), analytic, "logits",
                                  {}, r);
        INFO(r.message);
        CHECK(r.ok);
        CHECK(r.checked == 20);
    }
}

TEST_CASE("cross-entropy stays finite for logits of +-1e4 and ties") {
    Tensor z(3, make_dims(3));
    const float rows[9] = {1e4f, -1e4f, 0.0f, 1e4f, 1e4f, 1e4f, -1e4f, -1e4f, 1e4f};
    std::copy(rows, rows + 9, z.data());
    CrossEntropyLoss<> ce;
    const std::vector<std::int64_t> y{0, 1, 0};
    const float loss = ce(z, y);
    // row 0: ~0; row 1: log 3; row 2: 2e4
    CHECK(loss == doctest::Approx((0.0 + std::log(3.0) + 2e4) / 3.0).epsilon(1e-6));
    for (float g : ce.backward().span()) CHECK(std::isfinite(g));
    CHECK(ce.backward()[2 * 3 + 0] == doctest::Approx(-1.0 / 3.0));
}

TEST_CASE("cross-entropy refuses labels outside the classes and count mismatches, naming the index") {
    Tensor z(2, make_dims(10));
    CrossEntropyLoss<> ce;
    const std::vector<std::int64_t> ten{1, 10}, neg{-1, 0}, one{1};
    CHECK_THROWS_WITH_AS(ce(z, ten), doctest::Contains("label 10 at index 1 is outside [0, 10)"), value_error);
    CHECK_THROWS_WITH_AS(ce(z, neg), doctest::Contains("label -1 at index 0"), value_error);
    CHECK_THROWS_WITH_AS(ce(z, one), doctest::Contains("2 rows of logits [2, 10] but 1 labels"), shape_error);
}
