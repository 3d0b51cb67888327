// Accuracy: top-1 and top-k against a sort-based count written here, the running accumulator,
// and errors for bad labels.
#include <oar/metric/accuracy.hpp>

#include <doctest/doctest.h>

#include <oar/core/rng.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

using namespace oar;

TEST_CASE("top-k accuracy agrees with ranking the scores by sorting") {
    const std::size_t rows = 200, classes = 10;
    Tensor s(rows, make_dims(classes));
    const CounterRng rng{12};
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = rng.uniform(1, i);
    std::vector<std::int64_t> y(rows);
    for (std::size_t r = 0; r < rows; ++r) y[r] = static_cast<std::int64_t>(rng.below(2, r, classes));
    for (std::size_t k : {1u, 2u, 5u, 10u}) {
        std::size_t expected = 0;
        for (std::size_t r = 0; r < rows; ++r) {
            std::vector<std::size_t> idx(classes);
            std::iota(idx.begin(), idx.end(), std::size_t{0});
            std::sort(idx.begin(), idx.end(), [&](auto a, auto b) { return s[r * classes + a] > s[r * classes + b]; });
            expected += std::find(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k),
                                  static_cast<std::size_t>(y[r])) != idx.begin() + static_cast<std::ptrdiff_t>(k);
        }
        CHECK(count_correct(s, y, k) == expected);
        CHECK(accuracy(s, y, k) == doctest::Approx(double(expected) / rows));
    }
    CHECK(accuracy(s, y, 10) == 1.0f);
}

TEST_CASE("the Accuracy accumulator averages over every sample seen") {
    Tensor a(2, make_dims(3)), b(1, make_dims(3));
    const float av[6] = {0.1f, 0.8f, 0.1f, 0.5f, 0.2f, 0.3f}, bv[3] = {0.0f, 0.0f, 1.0f};
    std::copy(av, av + 6, a.data());
    std::copy(bv, bv + 3, b.data());
    Accuracy acc;
    const std::vector<std::int64_t> ya{1, 2}, yb{2};
    CHECK(acc.update(a, ya) == doctest::Approx(0.5));
    CHECK(acc.update(b, yb) == doctest::Approx(1.0));
    CHECK(acc.accumulate() == doctest::Approx(2.0 / 3.0));
    CHECK(acc.total() == 3);
    acc.reset();
    CHECK(acc.accumulate() == 0.0);
}

TEST_CASE("accuracy names bad labels and mismatched counts") {
    Tensor s(2, make_dims(4));
    const std::vector<std::int64_t> bad{0, 4}, few{0};
    CHECK_THROWS_WITH_AS(count_correct(s, bad), doctest::Contains("label 4 at index 1"), value_error);
    CHECK_THROWS_WITH_AS(count_correct(s, few), doctest::Contains("2 rows of scores [2, 4] but 1 labels"), shape_error);
    CHECK_THROWS_AS(count_correct(s, std::vector<std::int64_t>{0, 0}, 0), value_error);
}
