// CPU bf16 GEMM with fp32 accumulation: C = alpha * op(A) op(B) + beta * C, A and B bfloat16
// (core/bf16.hpp), C float, row-major, the arguments of kernel<op::gemm, cpu>. Not part of oar.hpp:
// only code that uses bf16 mixed precision includes it. Also the GEMM of the bf16_mixed policy
// (core/precision.hpp: precision_gemm<bf16_mixed>, float operands rounded to bf16 here).
//
// Three paths, chosen at run time by the active ISA (core/cpu_isa.hpp, OAR_ISA):
// - amx: AMX tiles (tdpbf16ps), 32 x 32 blocks of C in four 16 x 16 fp32 tiles, 32 values of K per
//   step (isa/gemm_bf16_amx.inc; Linux's permission for the tile state is asked by cpu_supports);
// - avx512bf16: vdpbf16ps, a 10 x 32 register tile of C, K taken in pairs (isa/gemm_bf16_avx512.inc);
// - avx512, avx2, sse2: op(A) and op(B) widened to float (exact) and multiplied by the fp32 GEMM
//   (kernels/cpu/gemm.hpp) at that width. A product of two bf16 values is exact in fp32, so every
//   path computes the exact products of the bf16 inputs and differs from the others only in the
//   order and grouping of the fp32 sums, and in that vdpbf16ps and AMX treat subnormal inputs and
//   results as zero (the fp32 path keeps them).
// Each path sums every element of C in an order fixed by the shapes alone (K blocks of 256, 1024 on
// AMX, in order, each added to C with beta applied by the first; on AMX, with alpha 1 and beta 0 or
// 1, the whole 32 x 32 blocks of C, at multiples of 32 from C's origin, sum onto C in the tiles),
// so results do not depend on the thread count. The AMX and AVX512-BF16 bodies read bf16 inputs or float ones, which they round to bf16
// while packing (the bf16_mixed policy's products: no rounded copy of either operand).
#pragma once

#include <algorithm>  // std::min, std::max, std::clamp
#include <array>      // std::array: the weight-gradient tiles
#include <bit>        // std::bit_cast
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint16_t, std::int32_t
#include <cstring>    // std::memcpy
#include <utility>    // std::index_sequence

#include "../../config.hpp"            // OAR_ISA_X86, OAR_ISA_COMPILED
#include "../../core/bf16.hpp"         // bf16, to_float
#include "../../core/cpu_isa.hpp"      // active_cpu_isa
#include "../../core/precision.hpp"    // bf16_mixed, precision_gemm
#include "../../core/thread_pool.hpp"  // default_pool
#include "gemm.hpp"                    // kernel<op::gemm, cpu>: the fp32 path
#include "scratch.hpp"                 // scratch, scratch_slot

#if OAR_ISA_X86
#include <immintrin.h>  // _mm512_dpbf16_ps, the AMX tile intrinsics (inside their target regions)
#endif

