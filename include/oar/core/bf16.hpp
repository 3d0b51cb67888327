// bfloat16: the top 16 bits of an IEEE float (sign, 8 exponent bits, 7 fraction bits), the storage
// type of the bf16 mixed-precision kernels (kernels/cpu/gemm_bf16.hpp). Conversion from float
// rounds to nearest, ties to even; NaN stays NaN (quieted, sign and top payload bits kept);
// infinities and subnormals convert like any other value (no flush to zero); a finite float above
// the largest bf16 rounds to infinity as IEEE rounding says. bf16 -> float is exact.
#pragma once

#include <bit>      // std::bit_cast
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint16_t, std::uint32_t

namespace oar {

/// One bfloat16 value, its bits as stored (trivially copyable, 2 bytes, no arithmetic).
struct bf16 {
    std::uint16_t bits;
    friend constexpr bool operator==(bf16, bf16) = default;  // bit equality (NaN == itself)
};
static_assert(sizeof(bf16) == 2, "oar: bf16 must be 2 bytes");

/// x rounded to the nearest bf16, ties to even; NaN -> a quiet NaN of the same sign.
constexpr bf16 to_bf16(float x) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
    const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);  // carries into the exponent as needed
    return bf16{static_cast<std::uint16_t>(rounded >> 16)};
}

/// The float with the same value (exact).
constexpr float to_float(bf16 h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h.bits) << 16); }

/// x rounded to bf16 precision and back: the value a bf16 kernel sees for x.
constexpr float round_to_bf16(float x) { return to_float(to_bf16(x)); }

/// out[i] = to_bf16(in[i]) for i < n (branch-free in the loop so it vectorises).
inline void to_bf16(const float* in, bf16* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t u = std::bit_cast<std::uint32_t>(in[i]);
        const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        const std::uint32_t nan = (u >> 16) | 0x0040u;
        out[i].bits = static_cast<std::uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
    }
}

/// out[i] = round_to_bf16(in[i]) for i < n, as floats (in == out allowed): the values a bf16 kernel
/// sees, for the fp32 kernels that stand in for one.
inline void round_to_bf16(const float* in, float* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t u = std::bit_cast<std::uint32_t>(in[i]);
        const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        const std::uint32_t nan = (u | 0x00400000u) & 0xffff0000u;
        out[i] = std::bit_cast<float>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
    }
}

/// out[i] = to_float(in[i]) for i < n.
inline void to_float(const bf16* in, float* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = to_float(in[i]);
}

}  // namespace oar
