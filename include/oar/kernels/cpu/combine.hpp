// The CPU kernels that join tensors for blocks (nn/blocks.hpp): op::add (a Residual's sum, and the
// gradients of an input that several branches read), op::add_relu (a Residual's sum with the ReLU
// after it) and op::copy_rows (a Concat's slices along its axis, forward and backward).
// The sums run in xsimd vectors of the build's ISA (one correctly rounded addition per element
// whatever the vector width, so the bits do not depend on it) and, for large tensors, in the fixed
// chunks of for_chunks on the default pool.
#pragma once

#include <algorithm>  // std::copy_n
#include <cstddef>    // std::size_t

#include "../../config.hpp"     // OAR_RESTRICT
#include "../../core/simd.hpp"  // xsimd::batch
#include "../dispatch.hpp"      // kernel, op::add, op::copy_rows
#include "elementwise.hpp"      // cpu_detail::for_chunks, relu_fn

namespace oar {

namespace cpu_detail {
/// y[i] = a[i] + b[i], with Relu relu_fn's max(a[i] + b[i], 0) (-0 and NaN pass), for i < n on
/// this thread; y may be a or b (each element is read before it is written).
template <bool Relu, class T>
void add_span(const T* a, const T* b, T* y, std::size_t n) {
    using V = xsimd::batch<T>;
    const std::size_t whole = n / V::size * V::size;  // (a bound g++ sees through: no false -Waggressive-loop-optimizations)
    std::size_t i = 0;
    for (; i < whole; i += V::size) {
        const V v = V::load_unaligned(a + i) + V::load_unaligned(b + i);
        if constexpr (Relu) relu_fn{}.simd_apply(v).store_unaligned(y + i);
        else v.store_unaligned(y + i);
    }
    for (; i < n; ++i) {
        const T v = a[i] + b[i];
        y[i] = Relu ? relu_fn{}(v) : v;
    }
}
}  // namespace cpu_detail

/// kernel<op::add, cpu>::run(a, b, y, n): y[i] = a[i] + b[i]; y may be a or b. Large arrays in
/// chunks on the default pool.
template <class T>
struct kernel<op::add, basic_cpu<T>> {
    static void run(const T* a, const T* b, T* y, std::size_t n) {
        cpu_detail::for_chunks(n, [&](std::size_t s, std::size_t e) { cpu_detail::add_span<false>(a + s, b + s, y + s, e - s); });
    }
};

/// kernel<op::add_relu, cpu>::run(a, b, y, n): y[i] = relu_fn's max(a[i] + b[i], 0) (the bits of
/// op::add and then a ReLU); y may be a or b. Large arrays in chunks on the default pool.
template <class T>
struct kernel<op::add_relu, basic_cpu<T>> {
    static void run(const T* a, const T* b, T* y, std::size_t n) {
        cpu_detail::for_chunks(n, [&](std::size_t s, std::size_t e) { cpu_detail::add_span<true>(a + s, b + s, y + s, e - s); });
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
