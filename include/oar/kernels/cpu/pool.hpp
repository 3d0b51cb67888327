// CPU pooling kernels over (N,C,H,W): max (backward recomputes the arg-max from x, so nothing is
// stored between passes) and average (padding excluded from the divisor never arises: no padding).
// The 2x2 stride-2 max pool is SIMD throughout (isa/pool_body.inc, compiled for AVX-512, AVX2 and
// SSE2 whatever the user's -march and run on the best ISA the CPU has); where an ISA has no whole
// vector of windows (double at SSE2), an xsimd loop at the build's width (for_each_window_2x2).
#pragma once

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t
#include <limits>   // std::numeric_limits

#include "../../core/simd.hpp"  // xsimd::batch, select, swizzle: the 2x2 window

#include "../../config.hpp"            // OAR_RESTRICT
#include "../../core/thread_pool.hpp"  // default_pool: planes in parallel
#include "../dispatch.hpp"             // kernel, op::*
#include "../rows.hpp"        // window_argmax: shared with the CUDA bodies
#include "../types.hpp"       // ConvGeometry
#include "isa/dispatch.hpp"   // OAR_ISA_DISPATCH

namespace oar {

namespace cpu_detail {
using oar::rows::window_argmax;

/// The first maximum of (a, b, c, d) in that order, NaN winning (as window_argmax); returns 0..3.
/// Branch-free (selects, not jumps: random data would mispredict half the comparisons).
template <class T>
OAR_ALWAYS_INLINE unsigned argmax4(T a, T b, T c, T d) {
    unsigned best = 0;
    T bv = a;
    bool take = (b > bv) | ((b != b) & (bv == bv));
    bv = take ? b : bv;
    best = take ? 1u : best;
    take = (c > bv) | ((c != c) & (bv == bv));
    bv = take ? c : bv;
    best = take ? 2u : best;
    take = (d > bv) | ((d != d) & (bv == bv));
    return take ? 3u : best;
}

/// Lane i of a swizzle reads lane i ^ 1: swaps the two values of each horizontal pair.
struct pair_swap {
    static constexpr unsigned get(unsigned i, unsigned) { return i ^ 1u; }
};

/// The course's 2x2, stride-2 window: calls f(plane, oy, ox, argmax index 0..3 in window order)
/// per output. Whole SIMD vectors of a row pair at a time: in the even lanes, the window's first
/// maximum (NaN first) from branch-free selects over (a, b) = row 0 and its pair swap, then row 1.
/// A vector may also cover the following windows' columns (and rows) when it stays below x_end,
/// the end of the whole input: only the lanes of this row's windows are used.
template <class T, class F>
OAR_ALWAYS_INLINE void for_each_window_2x2(const ConvGeometry& g, std::size_t planes, const T* x, const T* x_end,
                                           F f) {
    using V = xsimd::batch<T>;
    using U = xsimd::batch<xsimd::as_unsigned_integer_t<T>, typename V::arch_type>;
    constexpr std::size_t L = V::size;
    constexpr auto swap = xsimd::make_batch_constant<U, pair_swap>();
    const std::size_t oh = g.out_height(), ow = g.out_width(), W = g.width;
    // take(v) = v > best, or v is NaN and best is not: !(v <= best) && best == best
    auto pick = [](V& best, V& idx, V v, T i) {
        const auto take = !(v <= best) && (best == best);
        best = xsimd::select(take, v, best);
        idx = xsimd::select(take, V(i), idx);
    };
    alignas(64) T idx_lanes[L];
    for (std::size_t p = 0; p < planes; ++p) {
        const T* in = x + p * g.height * W;
        for (std::size_t oy = 0; oy < oh; ++oy) {
            const T* r0 = in + 2 * oy * W;
            const T* r1 = r0 + W;
            std::size_t ox = 0;
            if constexpr (L >= 2 && L % 2 == 0)
                for (; ox < ow && r1 + 2 * ox + L <= x_end; ox += L / 2) {
                    const V a = V::load_unaligned(r0 + 2 * ox), c = V::load_unaligned(r1 + 2 * ox);
                    V best = a, idx(T(0));
                    pick(best, idx, xsimd::swizzle(a, swap), T(1));
                    pick(best, idx, c, T(2));
                    pick(best, idx, xsimd::swizzle(c, swap), T(3));
                    idx.store_aligned(idx_lanes);
                    const std::size_t lanes = std::min(L / 2, ow - ox);
                    for (std::size_t l = 0; l < lanes; ++l) f(p, oy, ox + l, static_cast<unsigned>(idx_lanes[2 * l]));
                }
            for (; ox < ow; ++ox) f(p, oy, ox, argmax4(r0[2 * ox], r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1]));
        }
    }
}

}  // namespace cpu_detail
}  // namespace oar

