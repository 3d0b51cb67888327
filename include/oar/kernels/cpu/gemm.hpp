// CPU GEMM: C = alpha * op(A) * op(B) + beta * C, row-major, float (and double for checks).
// A register-blocked xsimd micro-kernel (4 rows x 2 SIMD vectors of C held in registers over the
// whole K loop) reads op(B) row-contiguously; a transposed B is first packed into a reusable
// thread-local buffer (no allocation once it has grown). Simple and correct first: the
// performance issue replaces this with a packed, cache-blocked kernel behind the same dispatch.
#pragma once

#include <algorithm>  // std::fill
#include <cstddef>    // std::size_t

#include <xsimd/xsimd.hpp>  // xsimd::batch, fma

#include "../../config.hpp"        // OAR_RESTRICT
#include "../../core/aligned.hpp"  // aligned_vector
#include "../dispatch.hpp"         // kernel, op::gemm

namespace oar {

enum class Trans : bool { no = false, yes = true };

namespace cpu_detail {

/// C[MR rows, cols j0..j0+NV*W) += alpha * sum_k A(i,k) * B(k, j); A(i,k) = a[i*ai + k*ak].
template <std::size_t MR, std::size_t NV, class T>
OAR_ALWAYS_INLINE void micro_tile(std::size_t K, T alpha, const T* a, std::size_t ai, std::size_t ak, const T* b,
                                  std::size_t ldb, T* c, std::size_t ldc) {
    using fbatch = xsimd::batch<T>;
    constexpr std::size_t simd_width = fbatch::size;
    fbatch acc[MR][NV];
    for (std::size_t r = 0; r < MR; ++r)
        for (std::size_t v = 0; v < NV; ++v) acc[r][v] = fbatch(T(0));
    for (std::size_t k = 0; k < K; ++k) {
        fbatch bv[NV];
        for (std::size_t v = 0; v < NV; ++v) bv[v] = fbatch::load_unaligned(b + k * ldb + v * simd_width);
        for (std::size_t r = 0; r < MR; ++r) {
            const fbatch av(a[r * ai + k * ak]);
            for (std::size_t v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(av, bv[v], acc[r][v]);
        }
    }
    const fbatch al(alpha);
    for (std::size_t r = 0; r < MR; ++r)
        for (std::size_t v = 0; v < NV; ++v) {
            T* cp = c + r * ldc + v * simd_width;
            xsimd::fma(al, acc[r][v], fbatch::load_unaligned(cp)).store_unaligned(cp);
        }
}

/// The scalar edge: rows [0, MR), columns [j0, j1).
template <class T>
void edge_tile(std::size_t rows, std::size_t j0, std::size_t j1, std::size_t K, T alpha, const T* a, std::size_t ai,
               std::size_t ak, const T* b, std::size_t ldb, T* c, std::size_t ldc) {
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = j0; j < j1; ++j) {
            T s = 0;
            for (std::size_t k = 0; k < K; ++k) s += a[r * ai + k * ak] * b[k * ldb + j];
            c[r * ldc + j] += alpha * s;
        }
}

template <std::size_t MR, class T>
void row_block(std::size_t N, std::size_t K, T alpha, const T* a, std::size_t ai, std::size_t ak, const T* b,
               std::size_t ldb, T* c, std::size_t ldc) {
    constexpr std::size_t W = xsimd::batch<T>::size;
    std::size_t j = 0;
    for (; j + 2 * W <= N; j += 2 * W) micro_tile<MR, 2>(K, alpha, a, ai, ak, b + j, ldb, c + j, ldc);
    for (; j + W <= N; j += W) micro_tile<MR, 1>(K, alpha, a, ai, ak, b + j, ldb, c + j, ldc);
    if (j < N) edge_tile(MR, j, N, K, alpha, a, ai, ak, b, ldb, c, ldc);
}

template <class T>
aligned_vector<T>& pack_buffer() {
    thread_local aligned_vector<T> buf;
    return buf;
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
        if (M == 0 || N == 0) return;
        for (std::size_t i = 0; i < M; ++i) {  // C = beta * C
            T* c = C + i * ldc;
            if (beta == T(0))
                std::fill(c, c + N, T(0));
            else if (beta != T(1))
                for (std::size_t j = 0; j < N; ++j) c[j] *= beta;
        }
        if (K == 0 || alpha == T(0)) return;

        // op(B) must be row-contiguous for the micro-kernel: pack B^T (stored (N,K)) into (K,N).
        const T* b = B;
        std::size_t ldb_eff = ldb;
        if (tb == Trans::yes) {
            auto& buf = pack_buffer<T>();
            if (buf.size() < K * N) buf.resize(K * N);
            for (std::size_t j = 0; j < N; ++j)
                for (std::size_t k = 0; k < K; ++k) buf[k * N + j] = B[j * ldb + k];
            b = buf.data();
            ldb_eff = N;
        }
        // A(i,k) = A[i*ai + k*ak]
        const std::size_t ai = ta == Trans::no ? lda : 1;
        const std::size_t ak = ta == Trans::no ? 1 : lda;
        const std::size_t full = M / 4 * 4;
        for (std::size_t i = 0; i < full; i += 4)
            row_block<4, T>(N, K, alpha, A + i * ai, ai, ak, b, ldb_eff, C + i * ldc, ldc);
        for (std::size_t i = full; i < M; ++i)
            row_block<1, T>(N, K, alpha, A + i * ai, ai, ak, b, ldb_eff, C + i * ldc, ldc);
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
