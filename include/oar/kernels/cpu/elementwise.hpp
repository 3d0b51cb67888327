// Elementwise activation functors and the CPU map kernels that run them. A functor has a scalar
// `operator()` / `backward` (OAR_HOST_DEVICE, so a CUDA kernel runs the same body) and, for the
// CPU, xsimd `simd_apply` / `simd_backward`; the map kernel takes the SIMD path when it exists.
// Also the ReLU's backward as a mask applied in place to dy (op::relu_mask), which a layer with a
// fused ReLU epilogue uses: y > 0 exactly where the ReLU's input was > 0 (NaN and -0 included), so
// masking with the output gives the bits relu_fn::backward gives with the input.
#pragma once

#include <algorithm> // std::min
#include <cmath>    // std::exp, std::tanh, std::erf
#include <concepts> // std::same_as
#include <cstddef>  // std::size_t

#include "../../core/simd.hpp"  // xsimd::batch, select, exp, tanh

#include "../../config.hpp"            // OAR_HOST_DEVICE, OAR_RESTRICT
#include "../../core/thread_pool.hpp"  // default_pool: large maps in chunks
#include "../dispatch.hpp"   // kernel, op::map, op::map_backward

namespace oar {

/// max(x, 0); NaN passes through (as in PyTorch), so a NaN guard can still see it.
struct relu_fn {
    static constexpr bool cheap_forward = true;  // no call: a chain may recompute it (kernels/expr.hpp)
    template <class T>
    OAR_HOST_DEVICE T operator()(T x) const { return x < T(0) ? T(0) : x; }
    template <class T>
    OAR_HOST_DEVICE T backward(T x, T, T dy) const { return x > T(0) ? dy : T(0); }
    template <class B>
    B simd_apply(B x) const { return xsimd::select(x < B(0), B(0), x); }
    template <class B>
    B simd_backward(B x, B, B dy) const { return xsimd::select(x > B(0), dy, B(0)); }
};

/// 1 / (1 + exp(-x)); saturates to 0 or 1 without overflow to NaN.
struct sigmoid_fn {
    template <class T>
    OAR_HOST_DEVICE T operator()(T x) const { return T(1) / (T(1) + std::exp(-x)); }
    template <class T>
    OAR_HOST_DEVICE T backward(T, T y, T dy) const { return dy * y * (T(1) - y); }
    template <class B>
    B simd_apply(B x) const { return B(1) / (B(1) + xsimd::exp(-x)); }
    template <class B>
    B simd_backward(B, B y, B dy) const { return dy * y * (B(1) - y); }
};

/// tanh(x)
struct tanh_fn {
    template <class T>
    OAR_HOST_DEVICE T operator()(T x) const { return std::tanh(x); }
    template <class T>
    OAR_HOST_DEVICE T backward(T, T y, T dy) const { return dy * (T(1) - y * y); }
    template <class B>
    B simd_apply(B x) const { return xsimd::tanh(x); }
    template <class B>
    B simd_backward(B, B y, B dy) const { return dy * (B(1) - y * y); }
};

/// x > 0 ? x : slope x (paddle.nn.LeakyReLU, negative_slope 0.01 by default).
struct leaky_relu_fn {
    static constexpr bool cheap_forward = true;
    float slope = 0.01f;
    template <class T>
    OAR_HOST_DEVICE T operator()(T x) const { return x > T(0) ? x : T(slope) * x; }
    template <class T>
    OAR_HOST_DEVICE T backward(T x, T, T dy) const { return x > T(0) ? dy : T(slope) * dy; }
    template <class B>
    B simd_apply(B x) const { return xsimd::select(x > B(0), x, B(typename B::value_type(slope)) * x); }
    template <class B>
    B simd_backward(B x, B, B dy) const { return xsimd::select(x > B(0), dy, B(typename B::value_type(slope)) * dy); }
};

/// x > 0 ? x : alpha (exp(x) - 1) (paddle.nn.ELU, alpha 1 by default); the gradient below 0 is
/// y + alpha, as PyTorch computes it.
struct elu_fn {
    float alpha = 1.0f;
    template <class T>
    OAR_HOST_DEVICE T operator()(T x) const { return x > T(0) ? x : T(alpha) * (std::exp(x) - T(1)); }
    template <class T>
    OAR_HOST_DEVICE T backward(T x, T y, T dy) const { return x > T(0) ? dy : dy * (y + T(alpha)); }
    template <class B>
    B simd_apply(B x) const {
        return xsimd::select(x > B(0), x, B(typename B::value_type(alpha)) * (xsimd::exp(x) - B(1)));
    }
    template <class B>
    B simd_backward(B x, B y, B dy) const {
        return xsimd::select(x > B(0), dy, dy * (y + B(typename B::value_type(alpha))));
    }
};

/// The exact GELU, x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 (paddle.nn.GELU(approximate=False),
/// torch.nn.GELU()); d/dx = Phi(x) + x phi(x).
struct gelu_fn {
    template <class T>
    OAR_HOST_DEVICE T operator()(T x) const { return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440))); }
    template <class T>
    OAR_HOST_DEVICE T backward(T x, T, T dy) const {
        const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
        const T pdf = T(0.39894228040143267794) * std::exp(T(-0.5) * x * x);
        return dy * (cdf + x * pdf);
    }
    template <class B>
    B simd_apply(B x) const { return B(0.5) * x * (B(1) + xsimd::erf(x * B(0.70710678118654752440))); }
    template <class B>
    B simd_backward(B x, B, B dy) const {
        const B cdf = B(0.5) * (B(1) + xsimd::erf(x * B(0.70710678118654752440)));
        const B pdf = B(0.39894228040143267794) * xsimd::exp(B(-0.5) * x * x);
        return dy * (cdf + x * pdf);
    }
};

