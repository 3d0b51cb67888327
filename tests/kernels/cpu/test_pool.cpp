// Tests of oar/kernels/cpu/pool.hpp: max and average pooling, forward and backward, against naive
// loops over (N,C,H,W); ties go to the first maximum, a NaN in a window wins (PyTorch's rule),
// overlapping windows accumulate their gradients and floor mode leaves the remainder untouched.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cpu/pool.hpp>  // the header under test

#include <cmath>    // std::abs, std::isnan
#include <cstddef>  // std::size_t
#include <limits>   // std::numeric_limits
#include <string>   // std::string
#include <vector>   // std::vector

#include "support/isa.hpp"     // oar_test::for_each_isa: the SIMD 2x2 pool on every ISA the CPU has
#include "support/random.hpp"  // oar_test::random_vector: seeded inputs

namespace {

using oar_test::random_vector;

// Pooling windows (no padding): (channels, height, width, kernel, stride, 0)
constexpr oar::ConvGeometry pool_geometries[] = {
    {2, 6, 6, 2, 2, 0}, {1, 7, 7, 2, 2, 0}, {3, 7, 6, 3, 2, 0}, {1, 5, 8, 3, 1, 0},
    {2, 9, 9, 3, 3, 0}, {1, 4, 4, 4, 4, 0}, {2, 5, 5, 1, 1, 0}, {1, 8, 5, 2, 3, 0},
};
constexpr std::size_t batch = 2;

std::string describe_pool(const oar::ConvGeometry& g) {
    return "C=" + std::to_string(g.channels) + " H=" + std::to_string(g.height) + " W=" + std::to_string(g.width) +
           " K=" + std::to_string(g.kernel) + " S=" + std::to_string(g.stride);
}

/// Naive: plane index of the first maximum of window (oy, ox) in row-major window order.
template <class T>
std::size_t naive_argmax(const oar::ConvGeometry& g, const T* plane, std::size_t oy, std::size_t ox) {
    std::size_t best = 0;
    bool have = false;
    for (std::size_t ky = 0; ky < g.kernel; ++ky)
        for (std::size_t kx = 0; kx < g.kernel; ++kx) {
            const std::size_t idx = (oy * g.stride + ky) * g.width + ox * g.stride + kx;
            if (!have || plane[idx] > plane[best]) {
                best = idx;
                have = true;
            }
        }
    return best;
}

}  // namespace

TEST_CASE("max pooling forward and backward match naive loops") {
    for (const auto& g : pool_geometries) {
        INFO(describe_pool(g));
        const std::size_t hw = g.height * g.width, ohw = g.out_height() * g.out_width();
        const std::size_t planes = batch * g.channels;
        const auto x = random_vector<float>(planes * hw, 11);
        const auto dy = random_vector<float>(planes * ohw, 12);
        std::vector<float> y(planes * ohw, -99.0f), dx(planes * hw, 55.0f);  // dx is overwritten
        oar::kernel<oar::op::max_pool_forward, oar::cpu>::run(g, batch, x.data(), y.data());
        oar::kernel<oar::op::max_pool_backward, oar::cpu>::run(g, batch, x.data(), dy.data(), dx.data());

        std::vector<double> want_dx(planes * hw, 0.0);
        std::size_t bad_y = 0;
        for (std::size_t p = 0; p < planes; ++p)
            for (std::size_t oy = 0; oy < g.out_height(); ++oy)
                for (std::size_t ox = 0; ox < g.out_width(); ++ox) {
                    const std::size_t a = naive_argmax(g, x.data() + p * hw, oy, ox);
                    const std::size_t o = p * ohw + oy * g.out_width() + ox;
                    bad_y += y[o] != x[p * hw + a];
                    want_dx[p * hw + a] += dy[o];  // overlapping windows accumulate
                }
        std::size_t bad_dx = 0;
        for (std::size_t i = 0; i < dx.size(); ++i) bad_dx += std::abs(dx[i] - want_dx[i]) > 1e-6;
        CHECK(bad_y == 0);
        CHECK(bad_dx == 0);
    }
}

