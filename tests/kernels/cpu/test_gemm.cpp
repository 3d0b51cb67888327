// Tests of oar/kernels/cpu/gemm.hpp: every transpose combination, alpha/beta (beta = 0 ignoring
// NaN in C), row strides larger than the packed ones, and sizes that reach each path of the
// micro-kernel (10-row tiles and every shorter rest; full and partial column panels of two SIMD
// vectors, 16 floats / 8 doubles each with AVX-512; K = 1; M or N = 1), the cache blocks (K past
// KC = 256, M past MC = 120, B read in place or packed), in float and double,
// against a naive triple loop in long double. Narrow products (N <= 10 columns, the classifiers'
// outputs) take their own paths: op(A) = A^T through transposed tiles (whole 32-row tiles and a
// partial one), op(A) = A with K >= 32 through dot-product tiles (3 x 5 and their row and column
// rests, K past and short of whole SIMD vectors, B's rows read directly or copied when transposed);
// they are swept the same way, and so is every shape the course's models call. NaN in the padding
// of A and B and a sentinel in the padding of C catch reads and writes outside the matrices.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cpu/gemm.hpp>  // the header under test
#include <oar/core/thread_pool.hpp>  // set_num_threads: results must not depend on it
#include <oar/core/cpu_isa.hpp>      // supported_cpu_isas, set_cpu_isa: every ISA the CPU has is tested

#include <cmath>     // std::abs, std::isnan
#include <cstddef>   // std::size_t
#include <cstdint>   // std::uint64_t
#include <iterator>  // std::size
#include <limits>    // std::numeric_limits
#include <string>    // std::string
#include <utility>   // std::move
#include <vector>    // std::vector

#include "support/random.hpp"  // oar_test::rand_unit, random_vector: deterministic A, B and C
#include "support/isa.hpp"     // oar_test::for_each_isa: every ISA the CPU has
#include "support/skip.hpp"    // oar_test::skip: an ISA this CPU lacks

