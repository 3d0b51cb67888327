// Tests of oar/kernels/cpu/conv_bf16.hpp: Conv2D's bf16 route (im2col + gemm_bf16 on operands
// rounded to bf16) for the forward, the input gradient, the weight gradient and the bias gradient,
// against double-precision references on the fp32 inputs before rounding:
//   |got - ref| <= k 2^-8 sum|a||b|  (sum over the products of each output; for db, sum|dy|)
// bf16 keeps 8 significant bits, so each product is within (2^-7 + 2^-16)|a||b| of the exact one
// and k <= 2.02 in the worst case, which short sums approach; longer sums cancel part of the
// rounding. Measured over every geometry below, the same on the three bf16 bodies to the digits
// shown (printed by each run): sums of fewer than 32 products k = 1.196 forward, 1.066 input
// gradient; 32 or more: 0.255 forward, 0.370 input gradient, 0.222 weight gradient, 0.082 bias
// gradient. The checks use the worst case k = 2.02 below 32 products and k = 0.40 from 32 (the
// bodies differ from each other in their fp32 sums alone, far below 0.03 in k). Geometries
// cover square and non-square kernels, strides, padding and several chunks of the weight gradient.
// The route runs on gemm_bf16 at the active ISA (on this host's AVX2 its fp32 path: widened inputs),
// on the AVX512-BF16 and AMX bodies with emulated intrinsics (tests/support/emulated_bf16.hpp), and
// on the real AVX512-BF16 / AMX units where the CPU has them (skipped, naming the feature, where not).
// Every result has the same bits on 1, 2 and 3 threads.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cpu/conv_bf16.hpp>  // the header under test
#include <oar/core/cpu_isa.hpp>           // set_cpu_isa, cpu_supports
#include <oar/core/thread_pool.hpp>       // set_num_threads

#include <algorithm>  // std::max
#include <cmath>      // std::fabs, std::ldexp
#include <cstddef>    // std::size_t
#include <limits>     // std::numeric_limits
#include <ostream>    // std::ostream: the measured k's
#include <string>     // std::string
#include <vector>     // std::vector

#include "support/emulated_bf16.hpp"  // emu_avx512::gemm_block, emu_amx::gemm_block
#include "support/random.hpp"         // oar_test::random_vector
#include "support/skip.hpp"           // oar_test::skip

