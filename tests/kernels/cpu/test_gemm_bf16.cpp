// Tests of oar/kernels/cpu/gemm_bf16.hpp on each of its paths this CPU runs: the fp32 path (bf16
// inputs widened, at every vector ISA), AVX512-BF16 and AMX (skipped, naming the missing feature,
// where the CPU or the kernel lacks them). Every transpose combination, alpha/beta, row strides
// past the packed ones with NaN in A's and B's padding and a sentinel in C's, and sizes around each
// path's tiles (10 x 32 registers, 32 x 32 AMX blocks, K pairs and 32-wide K steps, the 256-wide K
// blocks (1024 on AMX) and 160-row blocks), against double-precision references:
// - the exact products of the bf16 inputs: every path only sums them in fp32, so
//   |C - ref| <= (K + 2) 2^-24 (|alpha| sum|a_bf||b_bf| + |beta C0|);
// - the fp32 inputs before rounding: |C - ref| <= k 2^-8 sum|a||b|. bf16 keeps 8 significant bits,
//   so each input is within 2^-8 of itself and each product within (2^-7 + 2^-16) |a||b|: k <= 2.02
//   in the worst case for K <= 1000, which short sums nearly reach (measured k = 1.84 for K < 32 on
//   these uniform random inputs); longer sums cancel part of the rounding (measured k = 0.606 for
//   K from 33 to 300, on the fp32 path). The other paths differ from that path by their fp32
//   summation alone, at most 2 (K + 2) 2^-16 = 0.01 in k for K <= 300, so the checks use k = 2.02
//   for K < 32 and k = 0.62 for K >= 32.
// Paths agree with each other within the sum of their two accumulation bounds, and each gives the
// same bits on 1, 2 and 3 threads. The AVX512-BF16 and AMX bodies (isa/gemm_bf16_*.inc) also run on
// every host with their intrinsics emulated here as the Intel SDM defines them (vdpbf16ps,
// tdpbf16ps: exact bf16 products added to fp32 sums), so their packing, edges, masks and blocks are
// checked where the instructions are absent (tests/support/emulated_bf16.hpp); the real
// instructions only where the CPU has them. The bodies' float inputs (the bf16_mixed policy's,
// rounded while packing) give the bits of the same product on inputs rounded beforehand, and
// with op(B) packed whole beforehand (bf16_mixed's cache of Linear's weights in evaluation mode)
// the bits of packing it block by block.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cpu/gemm_bf16.hpp>  // the header under test
#include <oar/core/bf16.hpp>              // to_bf16, to_float
#include <oar/core/cpu_isa.hpp>           // supported_cpu_isas, set_cpu_isa, cpu_supports
#include <oar/core/thread_pool.hpp>       // set_num_threads: results must not depend on it

#include <algorithm>  // std::max, std::fill
#include <cmath>      // std::fabs, std::isnan, std::ldexp
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t, std::uint16_t, std::int32_t
#include <bit>        // std::bit_cast
#include <cstring>    // std::memcmp
#include <initializer_list>  // the sweeps' K lists
#include <limits>     // std::numeric_limits
#include <string>     // std::string
#include <vector>     // std::vector

#include "support/emulated_bf16.hpp"  // emu_avx512::gemm_block, emu_amx::gemm_block
#include "support/random.hpp"         // oar_test::random_vector
#include "support/skip.hpp"           // oar_test::skip: a path this CPU lacks