/// x min(max(x + 3, 0), 6) / 6 (paddle.nn.Hardswish); the gradient is PyTorch's: 0 below -3,
/// x / 3 + 1/2 on [-3, 3], 1 above.
struct hardswish_fn {
    static constexpr bool cheap_forward = true;
    template <class T>
    OAR_HOST_DEVICE T operator()(T x) const {
        const T r = x + T(3) < T(0) ? T(0) : (x + T(3) > T(6) ? T(6) : x + T(3));
        return x * r / T(6);
    }
    template <class T>
    OAR_HOST_DEVICE T backward(T x, T, T dy) const {
        return x < T(-3) ? T(0) : (x <= T(3) ? dy * (x / T(3) + T(0.5)) : dy);
    }
    template <class B>
    B simd_apply(B x) const { return x * xsimd::min(xsimd::max(x + B(3), B(0)), B(6)) / B(6); }
    template <class B>
    B simd_backward(B x, B, B dy) const {
        return xsimd::select(x < B(-3), B(0), xsimd::select(x <= B(3), dy * (x / B(3) + B(0.5)), dy));
    }
};

template <class F, class T>
concept SimdFunctor = requires(const F f, xsimd::batch<T> b) {
    { f.simd_apply(b) } -> std::same_as<xsimd::batch<T>>;
    { f.simd_backward(b, b, b) } -> std::same_as<xsimd::batch<T>>;
};

namespace cpu_detail {
/// Runs f(begin, end) over [0, n) in fixed chunks of 64 Ki elements on the default pool (serially
/// when there is one chunk); elementwise results do not depend on the split.
template <class F>
void for_chunks(std::size_t n, F&& f) {
    constexpr std::size_t chunk = std::size_t{1} << 16;
    const std::size_t tasks = (n + chunk - 1) / chunk;
    if (tasks <= 1) {
        f(std::size_t{0}, n);
        return;
    }
    default_pool().parallel_for(tasks, [&](std::size_t t) { f(t * chunk, std::min(n, (t + 1) * chunk)); });
}

/// dy[i] = y[i] > 0 ? dy[i] : 0 for i < n on this thread: relu_fn::backward with the ReLU's output
/// in place of its input (the same comparison result for every input, so the same bits).
template <class T>
void relu_mask(const T* OAR_RESTRICT y, T* OAR_RESTRICT dy, std::size_t n) {
    using B = xsimd::batch<T>;
    std::size_t i = 0;
    for (; i + B::size <= n; i += B::size)
        xsimd::select(B::load_unaligned(y + i) > B(0), B::load_unaligned(dy + i), B(0)).store_unaligned(dy + i);
    for (; i < n; ++i) dy[i] = y[i] > T(0) ? dy[i] : T(0);
}
}  // namespace cpu_detail

