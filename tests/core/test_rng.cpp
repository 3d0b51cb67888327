// Tests of include/oar/core/rng.hpp: Philox4x32-10 against Random123's published known answers,
// the distributions CounterRng derives from it, mulhi64, and determinism.
//
// Statistical checks use fixed seeds, so they are deterministic; their bounds are 6 standard
// errors (or a chi-square quantile at z = 6), which a correct generator misses with probability
// about 1e-9, while a biased or broken one misses them by far.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <array>    // std::array
#include <cmath>    // std::sqrt, std::erfc, std::floor, std::abs
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint32_t, std::uint64_t
#include <vector>   // std::vector

#include <oar/core/rng.hpp>  // under test

__extension__ typedef unsigned __int128 u128;  // the reference for mulhi64 (a GCC/Clang extension)

using oar::CounterRng;
using u32x4 = std::array<std::uint32_t, 4>;

namespace {

constexpr double z = 6.0;  // bound in standard errors

/// Upper quantile of chi-square with k degrees of freedom at z standard normal deviations
/// (Wilson-Hilferty approximation: within a few percent for k >= 5, looser but still far below
/// what a biased generator produces for k = 1 or 2, e.g. 47 where the exact value is 36).
double chi2_bound(double k) {
    const double a = 2.0 / (9.0 * k);
    const double c = 1.0 - a + z * std::sqrt(a);
    return k * c * c * c;
}

/// Pearson's chi-square of counts against equal expected frequencies.
double chi2_uniform(const std::vector<std::size_t>& counts, std::size_t total) {
    const double expected = static_cast<double>(total) / static_cast<double>(counts.size());
    double x = 0.0;
    for (std::size_t c : counts) {
        const double d = static_cast<double>(c) - expected;
        x += d * d / expected;
    }
    return x;
}

double std_normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

/// SplitMix64, an independent source of test inputs.
std::uint64_t splitmix64(std::uint64_t& s) {
    std::uint64_t r = (s += 0x9E3779B97F4A7C15ull);
    r = (r ^ (r >> 30)) * 0xBF58476D1CE4E5B9ull;
    r = (r ^ (r >> 27)) * 0x94D049BB133111EBull;
    return r ^ (r >> 31);
}

}  // namespace