namespace {

using oar::Trans;
constexpr Trans both_trans[] = {Trans::no, Trans::yes};
constexpr double k_short = 2.02, k_long = 0.62;  // see the header comment

struct Bf16Case {
    Trans ta, tb;
    std::size_t M, N, K;
    float alpha, beta;
    std::size_t pad;  // extra row-stride elements of A, B and C
};

struct Bf16Result {
    std::size_t bad = 0;      // entries outside the accumulation bound, or padding touched
    double worst_k = 0;       // max |C - ref32| / (2^-8 sum|a||b|) (alpha 1, beta 0 cases)
    std::vector<float> c;     // C as computed (with its padding)
    std::vector<double> tol;  // the accumulation bound per entry of C
    std::string first;
};

std::string describe_bf16(const Bf16Case& c) {
    return std::string("ta=") + (c.ta == Trans::yes ? "T" : "N") + " tb=" + (c.tb == Trans::yes ? "T" : "N") +
           " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
           " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta) + " pad=" + std::to_string(c.pad);
}

/// Runs one case on the active ISA's path and checks it against both references.
Bf16Result run_bf16_case(const Bf16Case& c, std::uint64_t seed) {
    const std::size_t a_rows = c.ta == Trans::no ? c.M : c.K, a_cols = c.ta == Trans::no ? c.K : c.M;
    const std::size_t b_rows = c.tb == Trans::no ? c.K : c.N, b_cols = c.tb == Trans::no ? c.N : c.K;
    const std::size_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.N + c.pad;
    const float nan = std::numeric_limits<float>::quiet_NaN(), sentinel = 12345.0f;
    const auto a32 = oar_test::random_vector<float>(a_rows * lda, seed);
    const auto b32 = oar_test::random_vector<float>(b_rows * ldb, seed + 1);
    std::vector<oar::bf16> a(a32.size()), b(b32.size());
    oar::to_bf16(a32.data(), a.data(), a.size());
    oar::to_bf16(b32.data(), b.data(), b.size());
    for (std::size_t r = 0; r < a_rows; ++r)
        for (std::size_t j = a_cols; j < lda; ++j) a[r * lda + j] = oar::to_bf16(nan);
    for (std::size_t r = 0; r < b_rows; ++r)
        for (std::size_t j = b_cols; j < ldb; ++j) b[r * ldb + j] = oar::to_bf16(nan);
    auto c0 = oar_test::random_vector<float>(c.M * ldc, seed + 2);
    for (std::size_t i = 0; i < c.M; ++i)
        for (std::size_t j = c.N; j < ldc; ++j) c0[i * ldc + j] = sentinel;
    Bf16Result res;
    res.c = c0;
    res.tol.assign(c.M * ldc, 0.0);
    oar::gemm_bf16(c.ta, c.tb, c.M, c.N, c.K, c.alpha, a.data(), lda, b.data(), ldb, c.beta, res.c.data(), ldc);
    const auto A = [&](const auto& m, std::size_t i, std::size_t k) {
        return double(c.ta == Trans::no ? m[i * lda + k] : m[k * lda + i]);
    };
    const auto Bv = [&](const auto& m, std::size_t k, std::size_t j) {
        return double(c.tb == Trans::no ? m[k * ldb + j] : m[j * ldb + k]);
    };
    std::vector<float> af(a.size()), bf(b.size());
    oar::to_float(a.data(), af.data(), a.size());
    oar::to_float(b.data(), bf.data(), b.size());
    for (std::size_t i = 0; i < c.M; ++i)
        for (std::size_t j = 0; j < ldc; ++j) {
            const float got = res.c[i * ldc + j];
            if (j >= c.N) {
                if (got != sentinel && ++res.bad == 1) res.first = "padding of C written at " + std::to_string(i);
                continue;
            }
            double exact = 0, exact_abs = 0, ref32 = 0, ref32_abs = 0;
            for (std::size_t k = 0; k < c.K; ++k) {
                exact += A(af, i, k) * Bv(bf, k, j);
                exact_abs += std::fabs(A(af, i, k) * Bv(bf, k, j));
                ref32 += A(a32, i, k) * Bv(b32, k, j);
                ref32_abs += std::fabs(A(a32, i, k) * Bv(b32, k, j));
            }
            const double cin = c.beta == 0.0f ? 0.0 : double(c.beta) * c0[i * ldc + j];
            const double want = double(c.alpha) * exact + cin;
            const double tol = std::ldexp(double(c.K + 2), -24) * (std::fabs(double(c.alpha)) * exact_abs + std::fabs(cin)) +
                               std::numeric_limits<float>::denorm_min();
            res.tol[i * ldc + j] = tol;
            if (!(std::fabs(got - want) <= tol) && ++res.bad == 1)
                res.first = "C(" + std::to_string(i) + "," + std::to_string(j) + ") = " + std::to_string(got) +
                            ", exact sum of the bf16 products " + std::to_string(want);
            if (c.alpha == 1.0f && c.beta == 0.0f && ref32_abs > 0)
                res.worst_k = std::max(res.worst_k, std::fabs(got - ref32) / std::ldexp(ref32_abs, -8));
        }
    return res;
}

/// The sweep of one path (the active ISA): every transpose pair over the sizes around its tiles.
/// Returns the results in order, for comparisons between paths.
std::vector<Bf16Result> bf16_sweep(const char* path) {
    std::vector<Bf16Result> all;
    double worst_k_short = 0, worst_k_long = 0;  // K < 32, K >= 32
    std::uint64_t seed = 100;
    for (Trans ta : both_trans)
        for (Trans tb : both_trans)
            for (std::size_t M : {1u, 9u, 11u, 32u, 33u, 161u})
                for (std::size_t N : {1u, 16u, 17u, 32u, 65u})
                    for (std::size_t K : {1u, 2u, 3u, 33u, 64u, 257u, 300u}) {
                        const bool plain = (M + N + K) % 3 != 0;  // a third of the cases scale and add to C
                        const Bf16Case c{ta, tb, M, N, K, plain ? 1.0f : -0.75f, plain ? 0.0f : 0.5f, (M + K) % 3};
                        Bf16Result r = run_bf16_case(c, seed++);
                        INFO(std::string(path), ": ", describe_bf16(c), ": ", r.first);
                        CHECK(r.bad == 0);
                        double& worst = K < 32 ? worst_k_short : worst_k_long;
                        worst = std::max(worst, r.worst_k);
                        all.push_back(std::move(r));
                    }
    MESSAGE(std::string(path) << ": measured k = " << worst_k_short << " for K < 32, " << worst_k_long
                              << " for K >= 32 (max |C - fp32 reference| / (2^-8 sum|a||b|))");
    CHECK(worst_k_short <= k_short);
    CHECK(worst_k_long <= k_long);
    return all;
}

/// Same bits on 1, 2 and 3 threads for products large enough to be split (rows or columns).
void check_thread_counts(const char* path) {
    constexpr std::size_t shapes[][3] = {{300, 410, 270}, {20, 2000, 300}, {2000, 40, 100}, {161, 97, 513}};
    for (Trans ta : both_trans)
        for (Trans tb : both_trans)
            for (const auto& sh : shapes) {
                const std::size_t M = sh[0], N = sh[1], K = sh[2];
                const auto a32 = oar_test::random_vector<float>(M * K, 7), b32 = oar_test::random_vector<float>(K * N, 8);
                std::vector<oar::bf16> a(a32.size()), b(b32.size());
                oar::to_bf16(a32.data(), a.data(), a.size());
                oar::to_bf16(b32.data(), b.data(), b.size());
                std::vector<std::vector<float>> results;
                for (std::size_t threads : {1u, 2u, 3u}) {
                    oar::set_num_threads(threads);
                    std::vector<float> c(M * N, 0.25f);
                    oar::gemm_bf16(ta, tb, M, N, K, 1.0f, a.data(), b.data(), 0.5f, c.data());
                    results.push_back(std::move(c));
                }
                INFO(std::string(path), ": M=", M, " N=", N, " K=", K);
                CHECK(results[0] == results[1]);
                CHECK(results[0] == results[2]);
            }
    oar::set_num_threads(oar::default_thread_count());
}

/// Runs the sweep and the thread check with `isa` active; returns the sweep's results.
std::vector<Bf16Result> test_path(oar::cpu_isa isa) {
    oar::set_cpu_isa(isa);
    const std::string name(oar::cpu_isa_name(isa));
    auto results = bf16_sweep(name.c_str());
    check_thread_counts(name.c_str());
    oar::set_cpu_isa(oar::default_cpu_isa());
    return results;
}

/// Every path this CPU runs agrees with every other within both accumulation bounds.
void check_agree(const std::vector<Bf16Result>& x, const std::vector<Bf16Result>& y, const std::string& what) {
    REQUIRE(x.size() == y.size());
    std::size_t bad = 0;
    for (std::size_t n = 0; n < x.size(); ++n)
        for (std::size_t e = 0; e < x[n].c.size(); ++e)
            bad += !(std::fabs(double(x[n].c[e]) - y[n].c[e]) <= x[n].tol[e] + y[n].tol[e]);
    INFO(what);
    CHECK(bad == 0);
}

}  // namespace

