// CPU kernels for convolution: im2col, its adjoint col2im, im2row (the columns transposed),
// per-channel bias, and whole-batch Conv2D forward and backward built on them and the GEMM.
// The batch kernels run samples in parallel on the default pool (each sample on one thread, its
// buffers in thread-local scratch); the weight gradient is summed per fixed group of samples and
// the groups are added in order, so the result does not depend on the thread count.
// Square windows of stride 1 need no column matrix: each sample is copied zero-padded with row
// pitch Wp, where every column-matrix row is one contiguous run. The forward is an implicit GEMM
// (conv_stride1_sample: GEMM micro-tiles reading those runs in place, weights packed once per call,
// the bias added as the valid columns are copied out); the input gradient is the same kernel on dy
// with the flipped, transposed weights; the weight gradient (conv_dw_stride1), with the bias
// gradient alongside, is for 3x3 windows over 8+ input channels a GEMM over the output positions
// with the output channels along the SIMD lanes (x's window values broadcast from the padded copy,
// dy transposed), otherwise dot products of dy (on the same pitch) with the runs. Square windows of
// larger strides (ResNet8's stride-2 3x3 and 1x1 convolutions) do the same on the image split into its
// stride x stride phases (phase_layout: a window tap is then a contiguous run of one phase): the
// forward's implicit GEMM tiles and the weight gradient's dot products read the phases in place;
// the input gradient is w^T dy on the phases' pitch added back run by run. 1x1 windows of stride 1
// without padding are plain GEMMs on the samples as they lie (forward, dx = w^T dy, dw += dy x^T).
// Non-square windows: im2col / im2row + GEMM, col2im for the input gradient, the bias fused by
// starting C at the bias (beta = 1); a null bias (Conv2D without one) adds and accumulates nothing.
// Float convolutions with 5x5 or 3x3 kernels, stride 1 and 8+ input and output channels (the
// course's second one, MyNet's and ResNet8's 3x3 ones) take Winograd F(2x2, 5x5) or F(4x4, 3x3)
// instead for the forward and input gradient (winograd.hpp), except a last small group of SIMD lanes'
// samples; their weight gradient too where winograd_dw_applies (3x3 on outputs at least 13 wide on
// the AVX-512 body, 29 on the others), else it stays direct. set_conv_winograd(false) keeps them all on the direct path.
// A ReLU after the convolution can be fused (op::conv2d_forward_relu / conv2d_backward_relu, chosen
// by Network at compile time): the forward applies max(., 0) as the output is copied out (stride 1)
// or to each sample's output while it is in cache; the backward masks each group's dy in place with
// the ReLU's output just before using it. Both give the bits of the unfused layers.
// The batch kernels are compiled for AVX-512, AVX2 and SSE2 whatever the user's -march
// (isa/conv_body.inc in isa/region.inc) and run on the best ISA the CPU has (core/cpu_isa.hpp).
#pragma once

#include <algorithm>  // std::min, std::max, std::fill, std::copy
#include <array>      // std::array: the weight-gradient and GEMM tiles by shape
#include <cstddef>    // std::size_t
#include <type_traits>  // std::is_same_v: rounds_bf16
#include <utility>    // std::index_sequence

#include "../../config.hpp"            // OAR_RESTRICT
#include "../../core/bf16.hpp"         // round_to_bf16: conv_body.inc's rounded copies
#include "../../core/thread_pool.hpp"  // default_pool, ThreadPool
#include "../dispatch.hpp"             // kernel, op::*
#include "bias.hpp"                    // op::bias_add / bias_relu / bias_grad, cpu_detail::sum_run
#include "elementwise.hpp"             // cpu_detail::relu_mask
#include "gemm.hpp"                    // op::gemm on cpu, cpu_detail::scratch
#include "winograd.hpp"                // winograd_conv_batch: float 5x5 and 3x3 stride 1, >= 8 channels
#include "isa/dispatch.hpp"            // OAR_ISA_DISPATCH

