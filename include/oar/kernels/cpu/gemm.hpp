// CPU GEMM: C = alpha * op(A) * op(B) + beta * C, row-major, float (and double for checks).
// Goto-style: column blocks of NC, K blocks of KC, row blocks of MC; each MC x KC block of op(A)
// is packed into MR-row panels, and each KC x NR strip of op(B) is read in place when it is a
// full, row-contiguous strip, else packed into a zero-padded panel. The xsimd micro-kernel keeps
// MR x NR of C in registers (NR = two SIMD vectors: 10 x 32 floats with AVX-512, 6 x 16 with
// AVX2, the scalar batch elsewhere: xsimd picks the widest arch the compiler targets).
// Narrow products (N <= MR, as a classifier's 10 outputs) skip the NR-wide tiles: with op(A) = A^T
// the tiles compute C^T reading A's rows in place, with op(A) = A (K >= 32) dot products along K.
// Large products are split over the default thread pool by blocks of C rows or columns; every
// element of C is summed in the same order whatever the split, so results do not depend on the
// thread count. Pack buffers are thread-local and only grow: no allocation once warm.
#pragma once

#include <algorithm>  // std::fill, std::min
#include <cmath>      // std::fma: the narrow paths' scalar epilogues
#include <cstddef>    // std::size_t
#include <type_traits>  // std::integral_constant: compile-time row indices
#include <utility>      // std::index_sequence

#include "../../core/simd.hpp"  // xsimd::batch, fma

#include "../../config.hpp"             // OAR_ALWAYS_INLINE
#include "../../core/aligned.hpp"       // aligned_vector
#include "../../core/thread_pool.hpp"   // default_pool
#include "../dispatch.hpp"              // kernel, op::gemm
#include "scratch.hpp"                  // scratch, scratch_slot: the pack buffers

