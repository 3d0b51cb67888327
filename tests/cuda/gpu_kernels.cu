// GPU runtime test of oar/cuda/kernels.cuh: every kernel<op::X, cuda> launched for real and
// compared with kernel<op::X, cpu> to 1e-5 (GEMM to 1e-4: cuBLAS sums in another order);
// dropout masks compared bit for bit. Skipped (exit 77) where there is no GPU.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cuda/kernels.cuh>  // the header under test

#include <oar/kernels/cpu/conv.hpp>         // CPU references
#include <oar/kernels/cpu/elementwise.hpp>  // relu_fn, op::map on cpu
#include <oar/kernels/cpu/gemm.hpp>         // op::gemm on cpu
#include <oar/kernels/cpu/pool.hpp>         // op::*_pool_* on cpu
#include <oar/kernels/cpu/softmax.hpp>      // op::softmax_* on cpu
#include <oar/kernels/cpu/update.hpp>       // op::fused_update on cpu
#include <oar/core/bf16.hpp>                // round_to_bf16: the bf16 GEMM's reference

#include <cstdint>  // std::int64_t
#include <algorithm>  // std::max
#include <cmath>    // std::abs, std::ldexp
#include <cstring>  // std::memcmp
#include <string>   // std::string, std::to_string
#include <vector>   // std::vector

#include "cuda/gpu_device.hpp"  // to_device, to_host, max_rel_diff
#include "support/random.hpp"   // random_vector

using oar::kernel;
using oar_test::max_rel_diff;
using oar_test::random_vector;
using oar_test::to_device;
using oar_test::to_host;
using gpu = oar::cuda;
using oar::cpu;

TEST_CASE("cuBLAS GEMM through the row-major mapping equals the CPU GEMM for every transpose") {
    const std::size_t M = 37, N = 29, K = 53;
    for (auto ta : {oar::Trans::no, oar::Trans::yes})
        for (auto tb : {oar::Trans::no, oar::Trans::yes}) {
            const std::size_t lda = ta == oar::Trans::no ? K : M, ldb = tb == oar::Trans::no ? N : K;
            const auto A = random_vector<float>(M * K, 1), B = random_vector<float>(K * N, 2), C = random_vector<float>(M * N, 3);
            auto ref = C;
            kernel<oar::op::gemm, cpu>::run(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 1.0f, ref.data(), N);
            auto a = to_device(A), b = to_device(B), c = to_device(C);
            kernel<oar::op::gemm, gpu>::run(ta, tb, M, N, K, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, c.data(), N);
            CHECK(max_rel_diff(to_host(c), ref) <= 1e-4);
        }
}

