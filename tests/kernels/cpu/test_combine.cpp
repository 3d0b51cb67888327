// Tests of oar/kernels/cpu/combine.hpp: op::add and op::add_relu against the scalar sum (and
// relu_fn after it) bit for bit, on lengths with whole vectors, a partial one and several of the
// pool's chunks, on 1, 2 and 3 threads, in place (y = a, y = b) and with -0, NaN and infinities;
// op::copy_rows against element-wise copies.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/core/thread_pool.hpp>          // set_num_threads, default_pool
#include <oar/kernels/cpu/combine.hpp>       // the header under test
#include <oar/kernels/cpu/elementwise.hpp>  // relu_fn: the unfused ReLU

#include <bit>      // std::bit_cast
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint32_t, std::uint64_t
#include <limits>   // std::numeric_limits
#include <vector>   // std::vector

#include "support/random.hpp"  // oar_test::rand_unit

namespace {

/// Values in [-4, 4) with -0, +0, NaN and +-inf sprinkled in.
template <class T>
std::vector<T> combine_values(std::size_t n, std::uint64_t seed) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        switch (i % 97) {
            case 5: v[i] = T(-0.0); break;
            case 11: v[i] = T(0); break;
            case 23: v[i] = std::numeric_limits<T>::quiet_NaN(); break;
            case 41: v[i] = std::numeric_limits<T>::infinity(); break;
            case 59: v[i] = -std::numeric_limits<T>::infinity(); break;
            default: v[i] = static_cast<T>(4.0 * oar_test::rand_unit(seed));
        }
    }
    return v;
}

/// Bit patterns equal element by element (NaN == NaN, -0 != +0).
template <class T>
bool combine_same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if constexpr (sizeof(T) == 4) {
            if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
        } else {
            if (std::bit_cast<std::uint64_t>(a[i]) != std::bit_cast<std::uint64_t>(b[i])) return false;
        }
    }
    return true;
}

template <class T>
void check_combine_add(std::size_t n, std::size_t threads) {
    INFO("n=", n, " threads=", threads, " T=", sizeof(T) == 4 ? "float" : "double");
    oar::set_num_threads(threads);
    using cpu = oar::basic_cpu<T>;
    const oar::relu_fn relu{};
    const auto a = combine_values<T>(n, 3 + n), b = combine_values<T>(n, 1000 + n);
    std::vector<T> sum(n), sum_relu(n);
    for (std::size_t i = 0; i < n; ++i) {
        const T v = a[i] + b[i];
        sum[i] = v;
        sum_relu[i] = relu(static_cast<T>(v));
    }
    std::vector<T> y(n, T(7));
    oar::kernel<oar::op::add, cpu>::run(a.data(), b.data(), y.data(), n);
    CHECK(combine_same_bits(y, sum));
    oar::kernel<oar::op::add_relu, cpu>::run(a.data(), b.data(), y.data(), n);
    CHECK(combine_same_bits(y, sum_relu));
    auto ya = a, yb = b;  // in place, either operand
    oar::kernel<oar::op::add, cpu>::run(ya.data(), b.data(), ya.data(), n);
    oar::kernel<oar::op::add, cpu>::run(a.data(), yb.data(), yb.data(), n);
    CHECK(combine_same_bits(ya, sum));
    CHECK(combine_same_bits(yb, sum));
    ya = a;
    yb = b;
    oar::kernel<oar::op::add_relu, cpu>::run(ya.data(), b.data(), ya.data(), n);
    oar::kernel<oar::op::add_relu, cpu>::run(a.data(), yb.data(), yb.data(), n);
    CHECK(combine_same_bits(ya, sum_relu));
    CHECK(combine_same_bits(yb, sum_relu));
    std::size_t zeros = 0;
    for (const T v : sum_relu) zeros += v == T(0);
    CHECK(zeros > n / 5);  // the ReLU clamps a part of every case
}

}  // namespace

TEST_CASE("op::add and op::add_relu: the scalar sum's bits (and relu_fn's after it) on 1, 2 and 3 threads, in place too") {
    const std::size_t threads = oar::default_pool().size();
    for (const std::size_t t : {1, 2, 3})
        for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{1003},
                                    (std::size_t{1} << 16) * 3 + 5}) {  // the last one: several chunks on the pool
            check_combine_add<float>(n, t);
            check_combine_add<double>(n, t);
        }
    oar::set_num_threads(threads);
}

TEST_CASE("op::copy_rows: strided rows copied element by element") {
    const std::size_t rows = 5, len = 3, src_stride = 7, dst_stride = 4;
    std::vector<float> src(rows * src_stride), dst(rows * dst_stride, -1.0f);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
    oar::kernel<oar::op::copy_rows, oar::basic_cpu<float>>::run(rows, len, src.data(), src_stride, dst.data(), dst_stride);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < dst_stride; ++j) {
            INFO("r=", r, " j=", j);
            CHECK(dst[r * dst_stride + j] == (j < len ? src[r * src_stride + j] : -1.0f));
        }
}