namespace {

using oar::Trans;
using oar_test::rand_unit;

struct GemmCase {
    Trans ta, tb;
    std::size_t M, N, K;
    double alpha, beta;
    std::size_t pad_a, pad_b, pad_c;  // extra row-stride elements beyond the packed stride
};

std::string describe_gemm(const GemmCase& c) {
    return std::string("ta=") + (c.ta == Trans::yes ? "T" : "N") + " tb=" + (c.tb == Trans::yes ? "T" : "N") +
           " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
           " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta) + " pads=" +
           std::to_string(c.pad_a) + "," + std::to_string(c.pad_b) + "," + std::to_string(c.pad_c);
}

/// Runs one case through kernel<op::gemm, basic_cpu<T>> and returns the number of wrong entries
/// of C (including padding columns that were written). `first` describes the first one.
template <class T>
std::size_t run_gemm_case(const GemmCase& c, std::uint64_t seed, std::string& first, bool nan_in_c = false) {
    // Stored shapes: A is (M,K) or, transposed, (K,M); B is (K,N) or (N,K); C is (M,N).
    const std::size_t a_rows = c.ta == Trans::no ? c.M : c.K, a_cols = c.ta == Trans::no ? c.K : c.M;
    const std::size_t b_rows = c.tb == Trans::no ? c.K : c.N, b_cols = c.tb == Trans::no ? c.N : c.K;
    const std::size_t lda = a_cols + c.pad_a, ldb = b_cols + c.pad_b, ldc = c.N + c.pad_c;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    const T sentinel = T(12345);
    // Padding of A and B holds NaN: reading it would poison C. Padding of C holds a sentinel.
    std::vector<T> A(a_rows * lda + 1, nan), B(b_rows * ldb + 1, nan), C(c.M * ldc + 1, sentinel);
    std::uint64_t s = seed;
    for (std::size_t i = 0; i < a_rows; ++i)
        for (std::size_t j = 0; j < a_cols; ++j) A[i * lda + j] = static_cast<T>(rand_unit(s));
    for (std::size_t i = 0; i < b_rows; ++i)
        for (std::size_t j = 0; j < b_cols; ++j) B[i * ldb + j] = static_cast<T>(rand_unit(s));
    for (std::size_t i = 0; i < c.M; ++i)
        for (std::size_t j = 0; j < c.N; ++j) C[i * ldc + j] = nan_in_c ? nan : static_cast<T>(rand_unit(s));
    const std::vector<T> C0 = C;

    auto a_at = [&](std::size_t i, std::size_t k) -> long double {
        return c.ta == Trans::no ? A[i * lda + k] : A[k * lda + i];
    };
    auto b_at = [&](std::size_t k, std::size_t j) -> long double {
        return c.tb == Trans::no ? B[k * ldb + j] : B[j * ldb + k];
    };

    oar::kernel<oar::op::gemm, oar::basic_cpu<T>>::run(c.ta, c.tb, c.M, c.N, c.K, static_cast<T>(c.alpha), A.data(),
                                                       lda, B.data(), ldb, static_cast<T>(c.beta), C.data(), ldc);

    const long double u = std::numeric_limits<T>::epsilon();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < c.M; ++i)
        for (std::size_t j = 0; j < ldc; ++j) {
            const T got = C[i * ldc + j];
            if (j >= c.N) {  // padding: untouched
                if (got != sentinel) {
                    if (bad++ == 0) first = "padding C(" + std::to_string(i) + "," + std::to_string(j) + ") written";
                }
                continue;
            }
            long double dot = 0, mag = 0;
            for (std::size_t k = 0; k < c.K; ++k) {
                dot += a_at(i, k) * b_at(k, j);
                mag += std::abs(a_at(i, k) * b_at(k, j));
            }
            // BLAS semantics: beta == 0 ignores C (even NaN).
            const long double c0 = c.beta == 0.0 ? 0.0L : static_cast<long double>(C0[i * ldc + j]);
            const long double want = static_cast<long double>(c.alpha) * dot + static_cast<long double>(c.beta) * c0;
            // Forward error bound of a K-term dot product plus the two scalings, with slack.
            const long double bound =
                2 * (static_cast<long double>(c.K) + 3) * u *
                    (std::abs(static_cast<long double>(c.alpha)) * mag + std::abs(c.beta * c0) + std::abs(want)) +
                std::numeric_limits<T>::min();
            const long double err = std::abs(static_cast<long double>(got) - want);
            if (!(err <= bound)) {
                if (bad++ == 0)
                    first = "C(" + std::to_string(i) + "," + std::to_string(j) + "): got " +
                            std::to_string(static_cast<double>(got)) + ", want " +
                            std::to_string(static_cast<double>(want));
            }
        }
    if (A.back() == A.back() || B.back() == B.back()) {  // the guard elements past the end stay NaN
        if (bad++ == 0) first = "wrote past the end of A or B";
    }
    if (C.back() != sentinel) {
        if (bad++ == 0) first = "wrote past the end of C";
    }
    return bad;
}

constexpr Trans both[] = {Trans::no, Trans::yes};

using oar_test::for_each_isa;

// Ms reach the 10-row (AVX-512) and 6-row tiles and rests of every length. Ns are below, at and above multiples of one and
// two vectors of 16 floats / 8 doubles (and of narrower ISAs): full panels only, a partial panel
// only, and both.
constexpr std::size_t Ms[] = {1, 3, 4, 5, 8, 9, 10, 13, 19, 20};
constexpr std::size_t Ns[] = {1, 5, 8, 15, 16, 17, 24, 31, 32, 33, 48, 50, 65};
constexpr std::size_t Ks[] = {1, 2, 7, 16, 33};

