// The batched Conv2D of the CUDA backend as a sequence of steps over an executor: one im2col over
// the whole batch into (C*K*K, n*P), one GEMM, one permute back to (n, OutC, P) with the bias;
// backward: one permute of dy, the im2col recomputed, one GEMM for dW, one for dcol, a gather
// col2im. Network<..., cuda> runs it with an executor that launches CUDA kernels and cuBLAS;
// tests/cuda/test_conv_plan.cpp runs the same steps with emulated launches and the CPU GEMM and
// compares with the CPU Conv2D layer. Plain C++: g++ compiles this header.
#pragma once

#include <cstddef>  // std::size_t

#include "../types.hpp"  // ConvGeometry, Trans

namespace oar::cuda_kernels {

/// Scratch floats the plan needs for n samples: col and dcol (C*K*K, n*P) and (OutC, n*P).
constexpr std::size_t conv_plan_workspace(const ConvGeometry& g, std::size_t out_channels, std::size_t n) {
    return (2 * g.col_rows() + out_channels) * n * g.col_cols();
}

/// y (n, OutC, OH, OW) = conv(x (n, C, H, W), w (OutC, C*KH*KW)) + b[c] (no bias where b is null).
/// Exec: im2col(g, n, x, col), gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) (row-major),
/// ncp_from_cnp(src, dst, bias, n, c, p).
template <class Exec>
void conv2d_forward(Exec& ex, const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* w, const float* b,
                    const float* x, float* y, float* workspace) {
    const std::size_t CKK = g.col_rows(), P = g.col_cols(), nP = n * P;
    float* col = workspace;         // (CKK, n*P)
    float* ycnp = col + CKK * nP;   // (OutC, n*P)
    ex.im2col(g, n, x, col);
    ex.gemm(Trans::no, Trans::no, out_c, nP, CKK, 1.0f, w, CKK, col, nP, 0.0f, ycnp, nP);  // (OutC,CKK)x(CKK,nP)
    ex.ncp_from_cnp(static_cast<const float*>(ycnp), y, b, n, out_c, P);
}

/// dw += dy (x) im2col(x); db += sum of dy; dx = conv^T(dy) when dx is not null.
/// Exec also: cnp_from_ncp(src, dst, n, c, p), bias_grad(dy, db, n, c, inner), zero(ptr, count),
/// col2im(g, n, col, dx) (accumulating).
template <class Exec>
void conv2d_backward(Exec& ex, const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* w, const float* x,
                     const float* dy, float* dw, float* db, float* dx, float* workspace) {
    const std::size_t CKK = g.col_rows(), P = g.col_cols(), nP = n * P;
    float* col = workspace;          // (CKK, n*P)
    float* dycnp = col + CKK * nP;   // (OutC, n*P)
    float* dcol = dycnp + out_c * nP;  // (CKK, n*P)
    ex.cnp_from_ncp(dy, dycnp, n, out_c, P);
    ex.im2col(g, n, x, col);
    ex.gemm(Trans::no, Trans::yes, out_c, CKK, nP, 1.0f, dycnp, nP, col, nP, 1.0f, dw, CKK);  // dW += dy col^T
    if (db) ex.bias_grad(dy, db, n, out_c, P);  // null: a convolution without bias
    if (dx) {
        ex.gemm(Trans::yes, Trans::no, CKK, nP, out_c, 1.0f, w, CKK, dycnp, nP, 0.0f, dcol, nP);  // dcol = W^T dy
        ex.zero(dx, n * g.channels * g.height * g.width);
        ex.col2im(g, n, static_cast<const float*>(dcol), dx);
    }
}

}  // namespace oar::cuda_kernels
