// CPU pooling kernels over (N,C,H,W): max (backward recomputes the arg-max from x, so nothing is
// stored between passes) and average (padding excluded from the divisor never arises: no padding).
// The 2x2 stride-2 max pool is SIMD throughout (pool2x2): a vector pair of a row pair holds one
// vector of windows; the forward packs the windows' maxima with a swizzle, the backward writes
// whole rows of dx with selects (no zeroing pass, no scatter). Where a row's windows do not fill
// the vectors, the extra lanes are stored into the following rows of the same plane, which are
// written later anyway (never into another plane: planes run on different threads).
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

/// Lane i reads lane 2 * (i % (L/2)): the even lanes (window results) of a vector, twice.
struct even_lanes {
    static constexpr unsigned get(unsigned i, unsigned n) { return 2u * (i % (n / 2)); }
};
/// Lane i reads lane i & ~1: a pair's even lane in both.
struct dup_even {
    static constexpr unsigned get(unsigned i, unsigned) { return i & ~1u; }
};
/// Lane i reads lane i / 2 (spread_low) or n/2 + i / 2 (spread_high): a window's value to its pair.
struct spread_low {
    static constexpr unsigned get(unsigned i, unsigned) { return i / 2u; }
};
struct spread_high {
    static constexpr unsigned get(unsigned i, unsigned n) { return n / 2u + i / 2u; }
};

/// The SIMD 2x2 stride-2 max pool over one plane: L windows (two vectors of each of the two rows)
/// per step. For the forward, `best` of each vector (the first maximum, NaN first, in the even
/// lanes) is packed; for the backward, the arg-max (0..3 in the even lanes) is spread to its pair
/// and compared with each cell's position in the window.
template <class T>
struct pool2x2 {
    using V = xsimd::batch<T>;
    using U = xsimd::batch<xsimd::as_unsigned_integer_t<T>, typename V::arch_type>;
    static constexpr std::size_t L = V::size;
    static constexpr bool enabled = L >= 4 && L % 2 == 0;

    /// take(v) = v > best, or v is NaN and best is not (window_argmax's rule).
    static OAR_ALWAYS_INLINE void pick(V& best, V v) { best = xsimd::select(!(v <= best) && (best == best), v, best); }
    static OAR_ALWAYS_INLINE void pick(V& best, V& idx, V v, T i) {
        const auto take = !(v <= best) && (best == best);
        best = xsimd::select(take, v, best);
        idx = xsimd::select(take, V(i), idx);
    }
    static OAR_ALWAYS_INLINE V window_max(const T* r0, const T* r1) {
        constexpr auto swap = xsimd::make_batch_constant<U, pair_swap>();
        const V a = V::load_unaligned(r0), c = V::load_unaligned(r1);
        V best = a;
        pick(best, xsimd::swizzle(a, swap));
        pick(best, c);
        pick(best, xsimd::swizzle(c, swap));
        return best;
    }
    static OAR_ALWAYS_INLINE V window_argmax(const T* r0, const T* r1) {
        constexpr auto swap = xsimd::make_batch_constant<U, pair_swap>();
        const V a = V::load_unaligned(r0), c = V::load_unaligned(r1);
        V best = a, idx(T(0));
        pick(best, idx, xsimd::swizzle(a, swap), T(1));
        pick(best, idx, c, T(2));
        pick(best, idx, xsimd::swizzle(c, swap), T(3));
        return xsimd::swizzle(idx, xsimd::make_batch_constant<U, dup_even>());
    }
    static V lane_index() {
        alignas(64) T v[L];
        for (std::size_t i = 0; i < L; ++i) v[i] = static_cast<T>(i);
        return V::load_aligned(v);
    }

