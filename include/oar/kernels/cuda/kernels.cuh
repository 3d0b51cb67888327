// kernel<op::X, basic_cuda<D>> for every op the layers, losses and optimizers use, with the CPU
// kernels' `run` signatures; every pointer is device memory (labels too). Each __global__ function
// below only fills a Thread from the CUDA built-ins and calls the body in oar/kernels/cuda/bodies.hpp,
// the code tests/cuda/test_bodies.cpp runs on the CPU. GEMM goes to cuBLAS (row-major mapping in
// oar/kernels/cuda/cublas_map.hpp); Conv2D is the whole-batch plan of conv_plan.hpp. Under the
// bf16_mixed policy (core/precision.hpp) Linear calls op::gemm_bf16 (cublasGemmEx, bf16 operands,
// fp32 compute) and Conv2D the conv kernels' overloads taking bf16_mixed{}. Everything runs on
// cuda_runtime::compute_stream().
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t, std::uint64_t
#include <vector>   // std::vector: host copy of per-row losses

#include "conv_plan.hpp"                     // conv2d_forward / conv2d_backward over an executor
#include "../../core/bf16.hpp"               // bf16: packed GEMM operands
#include "../../core/precision.hpp"          // bf16_mixed: the Conv2D kernels' mixed-precision overloads

#include "bodies.hpp"                        // the kernel bodies
#include "cublas_map.hpp"                    // column_major_gemm
#include "launch.hpp"                        // Thread, blocks_for, block_threads
#include "../dispatch.hpp"                   // kernel, storage, op::*
#include "runtime.cuh"                       // OAR_CUDA_CHECK, cublas(), compute_stream(), device_buffer