TEST_CASE("average pooling forward and backward match naive loops") {
    for (const auto& g : pool_geometries) {
        INFO(describe_pool(g));
        const std::size_t hw = g.height * g.width, ohw = g.out_height() * g.out_width();
        const std::size_t planes = batch * g.channels;
        const auto x = random_vector<double>(planes * hw, 21);
        const auto dy = random_vector<double>(planes * ohw, 22);
        std::vector<double> y(planes * ohw, -99.0), dx(planes * hw, 55.0);
        oar::kernel<oar::op::avg_pool_forward, oar::cpu64>::run(g, batch, x.data(), y.data());
        oar::kernel<oar::op::avg_pool_backward, oar::cpu64>::run(g, batch, dy.data(), dx.data());

        const double kk = static_cast<double>(g.kernel * g.kernel);
        std::vector<double> want_dx(planes * hw, 0.0);
        std::size_t bad_y = 0;
        for (std::size_t p = 0; p < planes; ++p)
            for (std::size_t oy = 0; oy < g.out_height(); ++oy)
                for (std::size_t ox = 0; ox < g.out_width(); ++ox) {
                    const std::size_t o = p * ohw + oy * g.out_width() + ox;
                    double s = 0.0;
                    for (std::size_t ky = 0; ky < g.kernel; ++ky)
                        for (std::size_t kx = 0; kx < g.kernel; ++kx) {
                            const std::size_t i = p * hw + (oy * g.stride + ky) * g.width + ox * g.stride + kx;
                            s += x[i];
                            want_dx[i] += dy[o] / kk;
                        }
                    bad_y += std::abs(y[o] - s / kk) > 1e-14;
                }
        std::size_t bad_dx = 0;
        for (std::size_t i = 0; i < dx.size(); ++i) bad_dx += std::abs(dx[i] - want_dx[i]) > 1e-14;
        CHECK(bad_y == 0);
        CHECK(bad_dx == 0);
    }
}

TEST_CASE("average pooling backward is the adjoint of its forward") {
    constexpr oar::ConvGeometry g{2, 7, 8, 3, 2, 0};
    const std::size_t in = batch * g.channels * g.height * g.width;
    const std::size_t out = batch * g.channels * g.out_height() * g.out_width();
    const auto x = random_vector<double>(in, 31), dy = random_vector<double>(out, 32);
    std::vector<double> y(out), dx(in);
    oar::kernel<oar::op::avg_pool_forward, oar::cpu64>::run(g, batch, x.data(), y.data());
    oar::kernel<oar::op::avg_pool_backward, oar::cpu64>::run(g, batch, dy.data(), dx.data());
    double lhs = 0.0, rhs = 0.0;
    for (std::size_t i = 0; i < out; ++i) lhs += y[i] * dy[i];
    for (std::size_t i = 0; i < in; ++i) rhs += x[i] * dx[i];
    CHECK(std::abs(lhs - rhs) < 1e-12);
}

TEST_CASE("max pooling sends the gradient of a tied window to its first maximum") {
    constexpr oar::ConvGeometry g{1, 2, 4, 2, 2, 0};
    // window 0: all equal -> (0,0); window 1: max 5 at (0,3) and (1,2) -> (0,3) comes first
    const std::vector<float> x = {1, 1, 0, 5,  //
                                  1, 1, 5, 2};
    const std::vector<float> dy = {10, 20};
    std::vector<float> y(2), dx(8, -1.0f);
    oar::kernel<oar::op::max_pool_forward, oar::cpu>::run(g, 1, x.data(), y.data());
    oar::kernel<oar::op::max_pool_backward, oar::cpu>::run(g, 1, x.data(), dy.data(), dx.data());
    CHECK(y[0] == 1.0f);
    CHECK(y[1] == 5.0f);
    const std::vector<float> want = {10, 0, 0, 20,  //
                                     0, 0, 0, 0};
    CHECK(dx == want);
}

TEST_CASE("max pooling propagates a NaN in a window and routes its gradient to the first NaN") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    constexpr oar::ConvGeometry g{1, 2, 6, 2, 2, 0};
    // window 0: NaN after the largest value; window 1: NaN first; window 2: two NaNs, the first wins
    const std::vector<float> x = {3, nan, nan, 9, -1, nan,  //
                                  1, 2, 7, 8, nan, 0};
    const std::vector<float> dy = {1, 2, 4};
    std::vector<float> y(3), dx(12, -1.0f);
    oar::kernel<oar::op::max_pool_forward, oar::cpu>::run(g, 1, x.data(), y.data());
    oar::kernel<oar::op::max_pool_backward, oar::cpu>::run(g, 1, x.data(), dy.data(), dx.data());
    CHECK(std::isnan(y[0]));
    CHECK(std::isnan(y[1]));
    CHECK(std::isnan(y[2]));
    const std::vector<float> want = {0, 1, 2, 0, 0, 4,  //
                                     0, 0, 0, 0, 0, 0};
    CHECK(dx == want);
}

