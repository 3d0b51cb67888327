// CPU kernels for per-channel bias: add it (op::bias_add), add it with a fused ReLU
// (op::bias_relu), add it and run a producer's elementwise tail (op::bias_map: an expr::chain of
// activations, an eval-mode BatchNorm folded into a per-channel scale and shift), and its gradient
// (op::bias_grad), over (n, channels, inner) tensors: Linear's rows (inner = 1) and Conv2D's planes.
// Its own header so that a Linear pulls in no convolution code.
#pragma once

#include <cstddef>  // std::size_t
#include <type_traits>  // std::is_same_v: sum_run<true>

#include "../../config.hpp"     // OAR_RESTRICT
#include "../../core/bf16.hpp"  // round_to_bf16: sum_run<true>
#include "../../core/simd.hpp"  // xsimd::batch, select, hadd
#include "../dispatch.hpp"      // kernel, op::bias_*
#include "elementwise.hpp"      // SimdFunctor: op::bias_map's functor

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
/// One run of len values of op::bias_map: z[i] += b (when has_bias), then y[i] = f(z[i] * s + t)
/// (when has_affine) or f(z[i]). PerValue: b, s, t are arrays along the run (Linear's rows);
/// otherwise one value each for the whole run (a Conv2D channel's plane). Every value goes through
/// f's SIMD members where f has them, the last partial vector zero-padded (as map_span), so the
/// bits of f do not depend on the position.
template <bool PerValue, class F, class T>
void bias_map_run(const F& f, const T* b, const T* s, const T* t, T* OAR_RESTRICT z, T* OAR_RESTRICT y,
                  std::size_t len, bool has_bias, bool has_affine) {
    if constexpr (SimdFunctor<F, T>) {
        using V = xsimd::batch<T>;
        constexpr std::size_t W = V::size;
        // bp, sp, tp: where this vector's bias, scale and shift are (the run's one value, or arrays)
        auto step = [&](const T* zi, T* zo, T* yo, const T* bp, const T* sp, const T* tp) {
            V v = V::load_unaligned(zi);
            if (has_bias) {
                v = v + (PerValue ? V::load_unaligned(bp) : V(*bp));
                v.store_unaligned(zo);
            }
            if (has_affine) v = v * (PerValue ? V::load_unaligned(sp) : V(*sp)) + (PerValue ? V::load_unaligned(tp) : V(*tp));
            f.simd_apply(v).store_unaligned(yo);
        };
        const std::size_t whole = len / W * W;
        const std::size_t adv = PerValue ? 1 : 0;
        std::size_t i = 0;
        for (; i < whole; i += W)
            step(z + i, z + i, y + i, has_bias ? b + i * adv : b, has_affine ? s + i * adv : s,
                 has_affine ? t + i * adv : t);
        if (i < len) {
            alignas(64) T zb[W] = {}, yb[W] = {}, bb[W] = {}, sb[W] = {}, tb[W] = {};
            std::copy(z + i, z + len, zb);
            const T *bp = b, *sp = s, *tp = t;
            if constexpr (PerValue) {  // the arrays' tails, zero-padded too
                for (std::size_t j = 0; b && j < len - i; ++j) bb[j] = b[i + j];
                for (std::size_t j = 0; s && t && j < len - i; ++j) {
                    sb[j] = s[i + j];
                    tb[j] = t[i + j];
                }
                bp = bb;
                sp = sb;
                tp = tb;
            }
            step(zb, zb, yb, bp, sp, tp);
            if (has_bias) std::copy(zb, zb + (len - i), z + i);
            std::copy(yb, yb + (len - i), y + i);
        }
    } else {
        for (std::size_t i = 0; i < len; ++i) {
            T v = z[i];
            if (has_bias) z[i] = v = v + (PerValue ? b[i] : *b);
            if (has_affine) v = v * (PerValue ? s[i] : *s) + (PerValue ? t[i] : *t);
            y[i] = f(v);
        }
    }
}
}  // namespace cpu_detail

