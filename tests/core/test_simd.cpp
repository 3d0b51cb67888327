// core/simd.hpp: xsimd is reachable through oar's one include, at the width this build targets,
// and its math agrees with the C library (the functions oar's kernels use).
#include <oar/core/simd.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cmath>

TEST_CASE("xsimd batches come through core/simd.hpp with the widest width the target allows") {
    using B = xsimd::batch<float>;
#if defined(__AVX512F__)
    CHECK(B::size == 16);
#elif defined(__AVX__)
    CHECK(B::size == 8);
#elif defined(__SSE2__)
    CHECK(B::size == 4);
#endif
    CHECK(xsimd::batch<double>::size * 2 == B::size);
}

TEST_CASE("xsimd's exp, tanh and fma agree with the C library on a sweep of values") {
    using B = xsimd::batch<float>;
    alignas(64) std::array<float, B::size> in{}, out{};
    for (float start = -20.0f; start < 20.0f; start += 0.37f) {
        for (std::size_t i = 0; i < B::size; ++i) in[i] = start + 0.011f * static_cast<float>(i);
        const B x = B::load_aligned(in.data());
        xsimd::exp(x).store_aligned(out.data());
        for (std::size_t i = 0; i < B::size; ++i) CHECK(out[i] == doctest::Approx(std::exp(in[i])).epsilon(1e-6));
        xsimd::tanh(x).store_aligned(out.data());
        for (std::size_t i = 0; i < B::size; ++i) CHECK(out[i] == doctest::Approx(std::tanh(in[i])).epsilon(1e-6));
        xsimd::fma(x, x, B(1.0f)).store_aligned(out.data());
        // Against the exact value in double: within 2 ulp of float (2^-22 relative), fused or not.
        for (std::size_t i = 0; i < B::size; ++i)
            CHECK(out[i] == doctest::Approx(double(in[i]) * double(in[i]) + 1.0).epsilon(2.4e-7));
    }
}
