// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011). A value depends only on
// (seed, stream, index), never on call order or thread count: that is what makes init, shuffle
// and dropout deterministic for every num_workers and identical after a resume.
#pragma once

#include <array>    // std::array
#include <cmath>    // std::log, std::sqrt, std::cos
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint32_t, std::uint64_t

#include "../config.hpp"  // OAR_HOST_DEVICE

namespace oar {

/// Philox4x32 with 10 rounds: 128-bit counter, 64-bit key -> 128 random bits.
OAR_HOST_DEVICE inline std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> c,
                                                               std::array<std::uint32_t, 2> k) {
    constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;
    constexpr std::uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        const std::uint64_t p0 = static_cast<std::uint64_t>(m0) * c[0];
        const std::uint64_t p1 = static_cast<std::uint64_t>(m1) * c[2];
        c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<std::uint32_t>(p1),
             static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<std::uint32_t>(p0)};
        k[0] += w0;
        k[1] += w1;
    }
    return c;
}

/// High 64 bits of a 64x64-bit product (portable, no __int128 under -Wpedantic).
constexpr std::uint64_t mulhi64(std::uint64_t a, std::uint64_t b) {
    const std::uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32, b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
    const std::uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
    const std::uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFu) + lo_hi;
    return hi_hi + (hi_lo >> 32) + (cross >> 32);
}

/// Random streams keyed by a seed. `bits(stream, index)` is a pure function.
struct CounterRng {
    std::uint64_t seed = 0;

    OAR_HOST_DEVICE std::array<std::uint32_t, 4> bits(std::uint64_t stream, std::uint64_t index) const {
        return philox4x32({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                           static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
                          {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
    }

    /// Uniform in [0, 1) with 24 random bits: element `i` of stream `stream`.
    OAR_HOST_DEVICE float uniform(std::uint64_t stream, std::uint64_t i) const {
        return static_cast<float>(bits(stream, i / 4)[i % 4] >> 8) * (1.0f / 16777216.0f);
    }

    /// Standard normal (Box-Muller on two 32-bit draws): element `i` of stream `stream`.
    double normal(std::uint64_t stream, std::uint64_t i) const {
        const auto b = bits(stream, i / 2);
        const std::uint32_t u0 = b[(i % 2) * 2], u1 = b[(i % 2) * 2 + 1];
        const double a = (static_cast<double>(u0) + 1.0) / 4294967296.0;  // (0, 1]
        const double t = static_cast<double>(u1) / 4294967296.0;          // [0, 1)
        return std::sqrt(-2.0 * std::log(a)) * std::cos(6.283185307179586 * t);
    }

    /// Uniform integer in [0, n) for n > 0 (Lemire's multiply-shift; bias < n / 2^64).
    std::uint64_t below(std::uint64_t stream, std::uint64_t i, std::uint64_t n) const {
        const auto b = bits(stream, i);
        const std::uint64_t r = (static_cast<std::uint64_t>(b[0]) << 32) | b[1];
        return mulhi64(r, n);
    }
};

/// Stream ids, so that different uses of one seed never share random numbers: the top 8 bits
/// name the use, the rest its coordinates.
namespace rng_stream {
inline constexpr std::uint64_t init = 1ull << 56;     // + parameter tensor index
inline constexpr std::uint64_t dropout = 2ull << 56;  // + (layer index << 40) + forward count (< 2^40)
inline constexpr std::uint64_t shuffle = 3ull << 56;  // + epoch
inline constexpr std::uint64_t transform = 4ull << 56;  // data/transforms.hpp: + (slot << 40) + epoch
inline constexpr std::uint64_t random_dataset = 5ull << 56;  // data/random_dataset.hpp: + sample index

/// The dropout stream of layer `layer` at training forward pass `step` (layer < 2^16, step < 2^40).
constexpr std::uint64_t dropout_of(std::uint64_t layer, std::uint64_t step) {
    return dropout + ((layer & 0xFFFFu) << 40) + (step & ((1ull << 40) - 1));
}
}  // namespace rng_stream

}  // namespace oar