template <class T>
void gemm_sweep(std::size_t pad) {
    constexpr double alphas[] = {1.0, -0.5, 2.0, 0.75};
    constexpr double betas[] = {0.0, 1.0, 0.75, -2.0};
    std::size_t n = 0, cases = 0;
    for (Trans ta : both)
        for (Trans tb : both)
            for (std::size_t M : Ms)
                for (std::size_t N : Ns)
                    for (std::size_t K : Ks) {
                        const GemmCase c{ta, tb, M, N, K, alphas[n % 4], betas[(n / 4) % 4], pad, 2 * pad, pad + 1};
                        ++n;
                        std::string first;
                        const std::size_t bad = run_gemm_case<T>(c, 1000 + n, first);
                        INFO(describe_gemm(c));
                        INFO(first);
                        CHECK(bad == 0);
                        ++cases;
                    }
    CHECK(cases == 4 * std::size(Ms) * std::size(Ns) * std::size(Ks));
}

}  // namespace

TEST_CASE("float gemm matches a naive triple loop for every transpose combination and edge size on every ISA") {
    for_each_isa([] { gemm_sweep<float>(0); });
}

TEST_CASE("double gemm matches a naive triple loop for every transpose combination and edge size on every ISA") {
    for_each_isa([] { gemm_sweep<double>(0); });
}

TEST_CASE("gemm gives the same bits on avx2 and avx512 on the tiled paths, and sse2 stays within the bound") {
    // The tiles sum each element of C along K in the same order with one rounding per FMA, whatever
    // the tile's width, so the two FMA ISAs agree bit for bit; sse2 rounds each product (no FMA) and
    // is held to the triple loop's bound by the sweeps above. The narrow dot-product path sums
    // vector partials of the ISA's width, so it is left out here.
    if (!oar::cpu_supports(oar::cpu_isa::avx512) || !oar::cpu_supports(oar::cpu_isa::avx2)) {
        oar_test::skip("avx512 or avx2 is missing (from this CPU, or from OAR_ISA_LEVELS): nothing to compare bit for bit");
        return;
    }
    constexpr std::size_t shapes[][3] = {{100, 512, 784}, {784, 512, 100}, {37, 65, 300}, {300, 410, 270}, {13, 33, 7}};
    for (Trans ta : both)
        for (Trans tb : both)
            for (const auto& sh : shapes) {
                const std::size_t M = sh[0], N = sh[1], K = sh[2];
                const auto a = oar_test::random_vector<float>(M * K, 3), b = oar_test::random_vector<float>(K * N, 4);
                std::vector<std::vector<float>> results;
                for (oar::cpu_isa isa : {oar::cpu_isa::avx512, oar::cpu_isa::avx2}) {
                    oar::set_cpu_isa(isa);
                    std::vector<float> c(M * N, 0.25f);
                    oar::gemm(ta, tb, M, N, K, 1.5f, a.data(), b.data(), 0.5f, c.data());
                    results.push_back(std::move(c));
                }
                INFO("M=" << M << " N=" << N << " K=" << K);
                CHECK(results[0] == results[1]);
            }
    oar::set_cpu_isa(oar::default_cpu_isa());
}

