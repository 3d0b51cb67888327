// CPU GEMM: C = alpha * op(A) * op(B) + beta * C, row-major, float (and double for checks).
// Goto-style: column blocks of NC, K blocks of KC, row blocks of MC; each MC x KC block of op(A)
// is packed into MR-row panels, and each KC x NR strip of op(B) is read in place when it is a
// full, row-contiguous strip, else packed into a zero-padded panel. The micro-kernel keeps MR x NR
// of C in registers (NR = two SIMD vectors: 10 x 32 floats with AVX-512, 6 x 16 with AVX2, 6 x 8
// with SSE2). The kernels are compiled for each of those ISAs whatever the user's -march
// (isa/gemm_body.inc in isa/region.inc) and the best one the CPU has runs (core/cpu_isa.hpp,
// OAR_ISA); avx2 and avx512 give the same bits on the tiled paths.
// Narrow products (N <= MR, as a classifier's 10 outputs) skip the NR-wide tiles: with op(A) = A^T
// the tiles compute C^T reading A's rows in place, with op(A) = A (K >= 32) dot products along K.
// Large products are split over the default thread pool by blocks of C rows or columns; every
// element of C is summed in the same order whatever the split, so results do not depend on the
// thread count. Pack buffers are thread-local and only grow: no allocation once warm.
#pragma once

#include <algorithm>  // std::fill, std::min
#include <cmath>      // std::fma: the narrow paths' scalar epilogues
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t: gemm_pack_cache's versions
#include <vector>     // std::vector: gemm_pack_cache's entries
#include <type_traits>  // std::integral_constant: compile-time row indices
#include <utility>      // std::index_sequence

#include "../../config.hpp"             // OAR_ALWAYS_INLINE
#include "../../core/aligned.hpp"       // aligned_vector
#include "../../core/thread_pool.hpp"   // default_pool
#include "../dispatch.hpp"              // kernel, op::gemm
#include "scratch.hpp"                  // scratch, scratch_slot: the pack buffers
#include "isa/dispatch.hpp"             // OAR_ISA_X86, active_cpu_isa: the ISA a call runs

// The kernels themselves, once per ISA (isa/region.inc): oar::cpu_detail::isa_<name>::gemm_run;
// with OAR_EXTERN_KERNELS (config.hpp) they live in the oar::kernels library instead.
#if !OAR_EXTERN_KERNELS
#define OAR_ISA_BODY "gemm_body.inc"
#include "isa/every_isa.inc"
#endif

namespace oar {

namespace cpu_detail {
/// isa_<active ISA>::gemm_run (float and double): defined here, or only declared with
/// OAR_EXTERN_KERNELS (kernels/cpu/compiled.hpp instantiates it in the oar::kernels library).
template <class T>
void gemm_at_active_isa(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, T alpha, const T* A,
                        std::size_t lda, const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc);
#if !OAR_EXTERN_KERNELS
template <class T>
void gemm_at_active_isa(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, T alpha, const T* A,
                        std::size_t lda, const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc) {
    OAR_ISA_DISPATCH(gemm_run<T>, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
}
#endif

/// gemm_at_active_isa with op(B) already packed by gemm_pack_b_at_active_isa at the same ISA (`pre`);
/// B is still read by the narrow paths. The same bits as gemm_at_active_isa.
template <class T>
void gemm_prepacked_at_active_isa(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, T alpha,
                                  const T* A, std::size_t lda, const T* B, std::size_t ldb, T beta, T* C,
                                  std::size_t ldc, const T* pre);
/// Values gemm_pack_b_at_active_isa writes for a K x N op(B).
template <class T>
std::size_t gemm_packed_b_size_at_active_isa(std::size_t K, std::size_t N);
/// Packs the whole op(B) (K x N) into the layout the active ISA's tiles read.
template <class T>
void gemm_pack_b_at_active_isa(Trans tb, std::size_t K, std::size_t N, const T* B, std::size_t ldb, T* out);
#if !OAR_EXTERN_KERNELS
template <class T>
void gemm_prepacked_at_active_isa(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, T alpha,
                                  const T* A, std::size_t lda, const T* B, std::size_t ldb, T beta, T* C,
                                  std::size_t ldc, const T* pre) {
    OAR_ISA_DISPATCH(gemm_run<T>, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pre)
}
template <class T>
std::size_t gemm_packed_b_size_at_active_isa(std::size_t K, std::size_t N) {
    OAR_ISA_DISPATCH(gemm_packed_b_size<T>, K, N)
}
template <class T>
void gemm_pack_b_at_active_isa(Trans tb, std::size_t K, std::size_t N, const T* B, std::size_t ldb, T* out) {
    OAR_ISA_DISPATCH(gemm_pack_b_run<T>, tb, K, N, B, ldb, out)
}
#endif
}  // namespace cpu_detail

/// Packed copies of GEMM right-hand operands that stay the same from call to call (a network's
/// weights in evaluation mode): gemm(..., cache, version) packs op(B) once and reuses the copy while
/// B's address, shape, `version` (the caller's count of writes to B) and the active ISA are those it
/// was packed for. One per network; not shared between threads. Copies start empty.
template <class T>
class gemm_pack_cache {
public:
    gemm_pack_cache() = default;
    gemm_pack_cache(const gemm_pack_cache&) {}
    gemm_pack_cache& operator=(const gemm_pack_cache&) { return *this; }