namespace oar::cuda_kernels {

/// The running thread's coordinates as the bodies take them.
__device__ inline Thread this_thread() {
    return {{blockIdx.x, blockIdx.y, blockIdx.z},
            {threadIdx.x, threadIdx.y, threadIdx.z},
            {blockDim.x, blockDim.y, blockDim.z},
            {gridDim.x, gridDim.y, gridDim.z}};
}

template <class F, class T>
__global__ void map_kernel(F f, const T* x, T* y, std::size_t n) {
    map_body(this_thread(), f, x, y, n);
}
template <class F, class T>
__global__ void map_backward_kernel(F f, const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
    map_backward_body(this_thread(), f, x, y, dy, dx, n);
}
template <class T>
__global__ void add_kernel(const T* a, const T* b, T* y, std::size_t n) {
    add_body(this_thread(), a, b, y, n);
}
template <class T>
__global__ void copy_rows_kernel(std::size_t rows, std::size_t len, const T* src, std::size_t src_stride, T* dst,
                                 std::size_t dst_stride) {
    copy_rows_body(this_thread(), rows, len, src, src_stride, dst, dst_stride);
}
template <class F, class T>
__global__ void update_kernel(F f, std::size_t n, T* p, const T* g, T* s1, T* s2) {
    update_body(this_thread(), f, n, p, g, s1, s2);
}
template <class T>
__global__ void dropout_kernel(CounterRng rng, std::uint64_t stream, float p, T scale, const T* in, T* out,
                               std::size_t n) {
    dropout_body(this_thread(), rng, stream, p, scale, in, out, n);
}
template <class T>
__global__ void round_bf16_kernel(const T* in, T* out, std::size_t n) {
    round_bf16_body(this_thread(), in, out, n);
}
template <class T>
__global__ void pack_bf16_kernel(std::size_t rows, std::size_t cols, const T* src, std::size_t src_ld, bf16* dst) {
    pack_bf16_body(this_thread(), rows, cols, src, src_ld, dst);
}
template <class T>
__global__ void bias_add_kernel(T* y, const T* b, std::size_t n, std::size_t c, std::size_t inner) {
    bias_add_body(this_thread(), y, b, n, c, inner);
}
/// One block of block_threads per channel; the phases of bias_grad_body separated by barriers.
template <class T>
__global__ void bias_grad_kernel(const T* dy, T* db, std::size_t n, std::size_t c, std::size_t inner) {
    __shared__ double shared[block_threads];
    const Thread t = this_thread();
    const unsigned phases = bias_grad_phases(block_threads);
    for (unsigned p = 0; p < phases; ++p) {
        bias_grad_body(p, t, shared, dy, db, n, c, inner);
        __syncthreads();
    }
}
template <class T>
__global__ void im2col_kernel(ConvGeometry g, std::size_t n, const T* x, T* col) {
    im2col_body(this_thread(), g, n, x, col);
}
template <class T>
__global__ void col2im_kernel(ConvGeometry g, std::size_t n, const T* col, T* dx) {
    col2im_body(this_thread(), g, n, col, dx);
}
template <class T>
__global__ void ncp_from_cnp_kernel(const T* src, T* dst, const T* bias, std::size_t n, std::size_t c, std::size_t p) {
    ncp_from_cnp_body(this_thread(), src, dst, bias, n, c, p);
}
template <class T>
__global__ void cnp_from_ncp_kernel(const T* src, T* dst, std::size_t n, std::size_t c, std::size_t p) {
    cnp_from_ncp_body(this_thread(), src, dst, n, c, p);
}
template <class T>
__global__ void max_pool_forward_kernel(ConvGeometry g, std::size_t n, const T* x, T* y) {
    max_pool_forward_body(this_thread(), g, n, x, y);
}
template <class T>
__global__ void max_pool_backward_kernel(ConvGeometry g, std::size_t n, const T* x, const T* dy, T* dx) {
    max_pool_backward_body(this_thread(), g, n, x, dy, dx);
}
template <class T>
__global__ void avg_pool_forward_kernel(ConvGeometry g, std::size_t n, const T* x, T* y) {
    avg_pool_forward_body(this_thread(), g, n, x, y);
}
template <class T>
__global__ void avg_pool_backward_kernel(ConvGeometry g, std::size_t n, const T* dy, T* dx) {
    avg_pool_backward_body(this_thread(), g, n, dy, dx);
}
template <class T>
__global__ void adaptive_avg_pool_forward_kernel(AdaptiveGeometry g, std::size_t n, const T* x, T* y) {
    adaptive_avg_pool_forward_body(this_thread(), g, n, x, y);
}
template <class T>
__global__ void adaptive_avg_pool_backward_kernel(AdaptiveGeometry g, std::size_t n, const T* dy, T* dx) {
    adaptive_avg_pool_backward_body(this_thread(), g, n, dy, dx);
}
template <class T>
__global__ void softmax_forward_kernel(const T* x, T* y, std::size_t rows, std::size_t cols) {
    softmax_forward_body(this_thread(), x, y, rows, cols);
}
template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, std::size_t rows, std::size_t cols) {
    softmax_backward_body(this_thread(), y, dy, dx, rows, cols);
}
template <class T>
__global__ void softmax_cross_entropy_kernel(const T* z, const std::int64_t* labels, std::size_t rows, std::size_t cols,
                                             T scale, double* losses, T* dz) {
    softmax_cross_entropy_body(this_thread(), z, labels, rows, cols, scale, losses, dz);
}

template <class T>
__global__ void batch_norm_forward_kernel(std::size_t n, std::size_t channels, std::size_t inner, const T* x,
                                          const T* gamma, const T* beta, T* running_mean, T* running_var, bool train,
                                          float momentum, float eps, T* y) {
    batch_norm_forward_body(this_thread(), n, channels, inner, x, gamma, beta, running_mean, running_var, train,
                            momentum, eps, y);
}
template <class T>
__global__ void batch_norm_fold_kernel(std::size_t channels, const T* gamma, const T* beta, const T* running_mean,
                                       const T* running_var, float eps, T* scale, T* shift) {
    batch_norm_fold_body(this_thread(), channels, gamma, beta, running_mean, running_var, eps, scale, shift);
}
template <class F, class T>
__global__ void bias_map_kernel(F f, const T* b, const T* scale, const T* shift, T* z, T* y, std::size_t n,
                                std::size_t c, std::size_t inner) {
    bias_map_body(this_thread(), f, b, scale, shift, z, y, n, c, inner);
}
template <class T>
__global__ void batch_norm_backward_kernel(std::size_t n, std::size_t channels, std::size_t inner, const T* x,
                                           const T* gamma, const T* running_mean, const T* running_var, bool train,
                                           float eps, const T* dy, T* dgamma, T* dbeta, T* dx) {
    batch_norm_backward_body(this_thread(), n, channels, inner, x, gamma, running_mean, running_var, train, eps, dy,
                             dgamma, dbeta, dx);
}

