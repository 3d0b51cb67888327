// Tests of oar/kernels/cpu/winograd.hpp: the F(2x2, 5x5) and F(4x4, 3x3) convolutions against the
// direct one in double, within an error bound per output (below); odd output sizes (a tile partly
// outside), padding 0..4, batches that leave a partial group of SIMD lanes, output channels that
// leave partial micro-tiles; the fused ReLU bit for bit; the same bits on 1, 2 and 3 threads; and
// where conv.hpp takes it (winograd_applies, set_conv_winograd) with the results of the batch
// kernels. The same for the weight gradient (winograd_dw_batch): bound and thread counts; where
// conv2d_backward takes it (winograd_dw_applies: 3x3 on outputs 13+ wide with AVX-512, 29+ with AVX2
// or SSE2) with its bits.
// The error-bound cases are doctest suite `error_bounds`, which the tsan preset leaves out (tests/CMakeLists.txt).
//
// Error bound. Each output of an m x m tile (m = 2 for 5x5, 4 for 3x3) is a fixed linear function
// of the tile's 6x6 inputs per channel: rounding in the input transform (coefficients up to 5 per
// pass), the 36-point products summed over channels, and the output transform (coefficients up to
// 2 per pass for m = 2, 8 for m = 4) gives
//   |y - exact| <= kappa * u * (|b| + sum_c ||w[o][c]||_1 * max |x_c over the tile|),  u = 2^-24,
// the 1-norm of the KxK weights times the largest input the tile reads. 5x5: measured worst ratios
// (printed by INFO on failure) 5.4 over the cases below, 14.2 with channels scaled by 2^-10..2^9;
// the direct kernel, 1.9 on the same data; kappa = 64 leaves a margin of 4.5 over the worst. 3x3
// (F(4x4, 3x3), whose larger output transform rounds more): 18.4 over the cases, 34.2 scaled;
// the direct kernel 1.5; kappa3 = 160 leaves a margin of 4.7. A wrong sign or coefficient in any
// transform gives errors of the size of the outputs themselves; a relative change of 1e-4 to one
// coefficient of the 3x3 G gives ratios of 140 to 1500 (forward) and 200 (weight gradient).
//
// The weight gradient (winograd_dw_batch) has its own bound, per (output, input) channel pair:
//   |dw - exact| <= kappa_dw * u * sum over images and m x m tiles of ||dy tile||_1 * max |x over the 6x6 tile|,
// the scale of the sum it computes, tile by tile. 5x5: measured worst ratios 10.1 over the cases
// below (the largest on the smallest case, 3 images of 5 x 7 outputs), 2.7 with channels scaled by
// 2^-10..2^9; the direct kernel, 0.10 on the course's shape; kappa_dw = 64 leaves a margin of 6.3;
// a relative change of 6e-5 to one coefficient of G gives ratios up to 190. 3x3: 3.2 over the
// cases, 1.4 scaled, the direct kernel 0.27; kappa3_dw = 16 leaves a margin of 5.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cpu/conv.hpp>      // conv2d_forward(_relu) / backward: where Winograd is taken
#include <oar/kernels/cpu/winograd.hpp>  // the header under test
#include <oar/core/error.hpp>            // value_error: a malformed OAR_WINOGRAD
#include <oar/core/thread_pool.hpp>      // set_num_threads: results must not depend on it

#include <algorithm>  // std::max, std::equal
#include <cmath>      // std::abs, std::ldexp
#include <cstdlib>    // std::getenv, setenv, unsetenv: OAR_WINOGRAD
#include <cstddef>    // std::size_t, std::ptrdiff_t
#include <string>     // std::to_string
#include <utility>    // std::pair
#include <vector>     // std::vector

#include "support/isa.hpp"     // oar_test::for_each_isa: the kernels on every ISA the CPU has
#include "support/random.hpp"  // oar_test::random_vector: seeded inputs

