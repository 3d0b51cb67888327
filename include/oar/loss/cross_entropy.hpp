// CrossEntropyLoss on logits with integer labels, as paddle.nn.CrossEntropyLoss() (softmax fused,
// reduction "mean" by default): loss = logsumexp(z) - z[label], stable for any finite logits.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <span>     // std::span

#include "../core/backend.hpp"          // Backend, cpu
#include "../core/error.hpp"            // shape_error, value_error
#include "../core/tensor.hpp"           // Tensor, TensorView
#include "../kernels/cpu/softmax.hpp"   // op::softmax_cross_entropy on cpu
#include "reduction.hpp"                // Reduction

namespace oar {

template <Backend B = cpu>
class CrossEntropyLoss {
public:
    using value_type = typename B::value_type;
    using view_type = basic_tensor_view<const value_type>;

    explicit CrossEntropyLoss(Reduction reduction = Reduction::mean) : reduction_(reduction) {}

    /// logits (N, C) (any per-sample shape whose last dim is C: rows are classified), labels N' = rows.
    /// Returns the reduced loss and keeps d(loss)/d(logits) for backward().
    value_type forward(view_type logits, std::span<const std::int64_t> labels) {
        const std::size_t classes = logits.dims().d[logits.dims().rank - 1];
        const std::size_t rows = logits.size() / classes;
        if (labels.size() != rows)
            throw shape_error(detail::concat("CrossEntropyLoss: ", rows, " rows of logits ", logits.shape_string(),
                                             " but ", labels.size(), " labels"));
        for (std::size_t i = 0; i < rows; ++i)
            if (labels[i] < 0 || static_cast<std::size_t>(labels[i]) >= classes)
                throw value_error(detail::concat("CrossEntropyLoss: label ", labels[i], " at index ", i,
                                                 " is outside [0, ", classes, ")"));
        grad_.resize(logits.batch(), logits.dims());
        const value_type scale = reduction_ == Reduction::mean ? value_type(1) / static_cast<value_type>(rows) : value_type(1);
        const double total = kernel<op::softmax_cross_entropy, B>::run(logits.data(), labels.data(), rows, classes,
                                                                        scale, nullptr, grad_.data());
        return static_cast<value_type>(reduction_ == Reduction::mean ? total / static_cast<double>(rows) : total);
    }
    value_type operator()(view_type logits, std::span<const std::int64_t> labels) { return forward(logits, labels); }

    /// d(loss)/d(logits) of the last forward.
    view_type backward() const { return grad_.view(); }

private:
    Reduction reduction_;
    basic_tensor<value_type> grad_;
};

}  // namespace oar
