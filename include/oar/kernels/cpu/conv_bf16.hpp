// CPU Conv2D with bf16 products (bf16 mixed precision, core/precision.hpp): forward, input gradient
// and weight gradient as im2col + gemm_bf16 (kernels/cpu/gemm_bf16.hpp), the operands rounded to
// bf16 (nearest, ties to even) and packed as bf16 once: the weights once per call, each sample's
// column matrix and dy once, shared by the input and weight gradients. Sums are fp32. Not part of
// oar.hpp: a bf16_mixed Network's Conv2D layers run it (through Context::mixed_conv) where the CPU
// has AVX512-BF16 or AMX and conv_bf16_units() is on (conv_bf16_applies); elsewhere Conv2D keeps the fp32 kernels on rounded
// copies. The GEMM is a parameter (gemm_bf16 by default) so the route can run on any bf16 body.
// - forward: y_s = bias + W (out_c, C*KH*KW) col_s (C*KH*KW, OH*OW), samples in parallel;
// - input gradient: dcol_s = W^T dy_s, then col2im into dx_s, samples in parallel;
// - weight gradient: dW += dy (out_c, m*OH*OW) cols^T over a chunk of m samples laid side by side
//   (one product, K = m*OH*OW, chunks of fixed size added in order), so every entry is summed in an
//   order fixed by the shapes alone; the bias gradient sums the rounded dy in order of samples.
// Every result therefore has the same bits on any thread count.
#pragma once

#include <algorithm>  // std::min, std::max, std::fill
#include <cstddef>    // std::size_t

#include "../../core/bf16.hpp"         // bf16, to_bf16, to_float
#include "../../core/cpu_isa.hpp"      // active_cpu_isa
#include "../../core/precision.hpp"    // bf16_mixed, precision_conv
#include "../../core/thread_pool.hpp"  // default_pool, ThreadPool
#include "../types.hpp"                // ConvGeometry, Trans
#include "conv.hpp"                    // op::im2col, op::col2im on cpu
#include "gemm_bf16.hpp"               // gemm_bf16
#include "scratch.hpp"                 // scratch, scratch_slot