namespace {

using oar_test::random_vector;

struct Case {
    std::size_t C, H, W, pad, M, n, K = 5;  // K: the kernel size, 5 (F(2x2,5x5)) or 3 (F(4x4,3x3))
    std::size_t OH() const { return H + 2 * pad - (K - 1); }
    std::size_t OW() const { return W + 2 * pad - (K - 1); }
    std::size_t tile() const { return 7 - K; }  // the output tile's side
};

std::string describe(const Case& k) {
    return "K=" + std::to_string(k.K) + " C=" + std::to_string(k.C) + " H=" + std::to_string(k.H) +
           " W=" + std::to_string(k.W) + " pad=" + std::to_string(k.pad) + " M=" + std::to_string(k.M) +
           " n=" + std::to_string(k.n);
}

constexpr Case cases[] = {
    {20, 14, 14, 2, 20, 19},  // the course's second convolution; 19 = one full group and 3 lanes (AVX-512)
    {8, 7, 9, 1, 9, 3},       // odd outputs (5 x 7): the last tile row and column half outside
    {8, 10, 11, 0, 8, 17},    // no padding, 6 x 7 outputs
    {12, 6, 6, 4, 13, 5},     // padding 4 (10 x 10 outputs), 13 channels: partial micro-tiles
    {9, 5, 5, 2, 16, 1},      // one image
    {20, 14, 14, 2, 20, 33},  // the dx geometry of the course (padding 2 too) across three groups
    // F(4x4, 3x3):
    {32, 15, 15, 0, 64, 5, 3},  // MyNet's second convolution (13 x 13 outputs: the last tiles partly outside)
    {16, 8, 8, 1, 16, 17, 3},   // ResNet8's blocks at 8 x 8, padding 1; one full group and 1 lane (AVX-512)
    {8, 7, 9, 2, 9, 3, 3},      // padding 2 (the dx of an unpadded convolution), 9 x 11 outputs
    {12, 6, 6, 0, 13, 1, 3},    // one 4 x 4 tile, 13 output channels: partial micro-tiles
};

/// x[s][c][iy][ix] of an (n, C, H, W) input, zero outside the image (the padding).
double input_at(const Case& k, const std::vector<float>& x, std::size_t s, std::size_t c, std::ptrdiff_t iy,
                std::ptrdiff_t ix) {
    if (iy < 0 || ix < 0 || iy >= static_cast<std::ptrdiff_t>(k.H) || ix >= static_cast<std::ptrdiff_t>(k.W))
        return 0.0;
    return x[((s * k.C + c) * k.H + static_cast<std::size_t>(iy)) * k.W + static_cast<std::size_t>(ix)];
}

/// y_exact (double) and the bound's scale (|b| + sum_c ||w_oc||_1 * max |x_c| over the tile).
struct WinogradReference {
    std::vector<double> y, scale;
};

WinogradReference reference(const Case& k, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b) {
    const std::size_t OH = k.OH(), OW = k.OW(), K = k.K, m = k.tile();
    WinogradReference r{std::vector<double>(k.n * k.M * OH * OW), std::vector<double>(k.n * k.M * OH * OW)};
    auto at = [&](std::size_t s, std::size_t c, std::ptrdiff_t iy, std::ptrdiff_t ix) {
        return input_at(k, x, s, c, iy, ix);
    };
    const auto pad = static_cast<std::ptrdiff_t>(k.pad);
    for (std::size_t s = 0; s < k.n; ++s)
        for (std::size_t o = 0; o < k.M; ++o)
            for (std::size_t oy = 0; oy < OH; ++oy)
                for (std::size_t ox = 0; ox < OW; ++ox) {
                    double acc = b.empty() ? 0.0 : b[o], scale = b.empty() ? 0.0 : std::abs(b[o]);
                    const auto ty0 = static_cast<std::ptrdiff_t>(oy / m * m), tx0 = static_cast<std::ptrdiff_t>(ox / m * m);
                    for (std::size_t c = 0; c < k.C; ++c) {
                        double w1 = 0.0, xmax = 0.0;
                        for (std::ptrdiff_t i = 0; i < 6; ++i)
                            for (std::ptrdiff_t j = 0; j < 6; ++j)
                                xmax = std::max(xmax, std::abs(at(s, c, ty0 + i - pad, tx0 + j - pad)));
                        for (std::size_t ky = 0; ky < K; ++ky)
                            for (std::size_t kx = 0; kx < K; ++kx) {
                                const double wv = w[((o * k.C + c) * K + ky) * K + kx];
                                w1 += std::abs(wv);
                                acc += wv * at(s, c, static_cast<std::ptrdiff_t>(oy + ky) - pad,
                                               static_cast<std::ptrdiff_t>(ox + kx) - pad);
                            }
                        scale += w1 * xmax;
                    }
                    const std::size_t i = ((s * k.M + o) * OH + oy) * OW + ox;
                    r.y[i] = acc;
                    r.scale[i] = scale;
                }
    return r;
}

constexpr double kappa = 64.0, kappa3 = 160.0, unit_roundoff = 1.0 / 16777216.0;

/// The worst |y - exact| / (u * scale), and how many outputs exceed kappa (kappa3 for 3x3).
std::pair<double, std::size_t> error_ratio(const std::vector<float>& y, const WinogradReference& r, std::size_t K = 5) {
    const double bound = K == 3 ? kappa3 : kappa;
    double worst = 0.0;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
        const double ratio = std::abs(y[i] - r.y[i]) / (unit_roundoff * std::max(r.scale[i], 1e-30));
        worst = std::max(worst, ratio);
        bad += !(ratio <= bound);  // NaN counts as bad
    }
    return {worst, bad};
}

