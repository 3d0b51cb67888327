// Tests of include/oar/core/aligned.hpp: aligned_allocator, aligned_vector, round_to_cache_line.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uintptr_t
#include <memory>   // std::allocator_traits
#include <new>      // std::bad_array_new_length
#include <type_traits>  // std::is_same_v

#include <oar/core/aligned.hpp>  // under test

namespace {

bool is_aligned64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

struct odd_sized {
    char c[3];
};

template <class T>
void check_allocations_are_aligned() {
    oar::aligned_allocator<T> alloc;
    for (std::size_t n = 1; n <= 200; ++n) {
        T* p = alloc.allocate(n);
        CHECK(is_aligned64(p));
        alloc.deallocate(p, n);
    }
}

}  // namespace

static_assert(oar::cache_line == 64);
static_assert(std::is_same_v<oar::aligned_vector<float>::allocator_type, oar::aligned_allocator<float>>);
static_assert(std::is_same_v<std::allocator_traits<oar::aligned_allocator<float>>::rebind_alloc<double>,
                             oar::aligned_allocator<double>>);

TEST_CASE("aligned_allocator returns 64-byte aligned blocks for every element type and count") {
    check_allocations_are_aligned<float>();
    check_allocations_are_aligned<double>();
    check_allocations_are_aligned<char>();
    check_allocations_are_aligned<odd_sized>();
}

TEST_CASE("an aligned_vector stays aligned as it grows") {
    oar::aligned_vector<float> v;
    for (int i = 0; i < 5000; ++i) {
        v.push_back(static_cast<float>(i));
        if ((i & (i + 1)) == 0) CHECK(is_aligned64(v.data()));  // after each doubling
    }
    CHECK(is_aligned64(v.data()));
    CHECK(v[4999] == 4999.0f);
    oar::aligned_vector<double> d(33, 1.5);
    CHECK(is_aligned64(d.data()));
    oar::aligned_vector<double> copy = d;
    CHECK(is_aligned64(copy.data()));
    CHECK(copy == d);
}

TEST_CASE("aligned_allocator refuses a count whose byte size overflows") {
    oar::aligned_allocator<double> alloc;
    const std::size_t too_many = static_cast<std::size_t>(-1) / sizeof(double) + 1;
    CHECK_THROWS_AS((void)alloc.allocate(too_many), std::bad_array_new_length);
}

TEST_CASE("aligned allocators of any types compare equal and convert into each other") {
    const oar::aligned_allocator<float> f;
    const oar::aligned_allocator<double> d(f);
    CHECK(f == d);
    CHECK(d == f);
    CHECK_FALSE(f != d);
}

TEST_CASE("round_to_cache_line rounds a float count up to a multiple of 16") {
    static_assert(oar::round_to_cache_line(0) == 0);
    static_assert(oar::round_to_cache_line(1) == 16);
    static_assert(oar::round_to_cache_line(16) == 16);
    static_assert(oar::round_to_cache_line(17) == 32);
    const std::size_t per_line = 64 / sizeof(float);
    for (std::size_t n = 0; n < 1000; ++n) {
        const std::size_t r = oar::round_to_cache_line(n);
        CHECK(r % per_line == 0);  // a whole number of lines
        CHECK(r >= n);             // room for n floats
        CHECK(r < n + per_line);   // the smallest such number
        CHECK(r * sizeof(float) % 64 == 0);
    }
    CHECK(oar::round_to_cache_line(9800) == 9808);
}