// The SIMD 2x2 stride-2 pool, once per ISA (isa/region.inc): isa_<name>::max_pool2x2_*_plane.
#define OAR_ISA_BODY "pool_body.inc"
#include "isa/every_isa.inc"

namespace oar {
namespace cpu_detail {
/// Whether a plane whose rows have ow windows runs the AVX2 body although the active ISA is
/// AVX-512: rows of at most one AVX2 vector of windows (the course CNN's second pool: 7, MyNet's:
/// 6) fill at most half of an AVX-512 vector, which then costs more than the AVX2 body's one
/// vector of 8. A max pool selects values, so both bodies give the same bits.
template <class T>
bool pool2x2_narrow_rows(std::size_t ow) {
#if OAR_ISA_X86 && OAR_ISA_COMPILED(1) && OAR_ISA_COMPILED(2)
    return ow <= isa_avx2::simd::batch<T>::size && active_vector_isa() == cpu_isa::avx512;
#else
    (void)ow;
    return false;
#endif
}

/// The 2x2 stride-2 forward of one plane at the active ISA (pool2x2_narrow_rows: AVX2 for narrow
/// rows on AVX-512); false where it has no whole vector of windows (then nothing is written).
template <class T>
bool pool2x2_forward_plane(const ConvGeometry& g, const T* x, const T* x_end, T* y) {
    if (pool2x2_narrow_rows<T>(g.out_width())) return isa_avx2::max_pool2x2_forward_plane<T>(g, x, x_end, y);
    OAR_ISA_DISPATCH(max_pool2x2_forward_plane<T>, g, x, x_end, y)
}
/// The 2x2 stride-2 backward of one plane at the active ISA, as the forward; false as above.
template <class T>
bool pool2x2_backward_plane(const ConvGeometry& g, const T* x, const T* x_end, const T* dy, const T* dy_end, T* dx) {
    if (pool2x2_narrow_rows<T>(g.out_width()))
        return isa_avx2::max_pool2x2_backward_plane<T>(g, x, x_end, dy, dy_end, dx);
    OAR_ISA_DISPATCH(max_pool2x2_backward_plane<T>, g, x, x_end, dy, dy_end, dx)
}
}  // namespace cpu_detail

/// kernel<op::max_pool_forward, cpu>::run(g, n, x, y): x (n,C,H,W) -> y (n,C,OH,OW).
template <class T>
struct kernel<op::max_pool_forward, basic_cpu<T>> {
    static void run(const ConvGeometry& g, std::size_t n, const T* OAR_RESTRICT x, T* OAR_RESTRICT y) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), planes = n * g.channels;
        if (g.kernel == 2 && g.stride == 2) {  // planes in parallel: disjoint outputs
            const std::size_t W = g.width, hw = g.height * W;
            default_pool().parallel_for(planes, [&](std::size_t q) {
                const T* xq = x + q * hw;
                T* yq = y + q * oh * ow;
                if (cpu_detail::pool2x2_forward_plane(g, xq, x + planes * hw, yq)) return;
                cpu_detail::for_each_window_2x2(g, 1, xq, x + planes * hw,
                                                [&](std::size_t, std::size_t oy, std::size_t ox, unsigned a) {
                                                    yq[oy * ow + ox] = xq[(2 * oy + a / 2) * W + 2 * ox + a % 2];
                                                });
            });
            return;
        }
        for (std::size_t p = 0; p < planes; ++p) {
            const T* in = x + p * g.height * g.width;
            T* out = y + p * oh * ow;
            for (std::size_t oy = 0; oy < oh; ++oy)
                for (std::size_t ox = 0; ox < ow; ++ox) out[oy * ow + ox] = in[cpu_detail::window_argmax(g, in, oy, ox)];
        }
    }
};

