// Cache-line aligned storage for the flat parameter, gradient, optimizer-state and activation
// buffers, so SIMD kernels may use aligned loads at every block start.
#pragma once

#include <cstddef>  // std::size_t
#include <new>      // std::align_val_t, std::bad_array_new_length
#include <vector>   // std::vector

namespace oar {

inline constexpr std::size_t cache_line = 64;

/// std::allocator-compatible allocator returning 64-byte aligned memory.
template <class T>
struct aligned_allocator {
    using value_type = T;
    aligned_allocator() noexcept = default;
    template <class U>
    aligned_allocator(const aligned_allocator<U>&) noexcept {}

    T* allocate(std::size_t n) {
        if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
        return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{cache_line}));
    }
    void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{cache_line}); }

    template <class U>
    bool operator==(const aligned_allocator<U>&) const noexcept { return true; }
};

/// A growable, 64-byte aligned array.
template <class T>
using aligned_vector = std::vector<T, aligned_allocator<T>>;

/// Rounds a float count up to a whole number of cache lines.
constexpr std::size_t round_to_cache_line(std::size_t floats) {
    constexpr std::size_t per_line = cache_line / sizeof(float);
    return (floats + per_line - 1) / per_line * per_line;
}

}  // namespace oar
