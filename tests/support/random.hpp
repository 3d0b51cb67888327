// Deterministic pseudo-random test inputs (splitmix64), the same on every platform and standard
// library, so that a test's seed always gives the same numbers.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t
#include <span>     // std::span: fill_random writes into a tensor's or parameter's buffer
#include <vector>   // std::vector

namespace oar_test {

/// Advances the splitmix64 `state` and returns its next value in [-1, 1) (53 random bits).
inline double rand_unit(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/// n values scale * rand_unit() in [-scale, scale), from the stream seeded with `seed`, as T.
template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(scale * rand_unit(seed));
    return v;
}

/// n values in [lo, hi): rand_unit() mapped affinely, lo + (hi - lo) (u + 1) / 2. (For the default
/// [-1, 1) this rounds u + 1, so it is not bit-identical to random_vector.)
template <class T>
std::vector<T> uniform_vector(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(lo + (hi - lo) * 0.5 * (rand_unit(seed) + 1.0));
    return v;
}

/// Overwrites v with scale * rand_unit() from the stream seeded with `seed` (as random_vector).
inline void fill_random(std::span<float> v, std::uint64_t seed, double scale = 1.0) {
    for (auto& x : v) x = static_cast<float>(scale * rand_unit(seed));
}

}  // namespace oar_test
