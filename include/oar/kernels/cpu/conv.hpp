// CPU kernels for convolution by im2col + GEMM: im2col, its adjoint col2im, and per-channel bias.
#pragma once

#include <cstddef>  // std::size_t

#include "../../config.hpp"  // OAR_RESTRICT
#include "../dispatch.hpp"   // kernel, op::*

namespace oar {

/// Geometry of a 2-D convolution or pooling window over one (C,H,W) sample.
struct ConvGeometry {
    std::size_t channels, height, width, kernel, stride, pad;
    constexpr std::size_t out_height() const { return (height + 2 * pad - kernel) / stride + 1; }
    constexpr std::size_t out_width() const { return (width + 2 * pad - kernel) / stride + 1; }
    constexpr std::size_t col_rows() const { return channels * kernel * kernel; }
    constexpr std::size_t col_cols() const { return out_height() * out_width(); }
};

/// kernel<op::im2col, cpu>::run(g, x, col): x (C,H,W) -> col (C*K*K, OH*OW), zeros where padded.
template <class T>
struct kernel<op::im2col, basic_cpu<T>> {
    static void run(const ConvGeometry& g, const T* OAR_RESTRICT x, T* OAR_RESTRICT col) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), K = g.kernel;
        for (std::size_t c = 0; c < g.channels; ++c)
            for (std::size_t ky = 0; ky < K; ++ky)
                for (std::size_t kx = 0; kx < K; ++kx) {
                    T* row = col + ((c * K + ky) * K + kx) * oh * ow;  // (OH*OW)
                    for (std::size_t oy = 0; oy < oh; ++oy) {
                        const std::ptrdiff_t iy = static_cast<std::ptrdiff_t>(oy * g.stride + ky) -
                                                  static_cast<std::ptrdiff_t>(g.pad);
                        T* out = row + oy * ow;
                        if (iy < 0 || iy >= static_cast<std::ptrdiff_t>(g.height)) {
                            for (std::size_t ox = 0; ox < ow; ++ox) out[ox] = T(0);
                            continue;
                        }
                        const T* in = x + (c * g.height + static_cast<std::size_t>(iy)) * g.width;
                        for (std::size_t ox = 0; ox < ow; ++ox) {
                            const std::ptrdiff_t ix = static_cast<std::ptrdiff_t>(ox * g.stride + kx) -
                                                      static_cast<std::ptrdiff_t>(g.pad);
                            out[ox] = (ix < 0 || ix >= static_cast<std::ptrdiff_t>(g.width)) ? T(0) : in[ix];
                        }
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

}  // namespace oar
