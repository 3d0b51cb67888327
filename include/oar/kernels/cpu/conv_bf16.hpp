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
// Also conv2d_bf16_dw: the weight gradient alone on the AVX512-BF16 tile of isa/conv_bf16_dw.inc
// (output positions in pairs, no column matrix), which a bf16_mixed Conv2D runs off that route for
// stride-1 shapes but the widest 3x3 outputs (conv_bf16_dw_applies, Context::mixed_conv_dw).
#pragma once

#include <algorithm>  // std::min, std::max, std::fill
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint16_t, std::uint32_t: the weight gradient's packed operands

#include "../../core/bf16.hpp"         // bf16, to_bf16, to_float
#include "../../core/cpu_isa.hpp"      // active_cpu_isa
#include "../../core/error.hpp"        // usage_error: the weight gradient without its body
#include "../../core/precision.hpp"    // bf16_mixed, precision_conv
#include "../../core/thread_pool.hpp"  // default_pool, ThreadPool
#include "../types.hpp"                // ConvGeometry, Trans
#include "bias.hpp"                    // kernel<op::bias_grad, cpu>
#include "conv.hpp"                    // op::im2col, op::col2im on cpu; winograd_dw_applies, conv_dw_group, conv_pitch
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

/// The body conv2d_bf16_dw runs (isa/conv_bf16_dw.inc, on the real intrinsics or emulated ones):
/// dw_pack and dw_tile_rows (rows, the block's output channels, then the tile's operands).
struct conv_bf16_dw_body {
    void (*pack)(const cpu_detail::conv_bf16_dw_layout&, const float*, std::uint16_t*, const float*, std::uint16_t*,
                 std::uint32_t*);
    void (*tile)(std::size_t, std::size_t, std::size_t, std::size_t, const std::uint16_t*, std::size_t, const std::size_t*,
                 const std::uint32_t*, std::size_t, float*);
};

/// Whether a bf16_mixed Conv2D's weight gradient runs on the bf16 units (conv2d_bf16_dw) while its
/// forward and input gradient stay on the fp32 kernels (Winograd, implicit GEMM) on rounded copies:
/// the active ISA has them (AVX512-BF16, or AMX, whose CPUs have AVX512-BF16 too) and the
/// convolution (out_c output channels) is stride-1 and square, not 1x1, with at least 8 input
/// channels; not for 3x3 on outputs at least winograd_dw_wide (29) wide, where the fp32 Winograd
/// weight gradient does fewer multiplications than this tile's 2x can make up for. (On narrower 3x3
/// outputs the units measured faster than Winograd's, which the fp32 policy takes there from 13 wide
/// on AVX-512: winograd_dw_applies.) Applies whatever conv_bf16_units() says (that switch moves all
/// three products to the im2col route).
inline bool conv_bf16_dw_applies(const ConvGeometry& g, std::size_t out_c) {
#if OAR_ISA_X86 && OAR_ISA_COMPILED(2)
    const cpu_isa isa = active_cpu_isa();
    return (isa == cpu_isa::avx512_bf16 || isa == cpu_isa::amx) && g.square() && g.stride == 1 && g.kernel > 1 &&
           g.channels >= 8 &&
           !cpu_detail::winograd_dw_applies<float>(g.channels, out_c, g.kernel, 1, g.out_width(),
                                                   cpu_detail::winograd_dw_wide);
#else
    (void)g, (void)out_c;
    return false;
#endif
}