std::vector<float> run(const Case& k, const std::vector<float>& x, const std::vector<float>& w,
                       const std::vector<float>& b, bool relu) {
    std::vector<float> y(k.n * k.M * k.OH() * k.OW(), -7.0f);
    const float* bias = b.empty() ? nullptr : b.data();
    if (relu)
        oar::cpu_detail::winograd_conv_batch<true>(k.K, k.C, k.H, k.W, k.pad, k.M, k.n, x.data(), w.data(), bias,
                                                   y.data());
    else
        oar::cpu_detail::winograd_conv_batch<false>(k.K, k.C, k.H, k.W, k.pad, k.M, k.n, x.data(), w.data(), bias,
                                                    y.data());
    return y;
}

}  // namespace

TEST_CASE("Winograd F(2x2,5x5) equals the direct convolution in double within its error bound" * doctest::test_suite("error_bounds")) {
    for (const Case& k : cases)
        for (bool with_bias : {true, false}) {
            INFO(describe(k) << " bias=" << with_bias);
            const auto x = random_vector<float>(k.n * k.C * k.H * k.W, 41);
            const auto w = random_vector<float>(k.M * k.C * k.K * k.K, 42, 0.2);
            const auto b = with_bias ? random_vector<float>(k.M, 43) : std::vector<float>{};
            const auto want = reference(k, x, w, b);
            oar_test::for_each_isa([&] {
                const auto e = error_ratio(run(k, x, w, b, false), want, k.K);  // (worst ratio, outputs past kappa)
                INFO("worst error / (u * scale) = " << e.first);
                CHECK(e.second == 0);
            });
        }
}

TEST_CASE("Winograd's error bound holds for inputs of very different sizes across channels" * doctest::test_suite("error_bounds")) {
    for (const Case& k : {Case{20, 14, 14, 2, 20, 17}, Case{20, 10, 10, 1, 20, 17, 3}}) oar_test::for_each_isa([&] {
        // Channel c scaled by 2^(c - 10): the tile maximum is per channel, so the bound follows.
        INFO(describe(k));
        auto x = random_vector<float>(k.n * k.C * k.H * k.W, 51);
        for (std::size_t s = 0; s < k.n; ++s)
            for (std::size_t c = 0; c < k.C; ++c)
                for (std::size_t p = 0; p < k.H * k.W; ++p)
                    x[(s * k.C + c) * k.H * k.W + p] *= static_cast<float>(std::ldexp(1.0, static_cast<int>(c) - 10));
        const auto w = random_vector<float>(k.M * k.C * k.K * k.K, 52, 0.2), b = random_vector<float>(k.M, 53);
        const auto e = error_ratio(run(k, x, w, b, false), reference(k, x, w, b), k.K);
        INFO("worst error / (u * scale) = " << e.first);
        CHECK(e.second == 0);
    });
}

TEST_CASE("Winograd with the fused ReLU is max(y, 0) of the plain kernel, bit for bit") {
    oar_test::for_each_isa([&] {
        const Case k{20, 14, 14, 2, 20, 21};
        const auto x = random_vector<float>(k.n * k.C * k.H * k.W, 61);
        const auto w = random_vector<float>(k.M * k.C * 25, 62, 0.2), b = random_vector<float>(k.M, 63);
        const auto plain = run(k, x, w, b, false), fused = run(k, x, w, b, true);
        std::size_t differ = 0, negatives = 0;
        for (std::size_t i = 0; i < plain.size(); ++i) {
            negatives += plain[i] < 0.0f;
            differ += fused[i] != (plain[i] < 0.0f ? 0.0f : plain[i]);
        }
        CHECK(negatives > plain.size() / 4);  // the ReLU has work to do
        CHECK(differ == 0);
    });
}

