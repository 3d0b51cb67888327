// CPU softmax kernels over rows, and the fused softmax + cross-entropy for integer labels:
// loss = logsumexp(z) - z[label], stable for any finite logits (max subtracted first).
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t

#include "../../config.hpp"  // OAR_RESTRICT
#include "../dispatch.hpp"   // kernel, op::*
#include "../rows.hpp"       // the row bodies every backend shares

namespace oar {

/// kernel<op::softmax_forward, cpu>::run(x, y, rows, cols)
template <class T>
struct kernel<op::softmax_forward, basic_cpu<T>> {
    static void run(const T* OAR_RESTRICT x, T* OAR_RESTRICT y, std::size_t rows, std::size_t cols) {
        for (std::size_t r = 0; r < rows; ++r) rows::softmax(x + r * cols, y + r * cols, cols);
    }
};

/// kernel<op::softmax_backward, cpu>::run(y, dy, dx, rows, cols): dx = y * (dy - sum(dy * y)).
template <class T>
struct kernel<op::softmax_backward, basic_cpu<T>> {
    static void run(const T* OAR_RESTRICT y, const T* OAR_RESTRICT dy, T* OAR_RESTRICT dx,
                    std::size_t rows, std::size_t cols) {
        for (std::size_t r = 0; r < rows; ++r) rows::softmax_backward(y + r * cols, dy + r * cols, dx + r * cols, cols);
    }
};

/// kernel<op::softmax_cross_entropy, cpu>::run(z, labels, rows, cols, scale, losses, dz) -> sum of losses
///   losses[r] = logsumexp(z_r) - z_r[label_r]; dz = scale * (softmax(z) - onehot(label)).
///   Labels are checked by the caller. `losses` may be null; `dz` may be null (evaluation).
/// kernel<...>::run_rows(z, labels, rows, cols, scale, row_losses, dz): the same with every row's
///   loss in double (row_losses, never null), the form every backend has (CrossEntropyLoss sums
///   them on the host in row order: the bits of run's total).
template <class T>
struct kernel<op::softmax_cross_entropy, basic_cpu<T>> {
    static double run(const T* OAR_RESTRICT z, const std::int64_t* labels, std::size_t rows, std::size_t cols,
                      T scale, T* losses, T* OAR_RESTRICT dz) {
        double total = 0.0;
        for (std::size_t r = 0; r < rows; ++r) {
            const double loss = row(z, labels, r, cols, scale, dz);
            total += loss;
            if (losses) losses[r] = static_cast<T>(loss);
        }
        return total;
    }
    static void run_rows(const T* OAR_RESTRICT z, const std::int64_t* labels, std::size_t rows, std::size_t cols,
                         T scale, double* row_losses, T* OAR_RESTRICT dz) {
        for (std::size_t r = 0; r < rows; ++r) row_losses[r] = row(z, labels, r, cols, scale, dz);
    }

private:
    static double row(const T* OAR_RESTRICT z, const std::int64_t* labels, std::size_t r, std::size_t cols, T scale,
                      T* OAR_RESTRICT dz) {
        return rows::softmax_cross_entropy(z + r * cols, static_cast<std::size_t>(labels[r]), cols, scale,
                                           dz ? dz + r * cols : nullptr);
    }
};

}  // namespace oar
