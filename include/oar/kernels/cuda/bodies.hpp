// The bodies of oar's CUDA kernels as OAR_HOST_DEVICE functions of an explicit `Thread` (block,
// thread, block and grid sizes) and, for the one kernel that shares memory, a shared array and a
// phase number (a __syncthreads() separates phases). The __global__ wrappers in
// oar/cuda/kernels.cuh call exactly these; tests/cuda/ runs them on the CPU through an emulated
// launch and compares every one with the CPU backend. Plain C++: g++ compiles this header.
//
// Layouts: activations (n, C, H, W) row-major as on the CPU. The batched convolution works on
// "column" matrices (C*K*K, n*P) and on (C, n*P) outputs, P = OH*OW, so that one GEMM covers the
// whole batch; `ncp_from_cnp` / `cnp_from_ncp` move between (n, C, P) and (C, n*P).
#pragma once

#include <cstddef>  // std::size_t, std::ptrdiff_t
#include <cstdint>  // std::int64_t, std::uint64_t

#include "../../config.hpp"         // OAR_HOST_DEVICE
#include "../../core/bf16.hpp"      // bf16, to_bf16, round_to_bf16: the bf16_mixed policy's operands
#include "../../core/rng.hpp"       // CounterRng: dropout masks identical to the CPU's
#include "../rows.hpp"              // softmax rows, window_argmax: shared with the CPU
#include "../types.hpp"             // ConvGeometry
#include "launch.hpp"               // Thread