TEST_CASE("Winograd results are bit-identical whatever the thread count") {
    // F(2x2,5x5) and F(4x4,3x3): the tsan preset runs these (not the error-bound cases) for both.
    for (const Case& k : {Case{20, 14, 14, 2, 20, 37}, Case{16, 8, 8, 1, 16, 37, 3}}) oar_test::for_each_isa([&] {
        INFO(describe(k));
        const auto x = random_vector<float>(k.n * k.C * k.H * k.W, 71);
        const auto w = random_vector<float>(k.M * k.C * k.K * k.K, 72, 0.2), b = random_vector<float>(k.M, 73);
        std::vector<std::vector<float>> runs;
        for (std::size_t threads : {1u, 2u, 3u}) {
            oar::set_num_threads(threads);
            runs.push_back(run(k, x, w, b, false));
        }
        oar::set_num_threads(oar::default_thread_count());
        CHECK(runs[0] == runs[1]);
        CHECK(runs[0] == runs[2]);
    });
}

TEST_CASE("conv.hpp takes Winograd for float 5x5 and 3x3 stride-1 convolutions of 8+ channels, and only then") {
    using oar::cpu_detail::winograd_applies;
    CHECK(winograd_applies<float>(20, 20, 5, 1));
    CHECK(winograd_applies<float>(8, 8, 5, 1));
    CHECK(winograd_applies<float>(32, 64, 3, 1));        // MyNet's second convolution
    CHECK(winograd_applies<float>(16, 16, 3, 1));        // ResNet8's blocks
    CHECK_FALSE(winograd_applies<float>(3, 32, 3, 1));   // MyNet's first convolution
    CHECK_FALSE(winograd_applies<float>(1, 20, 5, 1));   // the course's first convolution
    CHECK_FALSE(winograd_applies<float>(20, 7, 5, 1));   // too few output channels
    CHECK_FALSE(winograd_applies<float>(20, 20, 7, 1));  // another kernel size
    CHECK_FALSE(winograd_applies<float>(20, 20, 1, 1));
    CHECK_FALSE(winograd_applies<float>(20, 20, 5, 2));  // stride 2
    CHECK_FALSE(winograd_applies<float>(16, 16, 3, 2));
    CHECK_FALSE(winograd_applies<double>(20, 20, 5, 1)); // double keeps the direct kernel
    oar::set_conv_winograd(false);
    CHECK_FALSE(oar::conv_winograd());
    CHECK_FALSE(winograd_applies<float>(20, 20, 5, 1));
    oar::set_conv_winograd(true);
    CHECK(winograd_applies<float>(20, 20, 5, 1));
}

TEST_CASE("OAR_WINOGRAD sets the switch's default (0 or 1) and any other value is a clear error") {
    const char* was = std::getenv("OAR_WINOGRAD");
    const std::string saved = was ? was : "";
    unsetenv("OAR_WINOGRAD");
    CHECK(oar::default_conv_winograd());
    setenv("OAR_WINOGRAD", "", 1);
    CHECK(oar::default_conv_winograd());
    setenv("OAR_WINOGRAD", "0", 1);
    CHECK_FALSE(oar::default_conv_winograd());
    setenv("OAR_WINOGRAD", "1", 1);
    CHECK(oar::default_conv_winograd());
    for (const char* bad : {"off", "00", "2", " 0", "1 ", "-1"}) {
        setenv("OAR_WINOGRAD", bad, 1);
        CHECK_THROWS_WITH_AS(oar::default_conv_winograd(), doctest::Contains("OAR_WINOGRAD: expected 0 or 1, got"),
                             oar::value_error);
    }
    if (was)
        setenv("OAR_WINOGRAD", saved.c_str(), 1);
    else
        unsetenv("OAR_WINOGRAD");
}