TEST_CASE("avx2's pack_a writes the panels of the scalar copy (sse2) for a row-contiguous float A, and nothing past them") {
    // avx2 packs full 6-row panels 8 columns at a time through registers; sse2 (same MR = 6) copies
    // one value at a time. Row counts with and without a partial panel, column counts short of,
    // at and past whole groups of 8, a row stride past kc; a sentinel after the panels.
    if (!oar::cpu_supports(oar::cpu_isa::avx2)) {
        oar_test::skip("avx2 is missing (from this CPU, or from OAR_ISA_LEVELS): no register-transposed panels to check");
        return;
    }
    static_assert(oar::cpu_detail::isa_avx2::gemm_mr<float> == 6 && oar::cpu_detail::isa_sse2::gemm_mr<float> == 6);
    constexpr std::size_t ai = 300;
    const auto a = oar_test::random_vector<float>(120 * ai, 11);
    for (std::size_t mc : {1, 5, 6, 7, 12, 100, 120})
        for (std::size_t kc : {1, 7, 8, 9, 16, 100, 256}) {
            const std::size_t len = (mc + 5) / 6 * 6 * kc;
            std::vector<float> fast(len + 8, -7.0f), scalar(len + 8, -7.0f);
            oar::cpu_detail::isa_avx2::pack_a<float>(mc, kc, a.data() + 3, ai, 1, fast.data());
            oar::cpu_detail::isa_sse2::pack_a<float>(mc, kc, a.data() + 3, ai, 1, scalar.data());
            INFO("mc=" << mc << " kc=" << kc);
            CHECK(fast == scalar);
            CHECK(fast[len] == -7.0f);
            if (mc > 2 && kc > 1) CHECK(scalar[1 * 6 + 2] == a[3 + 2 * ai + 1]);  // A(2, 1): panel 0, k * 6 + r
        }
}

TEST_CASE("gemm honours row strides larger than the packed ones and leaves the padding alone") {
    gemm_sweep<float>(3);
    gemm_sweep<double>(5);
}

TEST_CASE("gemm with beta = 0 overwrites NaN in C instead of propagating it") {
    for (Trans ta : both)
        for (Trans tb : both)
            for (std::size_t M : {1u, 5u})
                for (std::size_t N : {7u, 33u}) {
                    std::string first;
                    const GemmCase c{ta, tb, M, N, 9, 1.5, 0.0, 0, 0, 0};
                    INFO(describe_gemm(c));
                    INFO(first);
                    CHECK(run_gemm_case<float>(c, 7, first, /*nan_in_c=*/true) == 0);
                    CHECK(run_gemm_case<double>(c, 8, first, /*nan_in_c=*/true) == 0);
                }
}

TEST_CASE("gemm with alpha = 0 or K = 0 only scales C by beta") {
    for (double beta : {0.0, 1.0, -0.5}) {
        std::string first;
        const GemmCase zero_alpha{Trans::no, Trans::yes, 5, 17, 4, 0.0, beta, 1, 1, 1};
        const GemmCase zero_k{Trans::yes, Trans::no, 6, 19, 0, 2.0, beta, 0, 0, 2};
        INFO(first);
        CHECK(run_gemm_case<float>(zero_alpha, 11, first) == 0);
        CHECK(run_gemm_case<double>(zero_k, 12, first) == 0);
    }
}

TEST_CASE("gemm with alpha = 0 does not read A or B, as in BLAS") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> a(6 * 5, nan), b(5 * 20, nan), c(6 * 20, 2.0f);
    oar::kernel<oar::op::gemm, oar::cpu>::run(Trans::no, Trans::no, 6, 20, 5, 0.0f, a.data(), 5, b.data(), 20, 0.5f,
                                              c.data(), 20);
    std::size_t bad = 0;
    for (float v : c) bad += v != 1.0f;
    CHECK(bad == 0);
}

TEST_CASE("gemm with M or N = 0 touches nothing") {
    std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4, 7.0f);
    oar::kernel<oar::op::gemm, oar::cpu>::run(Trans::no, Trans::no, 0, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f,
                                              c.data(), 2);
    oar::kernel<oar::op::gemm, oar::cpu>::run(Trans::no, Trans::no, 2, 0, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f,
                                              c.data(), 2);
    for (float v : c) CHECK(v == 7.0f);
}

TEST_CASE("a large transposed-B gemm followed by a smaller one does not reuse stale packed values") {
    std::string first;
    const GemmCase big{Trans::no, Trans::yes, 9, 70, 40, 1.0, 0.0, 0, 0, 0};
    const GemmCase small{Trans::yes, Trans::yes, 5, 18, 3, -1.0, 0.5, 2, 1, 0};
    INFO(first);
    CHECK(run_gemm_case<float>(big, 21, first) == 0);
    CHECK(run_gemm_case<float>(small, 22, first) == 0);
    CHECK(run_gemm_case<float>(big, 23, first) == 0);
}