    /// C = alpha * op(A) op(B) + beta * C as kernel<op::gemm, cpu>::run, the same bits, with op(B)
    /// taken from this cache (packed first where the entry for B is missing or stale).
    void gemm(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, T alpha, const T* A, std::size_t lda,
              const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc, std::uint64_t version) {
        const T* pre = packed(entries_, tb, K, N, B, ldb, version, active_vector_isa(),
                              cpu_detail::gemm_packed_b_size_at_active_isa<T>(K, N),
                              [&](T* out) { cpu_detail::gemm_pack_b_at_active_isa<T>(tb, K, N, B, ldb, out); });
        cpu_detail::gemm_prepacked_at_active_isa<T>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pre);
    }
    /// A copy of op(B) in another kernel's layout of 16-bit values (the bf16 units' of
    /// kernels/cpu/gemm_bf16.hpp: precision_gemm<bf16_mixed>::run_cached), `size` values written by
    /// pack(out) where the entry for B is missing or stale, under gemm's rule with `isa` as the ISA.
    template <class Pack>
    const std::uint16_t* packed_u16(Trans tb, std::size_t K, std::size_t N, const T* B, std::size_t ldb,
                                    std::uint64_t version, cpu_isa isa, std::size_t size, Pack&& pack) {
        return packed(entries_u16_, tb, K, N, B, ldb, version, isa, size, pack);
    }
    /// Times an operand was packed (a test's view of the reuse).
    std::size_t packs() const { return packs_; }

private:
    /// A packed copy of one B, of values U, with what it was packed from and for.
    template <class U>
    struct entry {
        const T* b = nullptr;
        Trans tb = Trans::no;
        std::size_t K = 0, N = 0, ldb = 0;
        std::uint64_t version = 0;
        cpu_isa isa = cpu_isa::sse2;
        aligned_vector<U> data;
    };
    /// B's entry in `entries`, packed first by pack(out) into `size` values where it is missing or stale.
    template <class U, class Pack>
    const U* packed(std::vector<entry<U>>& entries, Trans tb, std::size_t K, std::size_t N, const T* B,
                    std::size_t ldb, std::uint64_t version, cpu_isa isa, std::size_t size, Pack&& pack) {
        entry<U>* e = nullptr;
        for (auto& x : entries)
            if (x.b == B) e = &x;
        if (!e) e = &entries.emplace_back();
        if (e->b != B || e->tb != tb || e->K != K || e->N != N || e->ldb != ldb || e->version != version ||
            e->isa != isa) {
            e->data.resize(size);
            pack(e->data.data());
            *e = entry<U>{B, tb, K, N, ldb, version, isa, std::move(e->data)};
            ++packs_;
        }
        return e->data.data();
    }
    std::vector<entry<T>> entries_;
    std::vector<entry<std::uint16_t>> entries_u16_;
    std::size_t packs_ = 0;
};


/// kernel<op::gemm, cpu>::run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
///   op(A): (M,K), op(B): (K,N), C: (M,N); lda/ldb/ldc are the row strides of A, B, C as stored.
///   beta == 0 overwrites C (NaNs in C do not propagate), as in BLAS.
template <class T>
struct kernel<op::gemm, basic_cpu<T>> {
    static void run(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, T alpha, const T* A,
                    std::size_t lda, const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc) {
        cpu_detail::gemm_at_active_isa<T>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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