namespace {

using oar::Trans;
using oar::ConvGeometry;
constexpr double k_conv_bf16_short = 2.02, k_conv_bf16_long = 0.40;  // see the header comment

/// gemm_bf16 on one of the emulated bodies, split over the pool as gemm_bf16 splits the real one.
template <auto Block, std::size_t RowUnit>
void emulated_conv_gemm(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha, const oar::bf16* A,
                   std::size_t lda, const oar::bf16* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
    const std::size_t ai = ta == Trans::no ? lda : 1, ak = ta == Trans::no ? 1 : lda;
    const std::size_t bk = tb == Trans::no ? ldb : 1, bj = tb == Trans::no ? 1 : ldb;
    oar::cpu_detail::gemm_bf16_split(M, N, K, RowUnit, A, ai, B, bj, C, ldc,
                                     [&](std::size_t m, std::size_t n, const oar::bf16* a, const oar::bf16* b, float* c,
                                         std::size_t) {
                                         Block(m, n, K, alpha, a, ai, ak, b, bk, bj, beta, c, ldc);
                                     });
}

struct ConvBf16Case {
    ConvGeometry g;
    std::size_t out_c, n;
};

// square 3x3 pad 1; 5x5 valid; non-square 3x5, stride 2x1, padding 1x2; 1x1 stride 2; and a batch whose
// weight gradient takes several chunks (conv_bf16_chunk_values / (max(ckk, out_c) * OH*OW) samples).
const ConvBf16Case conv_bf16_cases[] = {
    {{3, 9, 9, 3, 1, 1}, 5, 3},
    {{4, 12, 11, 5, 1, 0}, 7, 2},
    {{2, 10, 9, 3, 2, 1, 5, 1, 2}, 6, 3},
    {{6, 7, 7, 1, 2, 0}, 3, 2},
    {{1, 64, 64, 3, 1, 1}, 2, 30},  // 28 samples a chunk: two chunks
};

struct ConvBf16Outputs {
    std::vector<float> y, dx, dw, db;
};

struct ConvBf16Inputs {
    std::vector<float> x, w, b, dy, dw0, db0;
};

ConvBf16Inputs make_conv_bf16_inputs(const ConvBf16Case& c, std::uint64_t seed) {
    const std::size_t in = c.g.channels * c.g.height * c.g.width, P = c.g.col_cols(), ckk = c.g.col_rows();
    return {oar_test::random_vector<float>(c.n * in, seed), oar_test::random_vector<float>(c.out_c * ckk, seed + 1),
            oar_test::random_vector<float>(c.out_c, seed + 2), oar_test::random_vector<float>(c.n * c.out_c * P, seed + 3),
            oar_test::random_vector<float>(c.out_c * ckk, seed + 4), oar_test::random_vector<float>(c.out_c, seed + 5)};
}

ConvBf16Outputs run_conv_bf16_route(const ConvBf16Case& c, const ConvBf16Inputs& in, oar::gemm_bf16_fn gemm) {
    const std::size_t P = c.g.col_cols();
    ConvBf16Outputs o;
    o.y.assign(c.n * c.out_c * P, std::numeric_limits<float>::quiet_NaN());
    o.dx.assign(in.x.size(), std::numeric_limits<float>::quiet_NaN());
    o.dw = in.dw0;
    o.db = in.db0;
    oar::conv2d_bf16_forward(c.g, c.out_c, c.n, in.x.data(), in.w.data(), in.b.data(), o.y.data(), gemm);
    oar::conv2d_bf16_backward(c.g, c.out_c, c.n, in.x.data(), in.w.data(), in.dy.data(), o.dw.data(), o.db.data(),
                              o.dx.data(), gemm);
    return o;
}

struct ConvBf16Worst {
    struct pair {
        double short_sums = 0, long_sums = 0;  // fewer than 32 products, 32 or more
        void merge(const pair& o) {
            short_sums = std::max(short_sums, o.short_sums);
            long_sums = std::max(long_sums, o.long_sums);
        }
        friend std::ostream& operator<<(std::ostream& os, const pair& p) {
            return os << p.short_sums << " / " << p.long_sums;
        }
    };
    pair y, dx, dw, db;
};

/// Checks o against the double references on the unrounded inputs; returns the measured k's.
ConvBf16Worst check_conv_bf16_route(const ConvBf16Case& c, const ConvBf16Inputs& in, const ConvBf16Outputs& o, const std::string& what) {
    const ConvGeometry& g = c.g;
    const std::size_t C = g.channels, H = g.height, W = g.width, KH = g.kh(), KW = g.kw(), OH = g.out_height(),
                      OW = g.out_width(), P = OH * OW, ckk = g.col_rows(), per_in = C * H * W;
    std::vector<double> y(c.n * c.out_c * P), ya(y.size()), dx(in.x.size()), dxa(dx.size()), dw(c.out_c * ckk),
        dwa(dw.size()), db(c.out_c), dba(c.out_c);
    std::vector<std::size_t> yn(y.size()), dxn(dx.size()), dwn(dw.size());  // products per output
    for (std::size_t s = 0; s < c.n; ++s)
        for (std::size_t o = 0; o < c.out_c; ++o)
            for (std::size_t oy = 0; oy < OH; ++oy)
                for (std::size_t ox = 0; ox < OW; ++ox) {
                    const std::size_t yi = (s * c.out_c + o) * P + oy * OW + ox;
                    const double d = in.dy[yi];
                    db[o] += d;
                    dba[o] += std::fabs(d);
                    y[yi] = in.b[o];
                    for (std::size_t ch = 0; ch < C; ++ch)
                        for (std::size_t ky = 0; ky < KH; ++ky)
                            for (std::size_t kx = 0; kx < KW; ++kx) {
                                const std::ptrdiff_t iy = std::ptrdiff_t(oy * g.sh() + ky) - std::ptrdiff_t(g.ph());
                                const std::ptrdiff_t ix = std::ptrdiff_t(ox * g.sw() + kx) - std::ptrdiff_t(g.pw());
                                if (iy < 0 || ix < 0 || iy >= std::ptrdiff_t(H) || ix >= std::ptrdiff_t(W)) continue;
                                const std::size_t xi = s * per_in + (ch * H + std::size_t(iy)) * W + std::size_t(ix);
                                const std::size_t wi = o * ckk + (ch * KH + ky) * KW + kx;
                                const double wv = in.w[wi], xv = in.x[xi];
                                y[yi] += wv * xv;
                                ya[yi] += std::fabs(wv * xv);
                                ++yn[yi];
                                ++dxn[xi];
                                ++dwn[wi];
                                dx[xi] += wv * d;
                                dxa[xi] += std::fabs(wv * d);
                                dw[wi] += d * xv;
                                dwa[wi] += std::fabs(d * xv);
                            }
                }
    ConvBf16Worst worst;
    std::size_t bad = 0;
    std::string first;
    const auto check = [&](const char* name, float got, double want, double abs_sum, double extra, std::size_t terms,
                           ConvBf16Worst::pair& w) {
        const double err = std::fabs(double(got) - want), k = terms < 32 ? k_conv_bf16_short : k_conv_bf16_long;
        const double tol = k * std::ldexp(abs_sum, -8) + extra + std::numeric_limits<float>::denorm_min();
        double& wk = terms < 32 ? w.short_sums : w.long_sums;
        if (abs_sum > 0) wk = std::max(wk, err / std::ldexp(abs_sum, -8));
        if (!(err <= tol) && ++bad == 1)
            first = std::string(name) + ": got " + std::to_string(got) + ", reference " + std::to_string(want);
    };
    for (std::size_t i = 0; i < y.size(); ++i) check("y", o.y[i], y[i], ya[i], std::ldexp(std::fabs(y[i]), -23), yn[i], worst.y);
    for (std::size_t i = 0; i < dx.size(); ++i) check("dx", o.dx[i], dx[i], dxa[i], 0.0, dxn[i], worst.dx);
    for (std::size_t i = 0; i < dw.size(); ++i)  // dw0 + the sum: one more fp32 rounding of the total
        check("dw", o.dw[i], in.dw0[i] + dw[i], dwa[i], std::ldexp(std::fabs(in.dw0[i]) + dwa[i], -23), dwn[i], worst.dw);
    for (std::size_t i = 0; i < db.size(); ++i)  // an fp32 sum of up to n*P rounded values
        check("db", o.db[i], in.db0[i] + db[i], dba[i], std::ldexp(double(c.n * P + 1), -24) * (dba[i] + std::fabs(in.db0[i])),
              c.n * P, worst.db);
    INFO(what, ": ", first);
    CHECK(bad == 0);
    return worst;
}

/// Runs every case on `gemm`, checks it, prints the measured k's; with `threads`, also checks the
/// bits on 1, 2 and 3 threads.
void test_conv_bf16_route(oar::gemm_bf16_fn gemm, const std::string& path, bool threads) {
    ConvBf16Worst all;
    std::uint64_t seed = 40;
    for (const ConvBf16Case& c : conv_bf16_cases) {
        const ConvBf16Inputs in = make_conv_bf16_inputs(c, seed);
        seed += 10;
        const std::string what = path + ": C=" + std::to_string(c.g.channels) + " H=" + std::to_string(c.g.height) +
                                 " out_c=" + std::to_string(c.out_c) + " n=" + std::to_string(c.n);
        oar::set_num_threads(1);
        const ConvBf16Outputs one = run_conv_bf16_route(c, in, gemm);
        const ConvBf16Worst w = check_conv_bf16_route(c, in, one, what);
        all.y.merge(w.y);
        all.dx.merge(w.dx);
        all.dw.merge(w.dw);
        all.db.merge(w.db);
        if (threads)
            for (std::size_t t : {2u, 3u}) {
                oar::set_num_threads(t);
                const ConvBf16Outputs o = run_conv_bf16_route(c, in, gemm);
                INFO(what, ": ", t, " threads");
                CHECK(o.y == one.y);
                CHECK(o.dx == one.dx);
                CHECK(o.dw == one.dw);
                CHECK(o.db == one.db);
            }
    }
    oar::set_num_threads(oar::default_thread_count());
    MESSAGE(path << ": measured k (sums of < 32 / >= 32 products) = " << all.y << " forward, " << all.dx << " input gradient, " << all.dw
                 << " weight gradient, " << all.db << " bias gradient");
}

}  // namespace