/// Launches a 1-D kernel over n work items on the compute stream, then checks the launch.
template <class... P, class... A>
void launch_1d(std::size_t n, void (*k)(P...), A... args) {
    if (n == 0) return;
    k<<<blocks_for(n), block_threads, 0, cuda_runtime::compute_stream()>>>(static_cast<P>(args)...);
    OAR_CUDA_CHECK_LAUNCH();
}

/// im2col of n samples at once: col (C*K*K, n*P).
template <class T>
void im2col_batched(const ConvGeometry& g, std::size_t n, const T* x, T* col) {
    launch_1d(g.col_rows() * n * g.col_cols(), &im2col_kernel<T>, g, n, x, col);
}
/// dx (n, C, H, W) += col2im of col (C*K*K, n*P).
template <class T>
void col2im_batched(const ConvGeometry& g, std::size_t n, const T* col, T* dx) {
    launch_1d(n * g.channels * g.height * g.width, &col2im_kernel<T>, g, n, col, dx);
}
template <class T>
void ncp_from_cnp(const T* src, T* dst, const T* bias, std::size_t n, std::size_t c, std::size_t p) {
    launch_1d(n * c * p, &ncp_from_cnp_kernel<T>, src, dst, bias, n, c, p);
}
template <class T>
void cnp_from_ncp(const T* src, T* dst, std::size_t n, std::size_t c, std::size_t p) {
    launch_1d(n * c * p, &cnp_from_ncp_kernel<T>, src, dst, n, c, p);
}
/// The conv plan's steps as CUDA launches and cuBLAS calls on the compute stream; with `bf16_gemm` set
/// (the bf16_mixed policy) its GEMMs are kernel<op::gemm_bf16>.
template <class B>
struct CudaExec {
    bool bf16_gemm = false;
    void im2col(const ConvGeometry& g, std::size_t n, const float* x, float* col) { im2col_batched(g, n, x, col); }
    void col2im(const ConvGeometry& g, std::size_t n, const float* col, float* dx) { col2im_batched(g, n, col, dx); }
    void gemm(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A, std::size_t lda,
              const float* Bm, std::size_t ldb, float beta, float* C, std::size_t ldc) {
        if (bf16_gemm) kernel<op::gemm_bf16, B>::run(ta, tb, M, N, K, alpha, A, lda, Bm, ldb, beta, C, ldc);
        else kernel<op::gemm, B>::run(ta, tb, M, N, K, alpha, A, lda, Bm, ldb, beta, C, ldc);
    }
    void ncp_from_cnp(const float* src, float* dst, const float* bias, std::size_t n, std::size_t c, std::size_t p) {
        cuda_kernels::ncp_from_cnp(src, dst, bias, n, c, p);
    }
    void cnp_from_ncp(const float* src, float* dst, std::size_t n, std::size_t c, std::size_t p) {
        cuda_kernels::cnp_from_ncp(src, dst, n, c, p);
    }
    void bias_grad(const float* dy, float* db, std::size_t n, std::size_t c, std::size_t inner) {
        kernel<op::bias_grad, B>::run(dy, db, n, c, inner);
    }
    void zero(float* p, std::size_t count) {
        OAR_CUDA_CHECK(cudaMemsetAsync(p, 0, count * sizeof(float), cuda_runtime::compute_stream()));
    }
};

}  // namespace oar::cuda_kernels