TEST_CASE("the packed gemm convenience wrapper uses the packed strides of each operand") {
    std::uint64_t s = 99;
    for (Trans ta : both)
        for (Trans tb : both) {
            constexpr std::size_t M = 6, N = 19, K = 5;
            std::vector<double> A(M * K), B(K * N), C(M * N);
            for (auto& v : A) v = rand_unit(s);
            for (auto& v : B) v = rand_unit(s);
            for (auto& v : C) v = rand_unit(s);
            const std::vector<double> C0 = C;
            oar::gemm<oar::cpu64>(ta, tb, M, N, K, 2.0, A.data(), B.data(), 0.5, C.data());
            for (std::size_t i = 0; i < M; ++i)
                for (std::size_t j = 0; j < N; ++j) {
                    long double want = 0;
                    for (std::size_t k = 0; k < K; ++k) {
                        const long double a = ta == Trans::no ? A[i * K + k] : A[k * M + i];
                        const long double b = tb == Trans::no ? B[k * N + j] : B[j * K + k];
                        want += a * b;
                    }
                    want = 2 * want + 0.5L * C0[i * N + j];
                    CHECK(static_cast<double>(std::abs(C[i * N + j] - want)) < 1e-13);
                }
        }
}

TEST_CASE("gemm across the cache blocks: K past one K block, M past one row block, B in place and packed") {
    // (M, N, K): M <= 32 reads a row-contiguous B in place, larger M packs it; K = 300 and 513 span
    // two and three K blocks; M = 130 and 250 span two and three row blocks.
    constexpr std::size_t shapes[][3] = {{20, 196, 300}, {33, 70, 513}, {130, 65, 40}, {250, 97, 300}, {7, 40, 600}};
    std::size_t n = 0;
    for (Trans ta : both)
        for (Trans tb : both)
            for (const auto& sh : shapes) {
                const GemmCase c{ta, tb, sh[0], sh[1], sh[2], n % 2 ? -0.5 : 1.0, n % 3 ? 1.0 : 0.0, 1, 2, 3};
                ++n;
                std::string first;
                INFO(describe_gemm(c));
                const std::size_t bad = run_gemm_case<float>(c, 500 + n, first);
                INFO(first);
                CHECK(bad == 0);
            }
}

TEST_CASE("gemm results are bit-identical whatever the thread count, on every ISA") {
    // Split by rows, op(B) packed once for all threads ({300, 410, 270}: a partial panel, two K
    // blocks; {784, 512, 100}); split by columns, op(A) packed once for all ({100, 784, 512}: a
    // partial panel, two K blocks) or, 20 rows, by each thread ({20, 2000, 500}). The one-thread run
    // packs as it goes. The last three are narrow products large enough to be split over threads.
    constexpr std::size_t shapes[][3] = {{300, 410, 270}, {20, 2000, 500}, {784, 512, 100}, {100, 784, 512},
                                         {3000, 10, 200}, {2000, 7, 333}, {4001, 3, 170}};
    for_each_isa([&] {
    for (Trans ta : both)
        for (Trans tb : both)
            for (const auto& sh : shapes) {
                const std::size_t M = sh[0], N = sh[1], K = sh[2];
                const auto a = oar_test::random_vector<float>(M * K, 1), b = oar_test::random_vector<float>(K * N, 2);
                std::vector<std::vector<float>> results;
                for (std::size_t threads : {1u, 2u, 3u}) {
                    oar::set_num_threads(threads);
                    std::vector<float> c(M * N, 0.25f);
                    oar::gemm(ta, tb, M, N, K, 1.0f, a.data(), b.data(), 0.5f, c.data());
                    results.push_back(std::move(c));
                }
                INFO("M=" << M << " N=" << N << " K=" << K);
                CHECK(results[0] == results[1]);
                CHECK(results[0] == results[2]);
            }
    });
    oar::set_num_threads(oar::default_thread_count());
}

