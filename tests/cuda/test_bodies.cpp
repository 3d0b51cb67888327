// Tests of oar/kernels/cuda/bodies.hpp: every CUDA kernel body run through an emulated launch
// (tests/cuda/emulate.hpp) and compared with the CPU backend's kernel to 1e-5 (relative to the
// larger magnitude, absolute below 1), each under two launches: a small grid whose threads must
// loop (grid-stride) and the grid the CUDA wrapper launches.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cuda/bodies.hpp>  // the header under test

#include <oar/kernels/cpu/batch_norm.hpp>   // op::batch_norm_fold
#include <oar/kernels/cpu/combine.hpp>      // op::add, op::copy_rows
#include <oar/kernels/cpu/conv.hpp>         // the CPU reference: im2col, col2im, bias_*
#include <oar/kernels/cpu/elementwise.hpp>  // relu_fn, sigmoid_fn, tanh_fn, op::map*
#include <oar/kernels/cpu/pool.hpp>         // op::*_pool_*
#include <oar/kernels/cpu/softmax.hpp>      // op::softmax_*, op::softmax_cross_entropy
#include <oar/kernels/cpu/update.hpp>       // op::fused_update
#include <oar/kernels/expr.hpp>             // expr::then: a tail's chain
#include <oar/kernels/update_fns.hpp>       // sgd_fn, momentum_fn, adagrad_fn, adam_fn
#include <oar/layers/dropout.hpp>          // the CPU Dropout whose masks the body must reproduce

#include <algorithm>  // std::max
#include <array>      // std::array: shapes
#include <bit>        // std::bit_cast: bf16 rounding cases by their bits
#include <cmath>      // std::abs, std::ldexp
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t
#include <cstring>    // std::memcmp
#include <limits>     // std::numeric_limits: a NaN input
#include <string>     // std::string
#include <utility>    // std::pair
#include <vector>     // std::vector

#include "cuda/emulate.hpp"    // emulate_launch, emulate_phased_launch
#include "support/random.hpp"  // oar_test::random_vector

namespace {

namespace ck = oar::cuda_kernels;
using oar::cpu;
using oar::kernel;
using oar_test::Dim3;
using oar_test::emulate_launch;
using oar_test::random_vector;

/// The two launch shapes every body is run under for n work items.
std::vector<std::pair<Dim3, Dim3>> launches(std::size_t n) {
    return {{Dim3{3}, Dim3{32}}, {Dim3{ck::blocks_for(n)}, Dim3{ck::block_threads}}};
}

/// The largest |a - b| / max(1, |a|, |b|) over the two vectors; they must have the same size.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = std::abs(static_cast<double>(a[i]) - b[i]) /
                         std::max({1.0, std::abs(static_cast<double>(a[i])), std::abs(static_cast<double>(b[i]))});
        worst = std::max(worst, d);
    }
    return worst;
}

constexpr double tol = 1e-5;

// (channels, height, width, kernel, stride, pad): stride, padding, K = 1, non-square, the course's.
constexpr oar::ConvGeometry conv_geometries[] = {
    {1, 5, 5, 3, 1, 0}, {2, 6, 5, 3, 1, 1}, {3, 7, 7, 3, 2, 1}, {2, 8, 6, 5, 1, 2},
    {1, 9, 8, 4, 3, 2}, {3, 4, 4, 1, 1, 0}, {1, 28, 28, 5, 1, 2}, {20, 14, 14, 5, 1, 2},
};
// Pooling has no padding: (channels, height, width, kernel, stride, 0); overlapping windows too.
constexpr oar::ConvGeometry pool_geometries[] = {
    {2, 6, 6, 2, 2, 0}, {3, 7, 5, 3, 2, 0}, {1, 8, 8, 3, 1, 0}, {2, 9, 7, 2, 3, 0}, {20, 28, 28, 2, 2, 0},
};

std::string describe(const oar::ConvGeometry& g) {
    return "C=" + std::to_string(g.channels) + " H=" + std::to_string(g.height) + " W=" + std::to_string(g.width) +
           " K=" + std::to_string(g.kernel) + " S=" + std::to_string(g.stride) + " P=" + std::to_string(g.pad);
}

