// CPU kernels for convolution: im2col, its adjoint col2im, im2row (the columns transposed),
// per-channel bias, and whole-batch Conv2D forward and backward built on them and the GEMM.
// The batch kernels run samples in parallel on the default pool (each sample's GEMM on one
// thread, its columns in thread-local scratch); the weight gradient is summed per fixed group of
// samples and the groups are added in order, so the result does not depend on the thread count.
// Stride 1 runs on pitched columns (conv_stride1_sample: contiguous copies, no bounds per row),
// with the bias added as the valid columns are copied out; other strides fuse the bias by starting
// C at the bias (beta = 1). With stride 1 the input gradient is a convolution of dy with the
// flipped, transposed weights (one more NN GEMM, no col2im scatter).
#pragma once

#include <algorithm>  // std::min, std::max, std::fill, std::copy
#include <cstddef>    // std::size_t

#include "../../config.hpp"            // OAR_RESTRICT
#include "../../core/thread_pool.hpp"  // default_pool, ThreadPool
#include "../dispatch.hpp"             // kernel, op::*
#include "gemm.hpp"                    // op::gemm on cpu, cpu_detail::scratch

namespace oar {

/// Geometry of a 2-D convolution or pooling window over one (C,H,W) sample.
struct ConvGeometry {
    std::size_t channels, height, width, kernel, stride, pad;
    constexpr std::size_t out_height() const { return (height + 2 * pad - kernel) / stride + 1; }
    constexpr std::size_t out_width() const { return (width + 2 * pad - kernel) / stride + 1; }
    constexpr std::size_t col_rows() const { return channels * kernel * kernel; }
    constexpr std::size_t col_cols() const { return out_height() * out_width(); }
};

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

/// kernel<op::bias_grad, cpu>::run(dy, db, n, channels, inner): db[c] += sum over n and inner of dy.
/// Sums in double per channel: a fixed order, and no drift over large batches.
template <class T>
struct kernel<op::bias_grad, basic_cpu<T>> {
    static void run(const T* OAR_RESTRICT dy, T* OAR_RESTRICT db, std::size_t n, std::size_t channels,
                    std::size_t inner) {
        for (std::size_t c = 0; c < channels; ++c) {
            double s = 0.0;
            for (std::size_t b = 0; b < n; ++b) {
                const T* p = dy + (b * channels + c) * inner;
                T part = T(0);
                for (std::size_t i = 0; i < inner; ++i) part += p[i];
                s += part;
            }
            db[c] += static_cast<T>(s);
        }
    }
};

namespace op {
struct im2row {};            // one sample's (C,H,W) -> (OH*OW, C*K*K), the transpose of im2col
struct conv2d_forward {};    // whole batch: y = conv(x, w) + b
struct conv2d_backward {};   // whole batch: dw += .., db += .., dx = .. (optional)
}  // namespace op

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
/// Samples per weight-gradient group: partial sums are per group, added in group order.
inline constexpr std::size_t conv_dw_group = 4;
/// Scratch slots (gemm uses 0 and 1).
inline constexpr int slot_cols = 2, slot_dcols = 3, slot_partials = 4, slot_flipped = 5, slot_padded = 6,
                     slot_out = 7;

/// One sample of a stride-1 convolution by pitched columns: out (M, OH, OW) = w (M, C*K*K) conv x
/// (C, H, W) [+ bias]. x is first copied into a zero-padded (C, Hp, Wp) image; with the row pitch
/// Wp, column row (c, ky, kx) is then one contiguous run of OH*Wp values from padded(c, ky, kx)
/// (no per-row bounds or fills), the GEMM also computes the Wp - OW columns past each output row,
/// and the valid columns are copied out with the bias added.
template <class T>
void conv_stride1_sample(const ConvGeometry& g, std::size_t M, const T* x, const T* w, const T* bias, T* out) {
    const std::size_t C = g.channels, H = g.height, W = g.width, K = g.kernel, pad = g.pad;
    const std::size_t Hp = H + 2 * pad, Wp = W + 2 * pad, OH = g.out_height(), OW = g.out_width();
    const std::size_t J = OH * Wp, ckk = g.col_rows(), plane = Hp * Wp;
    T* padded = scratch<T, slot_padded>(C * plane + K);  // + K: the last run reads K-1 past the end
    std::fill(padded, padded + C * plane + K, T(0));
    for (std::size_t c = 0; c < C; ++c)
        for (std::size_t iy = 0; iy < H; ++iy) {
            const T* src = x + (c * H + iy) * W;
            std::copy(src, src + W, padded + c * plane + (iy + pad) * Wp + pad);
        }
    T* col = scratch<T, slot_cols>(ckk * J);  // (CKK, OH*Wp)
    for (std::size_t c = 0; c < C; ++c)
        for (std::size_t ky = 0; ky < K; ++ky)
            for (std::size_t kx = 0; kx < K; ++kx) {
                const T* src = padded + c * plane + ky * Wp + kx;
                std::copy(src, src + J, col + ((c * K + ky) * K + kx) * J);
            }
    T* wide = scratch<T, slot_out>(M * J);  // (M, OH*Wp)
    kernel<op::gemm, basic_cpu<T>>::run(Trans::no, Trans::no, M, J, ckk, T(1), w, ckk, col, J, T(0), wide, J);
    for (std::size_t o = 0; o < M; ++o) {
        const T b = bias ? bias[o] : T(0);
        for (std::size_t oy = 0; oy < OH; ++oy) {
            const T* src = wide + o * J + oy * Wp;
            T* dst = out + (o * OH + oy) * OW;
            for (std::size_t ox = 0; ox < OW; ++ox) dst[ox] = src[ox] + b;
        }
    }
}
}  // namespace cpu_detail