namespace oar {

namespace cpu_detail {
/// The output columns [lo, hi) whose input column ox*stride + k - pad lies inside [0, width).
inline void valid_range(std::size_t out, std::size_t stride, std::size_t k, std::size_t pad, std::size_t width,
                        std::size_t& lo, std::size_t& hi) {
    // ox*stride + k >= pad  and  ox*stride + k < width + pad
    lo = k >= pad ? 0 : (pad - k + stride - 1) / stride;
    hi = width + pad > k ? (width + pad - k + stride - 1) / stride : 0;
    hi = std::min(hi, out);
    lo = std::min(lo, hi);
}
}  // namespace cpu_detail

/// kernel<op::im2col, cpu>::run(g, x, col): x (C,H,W) -> col (C*KH*KW, OH*OW), zeros where padded.
template <class T>
struct kernel<op::im2col, basic_cpu<T>> {
    static void run(const ConvGeometry& g, const T* OAR_RESTRICT x, T* OAR_RESTRICT col) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), KH = g.kh(), KW = g.kw(), SH = g.sh(), SW = g.sw();
        const std::size_t PH = g.ph(), PW = g.pw();
        for (std::size_t c = 0; c < g.channels; ++c)
            for (std::size_t ky = 0; ky < KH; ++ky)
                for (std::size_t kx = 0; kx < KW; ++kx) {
                    T* row = col + ((c * KH + ky) * KW + kx) * oh * ow;  // (OH*OW)
                    std::size_t lo, hi;
                    cpu_detail::valid_range(ow, SW, kx, PW, g.width, lo, hi);
                    for (std::size_t oy = 0; oy < oh; ++oy) {
                        const std::ptrdiff_t iy = static_cast<std::ptrdiff_t>(oy * SH + ky) -
                                                  static_cast<std::ptrdiff_t>(PH);
                        T* out = row + oy * ow;
                        if (iy < 0 || iy >= static_cast<std::ptrdiff_t>(g.height)) {
                            std::fill(out, out + ow, T(0));
                            continue;
                        }
                        const T* in = x + (c * g.height + static_cast<std::size_t>(iy)) * g.width;
                        std::fill(out, out + lo, T(0));  // for ox in [lo, hi), ox*SW + kx >= PW
                        if (SW == 1) {
                            const T* src = in + (lo + kx - PW);
                            for (std::size_t ox = lo; ox < hi; ++ox) out[ox] = src[ox - lo];
                        } else {
                            for (std::size_t ox = lo; ox < hi; ++ox) out[ox] = in[ox * SW + kx - PW];
                        }
                        std::fill(out + hi, out + ow, T(0));
                    }
                }
    }
};

/// kernel<op::col2im, cpu>::run(g, col, dx): dx (C,H,W) += adjoint of im2col applied to col.
template <class T>
struct kernel<op::col2im, basic_cpu<T>> {
    static void run(const ConvGeometry& g, const T* OAR_RESTRICT col, T* OAR_RESTRICT dx) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), KH = g.kh(), KW = g.kw();
        for (std::size_t c = 0; c < g.channels; ++c)
            for (std::size_t ky = 0; ky < KH; ++ky)
                for (std::size_t kx = 0; kx < KW; ++kx) {
                    const T* row = col + ((c * KH + ky) * KW + kx) * oh * ow;
                    for (std::size_t oy = 0; oy < oh; ++oy) {
                        const std::ptrdiff_t iy = static_cast<std::ptrdiff_t>(oy * g.sh() + ky) -
                                                  static_cast<std::ptrdiff_t>(g.ph());
                        if (iy < 0 || iy >= static_cast<std::ptrdiff_t>(g.height)) continue;
                        T* out = dx + (c * g.height + static_cast<std::size_t>(iy)) * g.width;
                        for (std::size_t ox = 0; ox < ow; ++ox) {
                            const std::ptrdiff_t ix = static_cast<std::ptrdiff_t>(ox * g.sw() + kx) -
                                                      static_cast<std::ptrdiff_t>(g.pw());
                            if (ix >= 0 && ix < static_cast<std::ptrdiff_t>(g.width)) out[ix] += row[oy * ow + ox];
                        }
                    }
                }
    }
};