template <class F>
void check_map(const F& f, std::uint64_t seed) {
    const std::size_t n = 1000;
    const auto x = random_vector<float>(n, seed, 4.0);
    const auto dy = random_vector<float>(n, seed + 1);
    std::vector<float> y_cpu(n), dx_cpu(n);
    kernel<oar::op::map, cpu>::run(f, x.data(), y_cpu.data(), n);
    kernel<oar::op::map_backward, cpu>::run(f, x.data(), y_cpu.data(), dy.data(), dx_cpu.data(), n);
    for (auto [grid, block] : launches(n)) {
        std::vector<float> y(n, -7.0f), dx(n, -7.0f);
        emulate_launch(grid, block, [&](const ck::Thread& t) { ck::map_body(t, f, x.data(), y.data(), n); });
        emulate_launch(grid, block,
                       [&](const ck::Thread& t) { ck::map_backward_body(t, f, x.data(), y.data(), dy.data(), dx.data(), n); });
        CHECK(max_rel_diff(y, y_cpu) <= tol);
        CHECK(max_rel_diff(dx, dx_cpu) <= tol);
    }
}

}  // namespace

TEST_CASE("map and map_backward bodies equal the CPU map kernels for ReLU, Sigmoid and Tanh") {
    check_map(oar::relu_fn{}, 11);
    check_map(oar::sigmoid_fn{}, 12);
    check_map(oar::tanh_fn{}, 13);
}

TEST_CASE("the fused update body equals the CPU fused update for SGD, Momentum, Adagrad and Adam") {
    const std::size_t n = 777;
    const auto p0 = random_vector<float>(n, 21), g = random_vector<float>(n, 22);
    const auto s_0 = oar_test::uniform_vector<float>(n, 24, 0.0, 0.1);  // Adagrad/Adam state is >= 0
    auto run_both = [&](const auto& f, bool use_s1, bool use_s2) {
        for (auto [grid, block] : launches(n)) {
            auto pc = p0, pe = p0, a1 = s_0, a2 = s_0, b1 = s_0, b2 = s_0;
            for (int step = 0; step < 3; ++step) {  // state carried over steps
                kernel<oar::op::fused_update, cpu>::run(f, n, pc.data(), g.data(), use_s1 ? a1.data() : nullptr,
                                                        use_s2 ? a2.data() : nullptr);
                emulate_launch(grid, block, [&](const ck::Thread& t) {
                    ck::update_body(t, f, n, pe.data(), g.data(), use_s1 ? b1.data() : nullptr, use_s2 ? b2.data() : nullptr);
                });
            }
            CHECK(max_rel_diff(pe, pc) <= tol);
            CHECK(max_rel_diff(b1, a1) <= tol);
            CHECK(max_rel_diff(b2, a2) <= tol);
            CHECK(max_rel_diff(pe, p0) > 1e-4);  // the update did something
        }
    };
    run_both(oar::sgd_fn{0.1f, 0.01f}, false, false);
    run_both(oar::momentum_fn{0.1f, 0.0f, 0.9f, false}, true, false);
    run_both(oar::momentum_fn{0.1f, 0.01f, 0.9f, true}, true, false);
    run_both(oar::adagrad_fn{0.1f, 0.0f, 1e-6f}, true, false);
    run_both(oar::adam_fn{0.01f, 1e-8f, 0.9f, 0.999f, 0.001f}, true, true);
}

