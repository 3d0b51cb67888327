// Winograd F(2x2, 5x5): a stride-1, 5x5 convolution over many channels with 36 multiplications
// per 2x2 output tile and (input, output) channel pair (a 6x6 input tile gives the 2x2 outputs)
// instead of 100: about 2.8 times fewer multiply-adds than the direct kernel, for the transforms'
// cost. Used by conv.hpp (winograd_applies) for float convolutions of at least 8 input and 8
// output channels: the course's second convolution, forward and input gradient (the same kernel
// on dy with the flipped weights), and the weight gradient (winograd_dw_batch, the forward's
// adjoint, below). Interpolation points 0, 1, -1, 2, -2 and infinity (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016): the input transform B^T is the one of
// F(4x4, 3x3), the output transform A^T has entries 0, +-1, +-2 only.
//   Y = A^T [ (G w G^T) (.) (B^T d B) ] A      for each (output channel, 2x2 tile), summed over c.
// Images are the SIMD lanes: each group of L = batch<float>::size images is interleaved
// (C, Hq, Wq, L) with its zero padding, so every transform is plain vector arithmetic; the sum
// over channels is, for each of the 36 points, a small GEMM (M x C) x (C x tiles*L) on
// micro-tiles. Work is split by (group, tile row) on the default pool; every output is computed
// by one task in a fixed order, so the bits do not depend on the thread count.
// Rounding: the weight transform is done in double and rounded once; the input and output
// transforms add at most a few ulps of the largest input times 25 (|B^T| <= 5 per pass).
// tests/kernels/cpu/test_winograd.cpp holds it to the direct convolution in double.
#pragma once

#include <algorithm>    // std::min, std::fill
#include <array>        // std::array: the micro-tiles by shape
#include <atomic>       // std::atomic<int>: the switch
#include <cstddef>      // std::size_t
#include <cstdlib>      // std::getenv: OAR_WINOGRAD
#include <string>       // std::string: the OAR_WINOGRAD message
#include <type_traits>  // std::is_same_v
#include <utility>      // std::index_sequence

#if defined(__AVX512F__)
#include <immintrin.h>  // _mm512_*: the 16 x 16 transposes of the lane (de)interleaving
#endif

#include "../../config.hpp"            // OAR_ALWAYS_INLINE
#include "../../core/error.hpp"        // value_error: a malformed OAR_WINOGRAD
#include "../../core/simd.hpp"         // xsimd::batch, fma, select
#include "../../core/thread_pool.hpp"  // default_pool
#include "elementwise.hpp"             // relu_fn: the fused ReLU
#include "gemm.hpp"                    // cpu_detail::scratch