namespace oar::cpu_detail {

/// K per block on the AVX512-BF16 path (even, a whole number of K pairs).
inline constexpr std::size_t gemm_bf16_kc = 256;
/// K per block on the AMX path (a multiple of 32, the tile step): C stays in the tiles for a whole
/// block, so the block is long enough to hold the K of most layers whole.
inline constexpr std::size_t gemm_bf16_amx_kc = 1024;
/// Rows of C per block of packed op(A) on the bf16 paths (a multiple of the AVX512-BF16 tile's 10
/// rows and of the AMX block's 32 rows).
inline constexpr std::size_t gemm_bf16_mc = 160;
/// Columns of C per packed strip of op(B) (two zmm of fp32).
inline constexpr std::size_t gemm_bf16_nr = 32;
/// The AVX512-BF16 weight-gradient tile of conv_bf16.hpp (isa/conv_bf16_dw.inc): rows of dw^T
/// (input channel and window offset) and output channels (two zmm of fp32) per register tile, at
/// most (a block of fewer channels takes a narrower tile).
inline constexpr std::size_t conv_bf16_dw_rows = 12, conv_bf16_dw_cols = 32;
/// The shapes of conv_bf16.hpp's packed weight-gradient operands (conv2d_bf16_dw): images of C x H x W
/// with padding pad copied onto the row pitch Wp (planes of `plane` values, xs values a sample), dy of
/// out_c x OH x OW as `pairs` pair words of wide positions in nb blocks of conv_bf16_dw_cols channels.
struct conv_bf16_dw_layout {
    std::size_t C, H, W, pad, Wp, plane, xs, out_c, OH, OW, pairs, nb;
};

/// The bf16 bits a bf16 body reads for one input: a stored bf16 as it is, a float rounded as
/// to_bf16 rounds it (nearest, ties to even; NaN quieted), branch-free so packing loops vectorise.
constexpr std::uint16_t bf16_bits(bf16 x) { return x.bits; }
constexpr std::uint16_t bf16_bits(float x) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const std::uint32_t nan = (u >> 16) | 0x0040u;
    return static_cast<std::uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/// Two inputs' bf16 bits as one 32-bit word, lo in the low half: the pair as it lies in memory (lo
/// at the lower address) in the packed layouts, so packing stores whole words, lane by lane.
template <class In>
constexpr std::uint32_t bf16_pair(In lo, In hi) {
    return std::uint32_t(bf16_bits(lo)) | (std::uint32_t(bf16_bits(hi)) << 16);
}
/// A 32-bit word that may alias the packed uint16_t buffers (the words bf16_pair makes).
typedef std::uint32_t bf16_word __attribute__((may_alias));

/// The fp32 path: op(A) and op(B) widened to float, then the fp32 GEMM at the active vector ISA.
inline void gemm_bf16_widened(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha,
                              const bf16* A, std::size_t lda, const bf16* B, std::size_t ldb, float beta, float* C,
                              std::size_t ldc) {
    const std::size_t ar = ta == Trans::no ? M : K, ac = ta == Trans::no ? K : M;  // A as stored
    const std::size_t br = tb == Trans::no ? K : N, bc = tb == Trans::no ? N : K;
    float* af = scratch<float, scratch_slot::bf16_a>(ar * ac);
    float* bf = scratch<float, scratch_slot::bf16_b>(br * bc);
    for (std::size_t r = 0; r < ar; ++r) to_float(A + r * lda, af + r * ac, ac);
    for (std::size_t r = 0; r < br; ++r) to_float(B + r * ldb, bf + r * bc, bc);
    kernel<op::gemm, cpu>::run(ta, tb, M, N, K, alpha, af, ac, bf, bc, beta, C, ldc);
}

}  // namespace oar::cpu_detail

#if OAR_ISA_X86 && OAR_ISA_COMPILED(2)  // the bf16 levels go with avx512 (config.hpp: OAR_ISA_LEVELS)
// The two bodies, each under its own target whatever the user's -march: functions compiled here may
// use the instructions; dispatch (below) calls them only where cpu_supports says they run.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma")
#if !defined(__CUDACC__)  // nvcc's front end does not know this pragma
#pragma GCC optimize("O3")
#endif
#endif
namespace oar::cpu_detail::bf16_avx512 {
#include "isa/gemm_bf16_avx512.inc"  // gemm_block
// g++ 12 takes the undefined upper half in its _mm512_castsi512_si256 (a register's low half, no
// instruction) for a maybe-uninitialized value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "isa/conv_bf16_dw.inc"      // dw_tile_rows: conv_bf16.hpp's weight gradient
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}  // namespace oar::cpu_detail::bf16_avx512
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma")
#if !defined(__CUDACC__)
#pragma GCC optimize("O3")
#endif
#endif
namespace oar::cpu_detail::bf16_amx {
#include "isa/gemm_bf16_amx.inc"  // gemm_block
}  // namespace oar::cpu_detail::bf16_amx
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