TEST_CASE("the dropout body draws the CPU Dropout's mask bit for bit") {
    const std::size_t n = 5003;  // not a multiple of 4: the CPU layer's tail loop runs too
    const auto x = random_vector<float>(n, 31);
    const oar::CounterRng rng{1234};
    const float p = 0.2f;
    const float scale = 1.0f / (1.0f - p);
    const std::uint64_t stream = oar::rng_stream::dropout_of(3, 17);
    std::vector<float> ref(n);  // the CPU Dropout layer itself, at layer index 3, forward pass 17
    oar::Context<cpu> ctx;
    ctx.rng = rng;
    ctx.layer_index = 3;
    ctx.step = 17;
    oar::Dropout{0.2f}.forward(ctx, oar::make_dims(n), x.data(), ref.data(), 1);
    std::size_t dropped = 0;
    for (float v : ref) dropped += v == 0.0f;
    CHECK(dropped > 850);  // ~20% of 5000
    CHECK(dropped < 1150);
    for (auto [grid, block] : launches(n)) {
        std::vector<float> y(n, -7.0f);
        emulate_launch(grid, block,
                       [&](const ck::Thread& t) { ck::dropout_body(t, rng, stream, p, scale, x.data(), y.data(), n); });
        CHECK(std::memcmp(y.data(), ref.data(), n * sizeof(float)) == 0);
    }
}

TEST_CASE("add and copy_rows bodies (Residual's sum, Concat's slices) equal the CPU kernels bit for bit") {
    const std::size_t n = 1000;
    const auto a = random_vector<float>(n, 51);
    const auto b = random_vector<float>(n, 52);
    std::vector<float> y_cpu(n);
    kernel<oar::op::add, cpu>::run(a.data(), b.data(), y_cpu.data(), n);
    for (auto [grid, block] : launches(n)) {
        auto y = a;  // in place: y is a
        emulate_launch(grid, block, [&](const ck::Thread& t) { ck::add_body(t, y.data(), b.data(), y.data(), n); });
        CHECK(y == y_cpu);
    }
    // 6 rows of 7 values into the middle of rows of 20, starting at column 5, and back.
    const std::size_t rows = 6, len = 7, wide = 20;
    const auto src = random_vector<float>(rows * len, 53);
    const auto dst0 = random_vector<float>(rows * wide, 54);
    auto dst_cpu = dst0;
    kernel<oar::op::copy_rows, cpu>::run(rows, len, src.data(), len, dst_cpu.data() + 5, wide);
    for (auto [grid, block] : launches(rows * len)) {
        auto dst = dst0;
        emulate_launch(grid, block, [&](const ck::Thread& t) {
            ck::copy_rows_body(t, rows, len, src.data(), len, dst.data() + 5, wide);
        });
        CHECK(dst == dst_cpu);
        std::vector<float> back(rows * len, -1.0f);
        emulate_launch(grid, block, [&](const ck::Thread& t) {
            ck::copy_rows_body(t, rows, len, static_cast<const float*>(dst.data() + 5), wide, back.data(), len);
        });
        CHECK(back == src);
    }
}

TEST_CASE("bias_add equals the CPU kernel and bias_grad's shared-memory reduction equals the CPU sum") {
    const std::size_t n = 7, channels = 5, inner = 300;
    const auto y0 = random_vector<float>(n * channels * inner, 41);
    const auto b = random_vector<float>(channels, 42);
    auto y_cpu = y0;
    kernel<oar::op::bias_add, cpu>::run(y_cpu.data(), b.data(), n, channels, inner);
    for (auto [grid, block] : launches(y0.size())) {
        auto y = y0;
        emulate_launch(grid, block,
                       [&](const ck::Thread& t) { ck::bias_add_body(t, y.data(), b.data(), n, channels, inner); });
        CHECK(max_rel_diff(y, y_cpu) <= tol);
    }
    const auto db0 = random_vector<float>(channels, 43);
    auto db_cpu = db0;
    kernel<oar::op::bias_grad, cpu>::run(y0.data(), db_cpu.data(), n, channels, inner);
    for (unsigned threads : {1u, 2u, 32u, 256u}) {
        auto db = db0;
        oar_test::emulate_phased_launch<double>(
            Dim3{static_cast<unsigned>(channels)}, Dim3{threads}, ck::bias_grad_phases(threads), threads,
            [&](unsigned phase, const ck::Thread& t, double* shared) {
                ck::bias_grad_body(phase, t, shared, y0.data(), db.data(), n, channels, inner);
            });
        CHECK_MESSAGE(max_rel_diff(db, db_cpu) <= tol, "threads per block " << threads);
    }
}

