// Tests of oar/core/bf16.hpp: float -> bf16 rounds to nearest, ties to even (checked against a
// reference that picks the nearer of the two neighbouring bf16 values in double precision, over a
// sweep of every float exponent), NaN stays a NaN of the same sign (signalling ones included, which
// plain truncation would turn into infinity), overflow rounds to infinity, subnormals are kept,
// bf16 -> float is exact, and the array conversions give the scalar conversions' bits.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/core/bf16.hpp>  // the header under test

#include <bit>      // std::bit_cast
#include <cmath>    // std::isnan, std::signbit, std::ldexp, std::fabs
#include <cstdint>  // std::uint32_t
#include <ios>      // std::hex: bits in messages
#include <limits>   // std::numeric_limits
#include <vector>   // std::vector

namespace {

std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }
float float_of(std::uint32_t u) { return std::bit_cast<float>(u); }

/// The bf16 nearest to a finite x, ties to the even one, found by comparing distances in double:
/// the two candidates are x's bits truncated to 16 and that plus one bf16 ulp.
std::uint16_t reference_bf16(float x) {
    const std::uint32_t u = bits_of(x);
    const std::uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;  // hi may be the infinity
    const double dx = x, dlo = float_of(lo);
    // hi's value: the next bf16 away from zero; for the largest finite bf16 it is the infinity,
    // which IEEE rounding reaches from halfway to 2^128 on.
    const double dhi = (hi & 0x7fffffffu) == 0x7f800000u ? std::ldexp(std::signbit(x) ? -1.0 : 1.0, 128)
                                                          : double(float_of(hi));
    const double elo = std::fabs(dx - dlo), ehi = std::fabs(dhi - dx);
    if (elo < ehi) return static_cast<std::uint16_t>(lo >> 16);
    if (ehi < elo) return static_cast<std::uint16_t>(hi >> 16);
    return static_cast<std::uint16_t>(((lo >> 16) & 1u) ? hi >> 16 : lo >> 16);
}

}  // namespace

TEST_CASE("to_bf16 rounds every sampled finite float to the nearest bf16, ties to even") {
    std::vector<float> xs;
    // A stride through every float bit pattern (all exponents, both signs) plus, near each sample,
    // the exact halfway points and their neighbours, where ties and carries happen.
    for (std::uint64_t u = 0; u < (1ull << 32); u += 65521) {
        const std::uint32_t base = static_cast<std::uint32_t>(u) & 0xffff0000u;
        for (std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, static_cast<std::uint32_t>(u) & 0xffffu})
            xs.push_back(float_of(base | low));
    }
    std::size_t wrong = 0, checked = 0;
    for (float x : xs) {
        if (std::isnan(x) || std::isinf(x)) continue;
        ++checked;
        if (oar::to_bf16(x).bits != reference_bf16(x)) {
            if (++wrong <= 5) CHECK_MESSAGE(false, "x bits 0x" << std::hex << bits_of(x));
        }
    }
    CHECK(checked > 400000);
    CHECK(wrong == 0);
}

TEST_CASE("to_bf16: exact values, ties to even, overflow to infinity, subnormals kept") {
    for (float x : {0.0f, 1.0f, -2.5f, 0.15625f, 65536.0f, std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()})
        CHECK(oar::to_float(oar::to_bf16(x)) == x);
    CHECK(oar::to_bf16(-0.0f).bits == 0x8000);  // the sign of zero is kept
    const float ulp = 0x1p-7f;                  // bf16's ulp at 1
    CHECK(oar::round_to_bf16(1.0f + ulp / 2) == 1.0f);              // tie: down to the even 1
    CHECK(oar::round_to_bf16(1.0f + 3 * ulp / 2) == 1.0f + 2 * ulp);  // tie: up to the even 1 + 2 ulp
    CHECK(oar::round_to_bf16(1.0f + ulp / 2 + 0x1p-20f) == 1.0f + ulp);  // above the tie: up
    CHECK(oar::round_to_bf16(2.0f - ulp / 4) == 2.0f);                 // carry into the exponent
    CHECK(oar::to_bf16(std::numeric_limits<float>::max()).bits == 0x7f80);  // rounds to +infinity
    CHECK(oar::to_bf16(-std::numeric_limits<float>::max()).bits == 0xff80);
    CHECK(oar::to_bf16(float_of(0x7f7f7fffu)).bits == 0x7f7f);  // below halfway: the largest bf16
    const float sub = float_of(0x00010000u);                    // the smallest bf16 subnormal
    CHECK(oar::round_to_bf16(sub) == sub);
    CHECK(oar::to_bf16(float_of(0x00008001u)).bits == 0x0001);  // above half of it: rounds up, not to 0
}

TEST_CASE("to_bf16 keeps NaN a NaN of the same sign, signalling NaNs included") {
    for (std::uint32_t u : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7fffffffu}) {
        const oar::bf16 h = oar::to_bf16(float_of(u));
        CHECK(std::isnan(oar::to_float(h)));
        CHECK(std::signbit(oar::to_float(h)) == bool(u >> 31));
        CHECK((h.bits & 0x0040) != 0);  // quiet
    }
}

TEST_CASE("bf16 -> float is exact and the array conversions match the scalar ones bit for bit") {
    std::vector<float> in;
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
        const oar::bf16 b{static_cast<std::uint16_t>(h)};
        CHECK_MESSAGE(bits_of(oar::to_float(b)) == h << 16, "bf16 0x" << std::hex << h);
        in.push_back(float_of((h << 16) | (h * 2654435761u & 0xffffu)));  // every exponent, NaNs too
    }
    std::vector<oar::bf16> out(in.size());
    oar::to_bf16(in.data(), out.data(), in.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < in.size(); ++i) wrong += out[i] != oar::to_bf16(in[i]);
    CHECK(wrong == 0);
    std::vector<float> back(out.size());
    oar::to_float(out.data(), back.data(), out.size());
    for (std::size_t i = 0; i < out.size(); ++i) wrong += bits_of(back[i]) != std::uint32_t(out[i].bits) << 16;
    CHECK(wrong == 0);
}