namespace oar {

namespace cpu_detail {

/// Rows of C per micro-tile: 2*MR accumulators plus the B row and a broadcast must fit the vector
/// registers (32 with AVX-512, 16 with AVX2 or fewer); 10 rows also tile the models' 20 and 100.
template <class T>
inline constexpr std::size_t gemm_mr = sizeof(xsimd::batch<T>) >= 64 ? 10 : 6;
inline constexpr std::size_t gemm_kc = 256;  // K per block: an MR x KC A panel and a KC x NR B strip fit L1
inline constexpr std::size_t gemm_mc = 120;  // rows per packed A block (MC x KC, in L2)
inline constexpr std::size_t gemm_nc = 4096; // columns per outer block

/// Columns of C per micro-tile: two SIMD vectors of T.
template <class T>
inline constexpr std::size_t gemm_nr = 2 * xsimd::batch<T>::size;

/// The epilogue of a full micro-tile, rows by compile-time index (a runtime row loop kept the
/// accumulators in memory: a store and a load each, much of a small-K tile): C(r, :) = fma(alpha,
/// acc(r, :), beta * C(r, :)), beta * C as the separate C = beta * C pass rounded it (Beta 0: zero,
/// C never read; 1: C; 2: any other beta; 3: alpha 1 and beta 0, C = acc).
template <int Beta, class V, class T, std::size_t... r>
OAR_ALWAYS_INLINE void tile_store(std::index_sequence<r...>, const V (&acc0)[sizeof...(r)],
                                  const V (&acc1)[sizeof...(r)], T alpha, T beta, T* c, std::size_t ldc) {
    constexpr std::size_t W = V::size;
    const V al(alpha), be(beta);
    if constexpr (Beta == 3) {  // alpha 1, beta 0: fma(1, acc, 0) is acc (but -0 stays -0)
        (void)al, (void)be;
        ((acc0[r].store_unaligned(c + r * ldc), acc1[r].store_unaligned(c + r * ldc + W)), ...);
    } else {
        const auto c_in = [&](const T* cp) {
            return Beta == 0 ? V(T(0)) : Beta == 1 ? V::load_unaligned(cp) : V::load_unaligned(cp) * be;
        };
        ((xsimd::fma(al, acc0[r], c_in(c + r * ldc)).store_unaligned(c + r * ldc),
          xsimd::fma(al, acc1[r], c_in(c + r * ldc + W)).store_unaligned(c + r * ldc + W)),
         ...);
    }
}

/// The same for a tile of `cols` < NR columns, from the accumulators stored in acc (R, NR).
template <class T>
void tile_store_edge(std::size_t R, const T* acc, T alpha, T beta, T* c, std::size_t ldc, std::size_t cols) {
    using V = xsimd::batch<T>;
    constexpr std::size_t W = V::size;
    const V al(alpha), be(beta);
    for (std::size_t r = 0; r < R; ++r) {
        alignas(64) T tmp[2 * W];
        T* cp = c + r * ldc;
        for (std::size_t j = 0; j < cols; ++j) tmp[j] = beta == T(0) ? T(0) : cp[j];
        for (std::size_t h = 0; h < 2; ++h) {
            const V cv = V::load_aligned(tmp + h * W);
            xsimd::fma(al, V::load_aligned(acc + r * 2 * W + h * W), beta == T(0) || beta == T(1) ? cv : cv * be)
                .store_aligned(tmp + h * W);
        }
        for (std::size_t j = 0; j < cols; ++j) cp[j] = tmp[j];
    }
}

/// Stores R rows of accumulators into acc (R, NR).
template <class V, class T, std::size_t... r>
OAR_ALWAYS_INLINE void tile_spill(std::index_sequence<r...>, const V (&acc0)[sizeof...(r)],
                                  const V (&acc1)[sizeof...(r)], T* acc) {
    ((acc0[r].store_aligned(acc + r * 2 * V::size), acc1[r].store_aligned(acc + r * 2 * V::size + V::size)), ...);
}

/// acc(R x NR) = sum_k apanel(k, r) * b(k, :), apanel(k, r) = a[k*MR + r], b(k, :) = b[k*ldb ..+ NR);
/// then C(r, j) = fma(alpha, acc(r, j), beta * C(r, j)) for r < R, j < cols (the same rounding on
/// edges): beta 1 adds to C, beta 0 overwrites it without reading it (NaNs in C do not propagate).
template <std::size_t R, class T>
OAR_ALWAYS_INLINE void micro_tile(std::size_t kc, T alpha, const T* a, const T* b, std::size_t ldb, T beta, T* c,
                                  std::size_t ldc, std::size_t cols) {
    using V = xsimd::batch<T>;
    constexpr std::size_t W = V::size, MR = gemm_mr<T>;
    V acc0[R], acc1[R];
    for (std::size_t r = 0; r < R; ++r) acc0[r] = acc1[r] = V(T(0));
    for (std::size_t k = 0; k < kc; ++k) {
        const V b0 = V::load_unaligned(b + k * ldb);
        const V b1 = V::load_unaligned(b + k * ldb + W);
        for (std::size_t r = 0; r < R; ++r) {
            const V av(a[k * MR + r]);
            acc0[r] = xsimd::fma(av, b0, acc0[r]);
            acc1[r] = xsimd::fma(av, b1, acc1[r]);
        }
    }
    constexpr auto rows = std::make_index_sequence<R>{};
    if (cols == 2 * W) {
        if (beta == T(0) && alpha == T(1))
            tile_store<3>(rows, acc0, acc1, alpha, beta, c, ldc);
        else if (beta == T(0))
            tile_store<0>(rows, acc0, acc1, alpha, beta, c, ldc);  // the bits of the old C = 0 pass
        else if (beta == T(1))
            tile_store<1>(rows, acc0, acc1, alpha, beta, c, ldc);
        else
            tile_store<2>(rows, acc0, acc1, alpha, beta, c, ldc);
    } else {
        alignas(64) T acc[R * 2 * W];
        tile_spill(rows, acc0, acc1, acc);
        tile_store_edge(R, acc, alpha, beta, c, ldc, cols);
    }
}

template <class T>
void micro_tile_rows(std::size_t rows, std::size_t kc, T alpha, const T* a, const T* b, std::size_t ldb, T beta, T* c,
                     std::size_t ldc, std::size_t cols) {
    static_assert(gemm_mr<T> <= 10, "oar: micro_tile_rows dispatches rows 1..10");
    switch (rows) {
        case 10: return micro_tile<10>(kc, alpha, a, b, ldb, beta, c, ldc, cols);
        case 9: return micro_tile<9>(kc, alpha, a, b, ldb, beta, c, ldc, cols);
        case 8: return micro_tile<8>(kc, alpha, a, b, ldb, beta, c, ldc, cols);
        case 7: return micro_tile<7>(kc, alpha, a, b, ldb, beta, c, ldc, cols);
        case 6: return micro_tile<6>(kc, alpha, a, b, ldb, beta, c, ldc, cols);
        case 5: return micro_tile<5>(kc, alpha, a, b, ldb, beta, c, ldc, cols);
        case 4: return micro_tile<4>(kc, alpha, a, b, ldb, beta, c, ldc, cols);
        case 3: return micro_tile<3>(kc, alpha, a, b, ldb, beta, c, ldc, cols);
        case 2: return micro_tile<2>(kc, alpha, a, b, ldb, beta, c, ldc, cols);
        default: return micro_tile<1>(kc, alpha, a, b, ldb, beta, c, ldc, cols);
    }
}


/// Packs op(A)(i0.., k0..) of mc x kc (A(i,k) = a[i*ai + k*ak]) into MR-row panels:
/// out[p*kc*MR + k*MR + r] = A(i0 + p*MR + r, k0 + k), rows past mc zero.
template <class T>
void pack_a(std::size_t mc, std::size_t kc, const T* a, std::size_t ai, std::size_t ak, T* out) {
    constexpr std::size_t MR = gemm_mr<T>;
    for (std::size_t p = 0; p < mc; p += MR) {
        const std::size_t rows = std::min(MR, mc - p);
        T* panel = out + p * kc;  // (kc, MR)
        if (ak == 1) {
            for (std::size_t r = 0; r < rows; ++r) {
                const T* src = a + (p + r) * ai;
                for (std::size_t k = 0; k < kc; ++k) panel[k * MR + r] = src[k];
            }
        } else {
            for (std::size_t k = 0; k < kc; ++k) {
                const T* src = a + k * ak + p * ai;
                for (std::size_t r = 0; r < rows; ++r) panel[k * MR + r] = src[r * ai];
            }
        }
        if (rows < MR)
            for (std::size_t k = 0; k < kc; ++k)
                for (std::size_t r = rows; r < MR; ++r) panel[k * MR + r] = T(0);
    }
}

/// Packs a kc x cols strip of op(B) (B(k,j) = b[k*bk + j*bj]) into a zero-padded kc x NR panel.
template <class T>
void pack_b(std::size_t kc, std::size_t cols, const T* b, std::size_t bk, std::size_t bj, T* panel) {
    constexpr std::size_t NR = gemm_nr<T>;
    if (bj == 1) {
        for (std::size_t k = 0; k < kc; ++k) {
            T* row = panel + k * NR;
            const T* src = b + k * bk;
            for (std::size_t j = 0; j < cols; ++j) row[j] = src[j];
            for (std::size_t j = cols; j < NR; ++j) row[j] = T(0);
        }
    } else {
        if (cols < NR)
            for (std::size_t k = 0; k < kc; ++k)
                for (std::size_t j = cols; j < NR; ++j) panel[k * NR + j] = T(0);
        for (std::size_t j = 0; j < cols; ++j) {  // a transposed B: read its rows contiguously
            const T* src = b + j * bj;
            for (std::size_t k = 0; k < kc; ++k) panel[k * NR + j] = src[k * bk];
        }
    }
}

/// Packs a kc x n block of a row-contiguous B (B(k,j) = b[k*bk + j]) into zero-padded kc x NR
/// panels (panel p at out + p*kc*NR), as pack_b does strip by strip, but reading each row of B once
/// from start to end (strips of a wide B are 2 KB-strided and prefetch poorly).
template <class T>
void pack_b_rows(std::size_t kc, std::size_t n, const T* b, std::size_t bk, T* out) {
    using V = xsimd::batch<T>;
    constexpr std::size_t NR = gemm_nr<T>, W = V::size;
    const std::size_t full = n / NR, rest = n - full * NR;
    for (std::size_t k = 0; k < kc; ++k) {
        const T* src = b + k * bk;
        for (std::size_t p = 0; p < full; ++p)
            for (std::size_t h = 0; h < NR; h += W)
                V::load_unaligned(src + p * NR + h).store_aligned(out + (p * kc + k) * NR + h);
        if (rest) {
            T* row = out + (full * kc + k) * NR;
            for (std::size_t j = 0; j < rest; ++j) row[j] = src[full * NR + j];
            for (std::size_t j = rest; j < NR; ++j) row[j] = T(0);
        }
    }
}

/// Up to this many rows of C, full strips of a row-contiguous B are read in place, not packed.
inline constexpr std::size_t gemm_direct_max_m = 32;

/// The single-threaded blocked product on one block of C: C += alpha * op(A) op(B) (beta applied).
/// A(i,k) = a[i*ai + k*ak], B(k,j) = b[k*bk + j*bj].
template <class T>
void gemm_block(std::size_t M, std::size_t N, std::size_t K, T alpha, const T* a, std::size_t ai, std::size_t ak,
                const T* b, std::size_t bk, std::size_t bj, T beta, T* c, std::size_t ldc) {
    constexpr std::size_t NR = gemm_nr<T>, MR = gemm_mr<T>, KC = gemm_kc, MC = gemm_mc, NC = gemm_nc;
    if (K == 0 || alpha == T(0)) {  // C = beta * C
        for (std::size_t i = 0; i < M; ++i) {
            T* ci = c + i * ldc;
            if (beta == T(0))
                std::fill(ci, ci + N, T(0));
            else if (beta != T(1))
                for (std::size_t j = 0; j < N; ++j) ci[j] *= beta;
        }
        return;
    }
    T* apack = scratch<T, scratch_slot::gemm_a>(MC * KC);
    for (std::size_t jc = 0; jc < N; jc += NC) {
        const std::size_t nc = std::min(NC, N - jc);
        // Strips read in place: full NR-wide strips of a row-contiguous B when few rows of A reuse
        // them (packing would not pay; large strided strips also alias in L1); the rest is packed.
        const std::size_t direct = bj == 1 && M <= gemm_direct_max_m ? nc / NR * NR : 0;
        const std::size_t packed_panels = (nc - direct + NR - 1) / NR;
        T* bpack = packed_panels ? scratch<T, scratch_slot::gemm_b>(packed_panels * KC * NR) : nullptr;
        for (std::size_t pc = 0; pc < K; pc += KC) {
            const std::size_t kc = std::min(KC, K - pc);
            const T bk_beta = pc == 0 ? beta : T(1);  // the first K block applies beta, later ones add
            if (bj == 1 && packed_panels > 1) {  // row by row: B read in order, not strip by strip
                pack_b_rows(kc, nc - direct, b + pc * bk + jc + direct, bk, bpack);
            } else {
                for (std::size_t p = 0; p < packed_panels; ++p) {
                    const std::size_t j0 = jc + direct + p * NR;
                    pack_b(kc, std::min(NR, N - j0), b + pc * bk + j0 * bj, bk, bj, bpack + p * kc * NR);
                }
            }
            for (std::size_t ic = 0; ic < M; ic += MC) {
                const std::size_t mc = std::min(MC, M - ic);
                pack_a(mc, kc, a + ic * ai + pc * ak, ai, ak, apack);
                for (std::size_t j0 = 0; j0 < nc; j0 += NR) {
                    const bool in_place = j0 < direct;
                    const T* strip = in_place ? b + pc * bk + jc + j0 : bpack + (j0 - direct) / NR * kc * NR;
                    const std::size_t ldb = in_place ? bk : NR;
                    const std::size_t cols = std::min(NR, nc - j0);
                    T* cblock = c + ic * ldc + jc + j0;
                    std::size_t i = 0;
                    for (; i + MR <= mc; i += MR)
                        micro_tile<MR>(kc, alpha, apack + i * kc, strip, ldb, bk_beta, cblock + i * ldc, ldc, cols);
                    if (i < mc)
                        micro_tile_rows(mc - i, kc, alpha, apack + i * kc, strip, ldb, bk_beta, cblock + i * ldc, ldc,
                                        cols);
                }
            }
        }
    }
}

/// Narrow products (N <= MR columns, as a classifier's 10 outputs) waste most of an NR-wide tile,
/// so they take one of two shapes of their own.
///
/// op(A) = A^T stored (K, M), its rows contiguous along i: C^T (N, M) = op(B)^T (N, K) x A (K, M)
/// is the micro-tile's product with op(B)^T packed as one MR-row panel and A's rows read in place
/// (NR values of i per tile; the last partial tile packed). Each tile's N x NR sums land in a small
/// buffer and go to C transposed, with alpha and beta applied there. Column range [i0, i1) of C^T.
template <class T>
void gemm_narrow_at(std::size_t i0, std::size_t i1, std::size_t N, std::size_t K, T alpha, const T* a,
                    std::size_t lda, const T* b, std::size_t bk, std::size_t bj, T beta, T* c, std::size_t ldc) {
    constexpr std::size_t NR = gemm_nr<T>;
    T* bpanel = scratch<T, scratch_slot::gemm_a>(K * gemm_mr<T>);  // (K, MR): bpanel[k*MR + j] = op(B)(k, j)
    pack_a(N, K, b, bj, bk, bpanel);
    alignas(64) T tmp[gemm_mr<T> * NR];  // (N, NR): C^T of one tile
    for (std::size_t i = i0; i < i1; i += NR) {
        const std::size_t cols = std::min(NR, i1 - i);
        const T* strip = a + i;
        std::size_t ld = lda;
        if (cols < NR) {  // the partial tile: a zero-padded copy instead of reading past row ends
            T* p = scratch<T, scratch_slot::gemm_b>(K * NR);
            pack_b(K, cols, a + i, lda, std::size_t{1}, p);
            strip = p;
            ld = NR;
        }
        micro_tile_rows(N, K, T(1), bpanel, strip, ld, T(0), tmp, NR, NR);
        for (std::size_t r = 0; r < cols; ++r) {
            T* cr = c + (i + r) * ldc;
            for (std::size_t j = 0; j < N; ++j) {
                const T cv = beta == T(0) ? T(0) : beta == T(1) ? cr[j] : cr[j] * beta;
                cr[j] = std::fma(alpha, tmp[j * NR + r], cv);
            }
        }
    }
}

/// Rows and columns of C per dot-product tile: RA x RB accumulators plus RA + 1 loads in registers.
template <class T>
inline constexpr std::size_t gemm_dot_ra = sizeof(xsimd::batch<T>) >= 64 ? 3 : 1;
template <class T>
inline constexpr std::size_t gemm_dot_rb = sizeof(xsimd::batch<T>) >= 64 ? 5 : 3;

/// C(i, j) = alpha * sum_k A(i, k) Bt(j, k) + beta * C(i, j) for RA x RB entries, A(i, k) = a[i*lda + k],
/// Bt(j, k) = bt[j*ldbt + k] (both contiguous along k): SIMD partial sums over k, then one
/// horizontal sum and the scalar rest of K.
template <std::size_t RA, std::size_t RB, class T>
void dot_tile(std::size_t K, T alpha, const T* a, std::size_t lda, const T* bt, std::size_t ldbt, T beta, T* c,
              std::size_t ldc) {
    using V = xsimd::batch<T>;
    constexpr std::size_t W = V::size;
    V acc[RA][RB];
    for (std::size_t r = 0; r < RA; ++r)
        for (std::size_t q = 0; q < RB; ++q) acc[r][q] = V(T(0));
    const std::size_t kv = K / W * W;
    if (kv) {
        // Software-pipelined: the next step's vectors are loaded while this step's are used, so
        // they reach the FMAs as registers (a load feeding the FMAs directly is folded into each).
        V av[RA], bv[RB];
        for (std::size_t r = 0; r < RA; ++r) av[r] = V::load_unaligned(a + r * lda);
        for (std::size_t q = 0; q < RB; ++q) bv[q] = V::load_unaligned(bt + q * ldbt);
        for (std::size_t k = W; k < kv; k += W) {
            V an[RA], bn[RB];
            for (std::size_t r = 0; r < RA; ++r) an[r] = V::load_unaligned(a + r * lda + k);
            for (std::size_t q = 0; q < RB; ++q) bn[q] = V::load_unaligned(bt + q * ldbt + k);
            for (std::size_t r = 0; r < RA; ++r)
                for (std::size_t q = 0; q < RB; ++q) acc[r][q] = xsimd::fma(av[r], bv[q], acc[r][q]);
            for (std::size_t r = 0; r < RA; ++r) av[r] = an[r];
            for (std::size_t q = 0; q < RB; ++q) bv[q] = bn[q];
        }
        for (std::size_t r = 0; r < RA; ++r)
            for (std::size_t q = 0; q < RB; ++q) acc[r][q] = xsimd::fma(av[r], bv[q], acc[r][q]);
    }
    for (std::size_t r = 0; r < RA; ++r)
        for (std::size_t q = 0; q < RB; ++q) {
            T sum = xsimd::hadd(acc[r][q]);
            for (std::size_t k = kv; k < K; ++k) sum = std::fma(a[r * lda + k], bt[q * ldbt + k], sum);
            T& cv = c[r * ldc + q];
            cv = std::fma(alpha, sum, beta == T(0) ? T(0) : beta == T(1) ? cv : cv * beta);
        }
}

template <std::size_t RA, class T>
void dot_row_block(std::size_t N, std::size_t K, T alpha, const T* a, std::size_t lda, const T* bt, std::size_t ldbt,
                   T beta, T* c, std::size_t ldc) {
    constexpr std::size_t RB = gemm_dot_rb<T>;
    std::size_t j = 0;
    for (; j + RB <= N; j += RB) dot_tile<RA, RB>(K, alpha, a, lda, bt + j * ldbt, ldbt, beta, c + j, ldc);
    for (; j < N; ++j) dot_tile<RA, 1>(K, alpha, a, lda, bt + j * ldbt, ldbt, beta, c + j, ldc);
}

/// op(A) = A stored (M, K), rows contiguous along k: C(i, j) as dot products of A's rows with op(B)'s
/// columns, which are B's rows when op(B) = B^T and are otherwise copied out once (N x K, small).
/// Rows [i0, i1) of C.
template <class T>
void gemm_narrow_dot(std::size_t i0, std::size_t i1, std::size_t N, std::size_t K, T alpha, const T* a,
                     std::size_t lda, const T* b, std::size_t bk, std::size_t bj, T beta, T* c, std::size_t ldc) {
    constexpr std::size_t RA = gemm_dot_ra<T>, W = xsimd::batch<T>::size;
    const T* bt = b;  // Bt(j, k) = bt[j*ldbt + k]
    std::size_t ldbt = bj;
    if (bk != 1) {
        ldbt = (K + W - 1) / W * W + W;  // padded: rows apart from A's in the L1 sets
        T* p = scratch<T, scratch_slot::gemm_b>(N * ldbt);
        for (std::size_t j = 0; j < N; ++j) {  // each row of Bt written in order (faster than by k)
            T* dst = p + j * ldbt;
            const T* src = b + j * bj;
            for (std::size_t k = 0; k < K; ++k) dst[k] = src[k * bk];
        }
        bt = p;
    }
    std::size_t i = i0;
    for (; i + RA <= i1; i += RA) dot_row_block<RA>(N, K, alpha, a + i * lda, lda, bt, ldbt, beta, c + i * ldc, ldc);
    for (; i < i1; ++i) dot_row_block<1>(N, K, alpha, a + i * lda, lda, bt, ldbt, beta, c + i * ldc, ldc);
}

/// From this K on, a narrow product with op(A) = A takes dot products (below it, the packed tiles).
inline constexpr std::size_t gemm_dot_min_k = 32;

/// Multiply-adds per thread below which a product stays on one thread (a wake-up costs ~10 us).
inline constexpr double gemm_parallel_min_madds = 1.0e6;

}  // namespace cpu_detail

/// kernel<op::gemm, cpu>::run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
///   op(A): (M,K), op(B): (K,N), C: (M,N); lda/ldb/ldc are the row strides of A, B, C as stored.
///   beta == 0 overwrites C (NaNs in C do not propagate), as in BLAS.
template <class T>
struct kernel<op::gemm, basic_cpu<T>> {
    static void run(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, T alpha, const T* A,
                    std::size_t lda, const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc) {
        using namespace cpu_detail;
        constexpr std::size_t NR = gemm_nr<T>, MR = gemm_mr<T>;
        if (M == 0 || N == 0) return;
        const std::size_t ai = ta == Trans::no ? lda : 1, ak = ta == Trans::no ? 1 : lda;  // A(i,k) = A[i*ai + k*ak]
        const std::size_t bk = tb == Trans::no ? ldb : 1, bj = tb == Trans::no ? 1 : ldb;  // B(k,j) = B[k*bk + j*bj]

        ThreadPool* pool = ThreadPool::in_task() ? nullptr : &default_pool();
        const double madds = double(M) * double(N) * double(K);
        std::size_t parts = 1;
        if (pool && pool->size() > 1 && madds >= 2 * gemm_parallel_min_madds)
            parts = std::min<std::size_t>(pool->size(), static_cast<std::size_t>(madds / gemm_parallel_min_madds));
        if (N <= MR && K > 0 && alpha != T(0) && (ak != 1 || K >= gemm_dot_min_k)) {
            // Narrow C: split its rows over the threads in whole tiles (NR rows of C^T, or RA rows).
            const std::size_t unit = ak != 1 ? NR : gemm_dot_ra<T>, units = (M + unit - 1) / unit;
            parts = std::min(parts, units);
            const auto rows = [&](std::size_t t) {
                const std::size_t i0 = std::min(M, ThreadPool::chunk_begin(units, parts, t) * unit),
                                  i1 = std::min(M, ThreadPool::chunk_begin(units, parts, t + 1) * unit);
                if (ak != 1)
                    gemm_narrow_at(i0, i1, N, K, alpha, A, ak, B, bk, bj, beta, C, ldc);
                else
                    gemm_narrow_dot(i0, i1, N, K, alpha, A, ai, B, bk, bj, beta, C, ldc);
            };
            if (parts == 1)
                rows(0);
            else
                pool->parallel_for(parts, rows);
            return;
        }
        const std::size_t col_panels = (N + NR - 1) / NR, row_panels = (M + MR - 1) / MR;
        if (parts > 1 && std::max(col_panels, row_panels) < 2) parts = 1;
        if (parts == 1) {
            gemm_block(M, N, K, alpha, A, ai, ak, B, bk, bj, beta, C, ldc);
            return;
        }
        // Split C into `parts` blocks of whole micro-tiles along its longer side (in tiles).
        const bool by_cols = col_panels >= row_panels;
        const std::size_t units = by_cols ? col_panels : row_panels, unit = by_cols ? NR : MR;
        parts = std::min(parts, units);
        pool->parallel_for(parts, [&](std::size_t t) {
            const std::size_t u0 = ThreadPool::chunk_begin(units, parts, t), u1 = ThreadPool::chunk_begin(units, parts, t + 1);
            if (by_cols) {
                const std::size_t j0 = u0 * NR, j1 = std::min(N, u1 * unit);
                gemm_block(M, j1 - j0, K, alpha, A, ai, ak, B + j0 * bj, bk, bj, beta, C + j0, ldc);
            } else {
                const std::size_t i0 = u0 * MR, i1 = std::min(M, u1 * unit);
                gemm_block(i1 - i0, N, K, alpha, A + i0 * ai, ai, ak, B, bk, bj, beta, C + i0 * ldc, ldc);
            }
        });
    }
};

/// Convenience: C = alpha * op(A) * op(B) + beta * C with packed (contiguous) operands.
template <Backend B = cpu, class T = typename B::value_type>
void gemm(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, T alpha, const T* A, const T* Bm, T beta,
          T* C) {
    kernel<op::gemm, B>::run(ta, tb, M, N, K, alpha, A, ta == Trans::no ? K : M, Bm, tb == Trans::no ? N : K, beta, C,
                             N);
}

}  // namespace oar