/// kernel<op::conv2d_forward, cpu>::run(g, out_c, n, x, w, b, y):
///   x (n, C, H, W), w (out_c, C*K*K), b (out_c) -> y (n, out_c, OH, OW).
template <class T>
struct kernel<op::conv2d_forward, basic_cpu<T>> {
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w, const T* b,
                    T* y) {
        const std::size_t P = g.col_cols(), ckk = g.col_rows(), in_size = g.channels * g.height * g.width;
        default_pool().parallel_for(n, [&](std::size_t s) {
            if (g.stride == 1) {
                cpu_detail::conv_stride1_sample(g, out_c, x + s * in_size, w, b, y + s * out_c * P);
                return;
            }
            T* col = cpu_detail::scratch<T, cpu_detail::slot_cols>(ckk * P);  // (CKK, P)
            kernel<op::im2col, basic_cpu<T>>::run(g, x + s * in_size, col);
            T* ys = y + s * out_c * P;  // (out_c, P), starts as the bias: the GEMM adds to it
            for (std::size_t o = 0; o < out_c; ++o) std::fill(ys + o * P, ys + (o + 1) * P, b[o]);
            kernel<op::gemm, basic_cpu<T>>::run(Trans::no, Trans::no, out_c, P, ckk, T(1), w, ckk, col, P, T(1), ys,
                                               P);  // (out_c,CKK) x (CKK,P)
        });
    }
};

/// kernel<op::conv2d_backward, cpu>::run(g, out_c, n, x, w, dy, dw, db, dx):
///   dw (out_c, C*K*K) += sum_s dy_s row_s; db (out_c) += sums of dy; dx (n, C, H, W) = input
///   gradient when dx is not null.
template <class T>
struct kernel<op::conv2d_backward, basic_cpu<T>> {
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const T* x, const T* w, const T* dy,
                    T* dw, T* db, T* dx) {
        using namespace cpu_detail;
        const std::size_t P = g.col_cols(), ckk = g.col_rows(), in_size = g.channels * g.height * g.width;
        const std::size_t K = g.kernel, C = g.channels;
        const std::size_t groups = (n + conv_dw_group - 1) / conv_dw_group, wsize = out_c * ckk;
        T* partials = scratch<T, slot_partials>(groups * wsize);  // (groups, out_c, CKK)
        // With stride 1, dx = conv(dy, flipped w) with padding K-1-pad: wf (C, out_c*K*K).
        // (Only from 8 input channels: the flipped product has C rows, too few below that.)
        const bool flipped = dx && g.stride == 1 && C >= 8;
        const ConvGeometry gd{out_c, g.out_height(), g.out_width(), K, 1, K - 1 - g.pad};
        T* wf = flipped ? scratch<T, slot_flipped>(C * out_c * K * K) : nullptr;
        if (flipped)
            for (std::size_t o = 0; o < out_c; ++o)
                for (std::size_t c = 0; c < C; ++c)
                    for (std::size_t ky = 0; ky < K; ++ky)
                        for (std::size_t kx = 0; kx < K; ++kx)
                            wf[((c * out_c + o) * K + ky) * K + kx] =
                                w[((o * C + c) * K + (K - 1 - ky)) * K + (K - 1 - kx)];
        default_pool().parallel_for(groups, [&](std::size_t grp) {
            T* row = scratch<T, slot_cols>(P * ckk);  // (P, CKK)
            T* part = partials + grp * wsize;         // (out_c, CKK)
            const std::size_t s0 = grp * conv_dw_group, s1 = std::min(n, s0 + conv_dw_group);
            for (std::size_t s = s0; s < s1; ++s) {
                const T* dys = dy + s * out_c * P;  // (out_c, P)
                kernel<op::im2row, basic_cpu<T>>::run(g, x + s * in_size, row);
                kernel<op::gemm, basic_cpu<T>>::run(Trans::no, Trans::no, out_c, ckk, P, T(1), dys, P, row, ckk,
                                                   s == s0 ? T(0) : T(1), part, ckk);  // (out_c,P) x (P,CKK)
                if (!dx) continue;
                T* dxs = dx + s * in_size;  // (C, H*W)
                if (flipped) {
                    conv_stride1_sample(gd, C, dys, wf, static_cast<const T*>(nullptr), dxs);
                } else {
                    T* dcol = scratch<T, slot_dcols>(ckk * P);  // (CKK, P)
                    kernel<op::gemm, basic_cpu<T>>::run(Trans::yes, Trans::no, ckk, P, out_c, T(1), w, ckk, dys, P,
                                                       T(0), dcol, P);  // W^T dy
                    std::fill(dxs, dxs + in_size, T(0));
                    kernel<op::col2im, basic_cpu<T>>::run(g, dcol, dxs);
                }
            }
        });
        for (std::size_t grp = 0; grp < groups; ++grp) {  // in group order: independent of threads
            const T* part = partials + grp * wsize;
            for (std::size_t i = 0; i < wsize; ++i) dw[i] += part[i];
        }
        kernel<op::bias_grad, basic_cpu<T>>::run(dy, db, n, out_c, P);
    }
};

}  // namespace oar
