// CrossEntropyLoss on logits with integer labels, as paddle.nn.CrossEntropyLoss() (softmax fused,
// reduction "mean" by default): loss = logsumexp(z) - z[label], stable for any finite logits.
// One class for every backend: the logits and the gradient are in backend B's memory, the labels
// are checked on the host, and each row's loss (double) is summed on the host in row order.
// CrossEntropyLoss(reduction, /*use_softmax=*/false) is Paddle's cross_entropy(..., use_softmax=False)
// (fluid's cross_entropy after a Softmax output layer): the inputs are probabilities and the loss is
// -log p[label], i.e. torch's nll_loss(log p, label). Host backends only.
#pragma once

#include <algorithm>  // std::max
#include <cmath>      // std::log, std::isfinite
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t
#include <limits>     // std::numeric_limits: the smallest probability taken
#include <span>       // std::span
#include <vector>     // std::vector: the row losses on the host

#include "../core/backend.hpp"          // Backend, cpu
#include "../core/error.hpp"            // shape_error, value_error
#include "../core/tensor.hpp"           // basic_tensor_view
#include "../kernels/cpu/softmax.hpp"   // op::softmax_cross_entropy on cpu
#include "../kernels/cpu/storage.hpp"   // storage<cpu>
#include "reduction.hpp"                // Reduction

namespace oar {

template <Backend B = cpu>
class CrossEntropyLoss {
    using store = storage<B>;

public:
    using value_type = typename B::value_type;
    using view_type = basic_tensor_view<const value_type>;
    /// forward() reads logits in B's memory: Model pairs the loss with a network of the same backend.
    static constexpr bool device_outputs = !store::host_memory;

    /// use_softmax = false: forward() takes probabilities (a Softmax layer's output), not logits.
    explicit CrossEntropyLoss(Reduction reduction = Reduction::mean, bool use_softmax = true)
        : reduction_(reduction), use_softmax_(use_softmax) {}

    bool use_softmax() const { return use_softmax_; }

    /// logits (N, C) in B's memory (any per-sample shape whose last dim is C: rows are classified),
    /// labels (host) N' = rows. Returns the reduced loss (waits for B) and keeps d(loss)/d(logits).
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
        if (!use_softmax_) {
            forward_probabilities(logits, labels);
            return loss();
        }
        const std::int64_t* l = labels.data();
        if constexpr (!store::host_memory) {
            grow(labels_, rows);
            store::upload(labels_.data(), labels.data(), rows);
            l = labels_.data();
        }
        forward_device(logits, l);
        return loss();
    }
    value_type operator()(view_type logits, std::span<const std::int64_t> labels) { return forward(logits, labels); }

    /// Queues the loss and its gradient without waiting: labels in B's memory, in [0, classes)
    /// (checked by the caller). loss() reads the result.
    void forward_device(view_type logits, const std::int64_t* labels) {
        if (!use_softmax_) {
            const std::size_t rows = logits.size() / logits.dims().d[logits.dims().rank - 1];
            forward_probabilities(logits, std::span<const std::int64_t>(labels, rows));
            return;
        }
        const std::size_t classes = logits.dims().d[logits.dims().rank - 1];
        rows_ = logits.size() / classes;
        batch_ = logits.batch();
        dims_ = logits.dims();
        grow(grad_, logits.size());
        grow(row_losses_, rows_);
        const value_type scale = reduction_ == Reduction::mean ? value_type(1) / static_cast<value_type>(rows_) : value_type(1);
        kernel<op::softmax_cross_entropy, B>::run_rows(logits.data(), labels, rows_, classes, scale,
                                                       row_losses_.data(), grad_.data());
    }

    /// The reduced loss of the last forward (waits for B).
    value_type loss() const {
        const double* rows = row_losses_.data();
        if constexpr (!store::host_memory) {
            host_rows_.resize(rows_);
            store::download(host_rows_.data(), row_losses_.data(), rows_);
            store::synchronize();
            rows = host_rows_.data();
        }
        double total = 0.0;
        for (std::size_t r = 0; r < rows_; ++r) total += rows[r];
        return static_cast<value_type>(reduction_ == Reduction::mean ? total / static_cast<double>(rows_) : total);
    }

    /// d(loss)/d(logits) of the last forward, in B's memory.
    view_type backward() const { return {grad_.data(), batch_, dims_}; }

private:
    /// use_softmax = false: loss -log p[label] per row, gradient -scale / p at the label, 0 elsewhere.
    /// A probability of 0 is taken as the smallest normal value (Paddle clips the same way), so the
    /// loss stays finite. Probabilities that are negative or not finite are refused, naming the index.
    void forward_probabilities(view_type probs, std::span<const std::int64_t> labels) {
        if constexpr (!store::host_memory) {
            throw value_error("CrossEntropyLoss: use_softmax=false (a loss on probabilities) runs on host "
                              "backends only; on this backend drop the Softmax layer and keep use_softmax=true");
        } else {
            const std::size_t classes = probs.dims().d[probs.dims().rank - 1];
            rows_ = probs.size() / classes;
            batch_ = probs.batch();
            dims_ = probs.dims();
            grow(grad_, probs.size());
            grow(row_losses_, rows_);
            const value_type scale =
                reduction_ == Reduction::mean ? value_type(1) / static_cast<value_type>(rows_) : value_type(1);
            const value_type* p = probs.data();
            for (std::size_t i = 0; i < probs.size(); ++i)
                if (!(p[i] >= value_type(0)) || !std::isfinite(p[i]))
                    throw value_error(detail::concat("CrossEntropyLoss(use_softmax=false): probability ", p[i],
                                                     " at row ", i / classes, ", class ", i % classes,
                                                     " is not a probability (negative or not finite)"));
            for (std::size_t r = 0; r < rows_; ++r) {
                const auto y = static_cast<std::size_t>(labels[r]);
                const value_type py = std::max(p[r * classes + y], std::numeric_limits<value_type>::min());
                row_losses_.data()[r] = -std::log(static_cast<double>(py));
                value_type* g = grad_.data() + r * classes;
                for (std::size_t j = 0; j < classes; ++j) g[j] = value_type(0);
                g[y] = -scale / py;
            }
        }
    }

    template <class U>
    using buffer = typename store::template buffer<U>;
    /// Grows a buffer to at least n values (never shrinks: a steady loop allocates nothing).
    template <class U>
    static void grow(buffer<U>& b, std::size_t n) {
        if (b.size() < n) b = store::template make<U>(n);
    }

    Reduction reduction_;
    bool use_softmax_ = true;
    buffer<value_type> grad_;
    buffer<double> row_losses_;
    buffer<std::int64_t> labels_;
    mutable std::vector<double> host_rows_;
    std::size_t rows_ = 0, batch_ = 0;
    Dims dims_{};
};

}  // namespace oar
