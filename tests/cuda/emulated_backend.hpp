// `emulated_cuda`: a backend made of the CUDA backend's kernel bodies run through emulated launches
// (tests/cuda/emulate.hpp), with the CPU GEMM where cuBLAS runs and buffers that say they are not
// host memory, so backend-neutral code takes its device paths (uploads, downloads, host mirrors).
// It lets the Network, optimizers, losses, Model, checkpoints and DataParallel that a GPU runs be
// tested here without a GPU: the launch configurations are those of oar/kernels/cuda/kernels.cuh.
#pragma once

#include <algorithm>  // std::copy_n, std::fill_n
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t, std::uint64_t
#include <string_view>  // std::string_view
#include <vector>     // std::vector: the "device" buffers

#include <oar/core/bf16.hpp>              // bf16, to_float: the packed GEMM operands
#include <oar/core/precision.hpp>         // bf16_mixed: the Conv2D kernels' mixed overloads
#include <oar/core/rng.hpp>               // CounterRng
#include <oar/kernels/cpu/gemm.hpp>       // op::gemm on cpu: the stand-in for cuBLAS
#include <oar/kernels/cuda/bodies.hpp>    // the CUDA kernel bodies
#include <oar/kernels/cuda/conv_plan.hpp> // the whole-batch convolution plan
#include <oar/kernels/cuda/cublas_map.hpp> // stored_shape: what the bf16 GEMM packs
#include <oar/kernels/cuda/launch.hpp>    // Thread, blocks_for, block_threads
#include <oar/kernels/dispatch.hpp>       // kernel, storage

#include "cuda/emulate.hpp"  // emulate_launch, emulate_phased_launch

