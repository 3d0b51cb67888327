// MSELoss: mean((pred - target)^2) over every element, i.e. Paddle's square_error_cost followed by
// paddle.mean, the course's loss for the linear and sigmoid-MLP regressors.
#pragma once

#include <cstddef>  // std::size_t

#include "../core/backend.hpp" // Backend, cpu
#include "../core/error.hpp"   // shape_error
#include "../core/tensor.hpp"  // Tensor, TensorView
#include "reduction.hpp"       // Reduction

namespace oar {

template <Backend B = cpu>
class MSELoss {
public:
    using value_type = typename B::value_type;
    using view_type = basic_tensor_view<const value_type>;

    explicit MSELoss(Reduction reduction = Reduction::mean) : reduction_(reduction) {}

    /// pred and target of the same shape; returns the reduced loss, keeps d(loss)/d(pred).
    value_type forward(view_type pred, view_type target) {
        if (pred.size() != target.size() || pred.batch() != target.batch())
            throw shape_error(detail::concat("MSELoss: prediction ", pred.shape_string(), " and target ",
                                             target.shape_string(), " differ in size"));
        grad_.resize(pred.batch(), pred.dims());
        const std::size_t n = pred.size();
        const value_type scale = reduction_ == Reduction::mean ? value_type(2) / static_cast<value_type>(n) : value_type(2);
        double total = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            const value_type d = pred[i] - target[i];
            total += static_cast<double>(d) * d;
            grad_[i] = scale * d;
        }
        return static_cast<value_type>(reduction_ == Reduction::mean ? total / static_cast<double>(n) : total);
    }
    value_type operator()(view_type pred, view_type target) { return forward(pred, target); }

    view_type backward() const { return grad_.view(); }

private:
    Reduction reduction_;
    basic_tensor<value_type> grad_;
};

}  // namespace oar