namespace oar {

/// gemm_bf16's signature: the product the bf16 convolution runs.
using gemm_bf16_fn = void (*)(Trans, Trans, std::size_t, std::size_t, std::size_t, float, const bf16*, std::size_t,
                              const bf16*, std::size_t, float, float*, std::size_t);

/// Whether Conv2D's bf16 route runs on this CPU: the switch is on (conv_bf16_units) and the active
/// ISA has bf16 product units.
inline bool conv_bf16_applies() {
    const cpu_isa isa = active_cpu_isa();
    return conv_bf16_units() && (isa == cpu_isa::avx512_bf16 || isa == cpu_isa::amx);
}

namespace cpu_detail {
/// Most values of a chunk's side-by-side column matrix (and of its dy) in the weight gradient.
inline constexpr std::size_t conv_bf16_chunk_values = std::size_t(1) << 20;

/// Sample x_s (C, H, W) float -> its column matrix (C*KH*KW, OH*OW) rounded to bf16 at out, row
/// pitch ld (columns [0, OH*OW) of each row written).
inline void im2col_bf16(const ConvGeometry& g, const float* x, bf16* out, std::size_t ld) {
    const std::size_t rows = g.col_rows(), cols = g.col_cols();
    float* col = scratch<float, scratch_slot::conv_cols>(rows * cols);
    kernel<op::im2col, cpu>::run(g, x, col);
    for (std::size_t r = 0; r < rows; ++r) to_bf16(col + r * cols, out + r * ld, cols);
}

/// Runs fn(s) for s < n on the default pool (each sample on one thread; a task's GEMMs then stay on
/// its thread), or in order when already inside a task.
template <class F>
void for_samples(std::size_t n, F&& fn) {
    if (ThreadPool::in_task() || n <= 1) {
        for (std::size_t s = 0; s < n; ++s) fn(s);
        return;
    }
    default_pool().parallel_for(n, [&](std::size_t s) { fn(s); });
}
}  // namespace cpu_detail

/// y (n, out_c, OH, OW) = conv(x (n, C, H, W), w (out_c, C*KH*KW)) + b (out_c; null: none), every
/// product on bf16-rounded x and w with fp32 sums.
inline void conv2d_bf16_forward(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x,
                                const float* w, const float* b, float* y, gemm_bf16_fn gemm = &gemm_bf16) {
    using namespace cpu_detail;
    const std::size_t ckk = g.col_rows(), P = g.col_cols(), per_in = g.channels * g.height * g.width;
    bf16* wb = scratch<bf16, scratch_slot::mixed_w>(out_c * ckk);
    to_bf16(w, wb, out_c * ckk);
    for_samples(n, [&](std::size_t s) {
        bf16* col = scratch<bf16, scratch_slot::mixed_x>(ckk * P);
        im2col_bf16(g, x + s * per_in, col, P);
        float* ys = y + s * out_c * P;
        if (b)
            for (std::size_t o = 0; o < out_c; ++o) std::fill(ys + o * P, ys + (o + 1) * P, b[o]);
        gemm(Trans::no, Trans::no, out_c, P, ckk, 1.0f, wb, ckk, col, P, b ? 1.0f : 0.0f, ys, P);
    });
}

/// The backward of conv2d_bf16_forward: dw (out_c, C*KH*KW) += sum_s dy_s col_s^T, db (out_c; null:
/// none) += the sums of the rounded dy, dx (n, C, H, W; null: not computed) = the input gradient;
/// x, w and dy rounded to bf16.
inline void conv2d_bf16_backward(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x,
                                 const float* w, const float* dy, float* dw, float* db, float* dx,
                                 gemm_bf16_fn gemm = &gemm_bf16) {
    using namespace cpu_detail;
    const std::size_t ckk = g.col_rows(), P = g.col_cols(), per_in = g.channels * g.height * g.width;
    bf16* wb = scratch<bf16, scratch_slot::mixed_w>(out_c * ckk);
    to_bf16(w, wb, out_c * ckk);
    const std::size_t chunk = std::max<std::size_t>(1, conv_bf16_chunk_values / (std::max(ckk, out_c) * P));
    for (std::size_t s0 = 0; s0 < n; s0 += chunk) {
        const std::size_t m = std::min(chunk, n - s0), K = m * P;
        bf16* cols = scratch<bf16, scratch_slot::mixed_a>(ckk * K);  // (ckk, m*P), sample s at column s*P
        bf16* dyb = scratch<bf16, scratch_slot::mixed_dy>(out_c * K);  // (out_c, m*P)
        for_samples(m, [&](std::size_t s) {
            im2col_bf16(g, x + (s0 + s) * per_in, cols + s * P, K);
            const float* dys = dy + (s0 + s) * out_c * P;
            for (std::size_t o = 0; o < out_c; ++o) to_bf16(dys + o * P, dyb + o * K + s * P, P);
            if (dx) {
                float* dcol = scratch<float, scratch_slot::conv_dcols>(ckk * P);
                gemm(Trans::yes, Trans::no, ckk, P, out_c, 1.0f, wb, ckk, dyb + s * P, K, 0.0f, dcol, P);
                float* dxs = dx + (s0 + s) * per_in;
                std::fill(dxs, dxs + per_in, 0.0f);
                kernel<op::col2im, cpu>::run(g, dcol, dxs);
            }
        });
        gemm(Trans::no, Trans::yes, out_c, ckk, K, 1.0f, dyb, K, cols, K, 1.0f, dw, ckk);
        if (db)
            for (std::size_t o = 0; o < out_c; ++o) {
                float sum = 0.0f;
                for (std::size_t k = 0; k < K; ++k) sum += to_float(dyb[o * K + k]);
                db[o] += sum;
            }
    }
}

/// The bf16 convolution as Context::mixed_conv_forward / mixed_conv_backward hold it (set by a
/// bf16_mixed Network).
template <>
struct precision_conv<bf16_mixed> {
    static void forward(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                        const float* b, float* y) {
        conv2d_bf16_forward(g, out_c, n, x, w, b, y);
    }
    static void backward(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                         const float* dy, float* dw, float* db, float* dx) {
        conv2d_bf16_backward(g, out_c, n, x, w, dy, dw, db, dx);
    }
};

}  // namespace oar
