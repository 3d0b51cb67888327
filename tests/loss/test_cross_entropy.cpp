// CrossEntropyLoss: value against log-sum-exp in long double, gradient against finite
// differences in double, stability for huge logits, and label / shape errors.
#include <oar/loss/cross_entropy.hpp>

#include <doctest/doctest.h>

#include <oar/core/rng.hpp>
#include <oar/testing/gradcheck.hpp>

#include <algorithm>
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

namespace {
/// Row-wise softmax of logits in double: the probabilities a Softmax output layer hands the loss.
basic_tensor<double> softmax_rows(const basic_tensor<double>& z, std::size_t classes) {
    basic_tensor<double> p(z.batch(), z.dims());
    for (std::size_t r = 0; r < z.size() / classes; ++r) {
        double m = z[r * classes], s = 0;
        for (std::size_t j = 0; j < classes; ++j) m = std::max(m, z[r * classes + j]);
        for (std::size_t j = 0; j < classes; ++j) s += std::exp(z[r * classes + j] - m);
        for (std::size_t j = 0; j < classes; ++j) p[r * classes + j] = std::exp(z[r * classes + j] - m) / s;
    }
    return p;
}
}  // namespace

TEST_CASE("cross-entropy with use_softmax=false on softmax probabilities equals cross-entropy on the logits") {
    basic_tensor<double> z(6, make_dims(4));
    const CounterRng rng{5};
    for (std::size_t i = 0; i < z.size(); ++i) z[i] = 5.0 * rng.uniform(3, i) - 2.5;
    const std::vector<std::int64_t> y{3, 0, 1, 1, 2, 0};
    const basic_tensor<double> p = softmax_rows(z, 4);
    for (Reduction red : {Reduction::mean, Reduction::sum}) {
        CrossEntropyLoss<cpu64> on_logits(red), on_probs(red, false);
        CHECK_FALSE(on_probs.use_softmax());
        const double expected = on_logits(z.view(), y);
        CHECK(on_probs(p.view(), y) == doctest::Approx(expected).epsilon(1e-12));
        // -log p[label] summed by hand, and the gradient only at the label: -scale / p.
        double by_hand = 0;
        for (std::size_t r = 0; r < y.size(); ++r) by_hand -= std::log(p[r * 4 + static_cast<std::size_t>(y[r])]);
        if (red == Reduction::mean) by_hand /= static_cast<double>(y.size());
        CHECK(on_probs.loss() == doctest::Approx(by_hand).epsilon(1e-12));
        const double scale = red == Reduction::mean ? 1.0 / 6.0 : 1.0;
        for (std::size_t r = 0; r < y.size(); ++r)
            for (std::size_t j = 0; j < 4; ++j)
                CHECK(on_probs.backward()[r * 4 + j] ==
                      doctest::Approx(j == static_cast<std::size_t>(y[r]) ? -scale / p[r * 4 + j] : 0.0));
    }
}

TEST_CASE("cross-entropy with use_softmax=false: gradient matches finite differences in double precision") {
    basic_tensor<double> p(5, make_dims(3));
    const CounterRng rng{6};
    // Positive values away from 0 (the loss is -log p): any positive rows, not only normalised ones.
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = 0.1 + 0.8 * rng.uniform(4, i);
    const std::vector<std::int64_t> y{2, 0, 1, 2, 0};
    for (Reduction red : {Reduction::mean, Reduction::sum}) {
        CrossEntropyLoss<cpu64> ce(red, false);
        ce(p.view(), y);
        const std::vector<double> analytic(ce.backward().span().begin(), ce.backward().span().end());
        testing::GradcheckResult r;
        testing::compare_gradient([&] { return static_cast<double>(ce(p.view(), y)); }, p.span(), analytic,
                                  "probabilities", {}, r);
        INFO(r.message);
        CHECK(r.ok);
        CHECK(r.checked == 15);
    }
}

TEST_CASE("cross-entropy with use_softmax=false stays finite at probability 0 and refuses non-probabilities") {
    Tensor p(2, make_dims(3));
    const float rows[6] = {0.0f, 0.5f, 0.5f, 0.2f, 0.3f, 0.5f};
    std::copy(rows, rows + 6, p.data());
    CrossEntropyLoss<> ce(Reduction::mean, false);
    const std::vector<std::int64_t> y{0, 2};
    const float loss = ce(p, y);
    CHECK(std::isfinite(loss));
    CHECK(loss > 40.0f);  // -log(FLT_MIN) / 2 + ..., far above any real row
    for (float g : ce.backward().span()) CHECK(std::isfinite(g));
    p.data()[4] = -0.1f;
    CHECK_THROWS_WITH_AS(ce(p, y), doctest::Contains("probability -0.1 at row 1, class 1"), value_error);
    p.data()[4] = std::nanf("");
    CHECK_THROWS_WITH_AS(ce(p, y), doctest::Contains("at row 1, class 1 is not a probability"), value_error);
    const std::vector<std::int64_t> bad{0, 3};
    p.data()[4] = 0.3f;
    CHECK_THROWS_WITH_AS(ce(p, bad), doctest::Contains("label 3 at index 1 is outside [0, 3)"), value_error);
}
