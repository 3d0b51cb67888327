// CPU kernels for convolution: im2col, its adjoint col2im, im2row (the columns transposed),
// per-channel bias, and whole-batch Conv2D forward and backward built on them and the GEMM.
// The batch kernels run samples in parallel on the default pool (each sample on one thread, its
// buffers in thread-local scratch); the weight gradient is summed per fixed group of samples and
// the groups are added in order, so the result does not depend on the thread count.
// Stride 1 needs no column matrix: each sample is copied zero-padded with row pitch Wp, where every
// column-matrix row is one contiguous run. The forward is an implicit GEMM (conv_stride1_sample:
// GEMM micro-tiles reading those runs in place, weights packed once per call, the bias added as
// the valid columns are copied out); the input gradient is the same kernel on dy with the flipped,
// transposed weights; the weight gradient is dot products of dy (on the same pitch) with the runs
// (conv_dw_stride1), with the bias gradient alongside. Other strides: im2col / im2row + GEMM,
// col2im for the input gradient, the bias fused by starting C at the bias (beta = 1).
// Float convolutions with 5x5 kernels, stride 1 and 8+ input and output channels (the course's
// second one) take Winograd F(2x2, 5x5) instead, forward, input and weight gradient (winograd.hpp),
// except a last small group of SIMD lanes' samples; set_conv_winograd(false) keeps them on the
// direct path.
// A ReLU after the convolution can be fused (op::conv2d_forward_relu / conv2d_backward_relu, chosen
// by Network at compile time): the forward applies max(., 0) as the output is copied out (stride 1)
// or to each sample's output while it is in cache; the backward masks each group's dy in place with
// the ReLU's output just before using it. Both give the bits of the unfused layers.
#pragma once

#include <algorithm>  // std::min, std::max, std::fill, std::copy
#include <array>      // std::array: the weight-gradient tiles by shape
#include <cstddef>    // std::size_t
#include <utility>    // std::index_sequence

#include "../../config.hpp"            // OAR_RESTRICT
#include "../../core/simd.hpp"         // xsimd::batch, fma, hadd
#include "../../core/thread_pool.hpp"  // default_pool, ThreadPool
#include "../dispatch.hpp"             // kernel, op::*
#include "bias.hpp"                    // op::bias_add / bias_relu / bias_grad, cpu_detail::sum_run
#include "elementwise.hpp"             // cpu_detail::relu_mask
#include "gemm.hpp"                    // op::gemm on cpu, cpu_detail::scratch
#include "winograd.hpp"                // winograd_conv_batch: float 5x5 stride 1, >= 8 channels

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