TEST_CASE("bf16 gemm on the fp32 path (inputs widened) matches both references at every vector ISA") {
    std::vector<std::vector<Bf16Result>> per_isa;
    for (oar::cpu_isa isa : oar::supported_cpu_isas())
        if (isa <= oar::cpu_isa::avx512) per_isa.push_back(test_path(isa));
    for (std::size_t n = 1; n < per_isa.size(); ++n) check_agree(per_isa[0], per_isa[n], "fp32 path across ISAs");
}

TEST_CASE("bf16 gemm on the AVX512-BF16 path (vdpbf16ps) matches both references and the fp32 path") {
    if (!oar::cpu_supports(oar::cpu_isa::avx512_bf16)) {
        oar_test::skip("AVX512-BF16 path not run: " + oar::cpu_isa_unsupported_reason(oar::cpu_isa::avx512_bf16));
        return;
    }
    const auto fast = test_path(oar::cpu_isa::avx512_bf16);
    oar::set_cpu_isa(oar::cpu_isa::sse2);
    const auto ref = bf16_sweep("sse2 (for comparison)");
    oar::set_cpu_isa(oar::default_cpu_isa());
    check_agree(fast, ref, "avx512bf16 vs the fp32 path");
}

TEST_CASE("bf16 gemm on the AMX path (tdpbf16ps) matches both references and the fp32 path") {
    if (!oar::cpu_supports(oar::cpu_isa::amx)) {
        oar_test::skip("AMX path not run: " + oar::cpu_isa_unsupported_reason(oar::cpu_isa::amx));
        return;
    }
    const auto fast = test_path(oar::cpu_isa::amx);
    oar::set_cpu_isa(oar::cpu_isa::sse2);
    const auto ref = bf16_sweep("sse2 (for comparison)");
    oar::set_cpu_isa(oar::default_cpu_isa());
    check_agree(fast, ref, "amx vs the fp32 path");
}