    /// y (oh, ow) of plane x (H, W); reads stay below x_end (else the scalar rule).
    static void forward(const ConvGeometry& g, const T* x, const T* x_end, T* y) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), W = g.width, ohw = oh * ow;
        constexpr auto evens = xsimd::make_batch_constant<U, even_lanes>();
        const auto low = lane_index() < V(T(L / 2));
        alignas(64) T tmp[L];
        for (std::size_t oy = 0; oy < oh; ++oy) {
            const T* r0 = x + 2 * oy * W;
            const T* r1 = r0 + W;
            std::size_t ox = 0;
            for (; ox < ow && r1 + 2 * ox + 2 * L <= x_end; ox += L) {
                const V b0 = window_max(r0 + 2 * ox, r1 + 2 * ox), b1 = window_max(r0 + 2 * ox + L, r1 + 2 * ox + L);
                const V out = xsimd::select(low, xsimd::swizzle(b0, evens), xsimd::swizzle(b1, evens));
                const std::size_t at = oy * ow + ox, lanes = std::min(L, ow - ox);
                if (lanes == L || (ow <= L && at + L <= ohw)) {  // extra lanes land in later rows
                    out.store_unaligned(y + at);
                } else {
                    out.store_aligned(tmp);
                    for (std::size_t l = 0; l < lanes; ++l) y[at + l] = tmp[l];
                }
            }
            for (; ox < ow; ++ox) {
                const T c[4] = {r0[2 * ox], r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1]};
                y[oy * ow + ox] = c[argmax4(c[0], c[1], c[2], c[3])];
            }
        }
    }

    /// dx (H, W) of plane x (H, W) from dy (oh, ow); W even. dy is read up to dy_end, x up to x_end.
    static void backward(const ConvGeometry& g, const T* x, const T* x_end, const T* dy, const T* dy_end, T* dx) {
        const std::size_t oh = g.out_height(), ow = g.out_width(), W = g.width, hw = g.height * W;
        constexpr auto lo = xsimd::make_batch_constant<U, spread_low>();
        constexpr auto hi = xsimd::make_batch_constant<U, spread_high>();
        const V parity = xsimd::fmod(lane_index(), V(T(2))), parity2 = parity + V(T(2)), zero(T(0));
        alignas(64) T tmp[4 * L];
        for (std::size_t oy = 0; oy < oh; ++oy) {
            const std::size_t o0 = 2 * oy * W, o1 = o0 + W;  // the two rows in the plane
            std::size_t ox = 0;
            for (; ox < ow && x + o1 + 2 * ox + 2 * L <= x_end; ox += L) {
                const std::size_t lanes = std::min(L, ow - ox), at = oy * ow + ox;
                V d;
                if (dy + at + L <= dy_end) {
                    d = V::load_unaligned(dy + at);  // lanes past the row: only into the extra lanes
                } else {
                    for (std::size_t l = 0; l < L; ++l) tmp[l] = l < lanes ? dy[at + l] : T(0);
                    d = V::load_aligned(tmp);
                }
                const V d0 = xsimd::swizzle(d, lo), d1 = xsimd::swizzle(d, hi);
                const V i0 = window_argmax(x + o0 + 2 * ox, x + o1 + 2 * ox);
                const V i1 = window_argmax(x + o0 + 2 * ox + L, x + o1 + 2 * ox + L);
                const V a0 = xsimd::select(i0 == parity, d0, zero), a1 = xsimd::select(i1 == parity, d1, zero);
                const V c0 = xsimd::select(i0 == parity2, d0, zero), c1 = xsimd::select(i1 == parity2, d1, zero);
                if (lanes == L || (ow <= L && o1 + 2 * ox + 2 * L <= hw)) {
                    // Row 0 first: its extra lanes fall into row 1, then rewritten; row 1's into later rows.
                    a0.store_unaligned(dx + o0 + 2 * ox);
                    a1.store_unaligned(dx + o0 + 2 * ox + L);
                    c0.store_unaligned(dx + o1 + 2 * ox);
                    c1.store_unaligned(dx + o1 + 2 * ox + L);
                } else {
                    a0.store_aligned(tmp);
                    a1.store_aligned(tmp + L);
                    c0.store_aligned(tmp + 2 * L);
                    c1.store_aligned(tmp + 3 * L);
                    for (std::size_t j = 0; j < 2 * lanes; ++j) {
                        dx[o0 + 2 * ox + j] = tmp[j];
                        dx[o1 + 2 * ox + j] = tmp[2 * L + j];
                    }
                }
            }
            for (; ox < ow; ++ox) {
                T* c[4] = {dx + o0 + 2 * ox, dx + o0 + 2 * ox + 1, dx + o1 + 2 * ox, dx + o1 + 2 * ox + 1};
                for (T* p : c) *p = T(0);
                *c[argmax4(x[o0 + 2 * ox], x[o0 + 2 * ox + 1], x[o1 + 2 * ox], x[o1 + 2 * ox + 1])] = dy[oy * ow + ox];
            }
        }
        for (std::size_t i = 2 * oh * W; i < hw; ++i) dx[i] = T(0);  // an odd last row: outside every window
    }
};
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
                if constexpr (cpu_detail::pool2x2<T>::enabled) {
                    cpu_detail::pool2x2<T>::forward(g, xq, x + planes * hw, yq);
                    return;
                }
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
                if constexpr (cpu_detail::pool2x2<T>::enabled) {
                    if (W % 2 == 0) {
                        cpu_detail::pool2x2<T>::backward(g, x + q * hw, x + planes * hw, dyq, dy + planes * oh * ow, dxq);
                        return;
                    }
                }
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