/// kernel<op::im2col, cpu>::run(g, x, col): x (C,H,W) -> col (C*K*K, OH*OW), zeros where padded.
template <class T>
struct kernel<op::im2col, basic_cpu<T>> {
    static void run(const ConvGeometry& g, const T* OAR_RESTRICT x, T* OAR_RESTRICT col) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), K = g.kernel, S = g.stride;
        for (std::size_t c = 0; c < g.channels; ++c)
            for (std::size_t ky = 0; ky < K; ++ky)
                for (std::size_t kx = 0; kx < K; ++kx) {
                    T* row = col + ((c * K + ky) * K + kx) * oh * ow;  // (OH*OW)
                    std::size_t lo, hi;
                    cpu_detail::valid_range(ow, S, kx, g.pad, g.width, lo, hi);
                    for (std::size_t oy = 0; oy < oh; ++oy) {
                        const std::ptrdiff_t iy = static_cast<std::ptrdiff_t>(oy * S + ky) -
                                                  static_cast<std::ptrdiff_t>(g.pad);
                        T* out = row + oy * ow;
                        if (iy < 0 || iy >= static_cast<std::ptrdiff_t>(g.height)) {
                            std::fill(out, out + ow, T(0));
                            continue;
                        }
                        const T* in = x + (c * g.height + static_cast<std::size_t>(iy)) * g.width;
                        std::fill(out, out + lo, T(0));  // for ox in [lo, hi), ox*S + kx >= pad
                        if (S == 1) {
                            const T* src = in + (lo + kx - g.pad);
                            for (std::size_t ox = lo; ox < hi; ++ox) out[ox] = src[ox - lo];
                        } else {
                            for (std::size_t ox = lo; ox < hi; ++ox) out[ox] = in[ox * S + kx - g.pad];
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
        const std::size_t oh = g.out_height(), ow = g.out_width(), K = g.kernel;
        for (std::size_t c = 0; c < g.channels; ++c)
            for (std::size_t ky = 0; ky < K; ++ky)
                for (std::size_t kx = 0; kx < K; ++kx) {
                    const T* row = col + ((c * K + ky) * K + kx) * oh * ow;
                    for (std::size_t oy = 0; oy < oh; ++oy) {
                        const std::ptrdiff_t iy = static_cast<std::ptrdiff_t>(oy * g.stride + ky) -
                                                  static_cast<std::ptrdiff_t>(g.pad);
                        if (iy < 0 || iy >= static_cast<std::ptrdiff_t>(g.height)) continue;
                        T* out = dx + (c * g.height + static_cast<std::size_t>(iy)) * g.width;
                        for (std::size_t ox = 0; ox < ow; ++ox) {
                            const std::ptrdiff_t ix = static_cast<std::ptrdiff_t>(ox * g.stride + kx) -
                                                      static_cast<std::ptrdiff_t>(g.pad);
                            if (ix >= 0 && ix < static_cast<std::ptrdiff_t>(g.width)) out[ix] += row[oy * ow + ox];
                        }
                    }
                }
    }
};

/// kernel<op::im2row, cpu>::run(g, x, row): x (C,H,W) -> row (OH*OW, C*K*K), zeros where padded.
template <class T>
struct kernel<op::im2row, basic_cpu<T>> {
    static void run(const ConvGeometry& g, const T* OAR_RESTRICT x, T* OAR_RESTRICT row) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), K = g.kernel, S = g.stride, ckk = g.col_rows();
        for (std::size_t oy = 0; oy < oh; ++oy)
            for (std::size_t ox = 0; ox < ow; ++ox) {
                T* out = row + (oy * ow + ox) * ckk;  // (C*K*K)
                const std::ptrdiff_t y0 = static_cast<std::ptrdiff_t>(oy * S) - static_cast<std::ptrdiff_t>(g.pad);
                const std::ptrdiff_t x0 = static_cast<std::ptrdiff_t>(ox * S) - static_cast<std::ptrdiff_t>(g.pad);
                // kx in [kx_lo, kx_hi) reads inside the image
                const std::size_t kx_lo = x0 < 0 ? static_cast<std::size_t>(-x0) : 0;
                const std::size_t kx_hi = static_cast<std::size_t>(
                    std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(K), static_cast<std::ptrdiff_t>(g.width) - x0));
                for (std::size_t c = 0; c < g.channels; ++c)
                    for (std::size_t ky = 0; ky < K; ++ky) {
                        T* o = out + (c * K + ky) * K;
                        const std::ptrdiff_t iy = y0 + static_cast<std::ptrdiff_t>(ky);
                        if (iy < 0 || iy >= static_cast<std::ptrdiff_t>(g.height) || kx_lo >= kx_hi) {
                            std::fill(o, o + K, T(0));
                            continue;
                        }
                        const T* in = x + (c * g.height + static_cast<std::size_t>(iy)) * g.width;
                        if (kx_lo == 0 && kx_hi == K) {  // interior: K contiguous values
                            const T* src = in + x0;
                            if (K == 5)  // the course's kernels: a fixed-length copy the compiler unrolls
                                for (std::size_t kx = 0; kx < 5; ++kx) o[kx] = src[kx];
                            else
                                for (std::size_t kx = 0; kx < K; ++kx) o[kx] = src[kx];
                            continue;
                        }
                        std::fill(o, o + kx_lo, T(0));
                        for (std::size_t kx = kx_lo; kx < kx_hi; ++kx)
                            o[kx] = in[static_cast<std::size_t>(x0 + static_cast<std::ptrdiff_t>(kx))];
                        std::fill(o + kx_hi, o + K, T(0));
                    }
            }
    }
};