namespace {

using block_fn = void (*)(std::size_t, std::size_t, std::size_t, float, const oar::bf16*, std::size_t, std::size_t,
                          const oar::bf16*, std::size_t, std::size_t, float, float*, std::size_t);

/// Sweeps one emulated body over transposes, strides and the sizes around its tiles and blocks,
/// against the exact products of the bf16 inputs; returns the number of wrong cases.
std::size_t sweep_emulated(block_fn block, const char* name, std::initializer_list<std::size_t> Ks = {1, 3, 33, 257, 300},
                           std::initializer_list<std::size_t> Ns = {1, 16, 17, 33},
                           std::initializer_list<std::size_t> Ms = {1, 9, 11, 33, 161}) {
    std::size_t bad_cases = 0;
    std::uint64_t seed = 900;
    for (Trans ta : both_trans)
        for (Trans tb : both_trans)
            for (std::size_t M : Ms)
                for (std::size_t N : Ns)
                    for (std::size_t K : Ks) {
                        const std::size_t pad = (M + N) % 3;
                        const std::size_t ar = ta == Trans::no ? M : K, ac = ta == Trans::no ? K : M;
                        const std::size_t br = tb == Trans::no ? K : N, bc = tb == Trans::no ? N : K;
                        const std::size_t lda = ac + pad, ldb = bc + pad, ldc = N + pad;
                        const auto a32 = oar_test::random_vector<float>(ar * lda, seed++);
                        const auto b32 = oar_test::random_vector<float>(br * ldb, seed++);
                        std::vector<oar::bf16> a(a32.size()), b(b32.size());
                        oar::to_bf16(a32.data(), a.data(), a.size());
                        oar::to_bf16(b32.data(), b.data(), b.size());
                        const auto c0 = oar_test::random_vector<float>(M * ldc, seed++);
                        auto c = c0;
                        const float alpha = (M + K) % 2 ? 1.0f : -0.75f;
                        const float beta = N % 3 == 0 ? 0.0f : N % 3 == 1 ? 1.0f : 0.5f;
                        const std::size_t ai = ta == Trans::no ? lda : 1, ak = ta == Trans::no ? 1 : lda;
                        const std::size_t bk = tb == Trans::no ? ldb : 1, bj = tb == Trans::no ? 1 : ldb;
                        block(M, N, K, alpha, a.data(), ai, ak, b.data(), bk, bj, beta, c.data(), ldc);
                        std::size_t bad = 0;
                        for (std::size_t i = 0; i < M; ++i)
                            for (std::size_t j = 0; j < ldc; ++j) {
                                if (j >= N) {
                                    bad += c[i * ldc + j] != c0[i * ldc + j];
                                    continue;
                                }
                                double s = 0, sa = 0;
                                for (std::size_t k = 0; k < K; ++k) {
                                    const double p = double(oar::to_float(a[i * ai + k * ak])) * oar::to_float(b[k * bk + j * bj]);
                                    s += p;
                                    sa += std::fabs(p);
                                }
                                const double cin = beta == 0.0f ? 0.0 : double(beta) * c0[i * ldc + j];
                                const double want = alpha * s + cin;
                                const double tol = std::ldexp(double(K + 2), -24) * (std::fabs(alpha) * sa + std::fabs(cin)) +
                                                   std::numeric_limits<float>::denorm_min();
                                bad += !(std::fabs(c[i * ldc + j] - want) <= tol);
                            }
                        if (bad) {
                            ++bad_cases;
                            INFO(name, ": ", describe_bf16({ta, tb, M, N, K, alpha, beta, pad}), ": ", bad, " wrong entries");
                            CHECK(bad == 0);
                        }
                    }
    return bad_cases;
}

}  // namespace