TEST_CASE("im2col, col2im, bias, pooling, map, softmax and cross-entropy kernels equal the CPU kernels") {
    const oar::ConvGeometry g{3, 12, 10, 5, 1, 2};
    const auto x = random_vector<float>(g.channels * g.height * g.width, 4);
    std::vector<float> col_ref(g.col_rows() * g.col_cols());
    kernel<oar::op::im2col, cpu>::run(g, x.data(), col_ref.data());
    auto dx_ = to_device(x);
    oar::cuda_runtime::device_buffer<float> col(col_ref.size());
    kernel<oar::op::im2col, gpu>::run(g, dx_.data(), col.data());
    CHECK(max_rel_diff(to_host(col), col_ref) == 0.0);

    auto back_ref = x;
    kernel<oar::op::col2im, cpu>::run(g, col_ref.data(), back_ref.data());
    kernel<oar::op::col2im, gpu>::run(g, col.data(), dx_.data());
    CHECK(max_rel_diff(to_host(dx_), back_ref) <= 1e-5);

    const std::size_t n = 4, C = 6, inner = 50;
    const auto y0 = random_vector<float>(n * C * inner, 5), b = random_vector<float>(C, 6);
    auto y_ref = y0, db_ref = b;
    kernel<oar::op::bias_add, cpu>::run(y_ref.data(), b.data(), n, C, inner);
    kernel<oar::op::bias_grad, cpu>::run(y0.data(), db_ref.data(), n, C, inner);
    auto y = to_device(y0), bd = to_device(b), db = to_device(b);
    kernel<oar::op::bias_grad, gpu>::run(y.data(), db.data(), n, C, inner);
    kernel<oar::op::bias_add, gpu>::run(y.data(), bd.data(), n, C, inner);
    CHECK(max_rel_diff(to_host(y), y_ref) <= 1e-5);
    CHECK(max_rel_diff(to_host(db), db_ref) <= 1e-5);

    const oar::ConvGeometry pg{C, 10, 5, 2, 2, 0};
    const std::size_t out = n * C * pg.out_height() * pg.out_width();
    const auto px = random_vector<float>(n * C * 50, 7), pdy = random_vector<float>(out, 8);
    std::vector<float> ym(out), dxm(px.size()), ya(out), dxa(px.size());
    kernel<oar::op::max_pool_forward, cpu>::run(pg, n, px.data(), ym.data());
    kernel<oar::op::max_pool_backward, cpu>::run(pg, n, px.data(), pdy.data(), dxm.data());
    kernel<oar::op::avg_pool_forward, cpu>::run(pg, n, px.data(), ya.data());
    kernel<oar::op::avg_pool_backward, cpu>::run(pg, n, pdy.data(), dxa.data());
    auto gx = to_device(px), gdy = to_device(pdy);
    oar::cuda_runtime::device_buffer<float> gy(out), gdx(px.size());
    kernel<oar::op::max_pool_forward, gpu>::run(pg, n, gx.data(), gy.data());
    CHECK(max_rel_diff(to_host(gy), ym) <= 1e-5);
    kernel<oar::op::max_pool_backward, gpu>::run(pg, n, gx.data(), gdy.data(), gdx.data());
    CHECK(max_rel_diff(to_host(gdx), dxm) <= 1e-5);
    kernel<oar::op::avg_pool_forward, gpu>::run(pg, n, gx.data(), gy.data());
    CHECK(max_rel_diff(to_host(gy), ya) <= 1e-5);
    kernel<oar::op::avg_pool_backward, gpu>::run(pg, n, gdy.data(), gdx.data());
    CHECK(max_rel_diff(to_host(gdx), dxa) <= 1e-5);

    std::vector<float> r_ref(px.size()), rb_ref(px.size());
    kernel<oar::op::map, cpu>::run(oar::tanh_fn{}, px.data(), r_ref.data(), px.size());
    kernel<oar::op::map_backward, cpu>::run(oar::tanh_fn{}, px.data(), r_ref.data(), px.data(), rb_ref.data(), px.size());
    oar::cuda_runtime::device_buffer<float> gr(px.size()), grb(px.size());
    kernel<oar::op::map, gpu>::run(oar::tanh_fn{}, gx.data(), gr.data(), px.size());
    kernel<oar::op::map_backward, gpu>::run(oar::tanh_fn{}, gx.data(), gr.data(), gx.data(), grb.data(), px.size());
    CHECK(max_rel_diff(to_host(gr), r_ref) <= 1e-5);
    CHECK(max_rel_diff(to_host(grb), rb_ref) <= 1e-5);

    const std::size_t rows = 33, cols = 10;
    const auto z = random_vector<float>(rows * cols, 9, 5.0);
    std::vector<std::int64_t> labels(rows);
    for (std::size_t r = 0; r < rows; ++r) labels[r] = static_cast<std::int64_t>(r % cols);
    std::vector<float> sm(rows * cols), smb(rows * cols), dz(rows * cols);
    kernel<oar::op::softmax_forward, cpu>::run(z.data(), sm.data(), rows, cols);
    kernel<oar::op::softmax_backward, cpu>::run(sm.data(), z.data(), smb.data(), rows, cols);
    const double total = kernel<oar::op::softmax_cross_entropy, cpu>::run(z.data(), labels.data(), rows, cols, 0.5f,
                                                                           nullptr, dz.data());
    auto gz = to_device(z);
    auto gl = to_device(labels);
    oar::cuda_runtime::device_buffer<float> gsm(rows * cols), gsmb(rows * cols), gdz(rows * cols);
    kernel<oar::op::softmax_forward, gpu>::run(gz.data(), gsm.data(), rows, cols);
    kernel<oar::op::softmax_backward, gpu>::run(gsm.data(), gz.data(), gsmb.data(), rows, cols);
    const double gtotal = kernel<oar::op::softmax_cross_entropy, gpu>::run(gz.data(), gl.data(), rows, cols, 0.5f,
                                                                            nullptr, gdz.data());
    CHECK(max_rel_diff(to_host(gsm), sm) <= 1e-5);
    CHECK(max_rel_diff(to_host(gsmb), smb) <= 1e-5);
    CHECK(max_rel_diff(to_host(gdz), dz) <= 1e-5);
    CHECK(std::abs(gtotal - total) <= 1e-5 * std::abs(total));
}

