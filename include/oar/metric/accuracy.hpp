// Top-k accuracy, as paddle.metric.accuracy(input, label, k) and the paddle.metric.Accuracy
// accumulator used by Model.evaluate.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <span>     // std::span

#include "../core/error.hpp"   // shape_error, value_error
#include "../core/tensor.hpp"  // TensorView

namespace oar {

/// Rows of `scores` (last dim = classes) whose label is among the k highest scores
/// (a label ranks by how many scores are strictly greater than its own).
inline std::size_t count_correct(TensorView scores, std::span<const std::int64_t> labels, std::size_t k = 1) {
    const std::size_t classes = scores.dims().d[scores.dims().rank - 1];
    const std::size_t rows = scores.size() / classes;
    if (labels.size() != rows)
        throw shape_error(detail::concat("accuracy: ", rows, " rows of scores ", scores.shape_string(), " but ",
                                         labels.size(), " labels"));
    if (k == 0) throw value_error("accuracy: k must be at least 1");
    std::size_t correct = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        if (labels[r] < 0 || static_cast<std::size_t>(labels[r]) >= classes)
            throw value_error(detail::concat("accuracy: label ", labels[r], " at index ", r, " is outside [0, ",
                                             classes, ")"));
        const float* z = scores.data() + r * classes;
        const float target = z[labels[r]];
        std::size_t greater = 0;
        for (std::size_t j = 0; j < classes; ++j) greater += z[j] > target ? 1 : 0;
        correct += (greater < k && target == target) ? 1 : 0;
    }
    return correct;
}

/// Fraction of rows whose label is in the top k.
inline float accuracy(TensorView scores, std::span<const std::int64_t> labels, std::size_t k = 1) {
    const std::size_t classes = scores.dims().d[scores.dims().rank - 1];
    const std::size_t rows = scores.size() / classes;
    return rows == 0 ? 0.0f : static_cast<float>(count_correct(scores, labels, k)) / static_cast<float>(rows);
}

/// Running top-k accuracy over many batches.
class Accuracy {
public:
    explicit Accuracy(std::size_t k = 1) : k_(k) {}
    /// Adds a batch; returns this batch's accuracy.
    float update(TensorView scores, std::span<const std::int64_t> labels) {
        const std::size_t c = count_correct(scores, labels, k_);
        correct_ += c;
        total_ += labels.size();
        return labels.empty() ? 0.0f : static_cast<float>(c) / static_cast<float>(labels.size());
    }
    double accumulate() const { return total_ == 0 ? 0.0 : static_cast<double>(correct_) / static_cast<double>(total_); }
    void reset() { correct_ = total_ = 0; }
    std::size_t correct() const { return correct_; }
    std::size_t total() const { return total_; }

private:
    std::size_t k_;
    std::size_t correct_ = 0, total_ = 0;
};

}  // namespace oar
