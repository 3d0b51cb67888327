// CPU kernels for per-channel bias: add it (op::bias_add), add it with a fused ReLU
// (op::bias_relu), and its gradient (op::bias_grad), over (n, channels, inner) tensors: Linear's
// rows (inner = 1) and Conv2D's planes. Its own header so that a Linear pulls in no convolution code.
#pragma once

#include <cstddef>  // std::size_t

#include "../../config.hpp"     // OAR_RESTRICT
#include "../../core/simd.hpp"  // xsimd::batch, select, hadd
#include "../dispatch.hpp"      // kernel, op::bias_*

namespace oar {

/// kernel<op::bias_add, cpu>::run(y, b, n, channels, inner): y (n, channels, inner) += b[c].
template <class T>
struct kernel<op::bias_add, basic_cpu<T>> {
    static void run(T* OAR_RESTRICT y, const T* OAR_RESTRICT b, std::size_t n, std::size_t channels,
                    std::size_t inner) {
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t c = 0; c < channels; ++c) {
                T* p = y + (s * channels + c) * inner;
                const T bc = b[c];
                for (std::size_t i = 0; i < inner; ++i) p[i] += bc;
            }
    }
};

/// kernel<op::bias_relu, cpu>::run(y, b, n, channels, inner): y (n, channels, inner) = max(y + b[c], 0),
/// the same bits as bias_add followed by relu_fn (NaN passes through).
template <class T>
struct kernel<op::bias_relu, basic_cpu<T>> {
    static void run(T* OAR_RESTRICT y, const T* OAR_RESTRICT b, std::size_t n, std::size_t channels,
                    std::size_t inner) {
        using V = xsimd::batch<T>;
        constexpr std::size_t W = V::size;
        if (inner == 1) {  // Linear: rows of `channels` features
            for (std::size_t s = 0; s < n; ++s) {
                T* p = y + s * channels;
                const std::size_t whole = channels / W * W;  // (a bound g++ sees through)
                std::size_t c = 0;
                for (; c < whole; c += W) {
                    const V v = V::load_unaligned(p + c) + V::load_unaligned(b + c);
                    xsimd::select(v < V(T(0)), V(T(0)), v).store_unaligned(p + c);
                }
                for (; c < channels; ++c) {
                    const T v = p[c] + b[c];
                    p[c] = v < T(0) ? T(0) : v;
                }
            }
            return;
        }
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t c = 0; c < channels; ++c) {
                T* p = y + (s * channels + c) * inner;
                const T bc = b[c];
                for (std::size_t i = 0; i < inner; ++i) {
                    const T v = p[i] + bc;
                    p[i] = v < T(0) ? T(0) : v;
                }
            }
    }
};

namespace cpu_detail {
/// p[0] + ... + p[n-1] in a fixed order: four SIMD accumulators over whole vectors (one chain of
/// dependent adds would be latency-bound), combined, summed across lanes, then the scalar tail.
template <class T>
T sum_run(const T* p, std::size_t n) {
    using V = xsimd::batch<T>;
    constexpr std::size_t W = V::size;
    std::size_t i = 0;
    T s = T(0);
    if (n >= 4 * W) {
        V a0(T(0)), a1(T(0)), a2(T(0)), a3(T(0));
        for (; i + 4 * W <= n; i += 4 * W) {
            a0 += V::load_unaligned(p + i);
            a1 += V::load_unaligned(p + i + W);
            a2 += V::load_unaligned(p + i + 2 * W);
            a3 += V::load_unaligned(p + i + 3 * W);
        }
        for (; i + W <= n; i += W) a0 += V::load_unaligned(p + i);
        s = xsimd::hadd((a0 + a1) + (a2 + a3));
    }
    for (; i < n; ++i) s += p[i];
    return s;
}
}  // namespace cpu_detail

/// kernel<op::bias_grad, cpu>::run(dy, db, n, channels, inner): db[c] += sum over n and inner of dy.
/// Each sample's run in float (cpu_detail::sum_run), the samples in double per channel: a fixed
/// order, and no drift over large batches.
template <class T>
struct kernel<op::bias_grad, basic_cpu<T>> {
    static void run(const T* OAR_RESTRICT dy, T* OAR_RESTRICT db, std::size_t n, std::size_t channels,
                    std::size_t inner) {
        for (std::size_t c = 0; c < channels; ++c) {
            double s = 0.0;
            for (std::size_t b = 0; b < n; ++b) s += cpu_detail::sum_run(dy + (b * channels + c) * inner, inner);
            db[c] += static_cast<T>(s);
        }
    }
};

}  // namespace oar