TEST_CASE("the AVX512-BF16 body on emulated vdpbf16ps matches the exact products on every transpose and edge") {
    CHECK(sweep_emulated(&oar::cpu_detail::emu_avx512::gemm_block<oar::bf16>, "emulated avx512bf16") == 0);
}

TEST_CASE("the AMX body on emulated tiles matches the exact products on every transpose and edge") {
    // K = 1057: more than one of the AMX body's K blocks (gemm_bf16_amx_kc = 1024).
    static_assert(oar::cpu_detail::gemm_bf16_amx_kc < 1057);
    // M = 64 with N = 33 (beta 0) and N = 64 (beta 1), alpha 1 where M + K is odd: whole 32 x 32 blocks
    // that start from zero or from C in the tiles and are stored straight into C, over one K block and two.
    CHECK(sweep_emulated(&oar::cpu_detail::emu_amx::gemm_block<oar::bf16>, "emulated amx", {1, 3, 33, 257, 300, 1057},
                         {1, 16, 17, 33, 64}, {1, 9, 11, 33, 64, 161}) == 0);
    CHECK(!oar::cpu_detail::emu_amx::tiles().misuse);       // every tile used within its configured shape
    CHECK(!oar::cpu_detail::emu_amx::tiles().configured);   // released at the end
}

TEST_CASE("bf16 gemm with beta = 0 overwrites NaN in C; alpha = 0 or K = 0 only scales C; M or N = 0 touches nothing") {
    for (oar::cpu_isa isa : oar::supported_cpu_isas()) {
        oar::set_cpu_isa(isa);
        INFO("ISA ", oar::cpu_isa_name(isa));
        const std::size_t M = 13, N = 35, K = 40;
        const auto a32 = oar_test::random_vector<float>(M * K, 3), b32 = oar_test::random_vector<float>(K * N, 4);
        std::vector<oar::bf16> a(a32.size()), b(b32.size());
        oar::to_bf16(a32.data(), a.data(), a.size());
        oar::to_bf16(b32.data(), b.data(), b.size());
        std::vector<float> c(M * N, std::numeric_limits<float>::quiet_NaN());
        oar::gemm_bf16(Trans::no, Trans::no, M, N, K, 1.0f, a.data(), b.data(), 0.0f, c.data());
        std::size_t nans = 0;
        for (float v : c) nans += std::isnan(v);
        CHECK(nans == 0);
        std::vector<float> d(M * N, 2.0f);
        oar::gemm_bf16(Trans::no, Trans::no, M, N, K, 0.0f, nullptr, nullptr, 0.5f, d.data());
        oar::gemm_bf16(Trans::no, Trans::no, M, N, 0, 1.0f, nullptr, nullptr, 3.0f, d.data());
        for (float v : d) CHECK(v == 3.0f);
        oar::gemm_bf16(Trans::no, Trans::no, 0, N, K, 1.0f, nullptr, nullptr, 0.0f, nullptr);
        oar::gemm_bf16(Trans::no, Trans::no, M, 0, K, 1.0f, nullptr, nullptr, 0.0f, nullptr);
    }
    oar::set_cpu_isa(oar::default_cpu_isa());
}

TEST_CASE("bf16_bits rounds a float as to_bf16 does, on special values and random bit patterns") {
    using oar::cpu_detail::bf16_bits;
    const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 1.00390625f /* 1 + 2^-8: a tie, to even */,
                              1.01171875f /* 1 + 3 * 2^-8: a tie, up */, std::numeric_limits<float>::max(),
                              -std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                              -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
                              std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()};
    for (float x : specials) CHECK(bf16_bits(x) == oar::to_bf16(x).bits);
    std::uint64_t s = 0x9e3779b97f4a7c15ull;
    std::size_t bad = 0;
    for (int i = 0; i < 1 << 20; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float x = std::bit_cast<float>(static_cast<std::uint32_t>(s >> 32));
        bad += bf16_bits(x) != oar::to_bf16(x).bits;
    }
    CHECK(bad == 0);
}