TEST_CASE("the batch conv2d kernels give Winograd's bits when it applies, the direct kernel's when switched off") {
    // The course's second convolution (5x5) and a ResNet8 block's (3x3, padding 1).
    for (const Case& shape : {Case{20, 14, 14, 2, 20, 0}, Case{16, 8, 8, 1, 16, 0, 3}}) oar_test::for_each_isa([&] {
        // Forward (with the fused ReLU) and the input gradient (the flipped weights, padding K-1-pad)
        // through kernel<op::...>: with the switch on the first winograd_images(n) samples equal
        // winograd_conv_batch exactly and the rest (a small last group of lanes) the direct kernel's
        // bits; off, every sample has the direct kernel's bits.
        INFO(describe(shape));
        const std::size_t C = shape.C, H = shape.H, K = shape.K, KK = K * K, M = shape.M, pad = shape.pad;
        const oar::ConvGeometry g{C, H, H, K, 1, pad};
        const std::size_t L = oar::cpu_detail::winograd_lanes<float>();
        const std::size_t n = 2 * L + 2, in_size = C * H * H, out_size = M * shape.OH() * shape.OW();
        const std::size_t nw = oar::cpu_detail::winograd_images<float>(n);
        CHECK(nw == (L >= 4 ? 2 * L : n));  // 2 samples past two groups: direct (with 1 or 2 lanes, none left over)
        const auto x = random_vector<float>(n * in_size, 81), w = random_vector<float>(M * C * KK, 82, 0.2);
        const auto b = random_vector<float>(M, 83), dy = random_vector<float>(n * out_size, 84);
        // The flipped weights: wf[c][o][ky][kx] = w[o][c][K-1 - ky][K-1 - kx].
        std::vector<float> wf(w.size());
        for (std::size_t o = 0; o < M; ++o)
            for (std::size_t c = 0; c < C; ++c)
                for (std::size_t t = 0; t < KK; ++t) wf[(c * M + o) * KK + t] = w[(o * C + c) * KK + (KK - 1 - t)];
        const Case fwd{C, H, H, pad, M, n, K}, bwd{M, shape.OH(), shape.OW(), K - 1 - pad, C, n, K};
        const auto wino_y = run(fwd, x, w, b, true), wino_dx = run(bwd, dy, wf, {}, false);
        auto kernels = [&](bool on) {
            oar::set_conv_winograd(on);
            std::vector<float> y(n * out_size), dx(n * in_size), dw(M * C * KK, 0.0f), db(M, 0.0f);
            oar::kernel<oar::op::conv2d_forward_relu, oar::cpu>::run(g, M, n, x.data(), w.data(), b.data(), y.data());
            oar::kernel<oar::op::conv2d_backward, oar::cpu>::run(g, M, n, x.data(), w.data(), dy.data(), dw.data(),
                                                                 db.data(), dx.data());
            oar::set_conv_winograd(true);
            return std::pair{y, dx};
        };
        const auto [direct_y, direct_dx] = kernels(false);
        const auto [y, dx] = kernels(true);
        auto same = [](const std::vector<float>& a, const std::vector<float>& b, std::size_t from, std::size_t to) {
            return std::equal(a.begin() + static_cast<std::ptrdiff_t>(from), a.begin() + static_cast<std::ptrdiff_t>(to),
                              b.begin() + static_cast<std::ptrdiff_t>(from));
        };
        CHECK(same(y, wino_y, 0, nw * out_size));
        CHECK(same(dx, wino_dx, 0, nw * in_size));
        CHECK(same(y, direct_y, nw * out_size, n * out_size));
        CHECK(same(dx, direct_dx, nw * in_size, n * in_size));
        CHECK_FALSE(same(direct_y, wino_y, 0, nw * out_size));  // the two kernels round differently
        CHECK_FALSE(same(direct_dx, wino_dx, 0, nw * in_size));
        for (const auto* d : {&dx, &direct_dx}) {
            const auto e = error_ratio(*d, reference(bwd, dy, wf, {}), K);
            INFO("dx: worst error / (u * scale) = " << e.first);
            CHECK(e.second == 0);
        }
    });
}

TEST_CASE("winograd_images leaves a last group of up to 5/8 of the lanes to the direct kernel") {
    oar_test::for_each_isa([&] {
        using oar::cpu_detail::winograd_images;
        const std::size_t L = oar::cpu_detail::winograd_lanes<float>();
        CHECK(winograd_images<float>(0) == 0);
        CHECK(winograd_images<float>(5 * L) == 5 * L);
        CHECK(winograd_images<float>(5 * L + L - 1) == 5 * L + L - 1);  // nearly full: Winograd
        if (L == 16) {
            CHECK(winograd_images<float>(100) == 96);  // the course's batch: 6 groups, 4 samples direct
            CHECK(winograd_images<float>(10) == 0);
            CHECK(winograd_images<float>(11) == 11);
            CHECK(winograd_images<float>(26) == 16);
            CHECK(winograd_images<float>(27) == 27);
        }
    });
}