/// kernel<op::im2row, cpu>::run(g, x, row): x (C,H,W) -> row (OH*OW, C*KH*KW), zeros where padded.
template <class T>
struct kernel<op::im2row, basic_cpu<T>> {
    static void run(const ConvGeometry& g, const T* OAR_RESTRICT x, T* OAR_RESTRICT row) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), KH = g.kh(), KW = g.kw(), ckk = g.col_rows();
        for (std::size_t oy = 0; oy < oh; ++oy)
            for (std::size_t ox = 0; ox < ow; ++ox) {
                T* out = row + (oy * ow + ox) * ckk;  // (C*KH*KW)
                const std::ptrdiff_t y0 = static_cast<std::ptrdiff_t>(oy * g.sh()) - static_cast<std::ptrdiff_t>(g.ph());
                const std::ptrdiff_t x0 = static_cast<std::ptrdiff_t>(ox * g.sw()) - static_cast<std::ptrdiff_t>(g.pw());
                // kx in [kx_lo, kx_hi) reads inside the image
                const std::size_t kx_lo = x0 < 0 ? static_cast<std::size_t>(-x0) : 0;
                const std::size_t kx_hi = static_cast<std::size_t>(std::max<std::ptrdiff_t>(
                    0, std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(KW), static_cast<std::ptrdiff_t>(g.width) - x0)));
                for (std::size_t c = 0; c < g.channels; ++c)
                    for (std::size_t ky = 0; ky < KH; ++ky) {
                        T* o = out + (c * KH + ky) * KW;
                        const std::ptrdiff_t iy = y0 + static_cast<std::ptrdiff_t>(ky);
                        if (iy < 0 || iy >= static_cast<std::ptrdiff_t>(g.height) || kx_lo >= kx_hi) {
                            std::fill(o, o + KW, T(0));
                            continue;
                        }
                        const T* in = x + (c * g.height + static_cast<std::size_t>(iy)) * g.width;
                        if (kx_lo == 0 && kx_hi == KW) {  // interior: KW contiguous values
                            const T* src = in + x0;
                            if (KW == 5)  // the course's kernels: a fixed-length copy the compiler unrolls
                                for (std::size_t kx = 0; kx < 5; ++kx) o[kx] = src[kx];
                            else
                                for (std::size_t kx = 0; kx < KW; ++kx) o[kx] = src[kx];
                            continue;
                        }
                        std::fill(o, o + kx_lo, T(0));
                        for (std::size_t kx = kx_lo; kx < kx_hi; ++kx)
                            o[kx] = in[static_cast<std::size_t>(x0 + static_cast<std::ptrdiff_t>(kx))];
                        std::fill(o + kx_hi, o + KW, T(0));
                    }
            }
    }
};

namespace cpu_detail {
/// Samples per weight-gradient group for outputs of P positions: partial sums are per group, added
/// in group order. 5 splits the course's batch of 100 into 20 groups, 10 per thread on two threads
/// (4 gave 13 and 12). Outputs of few positions take groups of at least dw_group_positions
/// positions (MyNet's third convolution, 4 x 4: 16 samples), as every group's tiles end in a fixed
/// epilogue (their sums scattered into the partials) that 5 x 16 positions did not repay. A
/// function of P only, so the sums do not depend on the thread count.
inline constexpr std::size_t dw_group_positions = 256;
inline constexpr std::size_t conv_dw_group(std::size_t P) {
    const std::size_t wide = P == 0 ? 5 : (dw_group_positions + P - 1) / P;
    return wide > 5 ? wide : 5;
}

/// The row pitch of the zero-padded copies the stride-1 kernels read: W + pad, not W + 2*pad. Each
/// row holds pad zeros, then the W values; a window reaching past the right edge (columns W..W+pad-1
/// of the padded row) wraps into the next row's leading pad zeros, which are the left padding of that
/// row too, and the last row wraps into the bottom padding. Every output row then computes Wp - OW =
/// K - 1 - pad extra columns instead of K - 1 (course CNN, second conv: 16 columns a row, not 18).
/// A pad beyond K - 1 makes the output row (W + 2*pad - K + 1) the wider one: then that is the pitch,
/// and its gap of 2*pad - K + 1 >= pad zeros still serves both edges.
inline constexpr std::size_t conv_pitch(std::size_t width, std::size_t kernel, std::size_t pad) {
    return pad + 1 > kernel ? width + 2 * pad - kernel + 1 : width + pad;
}

/// Whether the batch kernels read x and dy rounded to bf16 (ConvGeometry::round_bf16; floats only).
template <class T>
constexpr bool rounds_bf16(const ConvGeometry& g) {
    return std::is_same_v<T, float> && g.round_bf16;
}

/// What conv2d_forward_batch calls after each sample s's output is written: fn(ctx, s), nothing
/// when fn is null. A function pointer, not a template parameter, so that the compiled-kernels
/// library (kernels/cpu/compiled.hpp) holds the one batch kernel that every epilogue uses.
struct sample_post {
    void (*fn)(const void*, std::size_t) = nullptr;
    const void* ctx = nullptr;
    void operator()(std::size_t s) const { fn(ctx, s); }
    explicit operator bool() const { return fn != nullptr; }
};
}  // namespace cpu_detail