TEST_CASE("the producer-tail body (bias, folded BatchNorm, chain) equals the CPU op::bias_map; the fold body equals the CPU fold") {
    // Linear's rows (inner 1) and Conv2D's planes, sizes that leave partial vectors on the CPU.
    for (const auto [n, channels, inner] : {std::array<std::size_t, 3>{5, 13, 1}, std::array<std::size_t, 3>{3, 4, 37}}) {
        INFO("n=", n, " channels=", channels, " inner=", inner);
        const auto z0 = random_vector<float>(n * channels * inner, 51);
        const auto b = random_vector<float>(channels, 52), gamma = random_vector<float>(channels, 53),
                   beta = random_vector<float>(channels, 54), mean = random_vector<float>(channels, 55);
        auto var = random_vector<float>(channels, 56);
        for (float& v : var) v = std::abs(v) + 0.1f;
        std::vector<float> scale(channels), shift(channels), scale_cpu(channels), shift_cpu(channels);
        kernel<oar::op::batch_norm_fold, cpu>::run(channels, gamma.data(), beta.data(), mean.data(), var.data(), 1e-3f,
                                                   scale_cpu.data(), shift_cpu.data());
        emulate_launch(Dim3{1}, Dim3{32}, [&](const ck::Thread& t) {
            ck::batch_norm_fold_body(t, channels, gamma.data(), beta.data(), mean.data(), var.data(), 1e-3f,
                                     scale.data(), shift.data());
        });
        CHECK(scale == scale_cpu);  // the same double formula (rows::batch_norm_affine)
        CHECK(shift == shift_cpu);
        const auto f = oar::expr::then(oar::leaky_relu_fn{-0.2f}, oar::hardswish_fn{});  // exact in both
        for (const bool affine : {false, true}) {
            const float* sp = affine ? scale.data() : nullptr;
            const float* tp = affine ? shift.data() : nullptr;
            auto z_cpu = z0;
            std::vector<float> y_cpu(z0.size());
            kernel<oar::op::bias_map, cpu>::run(f, b.data(), sp, tp, z_cpu.data(), y_cpu.data(), n, channels, inner);
            for (auto [grid, block] : launches(z0.size())) {
                auto z = z0;
                std::vector<float> y(z0.size());
                emulate_launch(grid, block, [&](const ck::Thread& t) {
                    ck::bias_map_body(t, f, b.data(), sp, tp, z.data(), y.data(), n, channels, inner);
                });
                CHECK(z == z_cpu);  // z + b: one rounding either way
                if (affine) CHECK(max_rel_diff(y, y_cpu) <= tol);  // (a multiply-add may be fused on one side)
                else CHECK(y == y_cpu);
            }
        }
    }
}

TEST_CASE("batched im2col equals the CPU im2col of each sample, side by side in columns") {
    for (const auto& g : conv_geometries) {
        INFO(describe(g));
        const std::size_t n = 3, in_size = g.channels * g.height * g.width, R = g.col_rows(), P = g.col_cols();
        const auto x = random_vector<float>(n * in_size, 51);
        std::vector<float> ref(R * n * P), one(R * P);
        for (std::size_t s = 0; s < n; ++s) {
            kernel<oar::op::im2col, cpu>::run(g, x.data() + s * in_size, one.data());
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t p = 0; p < P; ++p) ref[r * n * P + s * P + p] = one[r * P + p];
        }
        for (auto [grid, block] : launches(ref.size())) {
            std::vector<float> col(ref.size(), -7.0f);
            emulate_launch(grid, block, [&](const ck::Thread& t) { ck::im2col_body(t, g, n, x.data(), col.data()); });
            CHECK(std::memcmp(col.data(), ref.data(), ref.size() * sizeof(float)) == 0);  // a copy: exact
        }
    }
}