namespace {

/// Inputs for the float-input checks: random values, some set to exact bf16 ties.
std::vector<float> with_ties(std::size_t n, std::uint64_t seed) {
    auto v = oar_test::random_vector<float>(n, seed);
    for (std::size_t i = 0; i < n; i += 7) v[i] = std::bit_cast<float>((std::bit_cast<std::uint32_t>(v[i]) & 0xffff0000u) | 0x8000u);
    return v;
}

template <class Block32, class Block16>
std::size_t float_vs_rounded(Block32 block32, Block16 block16, std::initializer_list<std::size_t> Ks) {
    std::size_t bad_cases = 0;
    std::uint64_t seed = 4100;
    for (Trans ta : both_trans)
        for (Trans tb : both_trans)
            for (std::size_t M : {1u, 11u, 33u})
                for (std::size_t N : {17u, 33u})
                    for (std::size_t K : Ks) {
                        const std::size_t ar = ta == Trans::no ? M : K, ac = ta == Trans::no ? K : M;
                        const std::size_t br = tb == Trans::no ? K : N, bc = tb == Trans::no ? N : K;
                        const auto a32 = with_ties(ar * ac, seed++), b32 = with_ties(br * bc, seed++);
                        std::vector<oar::bf16> a(a32.size()), b(b32.size());
                        oar::to_bf16(a32.data(), a.data(), a.size());
                        oar::to_bf16(b32.data(), b.data(), b.size());
                        const auto c0 = oar_test::random_vector<float>(M * N, seed++);
                        auto c_float = c0, c_bf16 = c0;
                        const std::size_t ai = ta == Trans::no ? ac : 1, ak = ta == Trans::no ? 1 : ac;
                        const std::size_t bk = tb == Trans::no ? bc : 1, bj = tb == Trans::no ? 1 : bc;
                        block32(M, N, K, 0.5f, a32.data(), ai, ak, b32.data(), bk, bj, 1.0f, c_float.data(), N);
                        block16(M, N, K, 0.5f, a.data(), ai, ak, b.data(), bk, bj, 1.0f, c_bf16.data(), N);
                        if (std::memcmp(c_float.data(), c_bf16.data(), c0.size() * sizeof(float)) != 0) {
                            ++bad_cases;
                            INFO("M ", M, " N ", N, " K ", K, " ta ", int(ta), " tb ", int(tb));
                            CHECK(false);
                        }
                    }
    return bad_cases;
}

}  // namespace

TEST_CASE("the emulated bf16 bodies round float inputs while packing: the bits of the same product on inputs rounded before") {
    namespace cd = oar::cpu_detail;
    CHECK(float_vs_rounded(&cd::emu_avx512::gemm_block<float>, &cd::emu_avx512::gemm_block<oar::bf16>, {1, 2, 33, 300}) == 0);
    CHECK(float_vs_rounded(&cd::emu_amx::gemm_block<float>, &cd::emu_amx::gemm_block<oar::bf16>, {1, 33, 300, 1057}) == 0);
    CHECK(!cd::emu_amx::tiles().misuse);
}

TEST_CASE("the bf16_mixed GEMM on the bf16 units (float inputs rounded while packing) gives gemm_bf16's bits on rounded inputs; "
          "a C narrower than a strip takes the fp32 kernel") {
    for (oar::cpu_isa isa : {oar::cpu_isa::avx512_bf16, oar::cpu_isa::amx}) {
        if (!oar::cpu_supports(isa)) {
            oar_test::skip(std::string(oar::cpu_isa_name(isa)) + " units not run: " + oar::cpu_isa_unsupported_reason(isa));
            continue;
        }
        oar::set_cpu_isa(isa);
        for (std::size_t threads : {1u, 2u}) {
            oar::set_num_threads(threads);
            CHECK(float_vs_rounded(
                      [](std::size_t M, std::size_t N, std::size_t K, float alpha, const float* a, std::size_t ai,
                         std::size_t ak, const float* b, std::size_t bk, std::size_t bj, float beta, float* c,
                         std::size_t ldc) {
                          const Trans ta = ak == 1 ? Trans::no : Trans::yes, tb = bj == 1 ? Trans::no : Trans::yes;
                          oar::precision_gemm<oar::bf16_mixed>::run(ta, tb, M, N, K, alpha, a, ak == 1 ? ai : ak, b,
                                                                    bj == 1 ? bk : bj, beta, c, ldc);
                      },
                      [](std::size_t M, std::size_t N, std::size_t K, float alpha, const oar::bf16* a, std::size_t ai,
                         std::size_t ak, const oar::bf16* b, std::size_t bk, std::size_t bj, float beta, float* c,
                         std::size_t ldc) {
                          const Trans ta = ak == 1 ? Trans::no : Trans::yes, tb = bj == 1 ? Trans::no : Trans::yes;
                          if (N >= oar::cpu_detail::gemm_bf16_nr)  // the units
                              oar::gemm_bf16(ta, tb, M, N, K, alpha, a, ak == 1 ? ai : ak, b, bj == 1 ? bk : bj, beta, c, ldc);
                          else  // N = 17: the fp32 kernel on the widened (exact) values
                              oar::cpu_detail::gemm_bf16_widened(ta, tb, M, N, K, alpha, a, ak == 1 ? ai : ak, b,
                                                                 bj == 1 ? bk : bj, beta, c, ldc);
                      },
                      {1, 33, 300, 1057}) == 0);
        }
        oar::set_num_threads(oar::default_thread_count());
    }
    oar::set_cpu_isa(oar::default_cpu_isa());
}

