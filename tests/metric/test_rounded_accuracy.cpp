// RoundedAccuracy: a prediction counts when it rounds, clamped to [lo, hi], to the label; running
// over batches; one value per sample.
#include <doctest/doctest.h>

#include <oar/metric/rounded_accuracy.hpp>  // under test

#include <cstdint>  // std::int64_t
#include <vector>   // std::vector

TEST_CASE("RoundedAccuracy rounds and clamps the predictions and accumulates over batches") {
    // 0.4 -> 0, 2.6 -> 3, 9 -> clamped to 3.
    oar::RoundedAccuracy acc(0, 3);
    const std::vector<float> y{0.4f, 2.6f, 9.0f};
    const std::vector<std::int64_t> labels{0, 2, 3};
    CHECK(acc.update(oar::TensorView(y.data(), 3, oar::make_dims(1)), labels) == doctest::Approx(2.0 / 3.0));
    const std::vector<float> y2{-5.0f};
    const std::vector<std::int64_t> l2{0};
    CHECK(acc.update(oar::TensorView(y2.data(), 1, oar::make_dims(1)), l2) == 1.0f);  // clamped to 0
    CHECK(acc.accumulate() == doctest::Approx(3.0 / 4.0));
    acc.reset();
    CHECK(acc.accumulate() == 0.0);
}

TEST_CASE("RoundedAccuracy names a prediction that is not one value per sample") {
    oar::RoundedAccuracy acc;
    const std::vector<float> y(4, 0.0f);
    const std::vector<std::int64_t> labels{0, 1};
    CHECK_THROWS_AS(acc.update(oar::TensorView(y.data(), 2, oar::make_dims(2)), labels), oar::shape_error);
}