TEST_CASE("batched col2im gathers what the CPU col2im scatters, accumulating into dx") {
    for (const auto& g : conv_geometries) {
        INFO(describe(g));
        const std::size_t n = 3, in_size = g.channels * g.height * g.width, R = g.col_rows(), P = g.col_cols();
        const auto col = random_vector<float>(R * n * P, 61);
        const auto dx0 = random_vector<float>(n * in_size, 62);
        auto ref = dx0;
        std::vector<float> one(R * P);
        for (std::size_t s = 0; s < n; ++s) {
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t p = 0; p < P; ++p) one[r * P + p] = col[r * n * P + s * P + p];
            kernel<oar::op::col2im, cpu>::run(g, one.data(), ref.data() + s * in_size);
        }
        for (auto [grid, block] : launches(dx0.size())) {
            auto dx = dx0;
            emulate_launch(grid, block, [&](const ck::Thread& t) { ck::col2im_body(t, g, n, col.data(), dx.data()); });
            CHECK(max_rel_diff(dx, ref) <= tol);
        }
    }
}

TEST_CASE("the (C, n*P) <-> (n, C, P) permutations invert each other and add the bias per channel") {
    const std::size_t n = 4, channels = 3, P = 10;
    const auto src = random_vector<float>(n * channels * P, 71);  // (C, n*P)
    const auto bias = random_vector<float>(channels, 72);
    for (auto [grid, block] : launches(src.size())) {
        std::vector<float> ncp(src.size(), -7.0f), back(src.size(), -7.0f), biased(src.size(), -7.0f);
        emulate_launch(grid, block,
                       [&](const ck::Thread& t) { ck::ncp_from_cnp_body(t, src.data(), ncp.data(), static_cast<const float*>(nullptr), n, channels, P); });
        emulate_launch(grid, block, [&](const ck::Thread& t) { ck::cnp_from_ncp_body(t, ncp.data(), back.data(), n, channels, P); });
        emulate_launch(grid, block,
                       [&](const ck::Thread& t) { ck::ncp_from_cnp_body(t, src.data(), biased.data(), bias.data(), n, channels, P); });
        CHECK(std::memcmp(back.data(), src.data(), src.size() * sizeof(float)) == 0);
        bool ok = true;
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t c = 0; c < channels; ++c)
                for (std::size_t p = 0; p < P; ++p) {
                    ok = ok && ncp[(s * channels + c) * P + p] == src[(c * n + s) * P + p];
                    ok = ok && biased[(s * channels + c) * P + p] == src[(c * n + s) * P + p] + bias[c];
                }
        CHECK(ok);
    }
}

TEST_CASE("max and average pooling bodies equal the CPU pooling kernels, forward and backward") {
    for (const auto& g : pool_geometries) {
        INFO(describe(g));
        const std::size_t n = 2, in_size = n * g.channels * g.height * g.width;
        const std::size_t out_size = n * g.channels * g.out_height() * g.out_width();
        auto x = random_vector<float>(in_size, 81);
        x[5] = x[4];  // a tie: the first maximum wins on both
        const auto dy = random_vector<float>(out_size, 82);
        std::vector<float> ym(out_size), ya(out_size), dxm(in_size), dxa(in_size);
        kernel<oar::op::max_pool_forward, cpu>::run(g, n, x.data(), ym.data());
        kernel<oar::op::max_pool_backward, cpu>::run(g, n, x.data(), dy.data(), dxm.data());
        kernel<oar::op::avg_pool_forward, cpu>::run(g, n, x.data(), ya.data());
        kernel<oar::op::avg_pool_backward, cpu>::run(g, n, dy.data(), dxa.data());
        for (auto [grid, block] : launches(in_size)) {
            std::vector<float> y(out_size, -7.0f), dx(in_size, -7.0f);
            emulate_launch(grid, block, [&](const ck::Thread& t) { ck::max_pool_forward_body(t, g, n, x.data(), y.data()); });
            CHECK(max_rel_diff(y, ym) <= tol);
            emulate_launch(grid, block,
                           [&](const ck::Thread& t) { ck::max_pool_backward_body(t, g, n, x.data(), dy.data(), dx.data()); });
            CHECK(max_rel_diff(dx, dxm) <= tol);
            emulate_launch(grid, block, [&](const ck::Thread& t) { ck::avg_pool_forward_body(t, g, n, x.data(), y.data()); });
            CHECK(max_rel_diff(y, ya) <= tol);
            emulate_launch(grid, block,
                           [&](const ck::Thread& t) { ck::avg_pool_backward_body(t, g, n, dy.data(), dx.data()); });
            CHECK(max_rel_diff(dx, dxa) <= tol);
        }
    }
}