namespace oar {

/// The default of conv_winograd: OAR_WINOGRAD when set ("0": off, "1": on), else on. Any other
/// value is an error, not a silent default (as OAR_NUM_THREADS).
inline bool default_conv_winograd() {
    const char* env = std::getenv("OAR_WINOGRAD");
    if (!env || !*env) return true;
    if ((env[0] == '0' || env[0] == '1') && env[1] == '\0') return env[0] == '1';
    throw value_error(std::string("OAR_WINOGRAD: expected 0 or 1, got \"") + env + "\"");
}

namespace cpu_detail {
/// The switch behind set_conv_winograd: -1 until set or first read (then default_conv_winograd()),
/// else 0 or 1.
inline std::atomic<int>& winograd_switch() {
    static std::atomic<int> state{-1};
    return state;
}
}  // namespace cpu_detail

/// Whether float stride-1 5x5 convolutions of >= 8 input and output channels use the Winograd
/// kernel (the default) or the direct implicit GEMM: for comparisons and benchmarks. Starts as
/// default_conv_winograd() (OAR_WINOGRAD=0 turns it off; a malformed value throws oar::value_error
/// from the first convolution that asks). Set it between passes, not during one.
inline void set_conv_winograd(bool on) { cpu_detail::winograd_switch().store(on ? 1 : 0, std::memory_order_relaxed); }
inline bool conv_winograd() {
    int state = cpu_detail::winograd_switch().load(std::memory_order_relaxed);
    if (state < 0) {
        int expected = -1;
        const int fresh = default_conv_winograd() ? 1 : 0;
        state = cpu_detail::winograd_switch().compare_exchange_strong(expected, fresh, std::memory_order_relaxed)
                    ? fresh
                    : expected;  // set meanwhile: that value
    }
    return state == 1;
}

namespace cpu_detail {

/// Whether conv.hpp takes the Winograd kernel for a convolution of C input and M output channels.
template <class T>
bool winograd_applies(std::size_t C, std::size_t M, std::size_t kernel, std::size_t stride) {
    return std::is_same_v<T, float> && kernel == 5 && stride == 1 && C >= 8 && M >= 8 && conv_winograd();
}


/// How many of a batch's n images conv.hpp gives the Winograd kernel: all but a last partial group
/// of cnt < L lanes when cnt * 8 <= L * 5 (up to 10 of 16). A group costs the same whatever its
/// lanes hold; on the course's second convolution (2026-11-24, Zen 4, 1 thread) a group of 16 takes
/// 26 us per lane and the direct kernel 42 us per image, so up to 9.9 images are cheaper direct.
template <class T>
std::size_t winograd_images(std::size_t n) {
    constexpr std::size_t L = xsimd::batch<T>::size;
    const std::size_t tail = n % L;
    return tail != 0 && tail * 8 <= L * 5 ? n - tail : n;
}

/// The 36 points of the 6x6 transformed tile.
inline constexpr std::size_t wino_points = 36;
/// Tiles per block along a tile row: the GEMM's columns are (tile, lane), up to this many vectors.
inline constexpr std::size_t wino_block = 4;
/// Rows (output channels) per GEMM micro-tile: wino_rows x wino_block accumulators (20 of 32).
inline constexpr std::size_t wino_rows = 5;

/// The tiling of a stride-1 5x5 convolution of an H x W image with padding pad: OH x OW outputs in
/// TH x TW tiles of 2x2 (the last row or column half outside when odd), read from the interleaved,
/// zero-padded image of Hq x Wq (each tile reads 6x6 of it). Forward and weight gradient alike.
struct wino_geometry {
    std::size_t OH, OW, TH, TW, Hq, Wq;
    constexpr wino_geometry(std::size_t H, std::size_t W, std::size_t pad)
        : OH(H + 2 * pad - 4), OW(W + 2 * pad - 4), TH((OH + 1) / 2), TW((OW + 1) / 2), Hq(2 * TH + 4),
          Wq(2 * TW + 4) {}
};

/// G (6x5): row j is a_j^k / prod_{l != j}(a_j - a_l) for the finite points a = 0, 1, -1, 2, -2,
/// and (0, 0, 0, 0, 1) for infinity. The weight transform is G w G^T; the weight gradient's last
/// step, its adjoint, G^T m G.
inline constexpr double wino_G[6][5] = {
    {1.0 / 4, 0, 0, 0, 0},
    {-1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6},
    {-1.0 / 6, 1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6},
    {1.0 / 24, 2.0 / 24, 4.0 / 24, 8.0 / 24, 16.0 / 24},
    {1.0 / 24, -2.0 / 24, 4.0 / 24, -8.0 / 24, 16.0 / 24},
    {0, 0, 0, 0, 1},
};

/// Output channel o's part of U (36, C, M): U[(p*C + c)*M + o] = (G w[o][c] G^T)[p] for w
/// (M, C, 5, 5), computed in double and rounded once (the channels run on the pool's threads).
template <class T>
void winograd_weights_of(std::size_t o, std::size_t M, std::size_t C, const T* w, T* U) {
    constexpr const auto& G = wino_G;
    for (std::size_t c = 0; c < C; ++c) {
        const T* k = w + (o * C + c) * 25;
        double t[6][5];  // G k
        for (std::size_t i = 0; i < 6; ++i)
            for (std::size_t b = 0; b < 5; ++b) {
                double s = 0;
                for (std::size_t a = 0; a < 5; ++a) s += G[i][a] * static_cast<double>(k[a * 5 + b]);
                t[i][b] = s;
            }
        for (std::size_t i = 0; i < 6; ++i)
            for (std::size_t j = 0; j < 6; ++j) {
                double s = 0;
                for (std::size_t b = 0; b < 5; ++b) s += t[i][b] * G[j][b];
                U[((i * 6 + j) * C + c) * M + o] = static_cast<T>(s);
            }
    }
}

/// v = B^T d for one column of six vectors (B^T of the points 0, +-1, +-2, infinity):
///   v0 = 4 d0 - 5 d2 + d4          v1 = (d4 - 4 d2) + (d3 - 4 d1)    v2 = (d4 - 4 d2) - (d3 - 4 d1)
///   v3 = (d4 - d2) + 2 (d3 - d1)   v4 = (d4 - d2) - 2 (d3 - d1)      v5 = 4 d1 - 5 d3 + d5
template <class V>
OAR_ALWAYS_INLINE void wino_input_1d(const V& d0, const V& d1, const V& d2, const V& d3, const V& d4, const V& d5,
                                     V* v, std::size_t stride) {
    using T = typename V::value_type;
    const V four(T(4)), five(T(5)), two(T(2));
    const V t1 = xsimd::fnma(four, d2, d4), t2 = xsimd::fnma(four, d1, d3);
    const V t3 = d4 - d2, t4 = two * (d3 - d1);
    v[0 * stride] = xsimd::fnma(five, d2, xsimd::fma(four, d0, d4));
    v[1 * stride] = t1 + t2;
    v[2 * stride] = t1 - t2;
    v[3 * stride] = t3 + t4;
    v[4 * stride] = t3 - t4;
    v[5 * stride] = xsimd::fnma(five, d3, xsimd::fma(four, d1, d5));
}

/// (y0, y1) = A^T q for six vectors (A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 1]), the output transform's
/// 1-D step, applied to the columns of m and then to the two rows that gives.
template <class V>
OAR_ALWAYS_INLINE void wino_output_1d(const V* q, V& y0, V& y1) {
    using T = typename V::value_type;
    const V s12 = q[1] + q[2], d12 = q[1] - q[2], s34 = q[3] + q[4], d34 = q[3] - q[4];
    y0 = q[0] + s12 + s34;
    y1 = xsimd::fma(V(T(2)), d34, d12) + q[5];
}

/// Whether the (de)interleaving of lanes uses AVX-512 16 x 16 transposes (float, 16 lanes).
template <class T>
inline constexpr bool wino_transposes =
#if defined(__AVX512F__)
    std::is_same_v<T, float> && xsimd::batch<T>::size == 16;
#else
    false;
#endif

#if defined(__AVX512F__)
/// r[0..15], 16 rows of 16 floats, transposed in place: r[i][j] becomes r[j][i]. The masked
/// forms with every lane selected are the plain instructions; the unmasked intrinsics start from
/// _mm512_undefined_ps, which g++ 12 reports as maybe-uninitialized where <immintrin.h> was first
/// included outside core/simd.hpp's pragma (libtorch's headers do).
OAR_ALWAYS_INLINE void transpose16(__m512* r) {
    constexpr __mmask16 all = 0xFFFF;
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_mask_unpacklo_ps(r[i], all, r[i], r[i + 1]);
        t[i + 1] = _mm512_mask_unpackhi_ps(r[i], all, r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_mask_shuffle_ps(t[i], all, t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_mask_shuffle_ps(t[i], all, t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_mask_shuffle_ps(t[i + 1], all, t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_mask_shuffle_ps(t[i + 1], all, t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
        t[i] = _mm512_mask_shuffle_f32x4(r[i], all, r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_mask_shuffle_f32x4(r[i], all, r[i], r[i + 4], 0xDD);
        t[i + 8] = _mm512_mask_shuffle_f32x4(r[i + 8], all, r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_mask_shuffle_f32x4(r[i + 8], all, r[i + 8], r[i + 12], 0xDD);
    }
    for (int i = 0; i < 8; ++i) {
        r[i] = _mm512_mask_shuffle_f32x4(t[i], all, t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_mask_shuffle_f32x4(t[i], all, t[i], t[i + 8], 0xDD);
    }
}
#endif

/// The interleaved, zero-padded input of images [s0, s0 + cnt) (cnt <= L): xi (C, Hq, Wq, L),
/// xi[((c*Hq + py)*Wq + px)*L + l] = x[s0 + l][c][py - pad][px - pad], zero outside the image
/// and in lanes l >= cnt. Channel c only (the caller splits channels across tasks). With AVX-512,
/// 16 images' runs of 16 columns are loaded (masked at the row's end) and transposed.
template <class T>
void wino_interleave(std::size_t c, std::size_t H, std::size_t W, std::size_t pad, std::size_t Hq, std::size_t Wq,
                     std::size_t L, const T* x, std::size_t in_size, std::size_t cnt, T* xi) {
    T* dst = xi + c * Hq * Wq * L;
#if defined(__AVX512F__)
    if constexpr (wino_transposes<T>) {
        // Zeros in the padding only: the transposes write every lane of the image's positions.
        std::fill(dst, dst + pad * Wq * L, T(0));
        std::fill(dst + (pad + H) * Wq * L, dst + Hq * Wq * L, T(0));
        for (std::size_t py = pad; py < pad + H; ++py) {
            std::fill(dst + py * Wq * L, dst + (py * Wq + pad) * L, T(0));
            std::fill(dst + (py * Wq + pad + W) * L, dst + (py + 1) * Wq * L, T(0));
        }
        for (std::size_t iy = 0; iy < H; ++iy)
            for (std::size_t x0 = 0; x0 < W; x0 += 16) {
                const std::size_t cols = std::min<std::size_t>(16, W - x0);
                const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1u);
                __m512 r[16];
                for (std::size_t l = 0; l < 16; ++l)
                    r[l] = l < cnt ? _mm512_maskz_loadu_ps(mask, x + l * in_size + (c * H + iy) * W + x0)
                                   : _mm512_setzero_ps();
                transpose16(r);
                T* row = dst + ((iy + pad) * Wq + x0 + pad) * 16;
                for (std::size_t k = 0; k < cols; ++k) _mm512_store_ps(row + k * 16, r[k]);
            }
        return;
    }
#endif
    std::fill(dst, dst + Hq * Wq * L, T(0));
    for (std::size_t l = 0; l < cnt; ++l) {
        const T* src = x + l * in_size + c * H * W;
        for (std::size_t iy = 0; iy < H; ++iy)
            for (std::size_t ix = 0; ix < W; ++ix) dst[((iy + pad) * Wq + ix + pad) * L + l] = src[iy * W + ix];
    }
}

/// Output rows (o, oy) of the group's images from the staged vectors st[ox] (lanes = images),
/// ox < OW: y[l*out_size + ox] = st[ox][l] for l < cnt (y at (o, oy) of image 0). Transposed 16
/// by 16 with AVX-512 (st holds whole runs of 16 vectors), else lane by lane.
template <class T>
OAR_ALWAYS_INLINE void wino_deinterleave_row(const T* st, std::size_t OW, std::size_t L, std::size_t cnt, T* y,
                                             std::size_t out_size) {
#if defined(__AVX512F__)
    if constexpr (wino_transposes<T>) {
        for (std::size_t x0 = 0; x0 < OW; x0 += 16) {
            const std::size_t cols = std::min<std::size_t>(16, OW - x0);
            const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1u);
            __m512 r[16];
            for (std::size_t k = 0; k < 16; ++k) r[k] = _mm512_load_ps(st + (x0 + k) * 16);
            transpose16(r);
            for (std::size_t l = 0; l < cnt; ++l) _mm512_mask_storeu_ps(y + l * out_size + x0, mask, r[l]);
        }
        return;
    }
#endif
    for (std::size_t ox = 0; ox < OW; ++ox)
        for (std::size_t l = 0; l < cnt; ++l) y[l * out_size + ox] = st[ox * L + l];
}

/// out(RO x NV vectors) = sum_c u[c*M + r] * v[c*vc + j*vt]: one point's GEMM micro-tile (rows are
/// output channels, columns (tile, lane)), stored whole at out[r*N + j*L]. C >= 1; channel 0's
/// products start the accumulators.
template <std::size_t RO, std::size_t NV, class T>
void wino_tile(std::size_t C, const T* u, std::size_t M, const T* v, std::size_t vc, std::size_t vt, T* out,
               std::size_t N) {
    using V = xsimd::batch<T>;
    constexpr std::size_t L = V::size;
    V acc[RO][NV], b[NV];
    for (std::size_t j = 0; j < NV; ++j) b[j] = V::load_aligned(v + j * vt);
    for (std::size_t r = 0; r < RO; ++r)
        for (std::size_t j = 0; j < NV; ++j) acc[r][j] = V(u[r]) * b[j];
    for (std::size_t c = 1; c < C; ++c) {
        for (std::size_t j = 0; j < NV; ++j) b[j] = V::load_aligned(v + c * vc + j * vt);
        for (std::size_t r = 0; r < RO; ++r) {
            const V a(u[c * M + r]);
            for (std::size_t j = 0; j < NV; ++j) acc[r][j] = xsimd::fma(a, b[j], acc[r][j]);
        }
    }
    for (std::size_t r = 0; r < RO; ++r)
        for (std::size_t j = 0; j < NV; ++j) acc[r][j].store_aligned(out + r * N + j * L);
}

template <class T, std::size_t... I>
constexpr auto make_wino_tiles(std::index_sequence<I...>) {
    return std::array{&wino_tile<I / wino_block + 1, I % wino_block + 1, T>...};
}
/// wino_tiles<T>[(ro - 1)*wino_block + (nv - 1)]: ro rows by nv vectors.
template <class T>
inline constexpr auto wino_tiles = make_wino_tiles<T>(std::make_index_sequence<wino_rows * wino_block>{});

/// The input transform V = B^T d B of tiles (ty, tx0 + t), t < nb, for each of C channels of the
/// interleaved xi (C, Hq, Wq, L): tile (c, t)'s 36 vectors one after the other at
/// vb[((c*nb + t)*36 + p)*L] (36 separate store streams were slower).
template <class T>
void wino_input_tiles(std::size_t C, std::size_t Hq, std::size_t Wq, std::size_t ty, std::size_t tx0,
                      std::size_t nb, const T* xi, T* vb) {
    using V = xsimd::batch<T>;
    constexpr std::size_t L = V::size;
    for (std::size_t c = 0; c < C; ++c)
        for (std::size_t t = 0; t < nb; ++t) {
            const T* base = xi + ((c * Hq + 2 * ty) * Wq + 2 * (tx0 + t)) * L;
            V cols[6][6];  // cols[i][j] = (B^T d)[i][j]: columns first
            for (std::size_t j = 0; j < 6; ++j) {
                V d[6];
                for (std::size_t i = 0; i < 6; ++i) d[i] = V::load_aligned(base + (i * Wq + j) * L);
                wino_input_1d(d[0], d[1], d[2], d[3], d[4], d[5], &cols[0][j], 6);
            }
            for (std::size_t i = 0; i < 6; ++i) {  // then rows: (B^T d) B = (B^T (B^T d)^T)^T
                V v[6];
                wino_input_1d(cols[i][0], cols[i][1], cols[i][2], cols[i][3], cols[i][4], cols[i][5], v, 1);
                for (std::size_t j = 0; j < 6; ++j)
                    v[j].store_aligned(vb + ((c * nb + t) * wino_points + i * 6 + j) * L);
            }
        }
}

/// One task: output rows 2*ty and 2*ty + 1 of every channel, for the group's images.
template <bool Relu, class T>
void wino_tile_row(std::size_t C, std::size_t M, const wino_geometry& q, std::size_t ty, const T* xi, const T* U,
                   const T* bias, T* y, std::size_t cnt) {
    using V = xsimd::batch<T>;
    constexpr std::size_t L = V::size;
    const std::size_t OH = q.OH, OW = q.OW, TW = q.TW, Hq = q.Hq, Wq = q.Wq, out_size = M * OH * OW;
    // V at vb[((c*nb + t)*36 + p)*L] (wino_input_tiles). Point p's (M, N) block of the product at mb + p*ms,
    // the stride one vector more than the block: a power-of-two multiple (M*N*4 = 5 KB here) would
    // put the 36 points of a tile on the same few L1 sets (4 of 64), and they are loaded together.
    const std::size_t ms = M * wino_block * L + L;
    T* vb = scratch<T, scratch_slot::wino_v>(wino_points * C * wino_block * L);
    T* mb = scratch<T, scratch_slot::wino_m>(wino_points * ms);
    // The tile row's outputs, interleaved: st[((o*2 + a)*ws + ox)*L + l], ws = 2*TW rounded up to
    // 16 (whole transposes), then written to the images row by row.
    const std::size_t ws = (2 * TW + 15) / 16 * 16;
    T* st = scratch<T, scratch_slot::wino_st>(M * 2 * ws * L);
    for (std::size_t tx0 = 0; tx0 < TW; tx0 += wino_block) {
        const std::size_t nb = std::min(wino_block, TW - tx0), N = nb * L;
        wino_input_tiles(C, Hq, Wq, ty, tx0, nb, xi, vb);
        // The sum over channels: 36 GEMMs (M x C) x (C x N).
        for (std::size_t p = 0; p < wino_points; ++p)
            for (std::size_t o = 0; o < M; o += wino_rows) {
                const std::size_t ro = std::min(wino_rows, M - o);
                wino_tiles<T>[(ro - 1) * wino_block + (nb - 1)](C, U + p * C * M + o, M, vb + p * L,
                                                                 nb * wino_points * L, wino_points * L,
                                                                 mb + p * ms + o * N, N);
            }
        // Output transform: Y = A^T m A, the bias added, the ReLU applied, lanes to their images.
        for (std::size_t o = 0; o < M; ++o)
            for (std::size_t t = 0; t < nb; ++t) {
                V rows[2][6];  // A^T m: rows 0 and 1
                for (std::size_t j = 0; j < 6; ++j) {
                    V m[6];
                    for (std::size_t i = 0; i < 6; ++i) m[i] = V::load_aligned(mb + (i * 6 + j) * ms + o * N + t * L);
                    wino_output_1d(m, rows[0][j], rows[1][j]);
                }
                const V b(bias ? bias[o] : T(0));
                for (std::size_t a = 0; a < 2; ++a) {
                    V y0, y1;
                    wino_output_1d(rows[a], y0, y1);
                    y0 = y0 + b;
                    y1 = y1 + b;
                    if constexpr (Relu) {
                        y0 = relu_fn{}.simd_apply(y0);
                        y1 = relu_fn{}.simd_apply(y1);
                    }
                    T* row = st + ((o * 2 + a) * ws + 2 * (tx0 + t)) * L;
                    y0.store_aligned(row);
                    y1.store_aligned(row + L);
                }
            }
    }
    for (std::size_t o = 0; o < M; ++o)
        for (std::size_t a = 0; a < 2 && 2 * ty + a < OH; ++a)
            wino_deinterleave_row(st + (o * 2 + a) * ws * L, OW, L, cnt, y + (o * OH + 2 * ty + a) * OW, out_size);
}

/// y (n, M, OH, OW) = conv(x (n, C, H, W), w (M, C, 5, 5)) + bias (may be null), stride 1,
/// padding pad; with Relu, max(., 0) (NaN passes). OH = H + 2*pad - 4, OW likewise (both >= 1).
template <bool Relu, class T>
void winograd_conv_batch(std::size_t C, std::size_t H, std::size_t W, std::size_t pad, std::size_t M, std::size_t n,
                         const T* x, const T* w, const T* bias, T* y) {
    using V = xsimd::batch<T>;
    constexpr std::size_t L = V::size;
    const wino_geometry q(H, W, pad);
    const std::size_t TH = q.TH, in_size = C * H * W, out_size = M * q.OH * q.OW, groups = (n + L - 1) / L;
    const std::size_t slab = C * q.Hq * q.Wq * L;
    T* U = scratch<T, scratch_slot::wino_u>(wino_points * C * M);
    default_pool().parallel_for(M, [&](std::size_t o) { winograd_weights_of(o, M, C, w, U); });
    T* xi = scratch<T, scratch_slot::wino_in>(groups * slab);  // the caller's: the tasks share it
    const T* Uc = U;
    default_pool().parallel_for(groups * C, [&](std::size_t k) {
        const std::size_t g = k / C, c = k % C, s0 = g * L;
        wino_interleave(c, H, W, pad, q.Hq, q.Wq, L, x + s0 * in_size, in_size, std::min(L, n - s0), xi + g * slab);
    });
    default_pool().parallel_for(groups * TH, [&](std::size_t k) {
        const std::size_t g = k / TH, ty = k % TH, s0 = g * L;
        wino_tile_row<Relu>(C, M, q, ty, static_cast<const T*>(xi + g * slab), Uc, bias,
                            y + s0 * out_size, std::min(L, n - s0));
    });
}

// The weight gradient. Y = A^T [(G w G^T) (.) V] A is linear in w, so its adjoint gives
//   dw = G^T [ sum over images and tiles of (A dY A^T) (.) V ] G       per (output, input) channel,
// with V = B^T d B the forward's input transform: for each of the 36 points a GEMM
// (M x tiles*images) x (tiles*images x C), 2.8 times fewer multiply-adds than the direct kernel.
// The images are again the lanes, so each point's sum runs along the lanes too: the micro-tiles
// accumulate a block of tiles in registers, then fold their lanes to 4 (wino_fold4) into the
// group's partial sums (36, M, C4, 4); after all groups the partials are added in double, in
// group order, and G^T m G is applied in double (wino_dw_finish), so the bits do not depend on
// the thread count.

/// Tiles per block of the weight gradient (the K of its micro-tiles between folds).
inline constexpr std::size_t wino_dw_block = 7;
/// Output channels by input channels per micro-tile of the weight gradient: 4 x 4 accumulators.
inline constexpr std::size_t wino_dw_rows = 4, wino_dw_cols = 4;
/// A group's partial sums of the weight gradient: (36, M, C4, 4), C4 = C rounded up to 4 (the
/// micro-tiles' columns fold into whole 4 x 4 blocks; the padding channels stay zero).
inline constexpr std::size_t wino_dw_c4(std::size_t C) { return (C + 3) / 4 * 4; }
inline constexpr std::size_t wino_dw_part_size(std::size_t M, std::size_t C) {
    return wino_points * M * wino_dw_c4(C) * 4;
}

/// q = A y for two vectors (A = [1 0; 1 1; 1 -1; 1 2; 1 -2; 0 1]): the adjoint of wino_output_1d,
/// the 1-D step of dY's transform A dY A^T, written at q[i*stride].
template <class V>
OAR_ALWAYS_INLINE void wino_grad_1d(const V& y0, const V& y1, V* q, std::size_t stride) {
    using T = typename V::value_type;
    const V two(T(2));
    q[0 * stride] = y0;
    q[1 * stride] = y0 + y1;
    q[2 * stride] = y0 - y1;
    q[3 * stride] = xsimd::fma(two, y1, y0);
    q[4 * stride] = xsimd::fnma(two, y1, y0);
    q[5 * stride] = y1;
}

/// dY's transform A dY A^T of tiles (ty, tx0 + t), t < nb, for each of M channels of the
/// interleaved dyi (M, Hd, Wd, L) (2x2 tiles, zero past the outputs): tile (o, t)'s 36 vectors at
/// db[((o*nb + t)*36 + p)*L], as wino_input_tiles.
template <class T>
void wino_grad_tiles(std::size_t M, std::size_t Hd, std::size_t Wd, std::size_t ty, std::size_t tx0, std::size_t nb,
                     const T* dyi, T* db) {
    using V = xsimd::batch<T>;
    constexpr std::size_t L = V::size;
    for (std::size_t o = 0; o < M; ++o)
        for (std::size_t t = 0; t < nb; ++t) {
            const T* base = dyi + ((o * Hd + 2 * ty) * Wd + 2 * (tx0 + t)) * L;
            V cols[6][2];  // A dY: columns first
            for (std::size_t j = 0; j < 2; ++j)
                wino_grad_1d(V::load_aligned(base + j * L), V::load_aligned(base + (Wd + j) * L), &cols[0][j], 2);
            for (std::size_t i = 0; i < 6; ++i) {
                V q[6];
                wino_grad_1d(cols[i][0], cols[i][1], q, 1);
                for (std::size_t j = 0; j < 6; ++j)
                    q[j].store_aligned(db + ((o * nb + t) * wino_points + i * 6 + j) * L);
            }
        }
}

/// out[k*4 + j] += sum over i < L/4 of a_k[4i + j], k = 0..3: four accumulators' lanes folded to 4
/// each and added to 16 consecutive partial sums. AVX-512: two rounds of 128-bit shuffles and adds.
template <class T>
OAR_ALWAYS_INLINE void wino_fold4(const xsimd::batch<T>& a, const xsimd::batch<T>& b, const xsimd::batch<T>& c,
                                  const xsimd::batch<T>& d, T* out) {
    using V = xsimd::batch<T>;
    constexpr std::size_t L = V::size;
#if defined(__AVX512F__)
    if constexpr (wino_transposes<T>) {
        constexpr __mmask16 all = 0xFFFF;
        const __m512 ab = _mm512_add_ps(_mm512_mask_shuffle_f32x4(a, all, a, b, 0x44),   // a0 a1 b0 b1
                                        _mm512_mask_shuffle_f32x4(a, all, a, b, 0xEE));  // + a2 a3 b2 b3
        const __m512 cd = _mm512_add_ps(_mm512_mask_shuffle_f32x4(c, all, c, d, 0x44),
                                        _mm512_mask_shuffle_f32x4(c, all, c, d, 0xEE));
        const __m512 r = _mm512_add_ps(_mm512_mask_shuffle_f32x4(ab, all, ab, cd, 0x88),   // ab0 ab2 cd0 cd2
                                       _mm512_mask_shuffle_f32x4(ab, all, ab, cd, 0xDD));  // + ab1 ab3 cd1 cd3
        _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(out), r));
        return;
    }
#endif
    alignas(64) T lanes[4][L];
    a.store_aligned(lanes[0]);
    b.store_aligned(lanes[1]);
    c.store_aligned(lanes[2]);
    d.store_aligned(lanes[3]);
    for (std::size_t k = 0; k < 4; ++k)
        for (std::size_t i = 0; i < L; ++i) out[k * 4 + i % 4] += lanes[k][i];
}

/// One point's weight-gradient micro-tile: acc(RO x RI) = sum over t < nt of d[r*ds + t*ts] (.)
/// v[i*vs + t*ts] (nt >= 1), folded into part[r*ps + i*4 .. + 3] (lanes to 4, wino_fold4).
template <std::size_t RO, std::size_t RI, class T>
void wino_dw_tile(std::size_t nt, const T* d, std::size_t ds, const T* v, std::size_t vs, std::size_t ts, T* part,
                  std::size_t ps) {
    using V = xsimd::batch<T>;
    // The d vectors of step t + 1 are loaded during step t, so they reach the FMAs as registers:
    // loaded right before use, g++ folds each into the RI FMAs that read it (RO*RI + RI loads per
    // RO*RI FMAs, load-bound on Zen 4). 16 accumulators + 2 x 4 d + 4 v vectors fit 32 registers.
    V acc[RO][RI], a[RO], b[RI];
    for (std::size_t r = 0; r < RO; ++r) a[r] = V::load_aligned(d + r * ds);
    for (std::size_t t = 0;;) {
        for (std::size_t i = 0; i < RI; ++i) b[i] = V::load_aligned(v + i * vs + t * ts);
        const bool more = t + 1 < nt;
        V an[RO];
        if (more)
            for (std::size_t r = 0; r < RO; ++r) an[r] = V::load_aligned(d + r * ds + (t + 1) * ts);
        for (std::size_t r = 0; r < RO; ++r)
            for (std::size_t i = 0; i < RI; ++i) acc[r][i] = t == 0 ? a[r] * b[i] : xsimd::fma(a[r], b[i], acc[r][i]);
        if (!more) break;
        for (std::size_t r = 0; r < RO; ++r) a[r] = an[r];
        ++t;
    }
    for (std::size_t r = 0; r < RO; ++r) {
        if constexpr (RI == 4) {
            wino_fold4<T>(acc[r][0], acc[r][1], acc[r][2], acc[r][3], part + r * ps);
        } else {
            V cols[4] = {V(T(0)), V(T(0)), V(T(0)), V(T(0))};  // zeros past RI
            for (std::size_t i = 0; i < RI; ++i) cols[i] = acc[r][i];
            wino_fold4<T>(cols[0], cols[1], cols[2], cols[3], part + r * ps);
        }
    }
}

template <class T, std::size_t... I>
constexpr auto make_wino_dw_tiles(std::index_sequence<I...>) {
    return std::array{&wino_dw_tile<I / wino_dw_cols + 1, I % wino_dw_cols + 1, T>...};
}
/// wino_dw_tiles<T>[(ro - 1)*wino_dw_cols + (ri - 1)]: ro output by ri input channels.
template <class T>
inline constexpr auto wino_dw_tiles = make_wino_dw_tiles<T>(std::make_index_sequence<wino_dw_rows * wino_dw_cols>{});

/// One task: the group of images [s0, s0 + cnt) (cnt <= L) summed into part (wino_dw_part_size),
/// zeroed first. x and dy point at image s0.
template <class T>
void wino_dw_group(std::size_t C, std::size_t H, std::size_t W, std::size_t pad, std::size_t M, const T* x,
                   const T* dy, std::size_t cnt, T* part) {
    using V = xsimd::batch<T>;
    constexpr std::size_t L = V::size, P = wino_points;
    const wino_geometry q(H, W, pad);
    const std::size_t OH = q.OH, OW = q.OW, TH = q.TH, TW = q.TW, Hq = q.Hq, Wq = q.Wq;
    const std::size_t Hd = 2 * TH, Wd = 2 * TW, C4 = wino_dw_c4(C);
    T* xi = scratch<T, scratch_slot::wino_xg>(C * Hq * Wq * L);
    T* dyi = scratch<T, scratch_slot::wino_dyg>(M * Hd * Wd * L);
    for (std::size_t c = 0; c < C; ++c) wino_interleave(c, H, W, pad, Hq, Wq, L, x, C * H * W, cnt, xi);
    for (std::size_t o = 0; o < M; ++o)
        wino_interleave(o, OH, OW, std::size_t{0}, Hd, Wd, L, dy, M * OH * OW, cnt, dyi);
    T* vb = scratch<T, scratch_slot::wino_v>(P * C * wino_dw_block * L);
    T* gb = scratch<T, scratch_slot::wino_m>(P * M * wino_dw_block * L);
    std::fill(part, part + wino_dw_part_size(M, C), T(0));
    for (std::size_t ty = 0; ty < TH; ++ty)
        for (std::size_t tx0 = 0; tx0 < TW; tx0 += wino_dw_block) {
            const std::size_t nb = std::min(wino_dw_block, TW - tx0), ts = P * L, cs = nb * P * L;
            wino_input_tiles(C, Hq, Wq, ty, tx0, nb, static_cast<const T*>(xi), vb);
            wino_grad_tiles(M, Hd, Wd, ty, tx0, nb, static_cast<const T*>(dyi), gb);
            for (std::size_t p = 0; p < P; ++p)
                for (std::size_t o = 0; o < M; o += wino_dw_rows) {
                    const std::size_t ro = std::min(wino_dw_rows, M - o);
                    for (std::size_t c = 0; c < C; c += wino_dw_cols) {
                        const std::size_t ri = std::min(wino_dw_cols, C - c);
                        wino_dw_tiles<T>[(ro - 1) * wino_dw_cols + (ri - 1)](
                            nb, gb + o * cs + p * L, cs, vb + c * cs + p * L, cs, ts,
                            part + ((p * M + o) * C4 + c) * 4, C4 * 4);
                    }
                }
        }
}

/// dw (M, C, 5, 5) += G^T m G for output channel o, m[p] = the groups' partial sums of point p,
/// (o, c) added in double in a fixed order: group by group, each group's 4 lanes in turn. Four
/// input channels at a time, so the 144 sums run side by side rather than one dependent chain.
template <class T>
void wino_dw_finish(std::size_t o, std::size_t C, std::size_t M, std::size_t groups, const T* parts, T* dw) {
    constexpr std::size_t P = wino_points;
    constexpr const auto& G = wino_G;
    const std::size_t C4 = wino_dw_c4(C), gs = wino_dw_part_size(M, C);
    for (std::size_t c0 = 0; c0 < C; c0 += 4) {
        double m[4][6][6] = {};  // m[ci][i][j]: input channel c0 + ci, point i*6 + j
        for (std::size_t g = 0; g < groups; ++g)
            for (std::size_t p = 0; p < P; ++p) {
                const T* q = parts + g * gs + ((p * M + o) * C4 + c0) * 4;  // (4 channels, 4 lanes)
                for (std::size_t j = 0; j < 4; ++j)
                    for (std::size_t ci = 0; ci < 4; ++ci) m[ci][p / 6][p % 6] += static_cast<double>(q[ci * 4 + j]);
            }
        for (std::size_t ci = 0; ci < 4 && c0 + ci < C; ++ci) {
            double t[5][6];  // G^T m
            for (std::size_t a = 0; a < 5; ++a)
                for (std::size_t j = 0; j < 6; ++j) {
                    double s = 0;
                    for (std::size_t i = 0; i < 6; ++i) s += G[i][a] * m[ci][i][j];
                    t[a][j] = s;
                }
            for (std::size_t a = 0; a < 5; ++a)
                for (std::size_t b = 0; b < 5; ++b) {
                    double s = 0;
                    for (std::size_t j = 0; j < 6; ++j) s += t[a][j] * G[j][b];
                    dw[(o * C + c0 + ci) * 25 + a * 5 + b] += static_cast<T>(s);
                }
        }
    }
}

/// dw (M, C, 5, 5) += the weight gradient of the stride-1 5x5 convolution of x (n, C, H, W) with
/// padding pad, given dy (n, M, OH, OW), OH = H + 2*pad - 4 (>= 1), OW likewise. One task per
/// group of L images, then one per output channel for the sums and G^T m G.
template <class T>
void winograd_dw_batch(std::size_t C, std::size_t H, std::size_t W, std::size_t pad, std::size_t M, std::size_t n,
                       const T* x, const T* dy, T* dw) {
    constexpr std::size_t L = xsimd::batch<T>::size;
    const wino_geometry q(H, W, pad);
    const std::size_t in_size = C * H * W, out_size = M * q.OH * q.OW;
    const std::size_t groups = (n + L - 1) / L, gs = wino_dw_part_size(M, C);
    T* parts = scratch<T, scratch_slot::wino_acc>(groups * gs);  // the caller's: the tasks share it
    default_pool().parallel_for(groups, [&](std::size_t g) {
        const std::size_t s0 = g * L;
        wino_dw_group(C, H, W, pad, M, x + s0 * in_size, dy + s0 * out_size, std::min(L, n - s0), parts + g * gs);
    });
    const T* pc = parts;
    default_pool().parallel_for(M, [&](std::size_t o) { wino_dw_finish(o, C, M, groups, pc, dw); });
}

}  // namespace cpu_detail
}  // namespace oar