TEST_CASE("the fused Adam update is one launch equal to the CPU update, and dropout masks match bitwise") {
    const std::size_t n = 100000;
    const auto p0 = random_vector<float>(n, 10), g = random_vector<float>(n, 11);
    auto p = p0;
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    const oar::adam_fn f{0.001f, 1e-8f, 0.9f, 0.999f, 0.0f};
    kernel<oar::op::fused_update, cpu>::run(f, n, p.data(), g.data(), m.data(), v.data());
    auto gp = to_device(p0), gg = to_device(g), gm = to_device(std::vector<float>(n, 0.0f)),
         gv = to_device(std::vector<float>(n, 0.0f));
    kernel<oar::op::fused_update, gpu>::run(f, n, gp.data(), gg.data(), gm.data(), gv.data());
    CHECK(max_rel_diff(to_host(gp), p) <= 1e-5);
    CHECK(max_rel_diff(to_host(gm), m) <= 1e-5);

    const oar::CounterRng rng{77};
    const auto stream = oar::rng_stream::dropout_of(2, 5);
    std::vector<float> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = rng.uniform(stream, i) < 0.2f ? 0.0f : p0[i] * (1.0f / 0.8f);
    oar::cuda_runtime::device_buffer<float> out(n);
    const auto gx0 = to_device(p0);
    kernel<oar::op::dropout, gpu>::run(rng, stream, 0.2f, 1.0f / 0.8f, gx0.data(), out.data(), n);
    const auto got = to_host(out);
    CHECK(std::memcmp(got.data(), ref.data(), n * sizeof(float)) == 0);
}

TEST_CASE("set_device rejects a GPU index beyond the machine's devices with no_device_error") {
    const int n = oar::cuda_runtime::device_count();
    bool threw = false;
    try {
        oar::cuda_runtime::set_device("gpu:" + std::to_string(n));
    } catch (const oar::no_device_error& e) {
        threw = std::string(e.what()).find("gpu:" + std::to_string(n)) != std::string::npos;
    }
    CHECK(threw);
    CHECK(oar::cuda_runtime::set_device("gpu:0").index == 0);
}

TEST_CASE("the bf16 GEMM (cublasGemmEx, bf16 operands, fp32 compute) sums the products of bf16-rounded operands") {
    // Reference: double sums of the operands rounded by core/bf16.hpp. Bound: 2^-14 * sum |a||b|
    // (k = 2^-6 in the form k * 2^-8 * sum |a||b|: fp32 accumulation, whatever order and tile
    // shape cuBLAS picks). The fp32 GEMM of the unrounded operands misses the reference by more, so
    // the check sees whether the operands were rounded.
    const std::size_t M = 37, N = 29, K = 300;
    for (auto ta : {oar::Trans::no, oar::Trans::yes})
        for (auto tb : {oar::Trans::no, oar::Trans::yes}) {
            const std::size_t lda = (ta == oar::Trans::no ? K : M) + 3, ldb = (tb == oar::Trans::no ? N : K) + 5;
            const auto A = random_vector<float>((ta == oar::Trans::no ? M : K) * lda, 21);
            const auto B = random_vector<float>((tb == oar::Trans::no ? K : N) * ldb, 22);
            const auto C = random_vector<float>(M * N, 23);
            const auto at = [&](std::size_t i, std::size_t k) { return ta == oar::Trans::no ? A[i * lda + k] : A[k * lda + i]; };
            const auto bt = [&](std::size_t k, std::size_t j) { return tb == oar::Trans::no ? B[k * ldb + j] : B[j * ldb + k]; };
            auto a = to_device(A), b = to_device(B), c = to_device(C), c32 = to_device(C);
            kernel<oar::op::gemm_bf16, gpu>::run(ta, tb, M, N, K, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, c.data(), N);
            kernel<oar::op::gemm, gpu>::run(ta, tb, M, N, K, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, c32.data(), N);
            const auto got = to_host(c), got32 = to_host(c32);
            bool within = true;
            double worst32 = 0.0;
            for (std::size_t i = 0; i < M; ++i)
                for (std::size_t j = 0; j < N; ++j) {
                    double sum = 0.0, mag = 0.0;
                    for (std::size_t k = 0; k < K; ++k) {
                        const double t = static_cast<double>(oar::round_to_bf16(at(i, k))) * oar::round_to_bf16(bt(k, j));
                        sum += t;
                        mag += std::abs(t);
                    }
                    const double want = 0.5 * sum + C[i * N + j], bound = 0x1p-14 * (0.5 * mag + std::abs(C[i * N + j]));
                    within = within && std::abs(got[i * N + j] - want) <= bound;
                    worst32 = std::max(worst32, std::abs(got32[i * N + j] - want) / bound);
                }
            CHECK(within);
            CHECK(worst32 > 1.0);
        }
}

TEST_CASE("the bf16 rounding and packing kernels give core/bf16.hpp's bits on the device") {
    auto v = random_vector<float>(5000, 24);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(v[i], static_cast<int>(i % 80) - 40);
    std::vector<float> want(v.size());
    oar::round_to_bf16(v.data(), want.data(), v.size());
    auto d = to_device(v);
    oar::cuda_runtime::device_buffer<float> out(v.size());
    oar::cuda_kernels::launch_1d(v.size(), &oar::cuda_kernels::round_bf16_kernel<float>,
                                 static_cast<const float*>(d.data()), out.data(), v.size());
    const auto got = to_host(out);
    CHECK(std::memcmp(got.data(), want.data(), v.size() * sizeof(float)) == 0);
}