TEST_CASE("adaptive average pooling bodies equal the CPU kernels bit for bit (the same row body), forward and backward") {
    for (const oar::AdaptiveGeometry g : {oar::AdaptiveGeometry{3, 7, 9, 1, 1}, oar::AdaptiveGeometry{2, 7, 9, 2, 3},
                                          oar::AdaptiveGeometry{2, 5, 5, 4, 4}, oar::AdaptiveGeometry{1, 3, 2, 5, 4}}) {
        INFO(g.height << "x" << g.width << " -> " << g.out_height << "x" << g.out_width);
        const std::size_t n = 2, in_size = n * g.channels * g.height * g.width;
        const std::size_t out_size = n * g.channels * g.out_height * g.out_width;
        const auto x = random_vector<float>(in_size, 91);
        const auto dy = random_vector<float>(out_size, 92);
        std::vector<float> y_cpu(out_size), dx_cpu(in_size);
        kernel<oar::op::adaptive_avg_pool_forward, cpu>::run(g, n, x.data(), y_cpu.data());
        kernel<oar::op::adaptive_avg_pool_backward, cpu>::run(g, n, dy.data(), dx_cpu.data());
        for (auto [grid, block] : launches(in_size)) {
            std::vector<float> y(out_size, -7.0f), dx(in_size, -7.0f);
            emulate_launch(grid, block,
                           [&](const ck::Thread& t) { ck::adaptive_avg_pool_forward_body(t, g, n, x.data(), y.data()); });
            emulate_launch(grid, block,
                           [&](const ck::Thread& t) { ck::adaptive_avg_pool_backward_body(t, g, n, dy.data(), dx.data()); });
            CHECK(y == y_cpu);
            CHECK(dx == dx_cpu);
        }
    }
}

TEST_CASE("softmax forward/backward and the fused softmax-cross-entropy bodies equal the CPU kernels") {
    const std::size_t rows = 37, cols = 10;
    const auto z = random_vector<float>(rows * cols, 91, 8.0);
    const auto dy = random_vector<float>(rows * cols, 92);
    std::vector<std::int64_t> labels(rows);
    for (std::size_t r = 0; r < rows; ++r) labels[r] = static_cast<std::int64_t>((r * 7) % cols);
    std::vector<float> y_cpu(rows * cols), dx_cpu(rows * cols), loss_cpu(rows), dz_cpu(rows * cols);
    kernel<oar::op::softmax_forward, cpu>::run(z.data(), y_cpu.data(), rows, cols);
    kernel<oar::op::softmax_backward, cpu>::run(y_cpu.data(), dy.data(), dx_cpu.data(), rows, cols);
    const float scale = 1.0f / static_cast<float>(rows);
    const double total_cpu = kernel<oar::op::softmax_cross_entropy, cpu>::run(z.data(), labels.data(), rows, cols,
                                                                               scale, loss_cpu.data(), dz_cpu.data());
    for (auto [grid, block] : launches(rows)) {
        std::vector<float> y(rows * cols, -7.0f), dx(rows * cols, -7.0f), dz(rows * cols, -7.0f);
        std::vector<double> losses(rows, -7.0);
        emulate_launch(grid, block, [&](const ck::Thread& t) { ck::softmax_forward_body(t, z.data(), y.data(), rows, cols); });
        emulate_launch(grid, block,
                       [&](const ck::Thread& t) { ck::softmax_backward_body(t, y.data(), dy.data(), dx.data(), rows, cols); });
        emulate_launch(grid, block, [&](const ck::Thread& t) {
            ck::softmax_cross_entropy_body(t, z.data(), labels.data(), rows, cols, scale, losses.data(), dz.data());
        });
        CHECK(max_rel_diff(y, y_cpu) <= tol);
        CHECK(max_rel_diff(dx, dx_cpu) <= tol);
        CHECK(max_rel_diff(dz, dz_cpu) <= tol);
        double total = 0.0;
        std::vector<float> lf(rows);
        for (std::size_t r = 0; r < rows; ++r) {
            total += losses[r];
            lf[r] = static_cast<float>(losses[r]);
        }
        CHECK(max_rel_diff(lf, loss_cpu) <= tol);
        CHECK(std::abs(total - total_cpu) <= tol * std::max(1.0, std::abs(total_cpu)));
    }
}