namespace {

/// One emulated body's gemm_block reading a whole op(B) packed beforehand (pack_b_whole), C split
/// at column 32 into two calls as a split over threads does, against the body packing B itself:
/// same bits (B itself not passed to the calls with the copy). Returns the number of wrong cases.
template <class Body>
std::size_t prepacked_vs_packing(Body body, std::initializer_list<std::size_t> Ks) {
    std::size_t bad_cases = 0;
    std::uint64_t seed = 7700;
    for (Trans ta : both_trans)
        for (Trans tb : both_trans)
            for (std::size_t M : {1u, 11u, 33u})
                for (std::size_t N : {32u, 33u, 100u})
                    for (std::size_t K : Ks) {
                        const std::size_t ar = ta == Trans::no ? M : K, ac = ta == Trans::no ? K : M;
                        const std::size_t br = tb == Trans::no ? K : N, bc = tb == Trans::no ? N : K;
                        const auto a = with_ties(ar * ac, seed++), b = with_ties(br * bc, seed++);
                        const auto c0 = oar_test::random_vector<float>(M * N, seed++);
                        auto want = c0, got = c0;
                        const std::size_t ai = ta == Trans::no ? ac : 1, ak = ta == Trans::no ? 1 : ac;
                        const std::size_t bk = tb == Trans::no ? bc : 1, bj = tb == Trans::no ? 1 : bc;
                        const float alpha = K % 2 ? 1.0f : 0.5f, beta = N % 2 ? 0.0f : 1.0f;
                        body.pack_free(M, N, K, alpha, a.data(), ai, ak, b.data(), bk, bj, beta, want.data(), N);
                        std::vector<std::uint16_t> pre(body.size(K, N), 0xffff);
                        body.pack_whole(K, N, b.data(), bk, bj, pre.data());
                        const std::size_t strips = (N + 31) / 32;
                        body.from_pre(M, 32, K, alpha, a.data(), ai, ak, beta, got.data(), N, pre.data(), 0, strips);
                        body.from_pre(M, N - 32, K, alpha, a.data(), ai, ak, beta, got.data() + 32, N, pre.data(), 1,
                                      strips);
                        if (std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) != 0) {
                            ++bad_cases;
                            INFO("M ", M, " N ", N, " K ", K, " ta ", int(ta), " tb ", int(tb));
                            CHECK(false);
                        }
                    }
    return bad_cases;
}

/// The calls prepacked_vs_packing makes, for the body in namespace NS.
#define OAR_TEST_PREPACKED_BODY(NS)                                                                                   \
        void pack_free(std::size_t M, std::size_t N, std::size_t K, float alpha, const float* a, std::size_t ai,     \
                       std::size_t ak, const float* b, std::size_t bk, std::size_t bj, float beta, float* c,          \
                       std::size_t ldc) const {                                                                      \
            NS::gemm_block(M, N, K, alpha, a, ai, ak, b, bk, bj, beta, c, ldc);                                      \
        }                                                                                                            \
        std::size_t size(std::size_t K, std::size_t N) const { return NS::packed_b_size(K, N); }                     \
        void pack_whole(std::size_t K, std::size_t N, const float* b, std::size_t bk, std::size_t bj,                \
                        std::uint16_t* out) const {                                                                  \
            NS::pack_b_whole(K, N, b, bk, bj, out);                                                                  \
        }                                                                                                            \
        void from_pre(std::size_t M, std::size_t N, std::size_t K, float alpha, const float* a, std::size_t ai,      \
                      std::size_t ak, float beta, float* c, std::size_t ldc, const std::uint16_t* pre,               \
                      std::size_t strip0, std::size_t strips) const {                                                \
            NS::gemm_block_from(M, N, K, alpha, a, ai, ak, static_cast<const float*>(nullptr), 0, 0, beta, c, ldc,   \
                                pre, strip0, strips);                                                                \
        }
