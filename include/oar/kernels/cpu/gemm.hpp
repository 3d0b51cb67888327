// CPU GEMM: C = alpha * op(A) * op(B) + beta * C, row-major, float (and double for checks).
// One register-blocked xsimd micro-kernel: MR = 4 rows x NR = 2 SIMD vectors of C in registers
// over the whole K loop, A broadcast from its rows or columns (a transposed A costs nothing).
// op(B) is read in place when it is row-contiguous; a transposed B, and the last N % NR columns
// of any B, are first packed into zero-padded K x NR panels. The pack buffer is thread-local and
// only grows: no allocation once warm.
// Correct and reasonably fast; the performance issue replaces it with a cache-blocked kernel
// behind the same dispatch.
#pragma once

#include <algorithm>  // std::fill, std::min
#include <cstddef>    // std::size_t

#include "../../core/simd.hpp"  // xsimd::batch, fma

#include "../../config.hpp"        // OAR_ALWAYS_INLINE
#include "../../core/aligned.hpp"  // aligned_vector
#include "../dispatch.hpp"         // kernel, op::gemm

namespace oar {

enum class Trans : bool { no = false, yes = true };

namespace cpu_detail {

inline constexpr std::size_t gemm_mr = 4;  // rows of C per micro-tile

/// Columns of C per micro-tile: two SIMD vectors of T.
template <class T>
inline constexpr std::size_t gemm_nr = 2 * xsimd::batch<T>::size;

/// acc(MR x NR) = sum_k A(i,k) * panel(k, :), with A(i,k) = a[i*ai + k*ak]; then
/// C(rows, cols) += alpha * acc for the first `rows` x `cols` (edges go through a small buffer).
/// panel(k, :) = panel[k * ldp .. + NR).
template <std::size_t MR, class T>
OAR_ALWAYS_INLINE void micro_tile(std::size_t K, T alpha, const T* a, std::size_t ai, std::size_t ak, const T* panel,
                                  std::size_t ldp, T* c, std::size_t ldc, std::size_t cols) {
    using V = xsimd::batch<T>;
    constexpr std::size_t W = V::size;
    V acc0[MR], acc1[MR];
    for (std::size_t r = 0; r < MR; ++r) acc0[r] = acc1[r] = V(T(0));
    for (std::size_t k = 0; k < K; ++k) {
        const V b0 = V::load_unaligned(panel + k * ldp);
        const V b1 = V::load_unaligned(panel + k * ldp + W);
        for (std::size_t r = 0; r < MR; ++r) {
            const V av(a[r * ai + k * ak]);
            acc0[r] = xsimd::fma(av, b0, acc0[r]);
            acc1[r] = xsimd::fma(av, b1, acc1[r]);
        }
    }
    const V al(alpha);
    if (cols == 2 * W) {
        for (std::size_t r = 0; r < MR; ++r) {
            T* cp = c + r * ldc;
            xsimd::fma(al, acc0[r], V::load_unaligned(cp)).store_unaligned(cp);
            xsimd::fma(al, acc1[r], V::load_unaligned(cp + W)).store_unaligned(cp + W);
        }
    } else {
        alignas(64) T tmp[2 * W];
        for (std::size_t r = 0; r < MR; ++r) {
            (al * acc0[r]).store_aligned(tmp);
            (al * acc1[r]).store_aligned(tmp + W);
            for (std::size_t j = 0; j < cols; ++j) c[r * ldc + j] += tmp[j];
        }
    }
}

template <class T>
aligned_vector<T>& pack_buffer() {
    thread_local aligned_vector<T> buf;
    return buf;
}

/// Packs columns [j_begin, N) of op(B) (K x N; B(k,j) = b[k*bk + j*bj]) into panels of K x NR,
/// zero-padded; panel p holds columns j_begin + p*NR ...
template <class T>
const T* pack_b(std::size_t K, std::size_t N, std::size_t j_begin, const T* b, std::size_t bk, std::size_t bj) {
    constexpr std::size_t NR = gemm_nr<T>;
    const std::size_t panels = (N - j_begin + NR - 1) / NR;
    auto& buf = pack_buffer<T>();
    if (buf.size() < panels * K * NR) buf.resize(panels * K * NR);
    T* out = buf.data();
    for (std::size_t p = 0; p < panels; ++p) {
        const std::size_t j0 = j_begin + p * NR, cols = std::min(NR, N - j0);
        T* panel = out + p * K * NR;  // (K, NR)
        for (std::size_t k = 0; k < K; ++k) {
            T* row = panel + k * NR;
            const T* src = b + k * bk + j0 * bj;
            if (bj == 1)
                for (std::size_t j = 0; j < cols; ++j) row[j] = src[j];
            else
                for (std::size_t j = 0; j < cols; ++j) row[j] = src[j * bj];
            for (std::size_t j = cols; j < NR; ++j) row[j] = T(0);
        }
    }
    return out;
}

}  // namespace cpu_detail

/// kernel<op::gemm, cpu>::run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
///   op(A): (M,K), op(B): (K,N), C: (M,N); lda/ldb/ldc are the row strides of A, B, C as stored.
///   beta == 0 overwrites C (NaNs in C do not propagate), as in BLAS.
template <class T>
struct kernel<op::gemm, basic_cpu<T>> {
    static void run(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, T alpha, const T* A,
                    std::size_t lda, const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc) {
        using namespace cpu_detail;
        constexpr std::size_t NR = gemm_nr<T>, MR = gemm_mr;
        if (M == 0 || N == 0) return;
        for (std::size_t i = 0; i < M; ++i) {  // C = beta * C
            T* c = C + i * ldc;
            if (beta == T(0))
                std::fill(c, c + N, T(0));
            else if (beta != T(1))
                for (std::size_t j = 0; j < N; ++j) c[j] *= beta;
        }
        if (K == 0 || alpha == T(0)) return;

        // Columns [0, direct) are read from B in place; the rest from packed panels.
        const std::size_t direct = tb == Trans::no ? N / NR * NR : 0;
        const T* packed = direct == N ? nullptr
                          : tb == Trans::no ? pack_b(K, N, direct, B, ldb, std::size_t{1})
                                            : pack_b(K, N, direct, B, std::size_t{1}, ldb);
        const std::size_t ai = ta == Trans::no ? lda : 1;  // A(i,k) = A[i*ai + k*ak]
        const std::size_t ak = ta == Trans::no ? 1 : lda;
        const std::size_t full = M / MR * MR;
        for (std::size_t j0 = 0; j0 < N; j0 += NR) {
            const bool in_place = j0 < direct;
            const T* panel = in_place ? B + j0 : packed + (j0 - direct) / NR * K * NR;
            const std::size_t ldp = in_place ? ldb : NR;
            const std::size_t cols = std::min(NR, N - j0);
            for (std::size_t i = 0; i < full; i += MR)
                micro_tile<MR>(K, alpha, A + i * ai, ai, ak, panel, ldp, C + i * ldc + j0, ldc, cols);
            for (std::size_t i = full; i < M; ++i)
                micro_tile<1>(K, alpha, A + i * ai, ai, ak, panel, ldp, C + i * ldc + j0, ldc, cols);
        }
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