/// dw (out_c, C, K, K) += the weight gradient of the stride-1 square convolution g over samples x
/// (n, C, H, W) with output gradient dy (n, out_c, OH, OW), x and dy rounded to bf16 (nearest, ties
/// to even) and multiplied on the bf16 units by `body` (isa/conv_bf16_dw.inc: vdpbf16ps over pairs
/// of output positions, products exact, sums fp32, subnormal inputs and sums flushed to zero as the
/// instruction does); db (out_c; null: none) += the sums of dy as given (bias_grad). Each group of
/// samples (conv_dw_group) is one task: its images copied as bf16 onto a zero-padded row pitch
/// Wp, its dy as pair words in blocks of 32 output channels (a block of 24 or 16 channels or fewer
/// takes a narrower tile), zero at the Wp - OW positions past each output
/// row (there the tiles multiply zero by whatever the padded copy holds, so an infinite or NaN input
/// value reaches dw through them too, as it reaches it through the positions that read it). Groups
/// and pitch are the fp32 weight gradient's (conv.hpp conv_dw_group, conv_pitch). Every entry is
/// summed in an order fixed by the shapes alone: the same bits on any thread count.
inline void conv2d_bf16_dw(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* dy,
                           float* dw, float* db, conv_bf16_dw_body body) {
    using namespace cpu_detail;
    constexpr std::size_t RM = conv_bf16_dw_rows, OB = conv_bf16_dw_cols;
    const std::size_t C = g.channels, H = g.height, Wd = g.width, K = g.kernel, pad = g.pad;
    const std::size_t Wp = conv_pitch(Wd, K, pad);
    const std::size_t plane = (H + 2 * pad) * Wp, OH = g.out_height(), OW = g.out_width(), P = OH * OW;
    const std::size_t pairs = (OH * Wp + 1) / 2, ckk = g.col_rows(), nb = (out_c + OB - 1) / OB;
    // A tile reads up to (C-1)*plane + (K-1)*Wp + K-1 + 2*pairs - 1 <= C*plane + K - 1, as
    // 2*pairs <= OH*Wp + 1 and (K-1+OH)*Wp = plane.
    const std::size_t xs = (C * plane + K + 1) / 2 * 2, dyts = nb * pairs * OB, wsize = out_c * ckk;
    const std::size_t group = conv_dw_group(P), groups = (n + group - 1) / group;
    float* partials = scratch<float, scratch_slot::conv_partials>(groups * wsize);  // (groups, out_c, ckk)
    const conv_bf16_dw_layout L{C, H, Wd, pad, Wp, plane, xs, out_c, OH, OW, pairs, nb};
    auto run_group = [&](std::size_t grp) {
        const std::size_t s0 = grp * group, ns = std::min(group, n - s0);
        std::uint16_t* xp = scratch<std::uint16_t, scratch_slot::conv_dw_x>(ns * xs);
        std::uint32_t* dyt = scratch<std::uint32_t, scratch_slot::conv_dw_dy>(ns * dyts);
        std::uint16_t* bits = scratch<std::uint16_t, scratch_slot::conv_db>(std::max(C * H * Wd, out_c * P));
        for (std::size_t s = 0; s < ns; ++s)
            body.pack(L, x + (s0 + s) * C * H * Wd, xp + s * xs, dy + (s0 + s) * out_c * P, bits, dyt + s * dyts);
        float* part = partials + grp * wsize;
        alignas(64) float out[RM * OB];
        std::size_t off[RM];
        for (std::size_t b = 0; b < nb; ++b) {
            const std::size_t mb = std::min(OB, out_c - b * OB);
            for (std::size_t r0 = 0; r0 < ckk; r0 += RM) {
                const std::size_t R = std::min(RM, ckk - r0);
                for (std::size_t r = 0; r < R; ++r) {
                    const std::size_t i = r0 + r, c = i / (K * K), ky = i / K % K, kx = i % K;
                    off[r] = c * plane + ky * Wp + kx;
                }
                body.tile(R, mb, ns, pairs, xp, xs, off, dyt + b * pairs * OB, dyts, out);
                for (std::size_t j = 0; j < mb; ++j)
                    for (std::size_t r = 0; r < R; ++r) part[(b * OB + j) * ckk + r0 + r] = out[r * OB + j];
            }
        }
    };
    if (ThreadPool::in_task() || groups <= 1)
        for (std::size_t grp = 0; grp < groups; ++grp) run_group(grp);
    else
        default_pool().parallel_for(groups, run_group);
    for (std::size_t grp = 0; grp < groups; ++grp) {  // the groups' partials in order
        const float* part = partials + grp * wsize;
        for (std::size_t i = 0; i < wsize; ++i) dw[i] += part[i];
    }
    if (db) kernel<op::bias_grad, cpu>::run(dy, db, n, out_c, P);
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
    /// Context::mixed_conv_dw_applies / mixed_conv_dw: whether the weight gradient runs on the bf16
    /// units (conv_bf16_dw_applies), and that gradient (conv2d_bf16_dw on the AVX512-BF16 body).
    static bool weight_grad_applies(const ConvGeometry& g, std::size_t out_c) { return conv_bf16_dw_applies(g, out_c); }
    static void weight_grad(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* dy,
                            float* dw, float* db) {
#if OAR_ISA_X86 && OAR_ISA_COMPILED(2)
        conv2d_bf16_dw(g, out_c, n, x, dy, dw, db,
                       {&cpu_detail::bf16_avx512::dw_pack, &cpu_detail::bf16_avx512::dw_tile_rows});
#else
        (void)g, (void)out_c, (void)n, (void)x, (void)dy, (void)dw, (void)db;
        throw usage_error("oar: conv2d_bf16_dw: this build has no AVX512-BF16 body (conv_bf16_dw_applies is false)");
#endif
    }
};

}  // namespace oar