namespace oar {

/// kernel<op::gemm, cuda>::run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc): the CPU
/// GEMM's contract (row-major; beta == 0 overwrites C) through cublasSgemm.
template <int D>
struct kernel<op::gemm, basic_cuda<D>> {
    static void run(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
                    std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
        if (M == 0 || N == 0) return;
        const auto m = cuda_kernels::column_major_gemm(ta, tb, M, N, K, lda, ldb, ldc);
        const float* a = m.swap_operands ? B : A;
        const float* b = m.swap_operands ? A : B;
        OAR_CUBLAS_CHECK(cublasSgemm(cuda_runtime::cublas(), m.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     m.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(m.m), static_cast<int>(m.n),
                                     static_cast<int>(m.k), &alpha, a, static_cast<int>(m.lda), b,
                                     static_cast<int>(m.ldb), &beta, C, static_cast<int>(m.ldc)));
    }
};

/// kernel<op::gemm_bf16, cuda>::run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc): the
/// contract of op::gemm with A and B rounded to bf16 (packed by pack_bf16_kernel into this thread's
/// bf16 scratch, core/bf16.hpp's bits) and multiplied by cublasGemmEx with CUDA_R_16BF operands,
/// fp32 C and CUBLAS_COMPUTE_32F: bf16 products, fp32 sums (the bf16_mixed policy's GEMM).
template <int D>
struct kernel<op::gemm_bf16, basic_cuda<D>> {
    static void run(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
                    std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
        if (M == 0 || N == 0) return;
        const auto sa = cuda_kernels::stored_shape(ta, M, K), sb = cuda_kernels::stored_shape(tb, K, N);
        bf16* a16 = cuda_runtime::device_bf16_scratch(sa.rows * sa.cols + sb.rows * sb.cols);
        bf16* b16 = a16 + sa.rows * sa.cols;
        cuda_kernels::launch_1d(sa.rows * sa.cols, &cuda_kernels::pack_bf16_kernel<float>, sa.rows, sa.cols, A, lda, a16);
        cuda_kernels::launch_1d(sb.rows * sb.cols, &cuda_kernels::pack_bf16_kernel<float>, sb.rows, sb.cols, B, ldb, b16);
        const std::size_t pa = sa.cols > 0 ? sa.cols : 1, pb = sb.cols > 0 ? sb.cols : 1;  // packed leading dimensions
        const auto m = cuda_kernels::column_major_gemm(ta, tb, M, N, K, pa, pb, ldc);
        const bf16* a = m.swap_operands ? b16 : a16;
        const bf16* b = m.swap_operands ? a16 : b16;
        OAR_CUBLAS_CHECK(cublasGemmEx(cuda_runtime::cublas(), m.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      m.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(m.m), static_cast<int>(m.n),
                                      static_cast<int>(m.k), &alpha, a, CUDA_R_16BF, static_cast<int>(m.lda), b,
                                      CUDA_R_16BF, static_cast<int>(m.ldb), &beta, C, CUDA_R_32F,
                                      static_cast<int>(m.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
};

template <int D>
struct kernel<op::im2col, basic_cuda<D>> {
    static void run(const ConvGeometry& g, const float* x, float* col) { cuda_kernels::im2col_batched(g, 1, x, col); }
};
template <int D>
struct kernel<op::col2im, basic_cuda<D>> {
    static void run(const ConvGeometry& g, const float* col, float* dx) { cuda_kernels::col2im_batched(g, 1, col, dx); }
};
template <int D>
struct kernel<op::bias_add, basic_cuda<D>> {
    static void run(float* y, const float* b, std::size_t n, std::size_t channels, std::size_t inner) {
        cuda_kernels::launch_1d(n * channels * inner, &cuda_kernels::bias_add_kernel<float>, y, b, n, channels, inner);
    }
};
template <int D>
struct kernel<op::bias_grad, basic_cuda<D>> {
    static void run(const float* dy, float* db, std::size_t n, std::size_t channels, std::size_t inner) {
        if (channels == 0) return;
        cuda_kernels::bias_grad_kernel<float><<<static_cast<unsigned>(channels), cuda_kernels::block_threads, 0,
                                                cuda_runtime::compute_stream()>>>(dy, db, n, channels, inner);
        OAR_CUDA_CHECK_LAUNCH();
    }
};
template <int D>
struct kernel<op::max_pool_forward, basic_cuda<D>> {
    static void run(const ConvGeometry& g, std::size_t n, const float* x, float* y) {
        cuda_kernels::launch_1d(n * g.channels * g.out_height() * g.out_width(), &cuda_kernels::max_pool_forward_kernel<float>, g, n, x, y);
    }
};
template <int D>
struct kernel<op::max_pool_backward, basic_cuda<D>> {
    static void run(const ConvGeometry& g, std::size_t n, const float* x, const float* dy, float* dx) {
        cuda_kernels::launch_1d(n * g.channels * g.height * g.width, &cuda_kernels::max_pool_backward_kernel<float>, g, n, x, dy, dx);
    }
};
template <int D>
struct kernel<op::avg_pool_forward, basic_cuda<D>> {
    static void run(const ConvGeometry& g, std::size_t n, const float* x, float* y) {
        cuda_kernels::launch_1d(n * g.channels * g.out_height() * g.out_width(), &cuda_kernels::avg_pool_forward_kernel<float>, g, n, x, y);
    }
};
template <int D>
struct kernel<op::avg_pool_backward, basic_cuda<D>> {
    static void run(const ConvGeometry& g, std::size_t n, const float* dy, float* dx) {
        cuda_kernels::launch_1d(n * g.channels * g.height * g.width, &cuda_kernels::avg_pool_backward_kernel<float>, g, n, dy, dx);
    }
};
template <int D>
struct kernel<op::adaptive_avg_pool_forward, basic_cuda<D>> {
    static void run(const AdaptiveGeometry& g, std::size_t n, const float* x, float* y) {
        cuda_kernels::launch_1d(n * g.channels * g.out_height * g.out_width,
                                &cuda_kernels::adaptive_avg_pool_forward_kernel<float>, g, n, x, y);
    }
};
template <int D>
struct kernel<op::adaptive_avg_pool_backward, basic_cuda<D>> {
    static void run(const AdaptiveGeometry& g, std::size_t n, const float* dy, float* dx) {
        cuda_kernels::launch_1d(n * g.channels * g.height * g.width,
                                &cuda_kernels::adaptive_avg_pool_backward_kernel<float>, g, n, dy, dx);
    }
};
template <int D>
struct kernel<op::map, basic_cuda<D>> {
    template <class F>
    static void run(const F& f, const float* x, float* y, std::size_t n) {
        cuda_kernels::launch_1d(n, &cuda_kernels::map_kernel<F, float>, f, x, y, n);
    }
};
template <int D>
struct kernel<op::map_backward, basic_cuda<D>> {
    template <class F>
    static void run(const F& f, const float* x, const float* y, const float* dy, float* dx, std::size_t n) {
        cuda_kernels::launch_1d(n, &cuda_kernels::map_backward_kernel<F, float>, f, x, y, dy, dx, n);
    }
};
template <int D>
struct kernel<op::softmax_forward, basic_cuda<D>> {
    static void run(const float* x, float* y, std::size_t rows, std::size_t cols) {
        cuda_kernels::launch_1d(rows, &cuda_kernels::softmax_forward_kernel<float>, x, y, rows, cols);
    }
};
template <int D>
struct kernel<op::softmax_backward, basic_cuda<D>> {
    static void run(const float* y, const float* dy, float* dx, std::size_t rows, std::size_t cols) {
        cuda_kernels::launch_1d(rows, &cuda_kernels::softmax_backward_kernel<float>, y, dy, dx, rows, cols);
    }
};

/// kernel<op::batch_norm_forward, cuda>: the CPU kernel's signature and bits (one thread per channel).
template <int D>
struct kernel<op::batch_norm_forward, basic_cuda<D>> {
    static void run(std::size_t n, std::size_t channels, std::size_t inner, const float* x, const float* gamma,
                    const float* beta, float* running_mean, float* running_var, bool train, float momentum, float eps,
                    float* y) {
        cuda_kernels::launch_1d(channels, &cuda_kernels::batch_norm_forward_kernel<float>, n, channels, inner, x, gamma,
                                beta, running_mean, running_var, train, momentum, eps, y);
    }
};

/// kernel<op::batch_norm_fold, cuda>: the CPU kernel's signature and bits (one thread per channel).
template <int D>
struct kernel<op::batch_norm_fold, basic_cuda<D>> {
    static void run(std::size_t channels, const float* gamma, const float* beta, const float* running_mean,
                    const float* running_var, float eps, float* scale, float* shift) {
        cuda_kernels::launch_1d(channels, &cuda_kernels::batch_norm_fold_kernel<float>, channels, gamma, beta,
                                running_mean, running_var, eps, scale, shift);
    }
};

/// kernel<op::bias_map, cuda>: a producer's elementwise tail in one launch (the CPU kernel's signature).
template <int D>
struct kernel<op::bias_map, basic_cuda<D>> {
    template <class F>
    static void run(const F& f, const float* b, const float* scale, const float* shift, float* z, float* y,
                    std::size_t n, std::size_t channels, std::size_t inner) {
        cuda_kernels::launch_1d(n * channels * inner, &cuda_kernels::bias_map_kernel<F, float>, f, b, scale, shift, z,
                                y, n, channels, inner);
    }
};

/// kernel<op::batch_norm_backward, cuda>: the CPU kernel's signature and bits (one thread per channel).
template <int D>
struct kernel<op::batch_norm_backward, basic_cuda<D>> {
    static void run(std::size_t n, std::size_t channels, std::size_t inner, const float* x, const float* gamma,
                    const float* running_mean, const float* running_var, bool train, float eps, const float* dy,
                    float* dgamma, float* dbeta, float* dx) {
        cuda_kernels::launch_1d(channels, &cuda_kernels::batch_norm_backward_kernel<float>, n, channels, inner, x,
                                gamma, running_mean, running_var, train, eps, dy, dgamma, dbeta, dx);
    }
};

/// kernel<op::softmax_cross_entropy, cuda>::run(z, labels, rows, cols, scale, losses, dz) -> sum of
/// losses: labels in device memory (checked by the caller), `losses` (device, may be null), dz
/// (device, may be null). Returning the sum waits for the kernel; CrossEntropyLoss uses run_rows
/// (no wait) and reads the per-row losses when asked.
template <int D>
struct kernel<op::softmax_cross_entropy, basic_cuda<D>> {
    /// Per-row losses (double) into `row_losses` (device, rows values), no wait.
    static void run_rows(const float* z, const std::int64_t* labels, std::size_t rows, std::size_t cols, float scale,
                         double* row_losses, float* dz) {
        cuda_kernels::launch_1d(rows, &cuda_kernels::softmax_cross_entropy_kernel<float>, z, labels, rows, cols, scale, row_losses, dz);
    }
    static double run(const float* z, const std::int64_t* labels, std::size_t rows, std::size_t cols, float scale,
                      float* losses, float* dz) {
        thread_local cuda_runtime::device_buffer<double> scratch;
        scratch.reserve_discard(rows);
        run_rows(z, labels, rows, cols, scale, scratch.data(), dz);
        std::vector<double> host(rows);
        OAR_CUDA_CHECK(cudaMemcpyAsync(host.data(), scratch.data(), rows * sizeof(double), cudaMemcpyDeviceToHost,
                                       cuda_runtime::compute_stream()));
        OAR_CUDA_CHECK(cudaStreamSynchronize(cuda_runtime::compute_stream()));
        double total = 0.0;
        std::vector<float> as_float(losses ? rows : 0);
        for (std::size_t r = 0; r < rows; ++r) {
            total += host[r];
            if (losses) as_float[r] = static_cast<float>(host[r]);
        }
        if (losses) OAR_CUDA_CHECK(cudaMemcpy(losses, as_float.data(), rows * sizeof(float), cudaMemcpyHostToDevice));
        return total;
    }
};

/// kernel<op::fused_update, cuda>::run(f, n, p, g, s1, s2): one launch over the flat buffers.
template <int D>
struct kernel<op::fused_update, basic_cuda<D>> {
    template <class F>
    static void run(const F& f, std::size_t n, float* p, const float* g, float* s1, float* s2) {
        cuda_kernels::launch_1d(n, &cuda_kernels::update_kernel<F, float>, f, n, p, g, s1, s2);
    }
};

/// kernel<op::dropout, cuda>::run(rng, stream, p, scale, in, out, n): the CPU Dropout's mask.
template <int D>
struct kernel<op::dropout, basic_cuda<D>> {
    static void run(const CounterRng& rng, std::uint64_t stream, float p, float scale, const float* in, float* out,
                    std::size_t n) {
        cuda_kernels::launch_1d(n, &cuda_kernels::dropout_kernel<float>, rng, stream, p, scale, in, out, n);
    }
};

/// kernel<op::scale_down, cuda>::run(x, n, d): x[i] /= d in place.
template <int D>
struct kernel<op::scale_down, basic_cuda<D>> {
    static void run(float* x, std::size_t n, float d) {
        cuda_kernels::launch_1d(n, &cuda_kernels::map_kernel<cuda_kernels::scale_down_fn, float>,
                                cuda_kernels::scale_down_fn{d}, static_cast<const float*>(x), x, n);
    }
};

/// kernel<op::add, cuda>::run(a, b, y, n): y[i] = a[i] + b[i] (y may be a or b).
template <int D>
struct kernel<op::add, basic_cuda<D>> {
    static void run(const float* a, const float* b, float* y, std::size_t n) {
        cuda_kernels::launch_1d(n, &cuda_kernels::add_kernel<float>, a, b, y, n);
    }
};

/// kernel<op::copy_rows, cuda>::run(rows, len, src, src_stride, dst, dst_stride): strided row copies.
template <int D>
struct kernel<op::copy_rows, basic_cuda<D>> {
    static void run(std::size_t rows, std::size_t len, const float* src, std::size_t src_stride, float* dst,
                    std::size_t dst_stride) {
        cuda_kernels::launch_1d(rows * len, &cuda_kernels::copy_rows_kernel<float>, rows, len, src, src_stride, dst,
                                dst_stride);
    }
};

/// kernel<op::conv2d_forward, cuda>::run(g, out_c, n, x, w, b, y): the whole batch as one im2col,
/// one cuBLAS GEMM and one permute (conv_plan.hpp), in this thread's device scratch.
template <int D>
struct kernel<op::conv2d_forward, basic_cuda<D>> {
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* b, float* y) {
        cuda_kernels::CudaExec<basic_cuda<D>> ex;
        float* ws = cuda_runtime::device_scratch(cuda_kernels::conv_plan_workspace(g, out_c, n));
        cuda_kernels::conv2d_forward(ex, g, out_c, n, w, b, x, y, ws);
    }
    /// The bf16_mixed policy's: the GEMM on bf16 operands (x and w rounded), fp32 sums and bias.
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* b, float* y, bf16_mixed) {
        cuda_kernels::CudaExec<basic_cuda<D>> ex{.bf16_gemm = true};
        float* ws = cuda_runtime::device_scratch(cuda_kernels::conv_plan_workspace(g, out_c, n));
        cuda_kernels::conv2d_forward(ex, g, out_c, n, w, b, x, y, ws);
    }
};

/// kernel<op::conv2d_forward_map, cuda>::run(g, out_c, n, x, w, b, f, scale, shift, z, y): the
/// convolution into z, then its elementwise tail into y in one launch (op::bias_map without a bias).
template <int D>
struct kernel<op::conv2d_forward_map, basic_cuda<D>> {
    template <class F>
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* b, const F& f, const float* scale, const float* shift, float* z, float* y) {
        kernel<op::conv2d_forward, basic_cuda<D>>::run(g, out_c, n, x, w, b, z);
        kernel<op::bias_map, basic_cuda<D>>::run(f, static_cast<const float*>(nullptr), scale, shift, z, y, n, out_c,
                                                 g.col_cols());
    }
    template <class F>
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* b, const F& f, const float* scale, const float* shift, float* z, float* y, bf16_mixed) {
        kernel<op::conv2d_forward, basic_cuda<D>>::run(g, out_c, n, x, w, b, z, bf16_mixed{});
        kernel<op::bias_map, basic_cuda<D>>::run(f, static_cast<const float*>(nullptr), scale, shift, z, y, n, out_c,
                                                 g.col_cols());
    }
};

/// kernel<op::conv2d_backward, cuda>::run(g, out_c, n, x, w, dy, dw, db, dx): dw, db accumulate;
/// dx (may be null) is overwritten.
template <int D>
struct kernel<op::conv2d_backward, basic_cuda<D>> {
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* dy, float* dw, float* db, float* dx) {
        cuda_kernels::CudaExec<basic_cuda<D>> ex;
        float* ws = cuda_runtime::device_scratch(cuda_kernels::conv_plan_workspace(g, out_c, n));
        cuda_kernels::conv2d_backward(ex, g, out_c, n, w, x, dy, dw, db, dx, ws);
    }
    /// The bf16_mixed policy's: dy rounded to bf16 first (so the bias gradient sums the rounded dy,
    /// as on the CPU), then the plan with bf16 GEMMs.
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* dy, float* dw, float* db, float* dx, bf16_mixed) {
        cuda_kernels::CudaExec<basic_cuda<D>> ex{.bf16_gemm = true};
        const std::size_t plan = cuda_kernels::conv_plan_workspace(g, out_c, n), dy_size = n * out_c * g.col_cols();
        float* ws = cuda_runtime::device_scratch(plan + dy_size);
        float* dyr = ws + plan;
        cuda_kernels::launch_1d(dy_size, &cuda_kernels::round_bf16_kernel<float>, dy, dyr, dy_size);
        cuda_kernels::conv2d_backward(ex, g, out_c, n, w, x, static_cast<const float*>(dyr), dw, db, dx, ws);
    }
};

}  // namespace oar
