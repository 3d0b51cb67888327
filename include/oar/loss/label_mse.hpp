// LabelMSELoss: the course's regressors' loss, MSE between a one-value prediction and the label
// taken as a number (the digit 7 as 7.0f), for oar::Model, whose losses take integer labels.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <span>     // std::span: labels

#include "../core/error.hpp"   // shape_error, detail::concat
#include "../core/shape.hpp"   // make_dims
#include "../core/tensor.hpp"  // Tensor, TensorView
#include "mse.hpp"             // MSELoss

namespace oar {

/// The course's regressors: MSE between a one-value prediction and the label as a number.
class LabelMSELoss {
public:
    float forward(TensorView out, std::span<const std::int64_t> labels) {
        if (out.size() != labels.size())
            throw shape_error(detail::concat("LabelMSELoss: prediction ", out.shape_string(), " holds ", out.size(),
                                             " values for ", labels.size(), " labels (one value per sample)"));
        targets_.resize(labels.size(), make_dims(1));
        for (std::size_t i = 0; i < labels.size(); ++i) targets_[i] = static_cast<float>(labels[i]);
        return mse_(out, TensorView(targets_.data(), out.batch(), out.dims()));
    }
    TensorView backward() const { return mse_.backward(); }

private:
    MSELoss<> mse_;
    Tensor targets_;
};

}  // namespace oar
