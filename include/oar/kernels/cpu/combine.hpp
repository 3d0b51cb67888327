// The CPU kernels that join tensors for blocks (nn/blocks.hpp): op::add (a Residual's sum, and the
// gradients of an input that several branches read), op::add_relu (a Residual's sum with the ReLU
// after it) and op::copy_rows (a Concat's slices along its axis, forward and backward).
#pragma once

#include <algorithm>  // std::copy_n
#include <cstddef>    // std::size_t

#include "../../config.hpp"  // OAR_RESTRICT
#include "../dispatch.hpp"   // kernel, op::add, op::copy_rows

namespace oar {

/// kernel<op::add, cpu>::run(a, b, y, n): y[i] = a[i] + b[i]; y may be a or b.
template <class T>
struct kernel<op::add, basic_cpu<T>> {
    static void run(const T* a, const T* b, T* y, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
    }
};

/// kernel<op::add_relu, cpu>::run(a, b, y, n): y[i] = relu_fn's max(a[i] + b[i], 0) (the bits of
/// op::add and then a ReLU); y may be a or b.
template <class T>
struct kernel<op::add_relu, basic_cpu<T>> {
    static void run(const T* a, const T* b, T* y, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) {
            const T v = a[i] + b[i];
            y[i] = v < T(0) ? T(0) : v;
        }
    }
};

/// kernel<op::copy_rows, cpu>::run(rows, len, src, src_stride, dst, dst_stride):
/// dst[r * dst_stride + j] = src[r * src_stride + j] for r < rows, j < len (no overlap).
template <class T>
struct kernel<op::copy_rows, basic_cpu<T>> {
    static void run(std::size_t rows, std::size_t len, const T* OAR_RESTRICT src, std::size_t src_stride,
                    T* OAR_RESTRICT dst, std::size_t dst_stride) {
        for (std::size_t r = 0; r < rows; ++r) std::copy_n(src + r * src_stride, len, dst + r * dst_stride);
    }
};

}  // namespace oar