namespace oar {

namespace cpu_detail {
/// Multiply-adds per thread below which a bf16 product stays on one thread.
inline constexpr double gemm_bf16_parallel_min_madds = 1.0e6;

/// Splits C over the default pool in whole units (unit x unit blocks of C: NR columns or `rows`
/// rows) and runs block(M', N', A', B', C', j0) on each part, j0 its first column.
template <class In, class Block>
void gemm_bf16_split(std::size_t M, std::size_t N, std::size_t K, std::size_t row_unit, const In* A, std::size_t ai,
                     const In* B, std::size_t bj, float* C, std::size_t ldc, Block&& block) {
    ThreadPool* pool = ThreadPool::in_task() ? nullptr : &default_pool();
    const double madds = double(M) * double(N) * double(K);
    std::size_t parts = 1;
    if (pool && pool->size() > 1 && madds >= 2 * gemm_bf16_parallel_min_madds)
        parts = std::min<std::size_t>(pool->size(), static_cast<std::size_t>(madds / gemm_bf16_parallel_min_madds));
    const std::size_t col_units = (N + gemm_bf16_nr - 1) / gemm_bf16_nr, row_units = (M + row_unit - 1) / row_unit;
    const bool by_cols = col_units >= row_units;
    const std::size_t units = by_cols ? col_units : row_units, unit = by_cols ? gemm_bf16_nr : row_unit;
    parts = std::min(parts, units);
    if (parts <= 1) {
        block(M, N, A, B, C, std::size_t(0));
        return;
    }
    pool->parallel_for(parts, [&](std::size_t t) {
        const std::size_t u0 = ThreadPool::chunk_begin(units, parts, t), u1 = ThreadPool::chunk_begin(units, parts, t + 1);
        if (by_cols) {
            const std::size_t j0 = u0 * unit, j1 = std::min(N, u1 * unit);
            block(M, j1 - j0, A, B + j0 * bj, C + j0, j0);
        } else {
            const std::size_t i0 = u0 * unit, i1 = std::min(M, u1 * unit);
            block(i1 - i0, N, A + i0 * ai, B, C + i0 * ldc, std::size_t(0));
        }
    });
}

#if OAR_ISA_X86 && OAR_ISA_COMPILED(2)
/// C = alpha * op(A) op(B) + beta * C on the bf16 units of `isa` (amx or avx512_bf16), split over
/// the default pool; In is bf16, or float rounded to bf16 while packing (no rounded copy made).
/// With `pre` (bf16_pack_b_whole's copy of op(B) for `isa`) B is read from there, not packed.
template <class In>
void gemm_bf16_units(cpu_isa isa, Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha,
                     const In* A, std::size_t lda, const In* B, std::size_t ldb, float beta, float* C,
                     std::size_t ldc, const std::uint16_t* pre = nullptr) {
    const std::size_t ai = ta == Trans::no ? lda : 1, ak = ta == Trans::no ? 1 : lda;
    const std::size_t bk = tb == Trans::no ? ldb : 1, bj = tb == Trans::no ? 1 : ldb;
    const std::size_t strips = (N + gemm_bf16_nr - 1) / gemm_bf16_nr;
    if (isa == cpu_isa::amx)
        gemm_bf16_split(M, N, K, 32, A, ai, B, bj, C, ldc,
                        [&](std::size_t m, std::size_t n, const In* a, const In* b, float* c, std::size_t j0) {
                            bf16_amx::gemm_block_from(m, n, K, alpha, a, ai, ak, b, bk, bj, beta, c, ldc, pre,
                                                      j0 / gemm_bf16_nr, strips);
                        });
    else
        gemm_bf16_split(M, N, K, 10, A, ai, B, bj, C, ldc,
                        [&](std::size_t m, std::size_t n, const In* a, const In* b, float* c, std::size_t j0) {
                            bf16_avx512::gemm_block_from(m, n, K, alpha, a, ai, ak, b, bk, bj, beta, c, ldc, pre,
                                                         j0 / gemm_bf16_nr, strips);
                        });
}

/// Values of the whole of op(B) (K x N) packed for the bf16 units of `isa` (bf16_pack_b_whole).
inline std::size_t bf16_packed_b_size(cpu_isa isa, std::size_t K, std::size_t N) {
    return isa == cpu_isa::amx ? bf16_amx::packed_b_size(K, N) : bf16_avx512::packed_b_size(K, N);
}

/// Packs the whole of op(B) (K x N; B(k, j) = B[k*ldb + j] untransposed, B[j*ldb + k] transposed)
/// as gemm_bf16_units on `isa` packs it block by block, for its `pre`.
template <class In>
void bf16_pack_b_whole(cpu_isa isa, Trans tb, std::size_t K, std::size_t N, const In* B, std::size_t ldb,
                       std::uint16_t* out) {
    const std::size_t bk = tb == Trans::no ? ldb : 1, bj = tb == Trans::no ? 1 : ldb;
    if (isa == cpu_isa::amx)
        bf16_amx::pack_b_whole(K, N, B, bk, bj, out);
    else
        bf16_avx512::pack_b_whole(K, N, B, bk, bj, out);
}
#endif
}  // namespace cpu_detail

/// C = alpha * op(A) op(B) + beta * C with A, B bf16 and C float, summed in fp32. op(A): (M, K),
/// op(B): (K, N), C: (M, N); lda/ldb/ldc are the row strides of A, B, C as stored. beta == 0
/// overwrites C (NaNs in C do not propagate), as in BLAS; alpha == 0 or K == 0 only scales C.
inline void gemm_bf16(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha, const bf16* A,
                      std::size_t lda, const bf16* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0 || alpha == 0.0f) {  // C = beta * C, A and B not read
        for (std::size_t i = 0; i < M; ++i)
            for (std::size_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : C[i * ldc + j] * beta;
        return;
    }
    const cpu_isa isa = active_cpu_isa();
#if OAR_ISA_X86 && OAR_ISA_COMPILED(2)
    if (isa == cpu_isa::avx512_bf16 || isa == cpu_isa::amx) {
        cpu_detail::gemm_bf16_units(isa, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#endif
    (void)isa;
    cpu_detail::gemm_bf16_widened(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/// Convenience: gemm_bf16 with packed (contiguous) operands.
inline void gemm_bf16(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha, const bf16* A,
                      const bf16* B, float beta, float* C) {
    gemm_bf16(ta, tb, M, N, K, alpha, A, ta == Trans::no ? K : M, B, tb == Trans::no ? N : K, beta, C, N);
}

/// The bf16_mixed policy's GEMM (Linear's products under Network<..., bf16_mixed>): float A and B
/// rounded to bf16 (nearest, ties to even), multiplied exactly and summed in fp32. On AVX512-BF16 and
/// AMX the floats go to gemm_bf16's units, which round them while packing, where C has at least one
/// whole strip of the units' tiles (N >= gemm_bf16_nr: a narrower C, such as a 10-class output
/// layer's, leaves most of each tile's columns idle and the fp32 kernel does it sooner); elsewhere
/// (and for narrow C) they are rounded into float copies holding bf16 values and go to the fp32 GEMM
/// (what gemm_bf16's fp32 path computes, without the round trip through bf16 storage). The choice
/// depends on the shape and the ISA alone, so the bits do not depend on the thread count. There an untransposed A of more than
/// bf16_chunk_values values (a large evaluation batch) is rounded and multiplied a block of rows at
/// a time; each row of C is summed in an order fixed by K alone, so the bits are those of one product.
template <>
struct precision_gemm<bf16_mixed> {
    static void run(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
                    std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
        using cpu_detail::scratch;
        using cpu_detail::scratch_slot;
        if (M == 0 || N == 0) return;
#if OAR_ISA_X86 && OAR_ISA_COMPILED(2)
        const cpu_isa isa = active_cpu_isa();
        if (on_units(isa, N, K, alpha)) {
            cpu_detail::gemm_bf16_units(isa, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
            return;
        }
#endif
        const std::size_t br = tb == Trans::no ? K : N, bc = tb == Trans::no ? N : K;
        const std::size_t rows = ta == Trans::no && K > 0 ? std::max<std::size_t>(1, bf16_chunk_values / K) : M;
        float* b = scratch<float, scratch_slot::mixed_b>(br * bc);
        for (std::size_t r = 0; r < br; ++r) round_to_bf16(B + r * ldb, b + r * bc, bc);
        for (std::size_t i0 = 0; i0 < M; i0 += rows) {
            const std::size_t m = std::min(rows, M - i0), ar = ta == Trans::no ? m : K, ac = ta == Trans::no ? K : M;
            float* a = scratch<float, scratch_slot::mixed_a>(ar * ac);
            for (std::size_t r = 0; r < ar; ++r) round_to_bf16(A + (i0 + r) * lda, a + r * ac, ac);
            kernel<op::gemm, cpu>::run(ta, tb, m, N, K, alpha, a, ac, b, bc, beta, C + i0 * ldc, ldc);
        }
    }

    /// run's product, the same bits, with op(B) packed for the bf16 units once and kept in `cache`
    /// (Linear's weights in evaluation mode) while B's address, shape, `version` and the ISA stay
    /// the same; where the product does not go to the units, run as it is.
    static void run_cached(gemm_pack_cache<float>& cache, std::uint64_t version, Trans ta, Trans tb, std::size_t M,
                           std::size_t N, std::size_t K, float alpha, const float* A, std::size_t lda, const float* B,
                           std::size_t ldb, float beta, float* C, std::size_t ldc) {
#if OAR_ISA_X86 && OAR_ISA_COMPILED(2)
        const cpu_isa isa = active_cpu_isa();
        if (M > 0 && on_units(isa, N, K, alpha)) {
            const std::uint16_t* pre =
                cache.packed_u16(tb, K, N, B, ldb, version, isa, cpu_detail::bf16_packed_b_size(isa, K, N),
                                 [&](std::uint16_t* out) { cpu_detail::bf16_pack_b_whole(isa, tb, K, N, B, ldb, out); });
            cpu_detail::gemm_bf16_units(isa, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pre);
            return;
        }
#else
        (void)cache, (void)version;
#endif
        run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }

private:
    /// Whether the product goes to the bf16 units (see above).
    static bool on_units(cpu_isa isa, std::size_t N, std::size_t K, float alpha) {
        return (isa == cpu_isa::avx512_bf16 || isa == cpu_isa::amx) && N >= cpu_detail::gemm_bf16_nr && K > 0 &&
               alpha != 0.0f;
    }
};

}  // namespace oar

// Conv2D's bf16 route (the bf16_mixed policy's precision_conv), so that this one header brings every
// bf16 kernel a bf16_mixed Network needs.
#include "conv_bf16.hpp"