struct emu_avx512_prepacked {
    OAR_TEST_PREPACKED_BODY(oar::cpu_detail::emu_avx512)
};
struct emu_amx_prepacked {
    OAR_TEST_PREPACKED_BODY(oar::cpu_detail::emu_amx)
};
#undef OAR_TEST_PREPACKED_BODY

}  // namespace

TEST_CASE("the emulated bf16 bodies read a whole op(B) packed beforehand with the bits of packing it themselves") {
    namespace cd = oar::cpu_detail;
    // K = 300 spans two of the AVX512-BF16 body's K blocks (256), K = 1057 two of the AMX body's (1024).
    static_assert(cd::gemm_bf16_kc < 300 && cd::gemm_bf16_amx_kc < 1057);
    CHECK(prepacked_vs_packing(emu_avx512_prepacked{}, {1, 2, 33, 300}) == 0);
    CHECK(prepacked_vs_packing(emu_amx_prepacked{}, {1, 33, 300, 1057}) == 0);
    CHECK(!cd::emu_amx::tiles().misuse);
}

TEST_CASE("bf16_mixed's run_cached gives run's bits and packs op(B) once per version, on every path this CPU has") {
    // Linear's forward shapes (one row, the MLP's batch) and edges: N not a whole number of strips,
    // K over several blocks, N narrower than a strip (run as it is, nothing packed).
    constexpr std::size_t shapes[][3] = {{1, 512, 784}, {100, 512, 784}, {20, 70, 300}, {130, 65, 1057}, {33, 7, 64}};
    for (oar::cpu_isa isa : oar::supported_cpu_isas()) {
        oar::set_cpu_isa(isa);
        const bool units = isa == oar::cpu_isa::avx512_bf16 || isa == oar::cpu_isa::amx;
        for (std::size_t threads : {1u, 2u, 3u})
            for (Trans ta : both_trans)
                for (Trans tb : both_trans)
                    for (const auto& sh : shapes) {
                        oar::set_num_threads(threads);
                        const std::size_t M = sh[0], N = sh[1], K = sh[2], pad = 3;
                        const std::size_t lda = (ta == Trans::no ? K : M) + pad, ldb = (tb == Trans::no ? N : K) + pad;
                        const auto a = with_ties((ta == Trans::no ? M : K) * lda, 31);
                        auto b = with_ties((tb == Trans::no ? K : N) * ldb, 32);
                        std::vector<float> want(M * N, 0.25f), got(M * N, 0.25f);
                        oar::precision_gemm<oar::bf16_mixed>::run(ta, tb, M, N, K, 1.0f, a.data(), lda, b.data(), ldb,
                                                                  0.5f, want.data(), N);
                        oar::gemm_pack_cache<float> cache;
                        oar::precision_gemm<oar::bf16_mixed>::run_cached(cache, 1, ta, tb, M, N, K, 1.0f, a.data(), lda,
                                                                         b.data(), ldb, 0.5f, got.data(), N);
                        INFO(std::string(oar::cpu_isa_name(isa)), " threads=", threads, " ta=", int(ta), " tb=", int(tb),
                             " M=", M, " N=", N, " K=", K);
                        CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
                        const std::size_t packs = units && N >= oar::cpu_detail::gemm_bf16_nr ? 1 : 0;
                        CHECK(cache.packs() == packs);
                        std::fill(got.begin(), got.end(), 0.25f);  // again: from the kept copy
                        oar::precision_gemm<oar::bf16_mixed>::run_cached(cache, 1, ta, tb, M, N, K, 1.0f, a.data(), lda,
                                                                         b.data(), ldb, 0.5f, got.data(), N);
                        CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
                        CHECK(cache.packs() == packs);
                        b[0] += 1.0f;  // a write to B, announced by the next version: packed again
                        std::fill(want.begin(), want.end(), 0.25f);
                        std::fill(got.begin(), got.end(), 0.25f);
                        oar::precision_gemm<oar::bf16_mixed>::run(ta, tb, M, N, K, 1.0f, a.data(), lda, b.data(), ldb,
                                                                  0.5f, want.data(), N);
                        oar::precision_gemm<oar::bf16_mixed>::run_cached(cache, 2, ta, tb, M, N, K, 1.0f, a.data(), lda,
                                                                         b.data(), ldb, 0.5f, got.data(), N);
                        CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
                        CHECK(cache.packs() == 2 * packs);
                    }
    }
    oar::set_num_threads(oar::default_thread_count());
    oar::set_cpu_isa(oar::default_cpu_isa());
}