TEST_CASE("narrow gemm (N <= 10 columns) matches a naive triple loop on every path and edge on every ISA") {
    for_each_isa([] {
    // M: below, at and past one 32-row transposed tile and the 3-row dot tiles; N: every column
    // count of the 5-column dot tiles and their rests; K: below the dot paths' 32, past and short of
    // whole vectors of 16 floats / 8 doubles, past one K block.
    constexpr std::size_t Ms[] = {1, 2, 3, 4, 31, 32, 33, 64, 100};
    constexpr std::size_t Ns[] = {1, 2, 4, 5, 6, 9, 10};
    constexpr std::size_t Ks[] = {1, 15, 16, 32, 47, 100, 300};
    constexpr double alphas[] = {1.0, -0.5, 2.0, 0.75};
    constexpr double betas[] = {0.0, 1.0, 0.75, -2.0};
    std::size_t n = 0;
    for (Trans ta : both)
        for (Trans tb : both)
            for (std::size_t M : Ms)
                for (std::size_t N : Ns)
                    for (std::size_t K : Ks) {
                        const std::size_t pad = n % 3;
                        const GemmCase c{ta, tb, M, N, K, alphas[n % 4], betas[(n / 4) % 4], pad, 2 * pad, pad};
                        ++n;
                        std::string first_f, first_d;
                        const std::size_t bad_f = run_gemm_case<float>(c, 3000 + n, first_f);
                        const std::size_t bad_d = run_gemm_case<double>(c, 7000 + n, first_d);
                        INFO(describe_gemm(c));
                        INFO(first_f, " / ", first_d);
                        CHECK(bad_f == 0);
                        CHECK(bad_d == 0);
                    }
    });
}

TEST_CASE("narrow gemm with beta = 0 overwrites NaN in C on both narrow paths") {
    for (Trans ta : both)
        for (Trans tb : both)
            for (std::size_t M : {5u, 40u}) {
                std::string first;
                const GemmCase c{ta, tb, M, 10, 64, -1.25, 0.0, 1, 0, 2};
                INFO(describe_gemm(c));
                INFO(first);
                CHECK(run_gemm_case<float>(c, 31, first, /*nan_in_c=*/true) == 0);
                CHECK(run_gemm_case<double>(c, 32, first, /*nan_in_c=*/true) == 0);
            }
}

TEST_CASE("gemm matches a naive triple loop on every shape the course's models call on every ISA") {
    for_each_isa([] {
    // (ta, tb, M, N, K, beta) of a training step at batch 100: the CNN's Linear<980,10> forward,
    // weight and input gradients; the MLP's Linear<784,512> forward and weight gradient and its
    // Linear<512,10> forward, weight and input gradients.
    struct Shape {
        Trans ta, tb;
        std::size_t M, N, K;
        double beta;
    };
    constexpr Shape shapes[] = {
        {Trans::no, Trans::no, 100, 10, 980, 0.0},   {Trans::yes, Trans::no, 980, 10, 100, 1.0},
        {Trans::no, Trans::yes, 100, 980, 10, 0.0},  {Trans::no, Trans::no, 100, 512, 784, 0.0},
        {Trans::yes, Trans::no, 784, 512, 100, 1.0}, {Trans::no, Trans::no, 100, 10, 512, 0.0},
        {Trans::yes, Trans::no, 512, 10, 100, 1.0},  {Trans::no, Trans::yes, 100, 512, 10, 0.0},
    };
    std::size_t n = 0;
    for (const Shape& sh : shapes) {
        const GemmCase c{sh.ta, sh.tb, sh.M, sh.N, sh.K, 1.0, sh.beta, 0, 0, 0};
        std::string first;
        INFO(describe_gemm(c));
        const std::size_t bad = run_gemm_case<float>(c, 900 + n++, first);
        INFO(first);
        CHECK(bad == 0);
    }
    });
}

