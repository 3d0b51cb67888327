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

namespace {
/// |got - want| / |want|, in double (want is never 0 here: exp > 0, tanh(x) != 0 for the x swept).
double relative_error(float got, double want) { return std::abs(double(got) - want) / std::abs(want); }
}  // namespace

TEST_CASE("xsimd's exp, tanh and fma agree with the C library on a sweep of values") {
    using B = xsimd::batch<float>;
    alignas(64) std::array<float, B::size> in{}, out{};
    for (float start = -20.0f; start < 20.0f; start += 0.37f) {
        for (std::size_t i = 0; i < B::size; ++i) in[i] = start + 0.011f * static_cast<float>(i);
        const B x = B::load_aligned(in.data());
        // Relative bounds (doctest::Approx would add an absolute 1e-6, larger than exp(-20) = 2e-9
        // itself): 1e-6 is ~8 ulp of float, for every x down to -20 as for x near 20.
        xsimd::exp(x).store_aligned(out.data());
        for (std::size_t i = 0; i < B::size; ++i) {
            INFO("x = " << in[i] << ", exp: " << out[i] << " vs " << std::exp(in[i]));
            CHECK(relative_error(out[i], std::exp(in[i])) <= 1e-6);
        }
        xsimd::tanh(x).store_aligned(out.data());
        for (std::size_t i = 0; i < B::size; ++i) {
            INFO("x = " << in[i] << ", tanh: " << out[i] << " vs " << std::tanh(in[i]));
            CHECK(relative_error(out[i], std::tanh(in[i])) <= 1e-6);
        }
        xsimd::fma(x, x, B(1.0f)).store_aligned(out.data());
        // Against the exact value in double: within 2 ulp of float (2^-22 relative), fused or not.
        for (std::size_t i = 0; i < B::size; ++i) {
            INFO("x = " << in[i] << ", fma: " << out[i]);
            CHECK(relative_error(out[i], double(in[i]) * double(in[i]) + 1.0) <= 0x1p-22);
        }
    }
}