TEST_CASE("bf16 conv route on gemm_bf16 at the active ISA: within k 2^-8 sum|a||b| of fp32, same bits on 1-3 threads") {
    test_conv_bf16_route(&oar::gemm_bf16, std::string("gemm_bf16 at ") + std::string(oar::cpu_isa_name(oar::active_cpu_isa())), true);
}

TEST_CASE("bf16 conv route on the emulated AVX512-BF16 body: within k 2^-8 sum|a||b| of fp32, same bits on 1-3 threads") {
    test_conv_bf16_route(&emulated_conv_gemm<&oar::cpu_detail::emu_avx512::gemm_block<oar::bf16>, 10>, "emulated avx512bf16", true);
}

TEST_CASE("bf16 conv route on the emulated AMX body: within k 2^-8 sum|a||b| of fp32") {
    // One thread: the emulated tile file is one for the process, as the real one is one per core.
    test_conv_bf16_route(&emulated_conv_gemm<&oar::cpu_detail::emu_amx::gemm_block<oar::bf16>, 32>, "emulated amx", false);
    CHECK(!oar::cpu_detail::emu_amx::tiles().misuse);
}

TEST_CASE("bf16 conv route on the real AVX512-BF16 and AMX units: within k 2^-8 sum|a||b| of fp32, same bits on 1-3 threads") {
    for (oar::cpu_isa isa : {oar::cpu_isa::avx512_bf16, oar::cpu_isa::amx}) {
        if (!oar::cpu_supports(isa)) {
            oar_test::skip(std::string(oar::cpu_isa_name(isa)) + " conv route not run: " +
                           oar::cpu_isa_unsupported_reason(isa));
            continue;
        }
        oar::set_cpu_isa(isa);
        oar::set_conv_bf16_units(false);
        CHECK_FALSE(oar::conv_bf16_applies());  // the switch is off: Conv2D keeps the fp32 kernels
        oar::set_conv_bf16_units(true);
        CHECK(oar::conv_bf16_applies());
        test_conv_bf16_route(&oar::gemm_bf16, std::string(oar::cpu_isa_name(isa)), true);
        oar::set_conv_bf16_units(oar::default_conv_bf16_units());
        oar::set_cpu_isa(oar::default_cpu_isa());
    }
    const bool units = oar::active_cpu_isa() == oar::cpu_isa::avx512_bf16 || oar::active_cpu_isa() == oar::cpu_isa::amx;
    for (bool on : {false, true}) {
        oar::set_conv_bf16_units(on);
        CHECK(oar::conv_bf16_applies() == (on && units));
    }
    oar::set_conv_bf16_units(oar::default_conv_bf16_units());
}