namespace {

/// The weight gradient in double and its bound's scale per (o, c): sum over images and 2x2 output
/// tiles of ||dy tile||_1 * max |x| over the tile's 6x6 inputs (zero padding included).
struct DwReference {
    std::vector<double> dw, scale;  // (M, C, 5, 5) and (M, C)
};

DwReference dw_reference(const Case& k, const std::vector<float>& x, const std::vector<float>& dy) {
    const std::size_t OH = k.OH(), OW = k.OW(), K = k.K, KK = K * K, m = k.tile();
    DwReference r{std::vector<double>(k.M * k.C * KK, 0.0), std::vector<double>(k.M * k.C, 0.0)};
    const auto pad = static_cast<std::ptrdiff_t>(k.pad);
    auto at = [&](std::size_t s, std::size_t c, std::ptrdiff_t iy, std::ptrdiff_t ix) {
        return input_at(k, x, s, c, iy, ix);
    };
    auto g = [&](std::size_t s, std::size_t o, std::size_t oy, std::size_t ox) -> double {
        return oy < OH && ox < OW ? dy[((s * k.M + o) * OH + oy) * OW + ox] : 0.0;
    };
    for (std::size_t s = 0; s < k.n; ++s)
        for (std::size_t o = 0; o < k.M; ++o)
            for (std::size_t c = 0; c < k.C; ++c) {
                for (std::size_t ky = 0; ky < K; ++ky)
                    for (std::size_t kx = 0; kx < K; ++kx) {
                        double acc = 0.0;
                        for (std::size_t oy = 0; oy < OH; ++oy)
                            for (std::size_t ox = 0; ox < OW; ++ox)
                                acc += g(s, o, oy, ox) * at(s, c, static_cast<std::ptrdiff_t>(oy + ky) - pad,
                                                            static_cast<std::ptrdiff_t>(ox + kx) - pad);
                        r.dw[(o * k.C + c) * KK + ky * K + kx] += acc;
                    }
                for (std::size_t ty = 0; ty < OH; ty += m)
                    for (std::size_t tx = 0; tx < OW; tx += m) {
                        double g1 = 0.0, xmax = 0.0;
                        for (std::size_t a = 0; a < m; ++a)
                            for (std::size_t b = 0; b < m; ++b) g1 += std::abs(g(s, o, ty + a, tx + b));
                        for (std::ptrdiff_t i = 0; i < 6; ++i)
                            for (std::ptrdiff_t j = 0; j < 6; ++j)
                                xmax = std::max(xmax, std::abs(at(s, c, static_cast<std::ptrdiff_t>(ty) + i - pad,
                                                                  static_cast<std::ptrdiff_t>(tx) + j - pad)));
                        r.scale[o * k.C + c] += g1 * xmax;
                    }
            }
    return r;
}

constexpr double kappa_dw = 64.0, kappa3_dw = 16.0;

/// The worst |dw - exact| / (u * scale) and how many weights exceed kappa_dw (kappa3_dw for 3x3).
std::pair<double, std::size_t> dw_error_ratio(const std::vector<float>& dw, const DwReference& r, std::size_t K = 5) {
    double worst = 0.0;
    std::size_t bad = 0;
    const double bound = K == 3 ? kappa3_dw : kappa_dw;
    for (std::size_t i = 0; i < dw.size(); ++i) {
        const double ratio = std::abs(dw[i] - r.dw[i]) / (unit_roundoff * std::max(r.scale[i / (K * K)], 1e-30));
        worst = std::max(worst, ratio);
        bad += !(ratio <= bound);  // NaN counts as bad
    }
    return {worst, bad};
}

std::vector<float> run_dw(const Case& k, const std::vector<float>& x, const std::vector<float>& dy) {
    std::vector<float> dw(k.M * k.C * k.K * k.K, 0.0f);
    oar::cpu_detail::winograd_dw_batch(k.K, k.C, k.H, k.W, k.pad, k.M, k.n, x.data(), dy.data(), dw.data());
    return dw;
}

constexpr Case dw_cases[] = {
    {20, 14, 14, 2, 20, 19},  // the course's second convolution; one full group and 3 lanes (AVX-512)
    {8, 7, 9, 1, 9, 3},       // odd outputs (5 x 7), 9 output channels: a partial micro-tile row
    {9, 10, 11, 0, 13, 17},   // no padding, 9 input channels (partial micro-tile columns), 13 outputs
    {12, 6, 6, 4, 13, 5},     // padding 4
    {20, 14, 14, 2, 20, 33},  // three groups
    // F(4x4, 3x3):
    {32, 15, 15, 0, 64, 5, 3},  // MyNet's second convolution (13 x 13 outputs: the last tiles partly outside)
    {16, 8, 8, 1, 16, 17, 3},   // ResNet8's blocks at 8 x 8, padding 1
    {9, 7, 9, 1, 13, 3, 3},     // odd outputs (7 x 9), 9 inputs and 13 outputs: partial micro-tiles
};

}  // namespace