TEST_CASE("max pooling handles windows of infinities and of equal negative values") {
    const float inf = std::numeric_limits<float>::infinity();
    constexpr oar::ConvGeometry g{1, 2, 4, 2, 2, 0};
    const std::vector<float> x = {-inf, -inf, -3, -3,  //
                                  -inf, -inf, -3, -3};
    const std::vector<float> dy = {1, 2};
    std::vector<float> y(2), dx(8);
    oar::kernel<oar::op::max_pool_forward, oar::cpu>::run(g, 1, x.data(), y.data());
    oar::kernel<oar::op::max_pool_backward, oar::cpu>::run(g, 1, x.data(), dy.data(), dx.data());
    CHECK(y[0] == -inf);
    CHECK(y[1] == -3.0f);
    const std::vector<float> want = {1, 0, 2, 0, 0, 0, 0, 0};
    CHECK(dx == want);
}

template <class T>
void check_simd_2x2_pool() {
    INFO((sizeof(T) == 4 ? "float" : "double"));
    // Rows wide enough for whole vectors (and a scalar rest: 37 columns -> 18 windows); values from
    // a small set so that ties are common, with NaNs and infinities sprinkled in.
    const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
    // 37 columns: whole vectors and a partial one; 14 and 7: the CNN's rows, vectors reaching into
    // the next rows and planes, the input's last rows on the scalar path.
    // Widths 40 (a whole vector of windows and a partial one), 64 (two whole ones), 30 with an odd
    // height (a last row outside every window), 2 (one window); odd widths (37, 15, and 13, MyNet's
    // second pool) have a last column outside every window, which the backward's extra lanes reach.
    for (const oar::ConvGeometry& g : {oar::ConvGeometry{3, 10, 37, 2, 2, 0}, oar::ConvGeometry{4, 28, 28, 2, 2, 0},
                                      oar::ConvGeometry{5, 14, 14, 2, 2, 0}, oar::ConvGeometry{2, 9, 15, 2, 2, 0},
                                      oar::ConvGeometry{2, 6, 40, 2, 2, 0}, oar::ConvGeometry{3, 4, 64, 2, 2, 0},
                                      oar::ConvGeometry{2, 7, 30, 2, 2, 0}, oar::ConvGeometry{3, 5, 2, 2, 2, 0},
                                      oar::ConvGeometry{3, 13, 13, 2, 2, 0}}) {
        INFO(describe_pool(g));
        const std::size_t hw = g.height * g.width, ohw = g.out_height() * g.out_width(), planes = 2 * g.channels;
        const auto r = random_vector<T>(planes * hw, 41);
        std::vector<T> x(r.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
            const int q = static_cast<int>((r[i] + T(1)) * T(8));  // 0..15
            x[i] = q == 0 ? nan : q == 1 ? inf : q == 2 ? -inf : static_cast<T>(q % 4);
        }
        const auto dy = random_vector<T>(planes * ohw, 42);
        std::vector<T> y(planes * ohw), dx(planes * hw, T(3));
        oar::kernel<oar::op::max_pool_forward, oar::basic_cpu<T>>::run(g, 2, x.data(), y.data());
        oar::kernel<oar::op::max_pool_backward, oar::basic_cpu<T>>::run(g, 2, x.data(), dy.data(), dx.data());
        std::vector<T> want_dx(dx.size(), T(0));
        std::size_t bad_y = 0;
        for (std::size_t p = 0; p < planes; ++p)
            for (std::size_t oy = 0; oy < g.out_height(); ++oy)
                for (std::size_t ox = 0; ox < g.out_width(); ++ox) {
                    // the rule: the first NaN if any, else the first maximum, in row-major window order
                    std::size_t best = p * hw + 2 * oy * g.width + 2 * ox;
                    for (std::size_t ky = 0; ky < 2; ++ky)
                        for (std::size_t kx = 0; kx < 2; ++kx) {
                            const std::size_t i = p * hw + (2 * oy + ky) * g.width + 2 * ox + kx;
                            if (std::isnan(x[best])) continue;
                            if (std::isnan(x[i]) || x[i] > x[best]) best = i;
                        }
                    const std::size_t o = p * ohw + oy * g.out_width() + ox;
                    const T got = y[o], want = x[best];
                    bad_y += !(got == want || (std::isnan(got) && std::isnan(want)));
                    want_dx[best] = dy[o];
                }
        CHECK(bad_y == 0);
        CHECK(dx == want_dx);
    }
}

TEST_CASE("the SIMD 2x2 max pool matches the window rule on wide rows with NaNs, ties and infinities, on every ISA") {
    oar_test::for_each_isa([] {
        check_simd_2x2_pool<float>();
        check_simd_2x2_pool<double>();  // 2 lanes at sse2: the xsimd loop there
    });
}