// conv2d_bf16_dw: the weight gradient of stride-1 square convolutions on the AVX512-BF16 tile
// (isa/conv_bf16_dw.inc), the output positions in pairs. Held to the double reference on the
// unrounded inputs with the bound above (its products are those of the im2col route; only the fp32
// sums are grouped differently), the same bits on 1, 2 and 3 threads, on the emulated tile
// everywhere and on the real one where the CPU has AVX512-BF16, the narrower tiles of blocks of 24
// and 16 channels or fewer bit for bit as the 32-channel one. Geometries: MyNet's second and third
// convolutions and the course CNN's second (several groups of samples, output channels past one
// block of 32), a padding wider than the kernel (the pitch from the output row), odd widths (pairs
// across the end of the wide positions).
namespace {

const ConvBf16Case conv_bf16_dw_cases[] = {
    {{32, 15, 15, 3, 1, 0}, 64, 11},  // MyNet's second convolution: groups of 5 samples
    {{64, 6, 6, 3, 1, 0}, 64, 33},    // MyNet's third: 4 x 4 outputs, groups of 16
    {{20, 14, 14, 5, 1, 2}, 20, 7},   // the course CNN's second: 20 of 32 lanes
    {{9, 7, 5, 3, 1, 1}, 33, 4},      // 33 output channels: a second block of one
    {{8, 5, 6, 3, 1, 3}, 3, 2},       // pad 3 > K - 1: the pitch of the wider output row
    {{8, 9, 9, 1, 1, 0}, 5, 6},       // 1x1 with a bias
};

std::vector<float> run_conv_bf16_dw(const ConvBf16Case& c, const ConvBf16Inputs& in,
                                    oar::conv_bf16_dw_body tile, std::vector<float>& db) {
    std::vector<float> dw = in.dw0;
    db = in.db0;
    oar::conv2d_bf16_dw(c.g, c.out_c, c.n, in.x.data(), in.dy.data(), dw.data(), db.data(), tile);
    return dw;
}

/// Checks dw and db against double references on the unrounded inputs; returns the measured k of dw
/// (sums of >= 32 products; every case has at least 32).
double check_conv_bf16_dw(const ConvBf16Case& c, const ConvBf16Inputs& in, const std::vector<float>& dw,
                          const std::vector<float>& db, const std::string& what) {
    const ConvGeometry& g = c.g;
    const std::size_t C = g.channels, H = g.height, W = g.width, K = g.kernel, OH = g.out_height(),
                      OW = g.out_width(), P = OH * OW, ckk = g.col_rows();
    std::vector<double> ref(c.out_c * ckk), abs_sum(ref.size()), dbr(c.out_c), dba(c.out_c);
    std::vector<std::size_t> terms(ref.size());
    for (std::size_t s = 0; s < c.n; ++s)
        for (std::size_t o = 0; o < c.out_c; ++o)
            for (std::size_t p = 0; p < P; ++p) {
                const double d = in.dy[(s * c.out_c + o) * P + p];
                dbr[o] += d;
                dba[o] += std::fabs(d);
                for (std::size_t ch = 0; ch < C; ++ch)
                    for (std::size_t ky = 0; ky < K; ++ky)
                        for (std::size_t kx = 0; kx < K; ++kx) {
                            const std::ptrdiff_t iy = std::ptrdiff_t(p / OW + ky) - std::ptrdiff_t(g.pad);
                            const std::ptrdiff_t ix = std::ptrdiff_t(p % OW + kx) - std::ptrdiff_t(g.pad);
                            if (iy < 0 || ix < 0 || iy >= std::ptrdiff_t(H) || ix >= std::ptrdiff_t(W)) continue;
                            const double xv = in.x[((s * C + ch) * H + std::size_t(iy)) * W + std::size_t(ix)];
                            const std::size_t wi = o * ckk + (ch * K + ky) * K + kx;
                            ref[wi] += d * xv;
                            abs_sum[wi] += std::fabs(d * xv);
                            ++terms[wi];
                        }
            }
    double worst = 0;
    std::size_t bad = 0;
    std::string first;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double want = in.dw0[i] + ref[i], err = std::fabs(double(dw[i]) - want);
        const double k = terms[i] < 32 ? k_conv_bf16_short : k_conv_bf16_long;
        const double tol = k * std::ldexp(abs_sum[i], -8) + std::ldexp(std::fabs(in.dw0[i]) + abs_sum[i], -23);
        if (abs_sum[i] > 0) worst = std::max(worst, err / std::ldexp(abs_sum[i], -8));
        if (!(err <= tol) && ++bad == 1)
            first = "dw[" + std::to_string(i) + "]: got " + std::to_string(dw[i]) + ", reference " + std::to_string(want);
    }
    for (std::size_t o = 0; o < c.out_c; ++o) {  // db: bias_grad of dy as given (not rounded here)
        const double want = in.db0[o] + dbr[o], err = std::fabs(double(db[o]) - want);
        if (!(err <= std::ldexp(double(c.n * P + 1), -24) * (dba[o] + std::fabs(in.db0[o]))) && ++bad == 1)
            first = "db[" + std::to_string(o) + "]: got " + std::to_string(db[o]) + ", reference " + std::to_string(want);
    }
    INFO(what, ": ", first);
    CHECK(bad == 0);
    return worst;
}