TEST_CASE("Winograd's weight gradient equals the direct one in double within its error bound" * doctest::test_suite("error_bounds")) {
    for (const Case& k : dw_cases) {
        INFO(describe(k));
        const auto x = random_vector<float>(k.n * k.C * k.H * k.W, 91);
        const auto dy = random_vector<float>(k.n * k.M * k.OH() * k.OW(), 92);
        const auto want = dw_reference(k, x, dy);
        oar_test::for_each_isa([&] {
            const auto dw = run_dw(k, x, dy);
            const auto e = dw_error_ratio(dw, want, k.K);
            INFO("worst error / (u * scale) = " << e.first);
            CHECK(e.second == 0);
            // It adds to dw: a second call on the same buffer doubles it.
            std::vector<float> twice = dw;
            oar::cpu_detail::winograd_dw_batch(k.K, k.C, k.H, k.W, k.pad, k.M, k.n, x.data(), dy.data(),
                                               twice.data());
            std::size_t not_doubled = 0;
            for (std::size_t i = 0; i < dw.size(); ++i) not_doubled += twice[i] != 2.0f * dw[i];
            CHECK(not_doubled == 0);
        });
    }
}

TEST_CASE("Winograd's weight-gradient bound holds for channels of very different sizes" * doctest::test_suite("error_bounds")) {
    for (const Case& k : {Case{20, 14, 14, 2, 20, 17}, Case{20, 10, 10, 1, 20, 17, 3}}) oar_test::for_each_isa([&] {
        // Input channel c scaled by 2^(c - 10), output channel o's dy by 2^(9 - o): the scale is per pair.
        INFO(describe(k));
        const std::size_t P = k.OH() * k.OW();
        auto x = random_vector<float>(k.n * k.C * k.H * k.W, 93);
        auto dy = random_vector<float>(k.n * k.M * P, 94);
        for (std::size_t s = 0; s < k.n; ++s) {
            for (std::size_t c = 0; c < k.C; ++c)
                for (std::size_t p = 0; p < k.H * k.W; ++p)
                    x[(s * k.C + c) * k.H * k.W + p] *= static_cast<float>(std::ldexp(1.0, static_cast<int>(c) - 10));
            for (std::size_t o = 0; o < k.M; ++o)
                for (std::size_t p = 0; p < P; ++p)
                    dy[(s * k.M + o) * P + p] *= static_cast<float>(std::ldexp(1.0, 9 - static_cast<int>(o)));
        }
        const auto e = dw_error_ratio(run_dw(k, x, dy), dw_reference(k, x, dy), k.K);
        INFO("worst error / (u * scale) = " << e.first);
        CHECK(e.second == 0);
    });
}

TEST_CASE("Winograd's weight gradient is bit-identical whatever the thread count") {
    oar_test::for_each_isa([&] {
        const Case k{20, 14, 14, 2, 20, 37};
        const auto x = random_vector<float>(k.n * k.C * k.H * k.W, 95);
        const auto dy = random_vector<float>(k.n * k.M * 14 * 14, 96);
        std::vector<std::vector<float>> runs;
        for (std::size_t threads : {1u, 2u, 3u}) {
            oar::set_num_threads(threads);
            runs.push_back(run_dw(k, x, dy));
        }
        oar::set_num_threads(oar::default_thread_count());
        CHECK(runs[0] == runs[1]);
        CHECK(runs[0] == runs[2]);
    });
}