/// kernel<op::bias_map, cpu>::run(f, b, scale, shift, z, y, n, channels, inner): the elementwise tail
/// of a producer in one pass over z (n, channels, inner), the producer's output: z += b[c] when b
/// is not null (z keeps the layer's output, which the tail's backward reads), then
/// y = f(z * scale[c] + shift[c]) when scale is not null (an eval-mode BatchNorm folded: shift not
/// null then), else y = f(z). f is an elementwise functor (an expr::chain). Without b, z is only
/// read. The bits of bias_add, then (without scale) op::map of f.
template <class T>
struct kernel<op::bias_map, basic_cpu<T>> {
    template <class F>
    static void run(const F& f, const T* b, const T* scale, const T* shift, T* z, T* y, std::size_t n,
                    std::size_t channels, std::size_t inner) {
        const bool has_bias = b != nullptr, has_affine = scale != nullptr;
        if (inner == 1) {  // Linear: rows of `channels` features
            for (std::size_t r = 0; r < n; ++r)
                cpu_detail::bias_map_run<true>(f, b, scale, shift, z + r * channels, y + r * channels, channels,
                                               has_bias, has_affine);
            return;
        }
        for (std::size_t r = 0; r < n * channels; ++r) {
            const std::size_t c = r % channels;
            cpu_detail::bias_map_run<false>(f, has_bias ? b + c : b, has_affine ? scale + c : scale,
                                            has_affine ? shift + c : shift, z + r * inner, y + r * inner, inner,
                                            has_bias, has_affine);
        }
    }
};

namespace cpu_detail {
/// p[0] + ... + p[n-1] in a fixed order: four SIMD accumulators over whole vectors (one chain of
/// dependent adds would be latency-bound), combined, summed across lanes, then the scalar tail.
/// Round (floats): each p[i] read as round_to_bf16(p[i]), the bits of the sum of a rounded copy.
template <bool Round = false, class T>
T sum_run(const T* p, std::size_t n) {
    using V = xsimd::batch<T>;
    constexpr std::size_t W = V::size;
    static_assert(!Round || std::is_same_v<T, float>, "oar: sum_run rounds floats to bf16 only");
    auto load = [](const T* q) {
        if constexpr (Round) {
            alignas(64) T r[W];
            round_to_bf16(q, r, W);
            return V::load_aligned(r);
        } else {
            return V::load_unaligned(q);
        }
    };
    std::size_t i = 0;
    T s = T(0);
    if (n >= 4 * W) {
        V a0(T(0)), a1(T(0)), a2(T(0)), a3(T(0));
        for (; i + 4 * W <= n; i += 4 * W) {
            a0 += load(p + i);
            a1 += load(p + i + W);
            a2 += load(p + i + 2 * W);
            a3 += load(p + i + 3 * W);
        }
        for (; i + W <= n; i += W) a0 += load(p + i);
        s = xsimd::hadd((a0 + a1) + (a2 + a3));
    }
    for (; i < n; ++i) {
        if constexpr (Round)
            s += round_to_bf16(p[i]);
        else
            s += p[i];
    }
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
        if (inner == 1) {  // Linear's rows: the same sums (a run of one value is that value), read row by
            // row for a block of channels side by side, where a channel at a time strides over rows
            constexpr std::size_t block = 64;
            double acc[block];
            for (std::size_t c0 = 0; c0 < channels; c0 += block) {
                const std::size_t w = channels - c0 < block ? channels - c0 : block;
                for (std::size_t j = 0; j < w; ++j) acc[j] = 0.0;
                for (std::size_t b = 0; b < n; ++b) {
                    const T* row = dy + b * channels + c0;
                    for (std::size_t j = 0; j < w; ++j) acc[j] += static_cast<double>(row[j]);
                }
                for (std::size_t j = 0; j < w; ++j) db[c0 + j] += static_cast<T>(acc[j]);
            }
            return;
        }
        for (std::size_t c = 0; c < channels; ++c) {
            double s = 0.0;
            for (std::size_t b = 0; b < n; ++b) s += cpu_detail::sum_run(dy + (b * channels + c) * inner, inner);
            db[c] += static_cast<T>(s);
        }
    }
};

}  // namespace oar