/// kernel<op::relu_mask, cpu>::run(y, dy, n): dy[i] = y[i] > 0 ? dy[i] : 0 (y a ReLU's output), so
/// dy becomes the gradient of the ReLU's input; large arrays in chunks on the default pool.
template <class T>
struct kernel<op::relu_mask, basic_cpu<T>> {
    static void run(const T* y, T* dy, std::size_t n) {
        cpu_detail::for_chunks(n, [&](std::size_t b, std::size_t e) { cpu_detail::relu_mask(y + b, dy + b, e - b); });
    }
};

namespace cpu_detail {
/// y[i] = f(x[i]) for i < n on this thread. With f's SIMD members every element goes through
/// simd_apply, the last partial vector through a zero-padded one, so an element's bits do not depend
/// on where it sits in the array: a map over a part of a tensor (a producer's epilogue, one sample
/// at a time) gives the bits of a map over the whole. x == y (in place) is allowed.
template <class F, class T>
void map_span(const F& f, const T* x, T* y, std::size_t n) {
    std::size_t i = 0;
    if constexpr (SimdFunctor<F, T>) {
        using B = xsimd::batch<T>;
        const std::size_t whole = n / B::size * B::size;  // (a bound g++ sees through)
        for (; i < whole; i += B::size) f.simd_apply(B::load_unaligned(x + i)).store_unaligned(y + i);
        if (i < n) {
            alignas(64) T buf[B::size] = {};
            std::copy(x + i, x + n, buf);
            f.simd_apply(B::load_aligned(buf)).store_aligned(buf);
            std::copy(buf, buf + (n - i), y + i);
        }
    } else {
        for (; i < n; ++i) y[i] = f(x[i]);
    }
}

/// dx[i] = f.backward(x[i], y[i], dy[i]) for i < n on this thread, every element through
/// simd_backward when f has it (as map_span). dx may be dy (in place).
template <class F, class T>
void map_backward_span(const F& f, const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
    std::size_t i = 0;
    if constexpr (SimdFunctor<F, T>) {
        using B = xsimd::batch<T>;
        const std::size_t whole = n / B::size * B::size;
        for (; i < whole; i += B::size)
            f.simd_backward(B::load_unaligned(x + i), B::load_unaligned(y + i), B::load_unaligned(dy + i))
                .store_unaligned(dx + i);
        if (i < n) {
            alignas(64) T bx[B::size] = {}, by[B::size] = {}, bd[B::size] = {};
            std::copy(x + i, x + n, bx);
            std::copy(y + i, y + n, by);
            std::copy(dy + i, dy + n, bd);
            f.simd_backward(B::load_aligned(bx), B::load_aligned(by), B::load_aligned(bd)).store_aligned(bd);
            std::copy(bd, bd + (n - i), dx + i);
        }
    } else {
        for (; i < n; ++i) dx[i] = f.backward(x[i], y[i], dy[i]);
    }
}
}  // namespace cpu_detail

/// kernel<op::map, cpu>::run(f, x, y, n): y[i] = f(x[i]); x == y (in place) is allowed. Every
/// element through f's SIMD members where it has them (cpu_detail::map_span).
template <class T>
struct kernel<op::map, basic_cpu<T>> {
    template <class F>
    static void run(const F& f, const T* x, T* y, std::size_t n) {
        cpu_detail::for_chunks(n, [&](std::size_t b, std::size_t e) { cpu_detail::map_span(f, x + b, y + b, e - b); });
    }
};

/// kernel<op::map_backward, cpu>::run(f, x, y, dy, dx, n): dx[i] = f.backward(x[i], y[i], dy[i]);
/// dx may be dy (in place).
template <class T>
struct kernel<op::map_backward, basic_cpu<T>> {
    template <class F>
    static void run(const F& f, const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
        cpu_detail::for_chunks(n, [&](std::size_t b, std::size_t e) {
            cpu_detail::map_backward_span(f, x + b, y + b, dy + b, dx + b, e - b);
        });
    }
};

/// kernel<op::scale_down, cpu>::run(x, n, d): x[i] /= d, in place (correctly rounded, so every
/// rank that divides the same sums gets the same bits).
template <class T>
struct kernel<op::scale_down, basic_cpu<T>> {
    static void run(T* x, std::size_t n, T d) {
        for (std::size_t i = 0; i < n; ++i) x[i] /= d;
    }
};

}  // namespace oar
