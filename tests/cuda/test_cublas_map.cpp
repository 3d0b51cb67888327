// Tests of oar/kernels/cuda/cublas_map.hpp: a row-major GEMM mapped onto a column-major sgemm call
// (what kernel<op::gemm, cuda> passes to cublasSgemm) and evaluated by a reference column-major
// GEMM with BLAS semantics equals the CPU row-major GEMM, for every transpose combination and
// padded leading dimensions.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cuda/cublas_map.hpp>  // the header under test

#include <oar/kernels/cpu/gemm.hpp>  // the CPU reference GEMM

#include <algorithm>  // std::max
#include <cmath>      // std::abs
#include <cstddef>    // std::size_t
#include <vector>     // std::vector

#include "support/random.hpp"  // oar_test::random_vector

namespace {

/// The BLAS sgemm definition, column-major: C(i,j) at c[i + j*ldc]; op(X) = X or X^T.
void reference_sgemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                     std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
    for (std::size_t j = 0; j < n; ++j)
        for (std::size_t i = 0; i < m; ++i) {
            double s = 0.0;
            for (std::size_t p = 0; p < k; ++p) {
                const float av = ta ? a[p + i * lda] : a[i + p * lda];
                const float bv = tb ? b[j + p * ldb] : b[p + j * ldb];
                s += static_cast<double>(av) * bv;
            }
            float& out = c[i + j * ldc];
            out = static_cast<float>(alpha * s + (beta == 0.0f ? 0.0 : static_cast<double>(beta) * out));
        }
}

}  // namespace

TEST_CASE("a row-major GEMM mapped to column-major sgemm arguments equals the CPU GEMM for all transposes") {
    using oar::Trans;
    const std::size_t M = 7, N = 5, K = 9, pad = 3;
    for (Trans ta : {Trans::no, Trans::yes})
        for (Trans tb : {Trans::no, Trans::yes}) {
            INFO("ta=" << (ta == Trans::yes) << " tb=" << (tb == Trans::yes));
            // Row-major storage of A as stored: (M,K) or (K,M), with row stride lda > row length.
            const std::size_t lda = (ta == Trans::no ? K : M) + pad, ldb = (tb == Trans::no ? N : K) + pad, ldc = N + pad;
            const auto A = oar_test::random_vector<float>((ta == Trans::no ? M : K) * lda, 1);
            const auto B = oar_test::random_vector<float>((tb == Trans::no ? K : N) * ldb, 2);
            const auto C0 = oar_test::random_vector<float>(M * ldc, 3);
            auto c_cpu = C0, c_map = C0;
            oar::kernel<oar::op::gemm, oar::cpu>::run(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 2.0f,
                                                     c_cpu.data(), ldc);
            const auto cm = oar::cuda_kernels::column_major_gemm(ta, tb, M, N, K, lda, ldb, ldc);
            CHECK(cm.swap_operands);
            reference_sgemm(cm.trans_a, cm.trans_b, cm.m, cm.n, cm.k, 0.5f, cm.swap_operands ? B.data() : A.data(),
                            cm.lda, cm.swap_operands ? A.data() : B.data(), cm.ldb, 2.0f, c_map.data(), cm.ldc);
            double worst = 0.0;
            for (std::size_t i = 0; i < c_cpu.size(); ++i)
                worst = std::max(worst, std::abs(static_cast<double>(c_cpu[i]) - c_map[i]));
            CHECK(worst <= 1e-5);
            // The padding columns of C are untouched by both.
            for (std::size_t r = 0; r < M; ++r)
                for (std::size_t j = N; j < ldc; ++j) CHECK(c_map[r * ldc + j] == C0[r * ldc + j]);
        }
}