namespace oar_test {

/// The tag: float buffers in "device memory" (host memory that oar must not read directly).
struct emulated_cuda {
    using value_type = float;
    static constexpr std::string_view name = "cuda (emulated)";
    static constexpr bool is_oar_backend = true;
    static constexpr bool bf16_kernels = true;  // the bf16_mixed policy as on oar::cuda
};

/// A move-only buffer, as cuda_runtime::device_buffer.
template <class U>
class emulated_buffer {
public:
    emulated_buffer() = default;
    explicit emulated_buffer(std::size_t n) : v_(n) {}
    emulated_buffer(emulated_buffer&&) noexcept = default;
    emulated_buffer& operator=(emulated_buffer&&) noexcept = default;
    U* data() { return v_.data(); }
    const U* data() const { return v_.data(); }
    std::size_t size() const { return v_.size(); }

private:
    std::vector<U> v_;
};

/// Counts of the storage calls, so tests can see which path backend-neutral code took.
struct storage_counts {
    std::size_t uploads = 0, downloads = 0, copies = 0, syncs = 0;
};
inline storage_counts& counts() {
    static storage_counts c;
    return c;
}

namespace ck = oar::cuda_kernels;

/// A 1-D launch of `n` work items with the CUDA wrappers' grid (kernels.cuh: launch_1d).
template <class Body>
void launch_1d(std::size_t n, Body&& body) {
    if (n == 0) return;
    emulate_launch(ck::Dim3{ck::blocks_for(n)}, ck::Dim3{ck::block_threads}, body);
}

/// kernel<op::gemm_bf16, cuda>'s steps: A and B packed to bf16 by pack_bf16_body in emulated
/// launches (the grid of the CUDA wrapper), then the stand-in for cublasGemmEx: the packed values
/// (exact as floats) multiplied by the CPU's fp32 GEMM, i.e. bf16 products with fp32 sums.
inline void gemm_bf16(oar::Trans ta, oar::Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha,
                      const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
                      std::size_t ldc) {
    if (M == 0 || N == 0) return;
    const auto sa = ck::stored_shape(ta, M, K), sb = ck::stored_shape(tb, K, N);
    std::vector<oar::bf16> a16(sa.rows * sa.cols), b16(sb.rows * sb.cols);
    launch_1d(a16.size(), [&](const ck::Thread& t) { ck::pack_bf16_body(t, sa.rows, sa.cols, A, lda, a16.data()); });
    launch_1d(b16.size(), [&](const ck::Thread& t) { ck::pack_bf16_body(t, sb.rows, sb.cols, B, ldb, b16.data()); });
    std::vector<float> a(a16.size()), b(b16.size());
    oar::to_float(a16.data(), a.data(), a.size());
    oar::to_float(b16.data(), b.data(), b.size());
    oar::kernel<oar::op::gemm, oar::cpu>::run(ta, tb, M, N, K, alpha, a.data(), sa.cols, b.data(), sb.cols, beta, C, ldc);
}

/// The conv plan's steps with every kernel body run through an emulated launch (the grid the
/// CUDA wrappers use), and the CPU GEMM where the CUDA executor calls cuBLAS (gemm_bf16 above
/// where it calls the bf16 GEMM).
struct EmulatedExec {
    bool bf16_gemm = false;
    void im2col(const oar::ConvGeometry& g, std::size_t n, const float* x, float* col) {
        launch_1d(g.col_rows() * n * g.col_cols(), [&](const ck::Thread& t) { ck::im2col_body(t, g, n, x, col); });
    }
    void col2im(const oar::ConvGeometry& g, std::size_t n, const float* col, float* dx) {
        launch_1d(n * g.channels * g.height * g.width, [&](const ck::Thread& t) { ck::col2im_body(t, g, n, col, dx); });
    }
    void gemm(oar::Trans ta, oar::Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
              std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
        if (bf16_gemm) oar_test::gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        else oar::kernel<oar::op::gemm, oar::cpu>::run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
    void ncp_from_cnp(const float* src, float* dst, const float* bias, std::size_t n, std::size_t c, std::size_t p) {
        launch_1d(n * c * p, [&](const ck::Thread& t) { ck::ncp_from_cnp_body(t, src, dst, bias, n, c, p); });
    }
    void cnp_from_ncp(const float* src, float* dst, std::size_t n, std::size_t c, std::size_t p) {
        launch_1d(n * c * p, [&](const ck::Thread& t) { ck::cnp_from_ncp_body(t, src, dst, n, c, p); });
    }
    void bias_grad(const float* dy, float* db, std::size_t n, std::size_t c, std::size_t inner) {
        emulate_phased_launch<double>(
            ck::Dim3{static_cast<unsigned>(c)}, ck::Dim3{ck::block_threads}, ck::bias_grad_phases(ck::block_threads),
            ck::block_threads,
            [&](unsigned phase, const ck::Thread& t, double* shared) { ck::bias_grad_body(phase, t, shared, dy, db, n, c, inner); });
    }
    void zero(float* p, std::size_t count) { std::fill_n(p, count, 0.0f); }
};

}  // namespace oar_test

namespace oar {

template <>
struct storage<oar_test::emulated_cuda> {
    static constexpr bool host_memory = false;
    template <class U>
    using buffer = oar_test::emulated_buffer<U>;
    template <class U>
    static buffer<U> make(std::size_t n) { return buffer<U>(n); }
    template <class U>
    static void upload(U* dst, const U* src, std::size_t n) {
        ++oar_test::counts().uploads;
        std::copy_n(src, n, dst);
    }
    template <class U>
    static void download(U* dst, const U* src, std::size_t n) {
        ++oar_test::counts().downloads;
        std::copy_n(src, n, dst);
    }
    template <class U>
    static void copy(U* dst, const U* src, std::size_t n) {
        ++oar_test::counts().copies;
        std::copy_n(src, n, dst);
    }
    template <class U>
    static void fill(U* dst, std::size_t n, U v) { std::fill_n(dst, n, v); }
    static void synchronize() { ++oar_test::counts().syncs; }
};

// The kernels: each the body kernels.cuh launches, with the same grid.
using emu = oar_test::emulated_cuda;
namespace emu_ck = oar::cuda_kernels;

template <>
struct kernel<op::gemm, emu> : kernel<op::gemm, cpu> {};
template <>
struct kernel<op::gemm_bf16, emu> {
    static void run(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
                    std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
        oar_test::gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
};

template <>
struct kernel<op::bias_add, emu> {
    static void run(float* y, const float* b, std::size_t n, std::size_t c, std::size_t inner) {
        oar_test::launch_1d(n * c * inner, [&](const emu_ck::Thread& t) { emu_ck::bias_add_body(t, y, b, n, c, inner); });
    }
};
template <>
struct kernel<op::bias_map, emu> {
    template <class F>
    static void run(const F& f, const float* b, const float* scale, const float* shift, float* z, float* y,
                    std::size_t n, std::size_t c, std::size_t inner) {
        oar_test::launch_1d(n * c * inner, [&](const emu_ck::Thread& t) {
            emu_ck::bias_map_body(t, f, b, scale, shift, z, y, n, c, inner);
        });
    }
};
template <>
struct kernel<op::batch_norm_fold, emu> {
    static void run(std::size_t channels, const float* gamma, const float* beta, const float* running_mean,
                    const float* running_var, float eps, float* scale, float* shift) {
        oar_test::launch_1d(channels, [&](const emu_ck::Thread& t) {
            emu_ck::batch_norm_fold_body(t, channels, gamma, beta, running_mean, running_var, eps, scale, shift);
        });
    }
};
template <>
struct kernel<op::bias_grad, emu> {
    static void run(const float* dy, float* db, std::size_t n, std::size_t c, std::size_t inner) {
        oar_test::EmulatedExec{}.bias_grad(dy, db, n, c, inner);
    }
};
template <>
struct kernel<op::map, emu> {
    template <class F>
    static void run(const F& f, const float* x, float* y, std::size_t n) {
        oar_test::launch_1d(n, [&](const emu_ck::Thread& t) { emu_ck::map_body(t, f, x, y, n); });
    }
};
template <>
struct kernel<op::map_backward, emu> {
    template <class F>
    static void run(const F& f, const float* x, const float* y, const float* dy, float* dx, std::size_t n) {
        oar_test::launch_1d(n, [&](const emu_ck::Thread& t) { emu_ck::map_backward_body(t, f, x, y, dy, dx, n); });
    }
};
template <>
struct kernel<op::max_pool_forward, emu> {
    static void run(const ConvGeometry& g, std::size_t n, const float* x, float* y) {
        oar_test::launch_1d(n * g.channels * g.out_height() * g.out_width(),
                            [&](const emu_ck::Thread& t) { emu_ck::max_pool_forward_body(t, g, n, x, y); });
    }
};
template <>
struct kernel<op::max_pool_backward, emu> {
    static void run(const ConvGeometry& g, std::size_t n, const float* x, const float* dy, float* dx) {
        oar_test::launch_1d(n * g.channels * g.height * g.width,
                            [&](const emu_ck::Thread& t) { emu_ck::max_pool_backward_body(t, g, n, x, dy, dx); });
    }
};
template <>
struct kernel<op::softmax_cross_entropy, emu> {
    static void run_rows(const float* z, const std::int64_t* labels, std::size_t rows, std::size_t cols, float scale,
                         double* row_losses, float* dz) {
        oar_test::launch_1d(rows, [&](const emu_ck::Thread& t) {
            emu_ck::softmax_cross_entropy_body(t, z, labels, rows, cols, scale, row_losses, dz);
        });
    }
};
template <>
struct kernel<op::batch_norm_forward, emu> {
    static void run(std::size_t n, std::size_t channels, std::size_t inner, const float* x, const float* gamma,
                    const float* beta, float* running_mean, float* running_var, bool train, float momentum, float eps,
                    float* y) {
        oar_test::launch_1d(channels, [&](const emu_ck::Thread& t) {
            emu_ck::batch_norm_forward_body(t, n, channels, inner, x, gamma, beta, running_mean, running_var, train,
                                            momentum, eps, y);
        });
    }
};
template <>
struct kernel<op::batch_norm_backward, emu> {
    static void run(std::size_t n, std::size_t channels, std::size_t inner, const float* x, const float* gamma,
                    const float* running_mean, const float* running_var, bool train, float eps, const float* dy,
                    float* dgamma, float* dbeta, float* dx) {
        oar_test::launch_1d(channels, [&](const emu_ck::Thread& t) {
            emu_ck::batch_norm_backward_body(t, n, channels, inner, x, gamma, running_mean, running_var, train, eps, dy,
                                             dgamma, dbeta, dx);
        });
    }
};
template <>
struct kernel<op::fused_update, emu> {
    template <class F>
    static void run(const F& f, std::size_t n, float* p, const float* g, float* s1, float* s2) {
        oar_test::launch_1d(n, [&](const emu_ck::Thread& t) { emu_ck::update_body(t, f, n, p, g, s1, s2); });
    }
};
template <>
struct kernel<op::dropout, emu> {
    static void run(const CounterRng& rng, std::uint64_t stream, float p, float scale, const float* in, float* out,
                    std::size_t n) {
        oar_test::launch_1d(n, [&](const emu_ck::Thread& t) { emu_ck::dropout_body(t, rng, stream, p, scale, in, out, n); });
    }
};
template <>
struct kernel<op::scale_down, emu> {
    static void run(float* x, std::size_t n, float d) {
        const emu_ck::scale_down_fn f{d};
        oar_test::launch_1d(n, [&](const emu_ck::Thread& t) { emu_ck::map_body(t, f, static_cast<const float*>(x), x, n); });
    }
};
template <>
struct kernel<op::add, emu> {
    static void run(const float* a, const float* b, float* y, std::size_t n) {
        oar_test::launch_1d(n, [&](const emu_ck::Thread& t) { emu_ck::add_body(t, a, b, y, n); });
    }
};
template <>
struct kernel<op::copy_rows, emu> {
    static void run(std::size_t rows, std::size_t len, const float* src, std::size_t src_stride, float* dst,
                    std::size_t dst_stride) {
        oar_test::launch_1d(rows * len, [&](const emu_ck::Thread& t) {
            emu_ck::copy_rows_body(t, rows, len, src, src_stride, dst, dst_stride);
        });
    }
};
template <>
struct kernel<op::conv2d_forward, emu> {
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* b, float* y) {
        std::vector<float> ws(emu_ck::conv_plan_workspace(g, out_c, n), -7.0f);
        oar_test::EmulatedExec ex;
        emu_ck::conv2d_forward(ex, g, out_c, n, w, b, x, y, ws.data());
    }
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* b, float* y, bf16_mixed) {  // as the CUDA backend's
        std::vector<float> ws(emu_ck::conv_plan_workspace(g, out_c, n), -7.0f);
        oar_test::EmulatedExec ex{.bf16_gemm = true};
        emu_ck::conv2d_forward(ex, g, out_c, n, w, b, x, y, ws.data());
    }
};
template <>
struct kernel<op::conv2d_forward_map, emu> {  // as the CUDA backend's: the convolution, then one bias_map launch
    template <class F>
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* b, const F& f, const float* scale, const float* shift, float* z, float* y) {
        kernel<op::conv2d_forward, emu>::run(g, out_c, n, x, w, b, z);
        kernel<op::bias_map, emu>::run(f, static_cast<const float*>(nullptr), scale, shift, z, y, n, out_c,
                                       g.col_cols());
    }
    template <class F>
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* b, const F& f, const float* scale, const float* shift, float* z, float* y, bf16_mixed) {
        kernel<op::conv2d_forward, emu>::run(g, out_c, n, x, w, b, z, bf16_mixed{});
        kernel<op::bias_map, emu>::run(f, static_cast<const float*>(nullptr), scale, shift, z, y, n, out_c,
                                       g.col_cols());
    }
};
template <>
struct kernel<op::conv2d_backward, emu> {
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* dy, float* dw, float* db, float* dx) {
        std::vector<float> ws(emu_ck::conv_plan_workspace(g, out_c, n), -7.0f);
        oar_test::EmulatedExec ex;
        emu_ck::conv2d_backward(ex, g, out_c, n, w, x, dy, dw, db, dx, ws.data());
    }
    static void run(const ConvGeometry& g, std::size_t out_c, std::size_t n, const float* x, const float* w,
                    const float* dy, float* dw, float* db, float* dx, bf16_mixed) {  // as the CUDA backend's
        const std::size_t dy_size = n * out_c * g.col_cols();
        std::vector<float> ws(emu_ck::conv_plan_workspace(g, out_c, n), -7.0f), dyr(dy_size, -7.0f);
        oar_test::launch_1d(dy_size, [&](const emu_ck::Thread& t) { emu_ck::round_bf16_body(t, dy, dyr.data(), dy_size); });
        oar_test::EmulatedExec ex{.bf16_gemm = true};
        emu_ck::conv2d_backward(ex, g, out_c, n, w, x, static_cast<const float*>(dyr.data()), dw, db, dx, ws.data());
    }
};

}  // namespace oar