TEST_CASE("philox4x32 reproduces Random123's known-answer vectors for Philox4x32-10") {
    // Random123 tests/kat_vectors, lines "philox4x32 10 <counter> <key> <expected>".
    CHECK(oar::philox4x32({0u, 0u, 0u, 0u}, {0u, 0u}) == u32x4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
    CHECK(oar::philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}) ==
          u32x4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
    CHECK(oar::philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}) ==
          u32x4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("CounterRng::bits of all-zero and all-one (seed, stream, index) are the Random123 vectors") {
    CHECK(CounterRng{0}.bits(0, 0) == u32x4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
    constexpr std::uint64_t ones = ~std::uint64_t{0};
    CHECK(CounterRng{ones}.bits(ones, ones) == u32x4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
}

TEST_CASE("CounterRng::bits depends on every bit of seed, stream and index") {
    const CounterRng r{0x0123456789abcdefull};
    const auto base = r.bits(5, 9);
    for (int b = 0; b < 64; ++b) {
        const std::uint64_t flip = std::uint64_t{1} << b;
        CHECK(r.bits(5 ^ flip, 9) != base);
        CHECK(r.bits(5, 9 ^ flip) != base);
        CHECK(CounterRng{r.seed ^ flip}.bits(5, 9) != base);
    }
    CHECK(r.bits(9, 5) != base);  // stream and index are not interchangeable
}

TEST_CASE("mulhi64 equals the high half of the 128-bit product") {
    const std::uint64_t edges[] = {0,
                                   1,
                                   2,
                                   0xFFFFFFFFull,
                                   0x100000000ull,
                                   0x100000001ull,
                                   0x7FFFFFFFFFFFFFFFull,
                                   0x8000000000000000ull,
                                   0xFFFFFFFF00000000ull,
                                   0xFFFFFFFFFFFFFFFEull,
                                   0xFFFFFFFFFFFFFFFFull};
    for (std::uint64_t a : edges)
        for (std::uint64_t b : edges)
            CHECK(oar::mulhi64(a, b) == static_cast<std::uint64_t>((static_cast<u128>(a) * b) >> 64));
    std::uint64_t s = 42;
    bool all_equal = true;
    for (int i = 0; i < 200000; ++i) {
        const std::uint64_t a = splitmix64(s), b = splitmix64(s) >> (i % 64);  // mix of magnitudes
        all_equal = all_equal && oar::mulhi64(a, b) == static_cast<std::uint64_t>((static_cast<u128>(a) * b) >> 64);
    }
    CHECK(all_equal);
    static_assert(oar::mulhi64(~std::uint64_t{0}, ~std::uint64_t{0}) == ~std::uint64_t{0} - 1);  // constexpr
}

TEST_CASE("uniform lies in [0, 1) on a 2^-24 grid with mean 1/2 and variance 1/12") {
    const CounterRng r{2024};
    constexpr std::size_t n = 1 << 20;
    double sum = 0.0, sum_sq = 0.0;
    bool in_range = true, on_grid = true;
    std::vector<std::size_t> bins(64, 0);
    for (std::size_t i = 0; i < n; ++i) {
        const float u = r.uniform(7, i);
        in_range = in_range && u >= 0.0f && u < 1.0f;
        const double scaled = static_cast<double>(u) * 16777216.0;
        on_grid = on_grid && scaled == std::floor(scaled);
        sum += u;
        sum_sq += static_cast<double>(u) * u;
        ++bins[static_cast<std::size_t>(u * 64.0f)];
    }
    CHECK(in_range);
    CHECK(on_grid);
    const double mean = sum / n, var = sum_sq / n - mean * mean;
    // sd(mean) = sqrt(1/12 / n); sd(sample variance) = sqrt((mu4 - sigma^4) / n), mu4 = 1/80.
    CHECK(std::abs(mean - 0.5) < z * std::sqrt(1.0 / 12.0 / n));
    CHECK(std::abs(var - 1.0 / 12.0) < z * std::sqrt((1.0 / 80.0 - 1.0 / 144.0) / n));
    CHECK(chi2_uniform(bins, n) < chi2_bound(63));
}

TEST_CASE("uniform draws come close to 0 and to 1 but never exceed 1 - 2^-24") {
    const CounterRng r{1};
    float lo = 1.0f, hi = 0.0f;
    for (std::size_t i = 0; i < 1 << 20; ++i) {
        const float u = r.uniform(0, i);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    // With 2^20 draws, min and max lie within a few times 2^-20 of the ends.
    CHECK(lo < 2e-5f);
    CHECK(hi > 1.0f - 2e-5f);
    CHECK(hi <= 1.0f - 1.0f / 16777216.0f);
}

TEST_CASE("uniform draws of neighbouring streams are uncorrelated") {
    const CounterRng r{99};
    constexpr std::size_t n = 1 << 18;
    double sxy = 0.0;
    for (std::size_t i = 0; i < n; ++i)
        sxy += (static_cast<double>(r.uniform(10, i)) - 0.5) * (static_cast<double>(r.uniform(11, i)) - 0.5);
    const double corr = sxy / n * 12.0;  // divided by the variance 1/12
    CHECK(std::abs(corr) < z / std::sqrt(static_cast<double>(n)));
}

TEST_CASE("normal has mean 0, standard deviation 1 and the standard normal CDF") {
    const CounterRng r{31337};
    constexpr std::size_t n = 1 << 20;
    const double cuts[] = {-2.5, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.5};
    std::size_t below[9] = {};
    double sum = 0.0, sum_sq = 0.0;
    bool finite = true;
    for (std::size_t i = 0; i < n; ++i) {
        const double x = r.normal(3, i);
        finite = finite && std::isfinite(x);
        sum += x;
        sum_sq += x * x;
        for (int k = 0; k < 9; ++k) below[k] += x < cuts[k];
    }
    CHECK(finite);
    const double mean = sum / n, var = sum_sq / n - mean * mean;
    CHECK(std::abs(mean) < z / std::sqrt(static_cast<double>(n)));
    CHECK(std::abs(var - 1.0) < z * std::sqrt(2.0 / n));  // mu4 - sigma^4 = 3 - 1
    for (int k = 0; k < 9; ++k) {
        const double p = std_normal_cdf(cuts[k]);
        const double frac = static_cast<double>(below[k]) / n;
        INFO("cut ", cuts[k], ": fraction below ", frac, ", expected ", p);
        CHECK(std::abs(frac - p) < z * std::sqrt(p * (1.0 - p) / n));
    }
}

TEST_CASE("normal's two draws from one Philox block are uncorrelated") {
    const CounterRng r{5};
    constexpr std::size_t n = 1 << 18;
    double sxy = 0.0;
    for (std::size_t i = 0; i < n; ++i) sxy += r.normal(0, 2 * i) * r.normal(0, 2 * i + 1);
    CHECK(std::abs(sxy / n) < z / std::sqrt(static_cast<double>(n)));
}

TEST_CASE("below(n) stays in [0, n) and is uniform over it") {
    const CounterRng r{777};
    for (std::uint64_t m : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3}, std::uint64_t{10}, std::uint64_t{97}}) {
        constexpr std::size_t draws = 200000;
        std::vector<std::size_t> counts(m, 0);
        bool in_range = true;
        for (std::size_t i = 0; i < draws; ++i) {
            const std::uint64_t v = r.below(m, i, m);
            in_range = in_range && v < m;
            if (v < m) ++counts[v];
        }
        INFO("n = ", m);
        CHECK(in_range);
        if (m > 1) CHECK(chi2_uniform(counts, draws) < chi2_bound(static_cast<double>(m - 1)));
    }
}

// For n near 2^64 a naive `r % n` is far from uniform (n = 3 * 2^62 puts half of the draws in
// the lowest third); the multiply-shift reduction is not.
TEST_CASE("below(n) is uniform over the whole range for huge n") {
    const CounterRng r{8};
    const std::uint64_t huge[] = {std::uint64_t{1} << 63, (std::uint64_t{1} << 63) + 12345, std::uint64_t{3} << 62,
                                  ~std::uint64_t{0}};
    for (std::uint64_t m : huge) {
        constexpr std::size_t draws = 1 << 16;
        std::vector<std::size_t> thirds(3, 0);
        bool in_range = true;
        for (std::size_t i = 0; i < draws; ++i) {
            const std::uint64_t v = r.below(1, i, m);
            in_range = in_range && v < m;
            ++thirds[v < m / 3 ? 0 : v < m / 3 * 2 ? 1 : 2];
        }
        INFO("n = ", m);
        CHECK(in_range);
        CHECK(chi2_uniform(thirds, draws) < chi2_bound(2));
    }
}

TEST_CASE("every draw is a pure function of (seed, stream, index), whatever the call order") {
    const CounterRng a{123456789}, b{123456789};
    constexpr std::size_t n = 4096;
    std::vector<float> forward(n), backward(n);
    std::vector<double> nf(n), nb(n);
    for (std::size_t i = 0; i < n; ++i) {
        forward[i] = a.uniform(17, i);
        nf[i] = a.normal(18, i);
    }
    for (std::size_t i = n; i-- > 0;) {
        backward[i] = b.uniform(17, i);
        nb[i] = b.normal(18, i);
    }
    CHECK(forward == backward);
    CHECK(nf == nb);
    for (std::size_t i = 0; i < 100; ++i) CHECK(a.below(4, i, 1000) == b.below(4, i, 1000));
}

TEST_CASE("different seeds and different streams give different numbers") {
    const CounterRng a{1}, b{2};
    std::size_t same_seed = 0, same_stream = 0;
    for (std::size_t i = 0; i < 10000; ++i) {
        same_seed += a.uniform(0, i) == b.uniform(0, i);
        same_stream += a.uniform(0, i) == a.uniform(1, i);
    }
    // Equal 24-bit values by chance: expected 10000 / 2^24, i.e. almost surely none.
    CHECK(same_seed < 3);
    CHECK(same_stream < 3);
}

TEST_CASE("the named stream bases are distinct and far apart") {
    using namespace oar::rng_stream;
    CHECK(init != dropout);
    CHECK(dropout != shuffle);
    CHECK(init != shuffle);
    CHECK(init >= std::uint64_t{1} << 32);  // room for 2^32 parameter indices before the next base
    CHECK(dropout - init >= std::uint64_t{1} << 32);
    CHECK(shuffle - dropout >= std::uint64_t{1} << 32);
}