/// kernel<op::max_pool_backward, cpu>::run(g, n, x, dy, dx): dx = 0 except the window maxima get dy.
template <class T>
struct kernel<op::max_pool_backward, basic_cpu<T>> {
    static void run(const ConvGeometry& g, std::size_t n, const T* OAR_RESTRICT x, const T* OAR_RESTRICT dy,
                    T* OAR_RESTRICT dx) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), planes = n * g.channels, hw = g.height * g.width;
        if (g.kernel == 2 && g.stride == 2) {  // planes in parallel: disjoint outputs
            const std::size_t W = g.width;
            default_pool().parallel_for(planes, [&](std::size_t q) {
                const T* dyq = dy + q * oh * ow;
                T* dxq = dx + q * hw;
                if (cpu_detail::pool2x2_backward_plane(g, x + q * hw, x + planes * hw, dyq, dy + planes * oh * ow, dxq))
                    return;
                for (std::size_t i = 0; i < hw; ++i) dxq[i] = T(0);
                cpu_detail::for_each_window_2x2(g, 1, x + q * hw, x + planes * hw,
                                                [&](std::size_t, std::size_t oy, std::size_t ox, unsigned a) {
                                                    dxq[(2 * oy + a / 2) * W + 2 * ox + a % 2] = dyq[oy * ow + ox];
                                                });
            });
            return;
        }
        for (std::size_t i = 0; i < planes * hw; ++i) dx[i] = T(0);
        for (std::size_t p = 0; p < planes; ++p) {
            const T* in = x + p * hw;
            const T* d = dy + p * oh * ow;
            T* out = dx + p * hw;
            for (std::size_t oy = 0; oy < oh; ++oy)
                for (std::size_t ox = 0; ox < ow; ++ox) out[cpu_detail::window_argmax(g, in, oy, ox)] += d[oy * ow + ox];
        }
    }
};

/// kernel<op::avg_pool_forward, cpu>::run(g, n, x, y)
template <class T>
struct kernel<op::avg_pool_forward, basic_cpu<T>> {
    static void run(const ConvGeometry& g, std::size_t n, const T* OAR_RESTRICT x, T* OAR_RESTRICT y) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), planes = n * g.channels;
        const T inv = T(1) / static_cast<T>(g.kernel * g.kernel);
        for (std::size_t p = 0; p < planes; ++p) {
            const T* in = x + p * g.height * g.width;
            T* out = y + p * oh * ow;
            for (std::size_t oy = 0; oy < oh; ++oy)
                for (std::size_t ox = 0; ox < ow; ++ox) {
                    T s = T(0);
                    for (std::size_t ky = 0; ky < g.kernel; ++ky)
                        for (std::size_t kx = 0; kx < g.kernel; ++kx)
                            s += in[(oy * g.stride + ky) * g.width + ox * g.stride + kx];
                    out[oy * ow + ox] = s * inv;
                }
        }
    }
};

/// kernel<op::avg_pool_backward, cpu>::run(g, n, dy, dx): dx = spread of dy / (K*K) over each window.
template <class T>
struct kernel<op::avg_pool_backward, basic_cpu<T>> {
    static void run(const ConvGeometry& g, std::size_t n, const T* OAR_RESTRICT dy, T* OAR_RESTRICT dx) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), planes = n * g.channels, hw = g.height * g.width;
        const T inv = T(1) / static_cast<T>(g.kernel * g.kernel);
        for (std::size_t i = 0; i < planes * hw; ++i) dx[i] = T(0);
        for (std::size_t p = 0; p < planes; ++p) {
            const T* d = dy + p * oh * ow;
            T* out = dx + p * hw;
            for (std::size_t oy = 0; oy < oh; ++oy)
                for (std::size_t ox = 0; ox < ow; ++ox) {
                    const T v = d[oy * ow + ox] * inv;
                    for (std::size_t ky = 0; ky < g.kernel; ++ky)
                        for (std::size_t kx = 0; kx < g.kernel; ++kx)
                            out[(oy * g.stride + ky) * g.width + ox * g.stride + kx] += v;
                }
        }
    }
};

/// kernel<op::adaptive_avg_pool_forward, cpu>::run(g, n, x, y): each output the mean of its adaptive
/// window; kernel<op::adaptive_avg_pool_backward, cpu>::run(g, n, dy, dx): dx overwritten with the
/// gather of dy / area over the windows that hold each pixel. The element bodies are the ones every
/// backend runs (rows::adaptive_output, rows::adaptive_input_grad).
template <class T>
struct kernel<op::adaptive_avg_pool_forward, basic_cpu<T>> {
    static void run(const AdaptiveGeometry& g, std::size_t n, const T* x, T* y) {
        for (std::size_t i = 0, e = n * g.channels * g.out_height * g.out_width; i < e; ++i) y[i] = rows::adaptive_output(g, x, i);
    }
};
template <class T>
struct kernel<op::adaptive_avg_pool_backward, basic_cpu<T>> {
    static void run(const AdaptiveGeometry& g, std::size_t n, const T* dy, T* dx) {
        for (std::size_t i = 0, e = n * g.channels * g.height * g.width; i < e; ++i) dx[i] = rows::adaptive_input_grad(g, dy, i);
    }
};

}  // namespace oar