/// The tiles at their full 32 output channels whatever a block holds: the reference for the
/// narrower ones (16 and 24 channels), whose lanes must sum the same products in the same order.
template <auto Tile>
void full_width_tile(std::size_t rows, std::size_t, std::size_t ns, std::size_t pairs, const std::uint16_t* x,
                     std::size_t xs, const std::size_t* off, const std::uint32_t* dyt, std::size_t dyts, float* out) {
    Tile(rows, oar::cpu_detail::conv_bf16_dw_cols, ns, pairs, x, xs, off, dyt, dyts, out);
}

/// Every case on `tile`: checked, the same bits on 1, 2 and 3 threads and as `full` (the tile at
/// 32 channels for every block); returns the dw's per case (on 1 thread) for comparisons between tiles.
std::vector<std::vector<float>> test_conv_bf16_dw(oar::conv_bf16_dw_body tile, oar::conv_bf16_dw_body full,
                                                  const std::string& path) {
    std::vector<std::vector<float>> results;
    double worst = 0;
    std::uint64_t seed = 400;
    for (const ConvBf16Case& c : conv_bf16_dw_cases) {
        const ConvBf16Inputs in = make_conv_bf16_inputs(c, seed);
        seed += 10;
        const std::string what = path + ": C=" + std::to_string(c.g.channels) + " H=" + std::to_string(c.g.height) +
                                 " K=" + std::to_string(c.g.kernel) + " out_c=" + std::to_string(c.out_c) +
                                 " n=" + std::to_string(c.n);
        oar::set_num_threads(1);
        std::vector<float> db1;
        results.push_back(run_conv_bf16_dw(c, in, tile, db1));
        worst = std::max(worst, check_conv_bf16_dw(c, in, results.back(), db1, what));
        {
            std::vector<float> db;
            INFO(what, ": the 32-channel tile on every block");
            CHECK(run_conv_bf16_dw(c, in, full, db) == results.back());
        }
        for (std::size_t t : {2u, 3u}) {
            oar::set_num_threads(t);
            std::vector<float> db;
            const std::vector<float> dw = run_conv_bf16_dw(c, in, tile, db);
            INFO(what, ": ", t, " threads");
            CHECK(dw == results.back());
            CHECK(db == db1);
        }
    }
    oar::set_num_threads(oar::default_thread_count());
    MESSAGE(path << ": weight gradient on pairs of positions, measured k = " << worst);
    return results;
}

}  // namespace