namespace cpu_detail {
/// Samples per weight-gradient group: partial sums are per group, added in group order. 5 splits
/// the course's batch of 100 into 20 groups, 10 per thread on two threads (4 gave 13 and 12).
inline constexpr std::size_t conv_dw_group = 5;

/// part(r, q) = sum over samples s < ns and j < jv (a multiple of the SIMD width) of
/// dy[s*dys + r*ldd + j] * x[s*xs + q + j], for r < RO, q < RK, stored at part[r*ldp + q]: RO x RK
/// SIMD accumulators held over every sample, then summed across lanes (a fixed order).
template <std::size_t RO, std::size_t RK, class T>
void conv_dw_tile(std::size_t ns, std::size_t jv, const T* dy, std::size_t dys, std::size_t ldd, const T* x,
                  std::size_t xs, T* part, std::size_t ldp) {
    using V = xsimd::batch<T>;
    constexpr std::size_t W = V::size;
    V acc[RO][RK];
    for (std::size_t r = 0; r < RO; ++r)
        for (std::size_t q = 0; q < RK; ++q) acc[r][q] = V(T(0));
    for (std::size_t s = 0; s < ns; ++s) {
        const T* d = dy + s * dys;  // (RO, jv)
        const T* xr = x + s * xs;   // RK overlapping runs of jv, one value apart
        if (jv == 0) continue;
        // Software-pipelined over j: the next step's x vectors are loaded while this step's are used,
        // so they reach the FMAs as registers. Loaded right before use, g++ folds each x load into
        // every FMA that reads it (RO*RK + RO loads per RO*RK FMAs: load-bound, and RK-1 of the RK
        // runs are misaligned); 20 accumulators + 2 x 5 x vectors + dy fit AVX-512's 32 registers.
        V xv[RK];
        for (std::size_t q = 0; q < RK; ++q) xv[q] = V::load_unaligned(xr + q);
        for (std::size_t j = 0;;) {
            const std::size_t jn = j + W;
            const bool more = jn < jv;
            V xn[RK];
            if (more)
                for (std::size_t q = 0; q < RK; ++q) xn[q] = V::load_unaligned(xr + q + jn);
            for (std::size_t r = 0; r < RO; ++r) {
                const V dv = V::load_unaligned(d + r * ldd + j);
                for (std::size_t q = 0; q < RK; ++q) acc[r][q] = xsimd::fma(dv, xv[q], acc[r][q]);
            }
            if (!more) break;
            for (std::size_t q = 0; q < RK; ++q) xv[q] = xn[q];
            j = jn;
        }
    }
    for (std::size_t r = 0; r < RO; ++r)
        for (std::size_t q = 0; q < RK; ++q) part[r * ldp + q] = xsimd::hadd(acc[r][q]);
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

/// x (C, H, W) copied zero-padded onto the row pitch Wp (conv_pitch): channel c's plane of
/// (H + 2*pad) * Wp values at c * plane, image row iy at row iy + pad, column pad. dst[0, size) is
/// zeroed first (size >= C * plane; the slack past the last plane stays zero).
template <class T>
void copy_padded(const ConvGeometry& g, std::size_t Wp, const T* x, T* dst, std::size_t size) {
    const std::size_t C = g.channels, H = g.height, W = g.width, pad = g.pad, plane = (H + 2 * pad) * Wp;
    std::fill(dst, dst + size, T(0));
    for (std::size_t c = 0; c < C; ++c)
        for (std::size_t iy = 0; iy < H; ++iy) {
            const T* src = x + (c * H + iy) * W;
            std::copy(src, src + W, dst + c * plane + (iy + pad) * Wp + pad);
        }
}

/// Tile shapes: up to 4 output channels by up to 5 kernel columns (20 accumulators and 9 loaded
/// vectors fit AVX-512's 32 registers); entry (ro-1)*5 + (rk-1).
inline constexpr std::size_t dw_tile_o = 4, dw_tile_k = 5;
template <class T, std::size_t... I>
constexpr auto make_dw_tiles(std::index_sequence<I...>) {
    return std::array{&conv_dw_tile<I / dw_tile_k + 1, I % dw_tile_k + 1, T>...};
}
template <class T>
inline constexpr auto dw_tiles = make_dw_tiles<T>(std::make_index_sequence<dw_tile_o * dw_tile_k>{});

/// The stride-1 weight gradient of samples [s0, s1) without a column matrix: part (M, C*K*K) = sum
/// over those samples of dy_s (M, OH*OW) times the transposed columns of x_s, by dot products along
/// the output positions. Each sample's image is copied zero-padded on the pitch Wp (C, Hp, Wp), and
/// its dy onto the same pitch (zeros in the Wp - OW columns past each row and up to a whole vector
/// past the last): then dw(o, c, ky, kx) = sum_j dyw(o, j) * xpad(c, ky*Wp + kx + j), one contiguous
/// run per (c, ky, kx). dbs[(s - s0)*M + o] gets sample s's sum of dy over channel o.
template <class T>
void conv_dw_stride1(const ConvGeometry& g, std::size_t M, std::size_t s0, std::size_t s1, const T* x, const T* dy,
                     T* part, T* dbs) {
    constexpr std::size_t W = xsimd::batch<T>::size;
    const std::size_t C = g.channels, H = g.height, Wd = g.width, K = g.kernel, pad = g.pad;
    const std::size_t Wp = conv_pitch(Wd, K, pad), plane = (H + 2 * pad) * Wp, OH = g.out_height(), OW = g.out_width();
    const std::size_t P = OH * OW, ckk = g.col_rows(), jv = (OH * Wp + W - 1) / W * W;
    // Reads reach (C-1)*plane + (K-1)*Wp + K-1 + jv - 1 < C*plane + K + W (as (K-1)*Wp + OH*Wp = plane).
    const std::size_t xs = (C * plane + K + W + W - 1) / W * W, dys = M * jv, ns = s1 - s0;
    T* xp = scratch<T, scratch_slot::conv_dw_x>(ns * xs);    // (ns, C, Hp, Wp) + slack
    T* dyw = scratch<T, scratch_slot::conv_dw_dy>(ns * dys);  // (ns, M, jv)
    for (std::size_t s = 0; s < ns; ++s) {
        copy_padded(g, Wp, x + (s0 + s) * C * H * Wd, xp + s * xs, xs);
        for (std::size_t o = 0; o < M; ++o) {
            const T* src = dy + ((s0 + s) * M + o) * P;  // (OH, OW)
            T* dst = dyw + s * dys + o * jv;
            std::fill(dst, dst + jv, T(0));
            for (std::size_t oy = 0; oy < OH; ++oy) std::copy(src + oy * OW, src + (oy + 1) * OW, dst + oy * Wp);
            dbs[s * M + o] = sum_run(src, P);
        }
    }
    for (std::size_t o0 = 0; o0 < M; o0 += dw_tile_o) {
        const std::size_t ro = std::min(dw_tile_o, M - o0);
        for (std::size_t c = 0; c < C; ++c)
            for (std::size_t ky = 0; ky < K; ++ky)
                for (std::size_t kx0 = 0; kx0 < K; kx0 += dw_tile_k) {
                    const std::size_t rk = std::min(dw_tile_k, K - kx0);
                    dw_tiles<T>[(ro - 1) * dw_tile_k + (rk - 1)](ns, jv, dyw + o0 * jv, dys, jv,
                                                                  xp + c * plane + ky * Wp + kx0, xs,
                                                                  part + o0 * ckk + (c * K + ky) * K + kx0, ckk);
                }
    }
}

/// acc(R x NR) = sum_k wp(k, r) * padded[off[k] + (0..NR)]: the GEMM micro-tile (gemm.hpp's
/// micro_tile) with row k of B read in place from the padded image at off[k]; stored whole.
template <std::size_t R, class T>
void conv_tile(std::size_t kk, const T* wp, const T* b, const std::size_t* off, T* c, std::size_t ldc) {
    using V = xsimd::batch<T>;
    constexpr std::size_t W = V::size, MR = gemm_mr<T>;
    V acc0[R], acc1[R];
    for (std::size_t r = 0; r < R; ++r) acc0[r] = acc1[r] = V(T(0));
    for (std::size_t k = 0; k < kk; ++k) {
        const T* bk = b + off[k];
        const V b0 = V::load_unaligned(bk), b1 = V::load_unaligned(bk + W);
        for (std::size_t r = 0; r < R; ++r) {
            const V av(wp[k * MR + r]);
            acc0[r] = xsimd::fma(av, b0, acc0[r]);
            acc1[r] = xsimd::fma(av, b1, acc1[r]);
        }
    }
    for (std::size_t r = 0; r < R; ++r) {
        acc0[r].store_unaligned(c + r * ldc);
        acc1[r].store_unaligned(c + r * ldc + W);
    }
}

template <class T, std::size_t... I>
constexpr auto make_conv_tiles(std::index_sequence<I...>) {
    return std::array{&conv_tile<I + 1, T>...};
}
/// conv_tiles<T>[R - 1] computes R rows (1..MR).
template <class T>
inline constexpr auto conv_tiles = make_conv_tiles<T>(std::make_index_sequence<gemm_mr<T>>{});

/// w (M, CKK) packed into MR-row panels for conv_stride1_sample: (ceil(M/MR), CKK, MR), zero rows
/// past M. Packed once per batch call, shared by every sample.
template <class T>
void pack_conv_weights(std::size_t M, std::size_t ckk, const T* w, T* wp) {
    pack_a(M, ckk, w, ckk, std::size_t{1}, wp);
}
template <class T>
constexpr std::size_t packed_weights_size(std::size_t M, std::size_t ckk) {
    return (M + gemm_mr<T> - 1) / gemm_mr<T> * gemm_mr<T> * ckk;
}

/// One sample of a stride-1 convolution as an implicit GEMM: out (M, OH, OW) = w (M, C*K*K) conv x
/// (C, H, W) [+ bias], wp being w packed by pack_conv_weights. x is first copied into a zero-padded
/// (C, Hp, Wp) image; with the row pitch Wp, column-matrix row (c, ky, kx) is the contiguous run of
/// OH*Wp values at padded(c, ky, kx), so the micro-tiles read it there (no column matrix, no
/// per-row bounds). They also compute the Wp - OW columns past each output row (and up to a whole
/// tile past the last), into a wide buffer whose valid columns are copied out with the bias added
/// (and, with Relu, max(., 0) applied: a fused ReLU).
template <bool Relu = false, class T>
void conv_stride1_sample(const ConvGeometry& g, std::size_t M, const T* x, const T* wp, const T* bias, T* out) {
    constexpr std::size_t NR = gemm_nr<T>, MR = gemm_mr<T>;
    const std::size_t C = g.channels, H = g.height, W = g.width, K = g.kernel, pad = g.pad;
    const std::size_t Hp = H + 2 * pad, Wp = conv_pitch(W, K, pad), OH = g.out_height(), OW = g.out_width();
    const std::size_t J = OH * Wp, jn = (J + NR - 1) / NR * NR, ckk = g.col_rows(), plane = Hp * Wp;
    // Tiles read up to (C-1)*plane + (K-1)*Wp + K-1 + jn - 1 < C*plane + K + NR ((K-1)*Wp + J = plane).
    const std::size_t padded_size = C * plane + K + NR;
    T* padded = scratch<T, scratch_slot::conv_padded>(padded_size);
    copy_padded(g, Wp, x, padded, padded_size);
    std::size_t* off = scratch<std::size_t, scratch_slot::conv_padded>(ckk);  // off[(c*K + ky)*K + kx]
    for (std::size_t c = 0; c < C; ++c)
        for (std::size_t ky = 0; ky < K; ++ky)
            for (std::size_t kx = 0; kx < K; ++kx) off[(c * K + ky) * K + kx] = c * plane + ky * Wp + kx;
    T* wide = scratch<T, scratch_slot::conv_out>(M * jn);  // (M, jn)
    for (std::size_t i = 0; i < M; i += MR) {
        const std::size_t rows = std::min(MR, M - i);
        for (std::size_t j0 = 0; j0 < jn; j0 += NR)
            conv_tiles<T>[rows - 1](ckk, wp + i * ckk, padded + j0, off, wide + i * jn + j0, jn);
    }
    for (std::size_t o = 0; o < M; ++o) {
        const T b = bias ? bias[o] : T(0);
        for (std::size_t oy = 0; oy < OH; ++oy) {
            const T* src = wide + o * jn + oy * Wp;
            T* dst = out + (o * OH + oy) * OW;
            if constexpr (Relu) {
                for (std::size_t ox = 0; ox < OW; ++ox) {
                    const T v = src[ox] + b;
                    dst[ox] = v < T(0) ? T(0) : v;
                }
            } else {
                for (std::size_t ox = 0; ox < OW; ++ox) dst[ox] = src[ox] + b;
            }
        }
    }
}
}  // namespace cpu_detail

namespace cpu_detail {
/// The whole-batch forward, with a fused ReLU when Relu.
template <bool Relu, class T>
void conv2d_forward_batch(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w, const T* b,
                          T* y) {
    const std::size_t P = g.col_cols(), ckk = g.col_rows(), in_size = g.channels * g.height * g.width;
    // Winograd takes samples [0, s0) (all, or all but a small last group of lanes), the rest below.
    std::size_t s0 = 0;
    if (winograd_applies<T>(g.channels, out_c, g.kernel, g.stride)) {
        s0 = winograd_images<T>(n);
        if (s0 > 0) winograd_conv_batch<Relu>(g.channels, g.height, g.width, g.pad, out_c, s0, x, w, b, y);
        if (s0 == n) return;
    }
    T* wp = nullptr;  // stride 1: w packed once, read by every sample's tiles
    if (g.stride == 1) {
        wp = scratch<T, scratch_slot::conv_wpack>(packed_weights_size<T>(out_c, ckk));
        pack_conv_weights(out_c, ckk, w, wp);
    }
    default_pool().parallel_for(n - s0, [&](std::size_t i) {
        const std::size_t s = s0 + i;
        if (g.stride == 1) {
            conv_stride1_sample<Relu>(g, out_c, x + s * in_size, static_cast<const T*>(wp), b, y + s * out_c * P);
            return;
        }
        T* col = cpu_detail::scratch<T, cpu_detail::scratch_slot::conv_cols>(ckk * P);  // (CKK, P)
        kernel<op::im2col, basic_cpu<T>>::run(g, x + s * in_size, col);
        T* ys = y + s * out_c * P;  // (out_c, P), starts as the bias: the GEMM adds to it
        for (std::size_t o = 0; o < out_c; ++o) std::fill(ys + o * P, ys + (o + 1) * P, b[o]);
        kernel<op::gemm, basic_cpu<T>>::run(Trans::no, Trans::no, out_c, P, ckk, T(1), w, ckk, col, P, T(1), ys,
                                           P);  // (out_c,CKK) x (CKK,P)
        if constexpr (Relu) kernel<op::map, basic_cpu<T>>::run(relu_fn{}, ys, ys, out_c * P);  // in cache
    });
}
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

namespace cpu_detail {
/// The whole-batch backward. With Relu, dy_mut (== dy) is first masked in place by ry (the ReLU's
/// output), one group of samples at a time inside that group's task, just before the group uses it.
template <bool Relu, class T>
void conv2d_backward_batch(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w,
                           const T* ry, T* dy_mut, const T* dy, T* dw, T* db, T* dx) {
    const std::size_t P = g.col_cols(), ckk = g.col_rows(), in_size = g.channels * g.height * g.width;
    const std::size_t K = g.kernel, C = g.channels;
    const std::size_t groups = (n + conv_dw_group - 1) / conv_dw_group, wsize = out_c * ckk;
    // With stride 1, dx = conv(dy, flipped w) with padding K-1-pad: wf (C, out_c*K*K).
    // (Only from 8 input channels: the flipped product has C rows, too few below that.)
    const bool flipped = dx && g.stride == 1 && C >= 8;
    const ConvGeometry gd{out_c, g.out_height(), g.out_width(), K, 1, K - 1 - g.pad};
    // Winograd computes dx of samples [0, wino_n), after the groups; the rest per sample below.
    const bool wino_dx = flipped && g.pad <= K - 1 && winograd_applies<T>(out_c, C, K, 1);
    const std::size_t wino_n = wino_dx ? winograd_images<T>(n) : 0;
    T* wf = flipped ? scratch<T, scratch_slot::conv_flipped>(C * out_c * K * K) : nullptr;
    T* wfp = flipped && wino_n < n ? scratch<T, scratch_slot::conv_wpack>(packed_weights_size<T>(C, out_c * K * K)) : nullptr;
    if (flipped) {
        for (std::size_t o = 0; o < out_c; ++o)
            for (std::size_t c = 0; c < C; ++c)
                for (std::size_t ky = 0; ky < K; ++ky)
                    for (std::size_t kx = 0; kx < K; ++kx)
                        wf[((c * out_c + o) * K + ky) * K + kx] =
                            w[((o * C + c) * K + (K - 1 - ky)) * K + (K - 1 - kx)];
        if (wfp) pack_conv_weights(C, out_c * K * K, static_cast<const T*>(wf), wfp);
    }
    // Stride 1: the weight gradient by dot products on pitched copies (conv_dw_stride1), the bias
    // gradient per sample alongside; other strides: im2row + GEMM per sample, bias_grad after.
    const bool dw_direct = g.stride == 1;
    T* dbs = dw_direct ? scratch<T, scratch_slot::conv_db>(n * out_c) : nullptr;  // (n, out_c) per-sample sums
    // Winograd computes the weight gradient of samples [0, wino_dw) after the groups, which then only
    // mask dy and sum it for the bias; the few samples past wino_dw (fewer than a group of lanes) get
    // a task each for their direct weight gradient and input gradient, so the threads share them.
    const std::size_t wino_dw = dw_direct && winograd_applies<T>(C, out_c, K, 1) ? winograd_images<T>(n) : 0;
    const std::size_t tail = wino_dw > 0 ? n - wino_dw : 0, grouped = wino_dw > 0 ? wino_dw : n;
    T* partials = scratch<T, scratch_slot::conv_partials>(std::max(groups, tail) * wsize);  // (groups or tail, out_c, CKK)
    auto sample_dx = [&](std::size_t s) {  // dx of sample s, direct
        const T* dys = dy + s * out_c * P;  // (out_c, P)
        T* dxs = dx + s * in_size;          // (C, H*W)
        if (flipped) {
            conv_stride1_sample(gd, C, dys, static_cast<const T*>(wfp), static_cast<const T*>(nullptr), dxs);
        } else {
            T* dcol = scratch<T, scratch_slot::conv_dcols>(ckk * P);  // (CKK, P)
            kernel<op::gemm, basic_cpu<T>>::run(Trans::yes, Trans::no, ckk, P, out_c, T(1), w, ckk, dys, P, T(0),
                                               dcol, P);  // W^T dy
            std::fill(dxs, dxs + in_size, T(0));
            kernel<op::col2im, basic_cpu<T>>::run(g, dcol, dxs);
        }
    };
    default_pool().parallel_for(groups, [&](std::size_t grp) {
        T* part = partials + grp * wsize;  // (out_c, CKK)
        const std::size_t s0 = grp * conv_dw_group, s1 = std::min(n, s0 + conv_dw_group);
        if constexpr (Relu) relu_mask(ry + s0 * out_c * P, dy_mut + s0 * out_c * P, (s1 - s0) * out_c * P);
        if (wino_dw > 0) {  // the bias sums; the weight gradient is Winograd's or the tail tasks'
            for (std::size_t i = s0 * out_c; i < std::min(s1, grouped) * out_c; ++i) dbs[i] = sum_run(dy + i * P, P);
        } else if (dw_direct) {
            conv_dw_stride1(g, out_c, s0, s1, x, dy, part, dbs + s0 * out_c);
        }
        for (std::size_t s = s0; s < std::min(s1, grouped); ++s) {
            if (!dw_direct) {
                T* row = scratch<T, scratch_slot::conv_cols>(P * ckk);  // (P, CKK)
                kernel<op::im2row, basic_cpu<T>>::run(g, x + s * in_size, row);
                kernel<op::gemm, basic_cpu<T>>::run(Trans::no, Trans::no, out_c, ckk, P, T(1), dy + s * out_c * P,
                                                   P, row, ckk, s == s0 ? T(0) : T(1), part,
                                                   ckk);  // (out_c,P) x (P,CKK)
            }
            if (dx && s >= wino_n) sample_dx(s);
        }
    });
    if (tail > 0)  // every group's dy is masked by now
        default_pool().parallel_for(tail, [&](std::size_t i) {
            const std::size_t s = wino_dw + i;
            conv_dw_stride1(g, out_c, s, s + 1, x, dy, partials + i * wsize, dbs + s * out_c);
            if (dx && s >= wino_n) sample_dx(s);
        });
    if (wino_n > 0)
        winograd_conv_batch<false>(out_c, g.out_height(), g.out_width(), K - 1 - g.pad, C, wino_n, dy,
                                   static_cast<const T*>(wf), static_cast<const T*>(nullptr), dx);
    if (wino_dw > 0) winograd_dw_batch(C, g.height, g.width, g.pad, out_c, wino_dw, x, dy, dw);
    // The partials in order (the groups', or the tail samples' after Winograd's): independent of threads.
    for (std::size_t p = 0; p < (wino_dw > 0 ? tail : groups); ++p) {
        const T* part = partials + p * wsize;
        for (std::size_t i = 0; i < wsize; ++i) dw[i] += part[i];
    }
    if (!dw_direct) {
        kernel<op::bias_grad, basic_cpu<T>>::run(dy, db, n, out_c, P);
        return;
    }
    for (std::size_t o = 0; o < out_c; ++o) {  // as bias_grad: the samples' sums in double, in order
        double s = 0.0;
        for (std::size_t i = 0; i < n; ++i) s += dbs[i * out_c + o];
        db[o] += static_cast<T>(s);
    }
}
}  // namespace cpu_detail

/// kernel<op::conv2d_backward, cpu>::run(g, out_c, n, x, w, dy, dw, db, dx):
///   dw (out_c, C*K*K) += sum_s dy_s row_s; db (out_c) += sums of dy; dx (n, C, H, W) = input
///   gradient when dx is not null.
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