TEST_CASE("max pooling bodies follow the CPU's NaN rule: a NaN in a window wins, and its gradient goes there") {
    const oar::ConvGeometry g{1, 4, 4, 2, 2, 0};
    auto x = random_vector<float>(16, 101);
    x[5] = std::numeric_limits<float>::quiet_NaN();  // window (0, 0)
    const auto dy = random_vector<float>(4, 102);
    std::vector<float> y_cpu(4), dx_cpu(16), y(4, -7.0f), dx(16, -7.0f);
    kernel<oar::op::max_pool_forward, cpu>::run(g, 1, x.data(), y_cpu.data());
    kernel<oar::op::max_pool_backward, cpu>::run(g, 1, x.data(), dy.data(), dx_cpu.data());
    emulate_launch(Dim3{1}, Dim3{32}, [&](const ck::Thread& t) { ck::max_pool_forward_body(t, g, 1, x.data(), y.data()); });
    emulate_launch(Dim3{1}, Dim3{32},
                   [&](const ck::Thread& t) { ck::max_pool_backward_body(t, g, 1, x.data(), dy.data(), dx.data()); });
    REQUIRE(std::isnan(y_cpu[0]));
    CHECK(std::isnan(y[0]));
    for (std::size_t i = 1; i < 4; ++i) CHECK(y[i] == y_cpu[i]);
    CHECK(dx[5] == dy[0]);
    for (std::size_t i = 0; i < 16; ++i) CHECK(dx[i] == dx_cpu[i]);
}

TEST_CASE("the bf16 rounding and packing bodies give core/bf16.hpp's bits (ties, NaN, infinities, subnormals, overflow)") {
    // Values around every rounding case, then random ones over many binades.
    std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.5f, 3.0e38f, -3.4e38f, std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(), -1.0e-40f, std::numeric_limits<float>::min()};
    for (const std::uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u, 0x7f7f8000u, 0x7f800001u,
                                     0xff812345u, 0x00008000u, 0x00018000u, 0x807fffffu})
        v.push_back(std::bit_cast<float>(bits));  // ties to even (both parities), just below/above, signalling NaNs
    const auto r = random_vector<float>(3000, 41);
    for (std::size_t i = 0; i < r.size(); ++i) v.push_back(r[i] * std::ldexp(1.0f, static_cast<int>(i % 60) - 30));
    const std::size_t n = v.size();
    std::vector<float> want_f(n);
    std::vector<oar::bf16> want_h(n);
    oar::round_to_bf16(v.data(), want_f.data(), n);
    oar::to_bf16(v.data(), want_h.data(), n);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(want_h[i] == oar::to_bf16(v[i]));  // the array and scalar forms agree
    for (const auto& [grid, block] : launches(n)) {
        std::vector<float> got_f(n, -7.0f);
        emulate_launch(grid, block, [&](const ck::Thread& t) { ck::round_bf16_body(t, v.data(), got_f.data(), n); });
        CHECK(std::memcmp(got_f.data(), want_f.data(), n * sizeof(float)) == 0);
        // Packed as a (rows, cols) matrix read with a row stride wider than its width.
        const std::size_t cols = 7, ld = 9, rows = n / ld;
        std::vector<oar::bf16> got_h(rows * cols, oar::bf16{0x1234});
        emulate_launch(grid, block, [&](const ck::Thread& t) { ck::pack_bf16_body(t, rows, cols, v.data(), ld, got_h.data()); });
        bool same = true;
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < cols; ++j) same = same && got_h[i * cols + j] == want_h[i * ld + j];
        CHECK(same);
    }
}
