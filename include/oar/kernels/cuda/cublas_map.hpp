// Row-major GEMM on column-major cuBLAS. oar's matrices are row-major; a row-major (M,N) C is the
// column-major (N,M) matrix C^T, and C^T = op(B)^T op(A)^T, so cuBLAS is called with A and B
// swapped and M and N swapped, the transposes and leading dimensions carried over unchanged.
// Plain C++ (no cuBLAS header): tests/cuda/test_cublas_map.cpp checks the mapping with a
// column-major reference GEMM against the CPU kernel.
#pragma once

#include <cstddef>  // std::size_t

#include "../types.hpp"  // Trans

namespace oar::cuda_kernels {

/// The arguments of one column-major sgemm call: C = alpha op(A) op(B) + beta C with
/// op(A) (m,k), op(B) (k,n), C (m,n), each matrix stored column-major with its leading dimension.
struct ColumnMajorGemm {
    bool trans_a, trans_b;
    std::size_t m, n, k;
    bool swap_operands;  ///< true: the column-major A is oar's B and its B is oar's A
    std::size_t lda, ldb, ldc;
};

/// The matrix a row-major operand op(X) of (rows, cols) is stored as: (rows, cols) when op is the
/// identity, (cols, rows) when it transposes. kernel<op::gemm_bf16> packs this rectangle to bf16
/// with its row stride equal to its width.
struct StoredShape {
    std::size_t rows, cols;
};
constexpr StoredShape stored_shape(Trans t, std::size_t op_rows, std::size_t op_cols) {
    return t == Trans::no ? StoredShape{op_rows, op_cols} : StoredShape{op_cols, op_rows};
}

/// kernel<op::gemm>'s row-major call (op(A): (M,K), op(B): (K,N), C: (M,N), row strides lda/ldb/ldc)
/// as a column-major call.
constexpr ColumnMajorGemm column_major_gemm(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K,
                                            std::size_t lda, std::size_t ldb, std::size_t ldc) {
    return {tb == Trans::yes, ta == Trans::yes, N, M, K, true, ldb, lda, ldc};
}

}  // namespace oar::cuda_kernels