TEST_CASE("gemm_pack_cache gives the bits of gemm on every ISA, path and thread count, and packs once per version") {
    // (M, N, K): M = 1 and 20 (B otherwise read in place), 100 and 130 (packed, row blocks), N with
    // and without a partial panel, K over one and several K blocks, narrow N (B read directly).
    constexpr std::size_t shapes[][3] = {{1, 512, 784}, {20, 70, 300}, {100, 512, 784}, {130, 65, 513}, {33, 7, 64}};
    for_each_isa([&] {
        for (std::size_t threads : {1u, 2u})
            for (Trans ta : both)
                for (Trans tb : both)
                    for (const auto& sh : shapes) {
                        oar::set_num_threads(threads);
                        const std::size_t M = sh[0], N = sh[1], K = sh[2], pad = 3;
                        const std::size_t lda = (ta == Trans::no ? K : M) + pad, ldb = (tb == Trans::no ? N : K) + pad;
                        const auto a = oar_test::random_vector<float>((ta == Trans::no ? M : K) * lda, 7);
                        const auto b = oar_test::random_vector<float>((tb == Trans::no ? K : N) * ldb, 8);
                        std::vector<float> want(M * N, 0.25f), got(M * N, 0.25f);
                        oar::kernel<oar::op::gemm, oar::cpu>::run(ta, tb, M, N, K, 1.0f, a.data(), lda, b.data(), ldb,
                                                                  0.5f, want.data(), N);
                        oar::gemm_pack_cache<float> cache;
                        cache.gemm(ta, tb, M, N, K, 1.0f, a.data(), lda, b.data(), ldb, 0.5f, got.data(), N, 1);
                        INFO("threads=" << threads << " ta=" << int(ta == Trans::yes) << " tb=" << int(tb == Trans::yes)
                                        << " M=" << M << " N=" << N << " K=" << K);
                        CHECK(got == want);
                        std::vector<float> again(M * N, 0.25f);  // second call: from the cached copy
                        cache.gemm(ta, tb, M, N, K, 1.0f, a.data(), lda, b.data(), ldb, 0.5f, again.data(), N, 1);
                        CHECK(again == want);
                        CHECK(cache.packs() == 1);
                    }
    });
    oar::set_num_threads(oar::default_thread_count());
}

TEST_CASE("gemm_pack_cache packs again when B's version, address, shape or the ISA changes") {
    constexpr std::size_t M = 40, N = 64, K = 50;
    auto a = oar_test::random_vector<float>(M * K, 1), b = oar_test::random_vector<float>(K * N, 2);
    oar::gemm_pack_cache<float> cache;
    std::vector<float> c(M * N), want(M * N);
    const auto run = [&](std::uint64_t version, std::size_t n) {
        cache.gemm(Trans::no, Trans::no, M, n, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c.data(), N, version);
        oar::kernel<oar::op::gemm, oar::cpu>::run(Trans::no, Trans::no, M, n, K, 1.0f, a.data(), K, b.data(), N, 0.0f,
                                                  want.data(), N);
        CHECK(c == want);
    };
    run(1, N);
    CHECK(cache.packs() == 1);
    b[5] += 1.0f;  // a write to B, announced by its next version
    run(2, N);     // the new version: packed again, B's new values used
    CHECK(cache.packs() == 2);
    run(2, N);
    CHECK(cache.packs() == 2);
    run(2, N - 16);  // another shape of the same B
    CHECK(cache.packs() == 3);
    std::size_t isas = 0;
    for_each_isa([&] {
        run(2, N - 16);
        ++isas;
    });
    CHECK(cache.packs() >= 3 + isas - 1);
}
