// storage<cpu>: the CPU backend's memory is the host's: cache-line aligned vectors, plain copies,
// nothing to wait for (the contract is in kernels/dispatch.hpp).
#pragma once

#include <algorithm>  // std::copy_n, std::fill_n
#include <concepts>   // std::floating_point
#include <cstddef>    // std::size_t

#include "../../core/aligned.hpp"  // aligned_vector
#include "../dispatch.hpp"         // storage (primary template)

namespace oar {

template <std::floating_point T>
struct storage<basic_cpu<T>> {
    static constexpr bool host_memory = true;
    template <class U>
    using buffer = aligned_vector<U>;

    template <class U>
    static buffer<U> make(std::size_t n) { return buffer<U>(n, U(0)); }
    template <class U>
    static void upload(U* dst, const U* src, std::size_t n) { std::copy_n(src, n, dst); }
    template <class U>
    static void download(U* dst, const U* src, std::size_t n) { std::copy_n(src, n, dst); }
    template <class U>
    static void copy(U* dst, const U* src, std::size_t n) { std::copy_n(src, n, dst); }
    template <class U>
    static void fill(U* dst, std::size_t n, U v) { std::fill_n(dst, n, v); }
    static void synchronize() {}
};

}  // namespace oar
