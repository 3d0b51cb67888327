// Metric: a named MetricType held by value (copies independent), and top_k_accuracy's names and
// values, with errors for an empty name and k = 0.
#include <doctest/doctest.h>

#include <oar/metric/metric.hpp>  // under test

#include <cstdint>  // std::int64_t
#include <span>     // std::span
#include <vector>   // std::vector

namespace {
/// A MetricType that counts the samples it was given.
struct Count {
    std::size_t n = 0;
    float update(oar::TensorView, std::span<const std::int64_t> labels) {
        n += labels.size();
        return 0.0f;
    }
    double accumulate() const { return static_cast<double>(n); }
    void reset() { n = 0; }
};
static_assert(oar::MetricType<Count>);
static_assert(oar::MetricType<oar::Accuracy>);
static_assert(!oar::MetricType<int>);
}  // namespace

TEST_CASE("a Metric accumulates through its type and its copies are independent") {
    oar::Metric m("count", Count{});
    CHECK(m.name() == "count");
    const std::vector<float> y(3, 0.0f);
    const std::vector<std::int64_t> labels{0, 1, 2};
    m.update(oar::TensorView(y.data(), 3, oar::make_dims(1)), labels);
    oar::Metric copy = m;
    copy.update(oar::TensorView(y.data(), 3, oar::make_dims(1)), labels);
    CHECK(m.accumulate() == 3.0);
    CHECK(copy.accumulate() == 6.0);
    m.reset();
    CHECK(m.accumulate() == 0.0);
    CHECK(copy.accumulate() == 6.0);
    CHECK_THROWS_WITH_AS(oar::Metric("", Count{}), "oar: Metric: the name is empty", oar::value_error);
}

TEST_CASE("top_k_accuracy is named as Paddle names it and counts the top k") {
    CHECK(oar::top_k_accuracy().name() == "acc");
    CHECK(oar::top_k_accuracy(5).name() == "acc_top5");
    // Two samples over three classes: sample 0's best is class 0 (label 0), sample 1's second is class 2.
    const std::vector<float> scores{0.9f, 0.05f, 0.05f, 0.5f, 0.1f, 0.4f};
    const std::vector<std::int64_t> labels{0, 2};
    auto top1 = oar::top_k_accuracy(1);
    auto top2 = oar::top_k_accuracy(2);
    top1.update(oar::TensorView(scores.data(), 2, oar::make_dims(3)), labels);
    top2.update(oar::TensorView(scores.data(), 2, oar::make_dims(3)), labels);
    CHECK(top1.accumulate() == doctest::Approx(0.5));
    CHECK(top2.accumulate() == doctest::Approx(1.0));
    CHECK_THROWS_WITH_AS(oar::top_k_accuracy(0), "oar: top_k_accuracy: k must be at least 1", oar::value_error);
}