TEST_CASE("bf16 weight gradient on pairs of positions (emulated and real AVX512-BF16 tile): within k 2^-8 sum|a||b|, same bits on 1-3 threads") {
    namespace emu = oar::cpu_detail::emu_avx512;
    const auto emulated = test_conv_bf16_dw({&emu::dw_pack, &emu::dw_tile_rows},
                                            {&emu::dw_pack, &full_width_tile<&emu::dw_tile_rows>}, "emulated avx512bf16");
#if OAR_ISA_X86 && OAR_ISA_COMPILED(2)
    if (!oar::cpu_supports(oar::cpu_isa::avx512_bf16)) {
        oar_test::skip("avx512bf16 weight-gradient tile not run: " +
                       oar::cpu_isa_unsupported_reason(oar::cpu_isa::avx512_bf16));
        return;
    }
    namespace real_body = oar::cpu_detail::bf16_avx512;
    const auto real = test_conv_bf16_dw({&real_body::dw_pack, &real_body::dw_tile_rows},
                                        {&real_body::dw_pack, &full_width_tile<&real_body::dw_tile_rows>}, "avx512bf16");
    // vdpbf16ps as the SDM defines it (the emulation): the same bits (the inputs hold no subnormals,
    // which the instruction flushes and the emulation keeps)
    CHECK(real == emulated);
#endif
}

TEST_CASE("bf16 weight gradient: conv_bf16_dw_applies takes the fp32 kernels' direct weight gradients of 8+ input channels on bf16 units") {
    const bool units = oar::active_cpu_isa() == oar::cpu_isa::avx512_bf16 || oar::active_cpu_isa() == oar::cpu_isa::amx;
    CHECK(oar::conv_bf16_dw_applies({32, 15, 15, 3, 1, 0}, 64) == units);  // MyNet's second convolution
    CHECK(oar::conv_bf16_dw_applies({20, 14, 14, 5, 1, 2}, 20) == units);  // the course CNN's second
    CHECK(oar::conv_bf16_dw_applies({32, 16, 16, 3, 1, 1}, 32) == units);  // ResNet8's second stage
    CHECK_FALSE(oar::conv_bf16_dw_applies({16, 32, 32, 3, 1, 1}, 16));  // Winograd's weight gradient there
    CHECK_FALSE(oar::conv_bf16_dw_applies({3, 32, 32, 3, 1, 0}, 32));   // too few input channels
    CHECK_FALSE(oar::conv_bf16_dw_applies({16, 32, 32, 3, 2, 1}, 32));  // strided
    CHECK_FALSE(oar::conv_bf16_dw_applies({16, 8, 8, 1, 1, 0}, 16));    // pointwise: a GEMM per sample already
    CHECK_FALSE(oar::conv_bf16_dw_applies({8, 10, 9, 3, 1, 1, 5, 1, 2}, 8));  // not square
}