namespace oar::cuda_kernels {

// ---------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------

/// x / d, correctly rounded (the CPU's x /= d bits): op::scale_down as a map.
struct scale_down_fn {
    float d;
    OAR_HOST_DEVICE float operator()(float x) const { return x / d; }
};

/// y[i] = f(x[i]) for i < n (grid-stride); x == y allowed.
template <class F, class T>
OAR_HOST_DEVICE void map_body(const Thread& t, const F& f, const T* x, T* y, std::size_t n) {
    for (std::size_t i = t.global_x(); i < n; i += t.stride_x()) y[i] = f(x[i]);
}

/// y[i] = a[i] + b[i] for i < n (y may be a or b): op::add.
template <class T>
OAR_HOST_DEVICE void add_body(const Thread& t, const T* a, const T* b, T* y, std::size_t n) {
    for (std::size_t i = t.global_x(); i < n; i += t.stride_x()) y[i] = a[i] + b[i];
}

/// dst[r * dst_stride + j] = src[r * src_stride + j] for r < rows, j < len: op::copy_rows, one
/// work item per copied value.
template <class T>
OAR_HOST_DEVICE void copy_rows_body(const Thread& t, std::size_t rows, std::size_t len, const T* src,
                                    std::size_t src_stride, T* dst, std::size_t dst_stride) {
    const std::size_t total = rows * len;
    for (std::size_t i = t.global_x(); i < total; i += t.stride_x()) {
        const std::size_t r = i / len, j = i % len;
        dst[r * dst_stride + j] = src[r * src_stride + j];
    }
}

/// dx[i] = f.backward(x[i], y[i], dy[i]) for i < n.
template <class F, class T>
OAR_HOST_DEVICE void map_backward_body(const Thread& t, const F& f, const T* x, const T* y, const T* dy, T* dx,
                                       std::size_t n) {
    for (std::size_t i = t.global_x(); i < n; i += t.stride_x()) dx[i] = f.backward(x[i], y[i], dy[i]);
}

/// f(p[i], g[i], s1[i], s2[i]) over the flat buffers (one launch for the whole network);
/// s1 / s2 may be null when f does not use them.
template <class F, class T>
OAR_HOST_DEVICE void update_body(const Thread& t, const F& f, std::size_t n, T* p, const T* g, T* s1, T* s2) {
    T d1 = T(0), d2 = T(0);
    for (std::size_t i = t.global_x(); i < n; i += t.stride_x()) f(p[i], g[i], s1 ? s1[i] : d1, s2 ? s2[i] : d2);
}

/// out[i] = 0 where the mask drops element i, else in[i] * scale; the mask is CounterRng::uniform
/// of (stream, i) < p, the same draw as the CPU's Dropout, so masks match bitwise.
template <class T>
OAR_HOST_DEVICE void dropout_body(const Thread& t, CounterRng rng, std::uint64_t stream, float p, T scale, const T* in,
                                  T* out, std::size_t count) {
    for (std::size_t i = t.global_x(); i < count; i += t.stride_x())
        out[i] = rng.uniform(stream, i) < p ? T(0) : in[i] * scale;
}

// ---------------------------------------------------------------------------------------------
// bf16 operands (the bf16_mixed policy, core/precision.hpp): core/bf16.hpp's rounding, the same bits
// ---------------------------------------------------------------------------------------------

/// out[i] = round_to_bf16(in[i]) for i < n, as floats (in == out allowed): values a bf16 GEMM sees.
OAR_HOST_DEVICE inline void round_bf16_body(const Thread& t, const float* in, float* out, std::size_t n) {
    for (std::size_t i = t.global_x(); i < n; i += t.stride_x()) out[i] = round_to_bf16(in[i]);
}

/// dst (rows, cols), packed row-major, = to_bf16 of src (rows, cols) with row stride src_ld: a
/// GEMM operand for cuBLAS's bf16 GEMM (one work item per value).
OAR_HOST_DEVICE inline void pack_bf16_body(const Thread& t, std::size_t rows, std::size_t cols, const float* src,
                                           std::size_t src_ld, bf16* dst) {
    const std::size_t total = rows * cols;
    for (std::size_t i = t.global_x(); i < total; i += t.stride_x()) dst[i] = to_bf16(src[(i / cols) * src_ld + i % cols]);
}

// ---------------------------------------------------------------------------------------------
// Bias
// ---------------------------------------------------------------------------------------------

/// y (n, channels, inner) += b[c]
template <class T>
OAR_HOST_DEVICE void bias_add_body(const Thread& t, T* y, const T* b, std::size_t n, std::size_t channels,
                                   std::size_t inner) {
    const std::size_t total = n * channels * inner;
    for (std::size_t i = t.global_x(); i < total; i += t.stride_x()) y[i] += b[(i / inner) % channels];
}

/// A producer's elementwise tail over z (n, channels, inner) (op::bias_map): z += b[c] when b is not
/// null, then y = f(z * scale[c] + shift[c]) when scale is not null, else y = f(z).
template <class F, class T>
OAR_HOST_DEVICE void bias_map_body(const Thread& t, const F& f, const T* b, const T* scale, const T* shift, T* z, T* y,
                                   std::size_t n, std::size_t channels, std::size_t inner) {
    const std::size_t total = n * channels * inner;
    for (std::size_t i = t.global_x(); i < total; i += t.stride_x()) {
        const std::size_t c = (i / inner) % channels;
        T v = z[i];
        if (b) z[i] = v = v + b[c];
        if (scale) v = v * scale[c] + shift[c];
        y[i] = f(v);
    }
}

/// Phases of bias_grad_body for a block of `block_dim` threads (a power of two): one partial-sum
/// phase, log2(block_dim) tree phases, one write phase.
constexpr unsigned bias_grad_phases(unsigned block_dim) {
    unsigned levels = 0;
    while ((1u << levels) < block_dim) ++levels;
    return levels + 2;
}

/// db[c] += sum over n and inner of dy (n, channels, inner); one block per channel (block.x = c),
/// `shared` holds block_dim doubles. Phase 0: strided partial sums; then a tree reduction; the
/// last phase writes. A fixed order for a fixed launch: the same sum on every run.
template <class T>
OAR_HOST_DEVICE void bias_grad_body(unsigned phase, const Thread& t, double* shared, const T* dy, T* db, std::size_t n,
                                    std::size_t channels, std::size_t inner) {
    const std::size_t c = t.block.x, tid = t.thread.x, bd = t.block_dim.x;
    const unsigned last = bias_grad_phases(t.block_dim.x) - 1;
    if (phase == 0) {
        double s = 0.0;
        for (std::size_t j = tid; j < n * inner; j += bd) s += static_cast<double>(dy[((j / inner) * channels + c) * inner + j % inner]);
        shared[tid] = s;
    } else if (phase < last) {
        const std::size_t half = bd >> phase;
        if (tid < half) shared[tid] += shared[tid + half];
    } else if (tid == 0) {
        db[c] += static_cast<T>(shared[0]);
    }
}

// ---------------------------------------------------------------------------------------------
// Convolution by columns, for the whole batch at once
// ---------------------------------------------------------------------------------------------

/// col (C*KH*KW, n*P) from x (n, C, H, W); zeros where the window covers padding. With n = 1 this
/// is exactly the CPU's im2col layout (C*KH*KW, P).
template <class T>
OAR_HOST_DEVICE void im2col_body(const Thread& t, ConvGeometry g, std::size_t n, const T* x, T* col) {
    const std::size_t KH = g.kh(), KW = g.kw(), ow = g.out_width(), P = g.col_cols(), nP = n * P;
    const std::size_t total = g.col_rows() * nP;
    for (std::size_t i = t.global_x(); i < total; i += t.stride_x()) {
        const std::size_t r = i / nP, q = i % nP, s = q / P, pix = q % P;
        const std::size_t c = r / (KH * KW), ky = (r / KW) % KH, kx = r % KW;
        const std::ptrdiff_t iy = static_cast<std::ptrdiff_t>((pix / ow) * g.sh() + ky) - static_cast<std::ptrdiff_t>(g.ph());
        const std::ptrdiff_t ix = static_cast<std::ptrdiff_t>((pix % ow) * g.sw() + kx) - static_cast<std::ptrdiff_t>(g.pw());
        const bool inside = iy >= 0 && iy < static_cast<std::ptrdiff_t>(g.height) && ix >= 0 &&
                            ix < static_cast<std::ptrdiff_t>(g.width);
        col[i] = inside ? x[((s * g.channels + c) * g.height + static_cast<std::size_t>(iy)) * g.width +
                            static_cast<std::size_t>(ix)]
                        : T(0);
    }
}

/// dx (n, C, H, W) += adjoint of im2col applied to col (C*KH*KW, n*P): each input pixel gathers the
/// column entries that read it (no atomics, so the result does not depend on scheduling).
template <class T>
OAR_HOST_DEVICE void col2im_body(const Thread& t, ConvGeometry g, std::size_t n, const T* col, T* dx) {
    const std::size_t KH = g.kh(), KW = g.kw(), SH = g.sh(), SW = g.sw(), oh = g.out_height(), ow = g.out_width();
    const std::size_t P = g.col_cols(), nP = n * P, hw = g.height * g.width, total = n * g.channels * hw;
    for (std::size_t i = t.global_x(); i < total; i += t.stride_x()) {
        const std::size_t s = i / (g.channels * hw), c = (i / hw) % g.channels;
        const std::size_t y = (i % hw) / g.width, x = i % g.width;
        T sum = T(0);
        for (std::size_t ky = 0; ky < KH; ++ky) {
            const std::ptrdiff_t ty = static_cast<std::ptrdiff_t>(y + g.ph()) - static_cast<std::ptrdiff_t>(ky);
            if (ty < 0 || static_cast<std::size_t>(ty) % SH != 0 || static_cast<std::size_t>(ty) / SH >= oh) continue;
            const std::size_t oy = static_cast<std::size_t>(ty) / SH;
            for (std::size_t kx = 0; kx < KW; ++kx) {
                const std::ptrdiff_t tx = static_cast<std::ptrdiff_t>(x + g.pw()) - static_cast<std::ptrdiff_t>(kx);
                if (tx < 0 || static_cast<std::size_t>(tx) % SW != 0 || static_cast<std::size_t>(tx) / SW >= ow) continue;
                const std::size_t ox = static_cast<std::size_t>(tx) / SW;
                sum += col[((c * KH + ky) * KW + kx) * nP + s * P + oy * ow + ox];
            }
        }
        dx[i] += sum;
    }
}

/// dst (n, C, P) = src (C, n*P) transposed by blocks, plus bias[c] when bias is not null.
template <class T>
OAR_HOST_DEVICE void ncp_from_cnp_body(const Thread& t, const T* src, T* dst, const T* bias, std::size_t n,
                                       std::size_t channels, std::size_t P) {
    const std::size_t total = n * channels * P;
    for (std::size_t i = t.global_x(); i < total; i += t.stride_x()) {
        const std::size_t s = i / (channels * P), c = (i / P) % channels, pix = i % P;
        dst[i] = src[(c * n + s) * P + pix] + (bias ? bias[c] : T(0));
    }
}

/// dst (C, n*P) from src (n, C, P).
template <class T>
OAR_HOST_DEVICE void cnp_from_ncp_body(const Thread& t, const T* src, T* dst, std::size_t n, std::size_t channels,
                                       std::size_t P) {
    const std::size_t total = n * channels * P;
    for (std::size_t i = t.global_x(); i < total; i += t.stride_x()) {
        const std::size_t c = i / (n * P), s = (i / P) % n, pix = i % P;
        dst[i] = src[(s * channels + c) * P + pix];
    }
}

// ---------------------------------------------------------------------------------------------
// Pooling (no padding, as the CPU kernels): one thread per output for forward, one per input
// pixel for backward (a gather over the windows that contain it: no atomics).
// ---------------------------------------------------------------------------------------------

using oar::rows::window_argmax;

/// The outputs whose window contains input coordinate `i` along one axis: [lo, hi).
OAR_HOST_DEVICE inline void windows_containing(std::size_t i, std::size_t K, std::size_t S, std::size_t outs,
                                               std::size_t& lo, std::size_t& hi) {
    lo = i + 1 > K ? (i + 1 - K + S - 1) / S : 0;  // first o with o*S + K > i
    hi = i / S + 1;                                // o*S <= i
    if (hi > outs) hi = outs;
}

template <class T>
OAR_HOST_DEVICE void max_pool_forward_body(const Thread& t, ConvGeometry g, std::size_t n, const T* x, T* y) {
    const std::size_t oh = g.out_height(), ow = g.out_width(), total = n * g.channels * oh * ow;
    for (std::size_t i = t.global_x(); i < total; i += t.stride_x()) {
        const std::size_t plane = i / (oh * ow), oy = (i % (oh * ow)) / ow, ox = i % ow;
        const T* in = x + plane * g.height * g.width;
        y[i] = in[window_argmax(g, in, oy, ox)];
    }
}

/// dx[i] = the sum, over the windows (oy, ox) of the plane that contain input pixel i, of
/// add(plane, pixel, oy, ox, sum) adding its term: a gather, one thread per input pixel, no atomics.
template <class T, class Add>
OAR_HOST_DEVICE void pool_gather(const Thread& t, const ConvGeometry& g, std::size_t n, T* dx, const Add& add) {
    const std::size_t oh = g.out_height(), ow = g.out_width(), hw = g.height * g.width, total = n * g.channels * hw;
    for (std::size_t i = t.global_x(); i < total; i += t.stride_x()) {
        const std::size_t plane = i / hw, iy = (i % hw) / g.width, ix = i % g.width;
        std::size_t y0, y1, x0, x1;
        windows_containing(iy, g.kernel, g.stride, oh, y0, y1);
        windows_containing(ix, g.kernel, g.stride, ow, x0, x1);
        T sum = T(0);
        for (std::size_t oy = y0; oy < y1; ++oy)
            for (std::size_t ox = x0; ox < x1; ++ox) add(plane, i % hw, oy, ox, sum);
        dx[i] = sum;
    }
}

/// A window's gradient goes to its first maximum.
template <class T>
struct max_pool_term {
    ConvGeometry g;
    const T* x;
    const T* dy;
    OAR_HOST_DEVICE void operator()(std::size_t plane, std::size_t pixel, std::size_t oy, std::size_t ox, T& sum) const {
        const std::size_t oh = g.out_height(), ow = g.out_width();
        if (window_argmax(g, x + plane * g.height * g.width, oy, ox) == pixel) sum += dy[plane * oh * ow + oy * ow + ox];
    }
};

/// A window's gradient spread evenly over its K*K pixels.
template <class T>
struct avg_pool_term {
    ConvGeometry g;
    const T* dy;
    T inv;
    OAR_HOST_DEVICE void operator()(std::size_t plane, std::size_t, std::size_t oy, std::size_t ox, T& sum) const {
        const std::size_t oh = g.out_height(), ow = g.out_width();
        sum += dy[plane * oh * ow + oy * ow + ox] * inv;
    }
};

template <class T>
OAR_HOST_DEVICE void max_pool_backward_body(const Thread& t, ConvGeometry g, std::size_t n, const T* x, const T* dy,
                                            T* dx) {
    pool_gather(t, g, n, dx, max_pool_term<T>{g, x, dy});
}

template <class T>
OAR_HOST_DEVICE void avg_pool_forward_body(const Thread& t, ConvGeometry g, std::size_t n, const T* x, T* y) {
    const std::size_t oh = g.out_height(), ow = g.out_width(), total = n * g.channels * oh * ow;
    const T inv = T(1) / static_cast<T>(g.kernel * g.kernel);
    for (std::size_t i = t.global_x(); i < total; i += t.stride_x()) {
        const std::size_t plane = i / (oh * ow), oy = (i % (oh * ow)) / ow, ox = i % ow;
        const T* in = x + plane * g.height * g.width;
        T s = T(0);
        for (std::size_t ky = 0; ky < g.kernel; ++ky)
            for (std::size_t kx = 0; kx < g.kernel; ++kx) s += in[(oy * g.stride + ky) * g.width + ox * g.stride + kx];
        y[i] = s * inv;
    }
}

template <class T>
OAR_HOST_DEVICE void avg_pool_backward_body(const Thread& t, ConvGeometry g, std::size_t n, const T* dy, T* dx) {
    pool_gather(t, g, n, dx, avg_pool_term<T>{g, dy, T(1) / static_cast<T>(g.kernel * g.kernel)});
}

/// One thread per output (the mean of its adaptive window) / per input pixel (the gather of dy / area).
template <class T>
OAR_HOST_DEVICE void adaptive_avg_pool_forward_body(const Thread& t, AdaptiveGeometry g, std::size_t n, const T* x,
                                                    T* y) {
    for (std::size_t i = t.global_x(), e = n * g.channels * g.out_height * g.out_width; i < e; i += t.stride_x())
        y[i] = oar::rows::adaptive_output(g, x, i);
}
template <class T>
OAR_HOST_DEVICE void adaptive_avg_pool_backward_body(const Thread& t, AdaptiveGeometry g, std::size_t n, const T* dy,
                                                     T* dx) {
    for (std::size_t i = t.global_x(), e = n * g.channels * g.height * g.width; i < e; i += t.stride_x())
        dx[i] = oar::rows::adaptive_input_grad(g, dy, i);
}

// ---------------------------------------------------------------------------------------------
// Softmax over rows: one thread per row (the course's rows are 10 wide).
// ---------------------------------------------------------------------------------------------

template <class T>
OAR_HOST_DEVICE void softmax_forward_body(const Thread& t, const T* x, T* y, std::size_t rows, std::size_t cols) {
    for (std::size_t r = t.global_x(); r < rows; r += t.stride_x()) oar::rows::softmax(x + r * cols, y + r * cols, cols);
}

/// dx = y * (dy - sum(dy * y)) per row.
template <class T>
OAR_HOST_DEVICE void softmax_backward_body(const Thread& t, const T* y, const T* dy, T* dx, std::size_t rows,
                                           std::size_t cols) {
    for (std::size_t r = t.global_x(); r < rows; r += t.stride_x())
        oar::rows::softmax_backward(y + r * cols, dy + r * cols, dx + r * cols, cols);
}

/// losses[r] = logsumexp(z_r) - z_r[label_r] (double); dz = scale * (softmax(z) - onehot) when dz
/// is not null. Labels are checked on the host before the launch.
template <class T>
OAR_HOST_DEVICE void softmax_cross_entropy_body(const Thread& t, const T* z, const std::int64_t* labels,
                                                std::size_t rows, std::size_t cols, T scale, double* losses, T* dz) {
    for (std::size_t r = t.global_x(); r < rows; r += t.stride_x())
        losses[r] = oar::rows::softmax_cross_entropy(z + r * cols, static_cast<std::size_t>(labels[r]), cols, scale,
                                                     dz ? dz + r * cols : nullptr);
}

// ---------------------------------------------------------------------------------------------
// Batch normalisation: one thread per channel, the CPU's per-channel bodies (rows.hpp), so the
// statistics are summed in the same order and the results are the CPU's bits.
// ---------------------------------------------------------------------------------------------

/// BatchNorm's forward over x (n, channels, inner), the running statistics updated in training.
template <class T>
OAR_HOST_DEVICE void batch_norm_forward_body(const Thread& t, std::size_t n, std::size_t channels, std::size_t inner,
                                             const T* x, const T* gamma, const T* beta, T* running_mean,
                                             T* running_var, bool train, float momentum, float eps, T* y) {
    for (std::size_t c = t.global_x(); c < channels; c += t.stride_x())
        oar::rows::batch_norm_forward_channel(n, channels, inner, c, x, gamma, beta, running_mean, running_var, train,
                                              momentum, eps, y);
}

/// The eval-mode BatchNorm as scale[c], shift[c] (op::batch_norm_fold), one thread per channel.
template <class T>
OAR_HOST_DEVICE void batch_norm_fold_body(const Thread& t, std::size_t channels, const T* gamma, const T* beta,
                                          const T* running_mean, const T* running_var, float eps, T* scale, T* shift) {
    for (std::size_t c = t.global_x(); c < channels; c += t.stride_x())
        oar::rows::batch_norm_fold_channel(c, gamma, beta, running_mean, running_var, eps, scale, shift);
}

/// BatchNorm's backward: dgamma, dbeta accumulated; dx (may be null) overwritten.
template <class T>
OAR_HOST_DEVICE void batch_norm_backward_body(const Thread& t, std::size_t n, std::size_t channels, std::size_t inner,
                                              const T* x, const T* gamma, const T* running_mean, const T* running_var,
                                              bool train, float eps, const T* dy, T* dgamma, T* dbeta, T* dx) {
    for (std::size_t c = t.global_x(); c < channels; c += t.stride_x())
        oar::rows::batch_norm_backward_channel(n, channels, inner, c, x, gamma, running_mean, running_var, train, eps,
                                               dy, dgamma, dbeta, dx);
}

}  // namespace oar::cuda_kernels