// The batch kernels, once per ISA (isa/region.inc): isa_<name>::conv2d_forward_batch and
// conv2d_backward_batch, dispatched by the kernel<op::conv2d_*> below; with OAR_EXTERN_KERNELS
// (config.hpp) the dispatchers are only declared here and the oar::kernels library holds them
// (kernels/cpu/compiled.hpp).
}  // namespace oar
#if !OAR_EXTERN_KERNELS
#define OAR_ISA_BODY "conv_body.inc"
#include "isa/every_isa.inc"
#endif
namespace oar {

namespace cpu_detail {
#if OAR_EXTERN_KERNELS
template <bool Relu, class T>
void conv2d_forward_batch(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w, const T* b,
                          T* y, sample_post post = {});
template <bool Relu, class T>
void conv2d_backward_batch(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w,
                           const T* ry, T* dy_mut, const T* dy, T* dw, T* db, T* dx);
#else
/// Call isa_<active ISA>::conv2d_forward_batch / conv2d_backward_batch.
template <bool Relu, class T>
void conv2d_forward_batch(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w, const T* b,
                          T* y, sample_post post = {}) {
    OAR_ISA_DISPATCH(conv2d_forward_batch<Relu>, g, out_c, n, x, w, b, y, post)
}
template <bool Relu, class T>
void conv2d_backward_batch(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w,
                           const T* ry, T* dy_mut, const T* dy, T* dw, T* db, T* dx) {
    OAR_ISA_DISPATCH(conv2d_backward_batch<Relu>, g, out_c, n, x, w, ry, dy_mut, dy, dw, db, dx)
}
#endif  // OAR_EXTERN_KERNELS
}  // namespace cpu_detail

/// kernel<op::conv2d_forward, cpu>::run(g, out_c, n, x, w, b, y):
///   x (n, C, H, W), w (out_c, C*K*K), b (out_c) -> y (n, out_c, OH, OW).
template <class T>
struct kernel<op::conv2d_forward, basic_cpu<T>> {
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w, const T* b,
                    T* y) {
        cpu_detail::conv2d_forward_batch<false>(g, out_c, n, x, w, b, y);
    }
};

/// kernel<op::conv2d_forward_relu, cpu>::run(g, out_c, n, x, w, b, y): as conv2d_forward, then
/// y = max(y, 0) (a ReLU fused into the epilogue: the same bits as the two layers).
template <class T>
struct kernel<op::conv2d_forward_relu, basic_cpu<T>> {
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w, const T* b,
                    T* y) {
        cpu_detail::conv2d_forward_batch<true>(g, out_c, n, x, w, b, y);
    }
};

/// kernel<op::conv2d_forward_map, cpu>::run(g, out_c, n, x, w, b, f, scale, shift, z, y): the
/// convolution into z (n, out_c, OH, OW), bias included, then the elementwise tail
/// y = f(z * scale[c] + shift[c]) (or f(z) when scale is null) of each sample as soon as its output
/// is written (op::bias_map on that sample, in the same task): the bits of conv2d_forward followed
/// by op::map of f (and, with a scale, within the bound of a folded BatchNorm).
template <class T>
struct kernel<op::conv2d_forward_map, basic_cpu<T>> {
    template <class F>
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w, const T* b,
                    const F& f, const T* scale, const T* shift, T* z, T* y) {
        const std::size_t per = out_c * g.col_cols();
        const auto tail = [&](std::size_t s) {
            kernel<op::bias_map, basic_cpu<T>>::run(f, static_cast<const T*>(nullptr), scale, shift, z + s * per,
                                                    y + s * per, 1, out_c, g.col_cols());
        };
        using Tail = decltype(tail);
        const cpu_detail::sample_post post{[](const void* c, std::size_t s) { (*static_cast<const Tail*>(c))(s); }, &tail};
        cpu_detail::conv2d_forward_batch<false>(g, out_c, n, x, w, b, z, post);
    }
};

/// kernel<op::conv2d_backward, cpu>::run(g, out_c, n, x, w, dy, dw, db, dx):
///   dw (out_c, C*K*K) += sum_s dy_s row_s when dw is not null; db (out_c) += sums of dy when db is
///   not null; dx (n, C, H, W) = input gradient when dx is not null.
template <class T>
struct kernel<op::conv2d_backward, basic_cpu<T>> {
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w, const T* dy,
                    T* dw, T* db, T* dx) {
        cpu_detail::conv2d_backward_batch<false>(g, out_c, n, x, w, static_cast<const T*>(nullptr),
                                                 static_cast<T*>(nullptr), dy, dw, db, dx);
    }
};

/// kernel<op::conv2d_backward_relu, cpu>::run(g, out_c, n, x, w, y, dy, dw, db, dx): the backward of
/// a convolution followed by a ReLU whose output is y (n, out_c, OH, OW) and output gradient dy:
/// dy is overwritten with the ReLU's input gradient (y > 0 ? dy : 0), then as conv2d_backward.
template <class T>
struct kernel<op::conv2d_backward_relu, basic_cpu<T>> {
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w, const T* y,
                    T* dy, T* dw, T* db, T* dx) {
        cpu_detail::conv2d_backward_batch<true>(g, out_c, n, x, w, y, dy, static_cast<const T*>(dy), dw, db, dx);
    }
};

}  // namespace oar