TEST_CASE("conv2d_backward takes Winograd's weight gradient for 3x3 on outputs 13+ wide with AVX-512, 29+ with AVX2 or SSE2, else and when off the direct one") {
    // The course's second convolution (5x5) and a ResNet8 block's at 8 x 8 (3x3, padding 1) keep the
    // direct weight gradient with the switch on or off; ResNet8's blocks at 32 x 32 take
    // winograd_dw_batch on every sample (its bits) with the switch on, the direct kernel's off; a
    // 13-wide output (MyNet's conv2 shape, 16 channels here) takes it on the AVX-512 body only. db has
    // the direct path's bits either way (bias_grad sums as the direct path does). Both within the
    // bound against double.
    using oar::cpu_detail::winograd_dw_applies;
    using oar::cpu_detail::winograd_dw_min_width;
    CHECK(winograd_dw_applies<float>(16, 16, 3, 1, 32, winograd_dw_min_width(8)));
    CHECK_FALSE(winograd_dw_applies<float>(16, 16, 3, 1, 28, winograd_dw_min_width(8)));
    CHECK_FALSE(winograd_dw_applies<float>(16, 16, 3, 1, 28, winograd_dw_min_width(4)));
    CHECK(winograd_dw_applies<float>(16, 16, 3, 1, 13, winograd_dw_min_width(16)));
    CHECK(winograd_dw_applies<float>(16, 16, 3, 1, 12, winograd_dw_min_width(16)));
    CHECK_FALSE(winograd_dw_applies<float>(16, 16, 3, 1, 11, winograd_dw_min_width(16)));
    CHECK_FALSE(winograd_dw_applies<float>(16, 16, 3, 1, 8, winograd_dw_min_width(16)));
    CHECK_FALSE(winograd_dw_applies<float>(20, 20, 5, 1, 32, winograd_dw_min_width(16)));
    CHECK_FALSE(winograd_dw_applies<float>(16, 32, 3, 2, 32, winograd_dw_min_width(16)));
    CHECK_FALSE(winograd_dw_applies<double>(16, 16, 3, 1, 32, winograd_dw_min_width(16)));
    for (const Case& shape : {Case{20, 14, 14, 2, 20, 0}, Case{16, 8, 8, 1, 16, 0, 3}, Case{16, 32, 32, 1, 16, 0, 3},
                              Case{16, 15, 15, 0, 16, 0, 3}}) {
        INFO(describe(shape));
        const std::size_t C = shape.C, H = shape.H, K = shape.K, KK = K * K, M = shape.M, pad = shape.pad;
        const oar::ConvGeometry g{C, H, H, K, 1, pad};
        const std::size_t n = 18, in_size = C * H * H, out_size = M * shape.OH() * shape.OW();
        const auto x = random_vector<float>(n * in_size, 97), w = random_vector<float>(M * C * KK, 98, 0.2);
        const auto dy = random_vector<float>(n * out_size, 99);
        const Case k{C, H, H, pad, M, n, K};
        const auto want = dw_reference(k, x, dy);
        oar_test::for_each_isa([&] {
            const bool wino = H == 32 || (H == 15 && oar::active_vector_isa() == oar::cpu_isa::avx512);
            auto backward = [&](bool on) {
                oar::set_conv_winograd(on);
                std::vector<float> dw(M * C * KK, 0.0f), db(M, 0.0f);
                oar::kernel<oar::op::conv2d_backward, oar::cpu>::run(g, M, n, x.data(), w.data(), dy.data(), dw.data(),
                                                                     db.data(), static_cast<float*>(nullptr));
                oar::set_conv_winograd(true);
                return std::pair{dw, db};
            };
            const auto [dw, db] = backward(true);
            const auto [direct_dw, direct_db] = backward(false);
            CHECK(db == direct_db);
            if (wino) {
                CHECK(dw == run_dw(k, x, dy));
                CHECK_FALSE(dw == direct_dw);  // the two kernels round differently
            } else {
                CHECK(dw == direct_dw);
            }
            for (const auto* d : {&dw, &direct_dw}) {
                const auto e = dw_error_ratio(*d, want, K);
                INFO("dw: worst error / (u * scale) = " << e.first);
                CHECK(e.second == 0);
            }
        });
    }
}
