// RoundedAccuracy: the course's regressors' accuracy (a MetricType, oar/metric/metric.hpp): a
// one-value prediction counts when it rounds, clamped to [lo, hi], to the label.
#pragma once

#include <algorithm>  // std::clamp
#include <cmath>      // std::lround
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t
#include <span>       // std::span: labels

#include "../core/error.hpp"   // shape_error, detail::concat
#include "../core/tensor.hpp"  // TensorView

namespace oar {

/// The course's regressors' accuracy: a prediction counts when it rounds (clamped to [lo, hi])
/// to the label.
class RoundedAccuracy {
public:
    explicit RoundedAccuracy(long lo = 0, long hi = 9) : lo_(lo), hi_(hi) {}
    float update(TensorView out, std::span<const std::int64_t> labels) {
        if (out.size() != labels.size())
            throw shape_error(detail::concat("RoundedAccuracy: prediction ", out.shape_string(), " for ",
                                             labels.size(), " labels (one value per sample)"));
        std::size_t c = 0;
        for (std::size_t i = 0; i < labels.size(); ++i) c += std::clamp(std::lround(out[i]), lo_, hi_) == labels[i];
        correct_ += c;
        total_ += labels.size();
        return labels.empty() ? 0.0f : static_cast<float>(c) / static_cast<float>(labels.size());
    }
    double accumulate() const { return total_ ? static_cast<double>(correct_) / static_cast<double>(total_) : 0.0; }
    void reset() { correct_ = total_ = 0; }

private:
    long lo_, hi_;
    std::size_t correct_ = 0, total_ = 0;
};

}  // namespace oar
