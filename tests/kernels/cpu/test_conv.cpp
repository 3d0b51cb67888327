// Tests of oar/kernels/cpu/conv.hpp: im2col against the definition and, followed by a matrix
// product, against a direct convolution loop; col2im against a naive scatter and as the adjoint of
// im2col; im2row as im2col's transpose; bias_add and bias_grad against naive loops; the batch
// conv2d_forward / conv2d_backward against direct loops (each path: the stride-1 implicit GEMM with
// flipped-weight or col2im dx, the strided phase layout, the pointwise 1x1 GEMMs, im2col for
// rectangular windows), bit-identical for every thread count. Geometries cover
// stride, padding, K = 1, non-square images and strides that do not divide the padded extent.
// The fused ReLU epilogue (bias_relu, conv2d_forward_relu / conv2d_backward_relu) against the
// unfused kernels followed by the ReLU map, bit for bit.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cpu/conv.hpp>  // the header under test
#include <oar/kernels/expr.hpp>      // expr::then: the expressions bias_map and conv2d_forward_map run
#include <oar/core/thread_pool.hpp>  // set_num_threads: results must not depend on it
#include <oar/core/bf16.hpp>         // round_to_bf16: the operands ConvGeometry::round_bf16 stands for

#include <algorithm>  // std::max
#include <bit>        // std::bit_cast: outputs compared bit for bit
#include <cmath>    // std::abs
#include <cstddef>  // std::size_t, std::ptrdiff_t
#include <cstdint>  // std::uint64_t
#include <limits>   // std::numeric_limits: NaN through bias_relu
#include <string>   // std::string
#include <vector>   // std::vector

#include "support/isa.hpp"     // oar_test::for_each_isa: the kernels on every ISA the CPU has
#include "support/random.hpp"  // oar_test::random_vector: seeded inputs

namespace {

/// A convolution of the batch kernels' tests: its geometry, output channels and batch size.
struct ConvCase {
    oar::ConvGeometry g;
    std::size_t out_c, n;
};

using oar_test::random_vector;

// (channels, height, width, kernel, stride, pad)
constexpr oar::ConvGeometry conv_geometries[] = {
    {1, 5, 5, 3, 1, 0}, {2, 6, 5, 3, 1, 1}, {3, 7, 7, 3, 2, 1}, {2, 8, 6, 5, 1, 2}, {1, 9, 8, 4, 3, 2},
    {3, 4, 4, 1, 1, 0}, {2, 5, 7, 2, 2, 0}, {1, 6, 6, 5, 2, 2}, {2, 3, 3, 3, 1, 2}, {1, 28, 28, 5, 1, 2},
};

std::string describe_conv(const oar::ConvGeometry& g) {
    return "C=" + std::to_string(g.channels) + " H=" + std::to_string(g.height) + " W=" + std::to_string(g.width) +
           " K=" + std::to_string(g.kernel) + " S=" + std::to_string(g.stride) + " P=" + std::to_string(g.pad);
}

/// Whether image coordinates (iy, ix) (padded coordinates minus pad) fall inside the image.
bool inside(const oar::ConvGeometry& g, std::ptrdiff_t iy, std::ptrdiff_t ix) {
    return iy >= 0 && ix >= 0 && iy < static_cast<std::ptrdiff_t>(g.height) &&
           ix < static_cast<std::ptrdiff_t>(g.width);
}

/// Index of x(c, iy, ix) in a (C, H, W) image; (iy, ix) must be inside.
std::size_t pixel(const oar::ConvGeometry& g, std::size_t c, std::ptrdiff_t iy, std::ptrdiff_t ix) {
    return (c * g.height + static_cast<std::size_t>(iy)) * g.width + static_cast<std::size_t>(ix);
}

/// x(c, iy, ix) with zero outside the image.
double at_padded(const oar::ConvGeometry& g, const std::vector<double>& x, std::size_t c, std::ptrdiff_t iy,
                 std::ptrdiff_t ix) {
    return inside(g, iy, ix) ? x[pixel(g, c, iy, ix)] : 0.0;
}

std::ptrdiff_t in_coord(const oar::ConvGeometry& g, std::size_t o, std::size_t k) {
    return static_cast<std::ptrdiff_t>(o * g.stride + k) - static_cast<std::ptrdiff_t>(g.pad);
}

/// The definition of the column matrix: calls f(i, c, iy, ix) for each of its entries, i being the
/// index of row (c, ky, kx), column (oy, ox), and (iy, ix) the image coordinates that entry reads.
template <class F>
void for_each_col_entry(const oar::ConvGeometry& g, F f) {
    const std::size_t K = g.kernel, ow = g.out_width();
    for (std::size_t c = 0; c < g.channels; ++c)
        for (std::size_t ky = 0; ky < K; ++ky)
            for (std::size_t kx = 0; kx < K; ++kx)
                for (std::size_t oy = 0; oy < g.out_height(); ++oy)
                    for (std::size_t ox = 0; ox < ow; ++ox)
                        f(((c * K + ky) * K + kx) * g.col_cols() + oy * ow + ox, c, in_coord(g, oy, ky),
                          in_coord(g, ox, kx));
}

}  // namespace

TEST_CASE("ConvGeometry computes the floor-mode output size of a padded, strided window") {
    constexpr oar::ConvGeometry g{3, 28, 28, 5, 1, 2};
    static_assert(g.out_height() == 28 && g.out_width() == 28);
    static_assert(g.col_rows() == 75 && g.col_cols() == 784);
    constexpr oar::ConvGeometry h{1, 9, 8, 4, 3, 2};  // (9+4-4)/3+1 = 4, (8+4-4)/3+1 = 3
    static_assert(h.out_height() == 4 && h.out_width() == 3);
    CHECK(h.col_cols() == 12);
}

TEST_CASE("im2col writes every window element of the padded image, zeros in the padding") {
    for (const auto& g : conv_geometries) {
        INFO(describe_conv(g));
        const auto x = random_vector<double>(g.channels * g.height * g.width, 3);
        std::vector<double> col(g.col_rows() * g.col_cols(), -777.0);
        oar::kernel<oar::op::im2col, oar::cpu64>::run(g, x.data(), col.data());
        std::size_t bad = 0;
        for_each_col_entry(g, [&](std::size_t i, std::size_t c, std::ptrdiff_t iy, std::ptrdiff_t ix) {
            bad += col[i] != at_padded(g, x, c, iy, ix);
        });
        CHECK(bad == 0);
    }
}

TEST_CASE("im2col followed by a matrix product equals a direct convolution loop") {
    for (const auto& g : conv_geometries) {
        INFO(describe_conv(g));
        constexpr std::size_t out_c = 3;
        const auto x = random_vector<float>(g.channels * g.height * g.width, 5);
        const auto w = random_vector<float>(out_c * g.col_rows(), 6);  // (OutC, C, K, K)
        std::vector<float> col(g.col_rows() * g.col_cols());
        oar::kernel<oar::op::im2col, oar::cpu>::run(g, x.data(), col.data());
        const std::size_t K = g.kernel, oh = g.out_height(), ow = g.out_width();
        std::size_t bad = 0;
        for (std::size_t o = 0; o < out_c; ++o)
            for (std::size_t oy = 0; oy < oh; ++oy)
                for (std::size_t ox = 0; ox < ow; ++ox) {
                    double direct = 0.0, via_col = 0.0;
                    for (std::size_t c = 0; c < g.channels; ++c)
                        for (std::size_t ky = 0; ky < K; ++ky)
                            for (std::size_t kx = 0; kx < K; ++kx) {
                                const std::ptrdiff_t iy = in_coord(g, oy, ky), ix = in_coord(g, ox, kx);
                                const double wv = w[((o * g.channels + c) * K + ky) * K + kx];
                                if (inside(g, iy, ix)) direct += wv * x[pixel(g, c, iy, ix)];
                            }
                    for (std::size_t r = 0; r < g.col_rows(); ++r)
                        via_col += static_cast<double>(w[o * g.col_rows() + r]) * col[r * g.col_cols() + oy * ow + ox];
                    bad += std::abs(direct - via_col) > 1e-12;
                }
        CHECK(bad == 0);
    }
}

TEST_CASE("col2im adds each column entry back to the pixel it was read from") {
    for (const auto& g : conv_geometries) {
        INFO(describe_conv(g));
        const auto col = random_vector<double>(g.col_rows() * g.col_cols(), 8);
        const auto dx0 = random_vector<double>(g.channels * g.height * g.width, 9);
        std::vector<double> dx = dx0, want = dx0;  // col2im accumulates into dx
        oar::kernel<oar::op::col2im, oar::cpu64>::run(g, col.data(), dx.data());
        for_each_col_entry(g, [&](std::size_t i, std::size_t c, std::ptrdiff_t iy, std::ptrdiff_t ix) {
            if (inside(g, iy, ix)) want[pixel(g, c, iy, ix)] += col[i];
        });
        std::size_t bad = 0;
        for (std::size_t i = 0; i < dx.size(); ++i) bad += std::abs(dx[i] - want[i]) > 1e-12;
        CHECK(bad == 0);
    }
}

TEST_CASE("col2im is the adjoint of im2col: <im2col(x), c> == <x, col2im(c)>") {
    for (const auto& g : conv_geometries) {
        INFO(describe_conv(g));
        for (std::uint64_t trial = 0; trial < 3; ++trial) {
            const auto x = random_vector<double>(g.channels * g.height * g.width, 20 + trial);
            const auto c = random_vector<double>(g.col_rows() * g.col_cols(), 40 + trial);
            std::vector<double> col(c.size()), back(x.size(), 0.0);
            oar::kernel<oar::op::im2col, oar::cpu64>::run(g, x.data(), col.data());
            oar::kernel<oar::op::col2im, oar::cpu64>::run(g, c.data(), back.data());
            long double lhs = 0, rhs = 0, mag = 0;
            for (std::size_t i = 0; i < c.size(); ++i) {
                lhs += static_cast<long double>(col[i]) * c[i];
                mag += std::abs(static_cast<long double>(col[i]) * c[i]);
            }
            for (std::size_t i = 0; i < x.size(); ++i) rhs += static_cast<long double>(x[i]) * back[i];
            CHECK(static_cast<double>(std::abs(lhs - rhs)) <= 1e-13 * static_cast<double>(mag + 1));
        }
    }
}

TEST_CASE("bias_add adds b[c] to every element of channel c of every sample") {
    constexpr std::size_t n = 3, channels = 5, inner = 37;
    const auto y0 = random_vector<float>(n * channels * inner, 1);
    const auto b = random_vector<float>(channels, 2);
    auto y = y0;
    oar::kernel<oar::op::bias_add, oar::cpu>::run(y.data(), b.data(), n, channels, inner);
    std::size_t bad = 0;
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t c = 0; c < channels; ++c)
            for (std::size_t i = 0; i < inner; ++i) {
                const std::size_t k = (s * channels + c) * inner + i;
                bad += y[k] != y0[k] + b[c];  // one float addition: exact comparison is right
            }
    CHECK(bad == 0);
}

TEST_CASE("bias_grad adds the per-channel sum over samples and positions to db") {
    constexpr std::size_t n = 4, channels = 6, inner = 53;
    const auto dy = random_vector<float>(n * channels * inner, 3);
    const auto db0 = random_vector<float>(channels, 4);
    auto db = db0;
    oar::kernel<oar::op::bias_grad, oar::cpu>::run(dy.data(), db.data(), n, channels, inner);
    for (std::size_t c = 0; c < channels; ++c) {
        long double want = db0[c];
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t i = 0; i < inner; ++i) want += dy[(s * channels + c) * inner + i];
        CHECK(static_cast<double>(std::abs(db[c] - want)) < 1e-5);
    }
    // inner = 1 is Linear's use: one value per (sample, channel)
    std::vector<double> g(channels, 0.0);
    const auto dy1 = random_vector<double>(n * channels, 5);
    oar::kernel<oar::op::bias_grad, oar::cpu64>::run(dy1.data(), g.data(), n, channels, 1);
    for (std::size_t c = 0; c < channels; ++c) {
        double want = 0.0;
        for (std::size_t s = 0; s < n; ++s) want += dy1[s * channels + c];
        CHECK(std::abs(g[c] - want) < 1e-14);
    }
    // In float, more channels than one block of the row-by-row loop: each channel's samples summed
    // in double in sample order, then added to db once, bit for bit.
    constexpr std::size_t rows = 7, wide = 150;
    const auto dyw = random_vector<float>(rows * wide, 6);
    const auto dbw0 = random_vector<float>(wide, 7);
    auto dbw = dbw0;
    oar::kernel<oar::op::bias_grad, oar::cpu>::run(dyw.data(), dbw.data(), rows, wide, 1);
    std::size_t bad = 0;
    for (std::size_t c = 0; c < wide; ++c) {
        double sum = 0.0;
        for (std::size_t r = 0; r < rows; ++r) sum += static_cast<double>(dyw[r * wide + c]);
        bad += dbw[c] != dbw0[c] + static_cast<float>(sum);
    }
    CHECK(bad == 0);
}

TEST_CASE("im2row is the transpose of im2col") {
    for (const auto& g : conv_geometries) {
        INFO(describe_conv(g));
        const auto x = random_vector<float>(g.channels * g.height * g.width, 21);
        std::vector<float> col(g.col_rows() * g.col_cols()), row(col.size(), -7.0f);
        oar::kernel<oar::op::im2col, oar::cpu>::run(g, x.data(), col.data());
        oar::kernel<oar::op::im2row, oar::cpu>::run(g, x.data(), row.data());
        std::size_t bad = 0;
        for (std::size_t r = 0; r < g.col_rows(); ++r)
            for (std::size_t p = 0; p < g.col_cols(); ++p) bad += row[p * g.col_rows() + r] != col[r * g.col_cols() + p];
        CHECK(bad == 0);
    }
}

namespace {
struct BatchConvResult {
    std::vector<float> y, dw, db, dx;
};

BatchConvResult run_batch_conv(const oar::ConvGeometry& g, std::size_t out_c, std::size_t n, bool want_dx) {
    const std::size_t in_size = g.channels * g.height * g.width, P = g.col_cols(), ckk = g.col_rows();
    const auto x = random_vector<float>(n * in_size, 31), w = random_vector<float>(out_c * ckk, 32);
    const auto b = random_vector<float>(out_c, 33), dy = random_vector<float>(n * out_c * P, 34);
    BatchConvResult r{std::vector<float>(n * out_c * P, 9.0f), random_vector<float>(out_c * ckk, 35),
                      random_vector<float>(out_c, 36), std::vector<float>(want_dx ? n * in_size : 0, 1e6f)};
    oar::kernel<oar::op::conv2d_forward, oar::cpu>::run(g, out_c, n, x.data(), w.data(), b.data(), r.y.data());
    oar::kernel<oar::op::conv2d_backward, oar::cpu>::run(g, out_c, n, x.data(), w.data(), dy.data(), r.dw.data(),
                                                         r.db.data(), want_dx ? r.dx.data() : nullptr);
    return r;
}
}  // namespace

TEST_CASE("batch conv2d forward and backward match direct loops, with and without the input gradient") {
    oar_test::for_each_isa([&] {
        const ConvCase cases[] = {
            {{1, 12, 12, 5, 1, 2}, 20, 9},    // the course's first layer (col2im dx: one channel)
            {{20, 7, 7, 5, 1, 2}, 20, 5},     // the second layer's shape: flipped-weight dx
            {{8, 6, 5, 3, 1, 0}, 3, 6},       // flipped, no padding
            {{9, 7, 6, 3, 2, 1}, 4, 4},       // stride 2: the phase layout
            {{3, 9, 8, 4, 3, 2}, 2, 3},
            {{2, 9, 10, 7, 1, 3}, 6, 5},      // stride 1, K = 7 and 6 channels: partial weight-gradient tiles
            {{3, 6, 7, 3, 1, 2}, 4, 3},       // pad = K - 1: the pitch is the output row, no extra columns
            {{8, 5, 6, 3, 1, 2}, 3, 3},       // the same with flipped-weight dx (its padding 0)
            {{2, 5, 6, 3, 1, 3}, 3, 4},       // pad > K - 1 (kernel level only): the output row sets the pitch
            {{20, 14, 14, 5, 1, 2}, 20, 6},   // the course's second layer at full size (pitch 16, not 18)
            {{3, 10, 9, 3, 1, 0}, 32, 2},     // MyNet's first layer's channels: 32 rows in uneven panels (6 6 5 5 5 5 on AVX2)
            // The strided phase layout (forward, weight gradient, input gradient) and the pointwise GEMMs:
            {{16, 9, 9, 3, 2, 1}, 12, 11},    // ResNet8's stride-2 3x3 at an odd size, two groups and a partial one
            {{16, 8, 8, 1, 2, 0}, 12, 3},     // ResNet8's 1x1 stride-2 projection: one phase, a strided gather
            {{9, 7, 7, 1, 1, 0}, 13, 4},      // 1x1 stride 1 without padding: GEMMs on the samples as they lie
            {{3, 7, 6, 3, 2, 0}, 5, 2},       // stride 2 without padding, odd width
            {{5, 10, 9, 3, 3, 2}, 3, 2},      // stride 3 (phases of one tap), pad 2
            {{4, 9, 9, 1, 2, 1}, 3, 2},       // 1x1 stride 2 with padding: zero border outputs
            {{2, 9, 7, 5, 2, 2}, 7, 2},       // 5x5 stride 2: three runs in phase 0 (two weight-gradient tiles on SSE2/AVX2)
            {{3, 6, 6, 2, 2, 0}, 4, 2},       // 2x2 stride 2: pixels each read once
            // Rows wide enough for the stride-2 vector steps (copy_phases, conv_dx_strided) on every ISA:
            {{16, 32, 32, 3, 2, 1}, 32, 2},   // ResNet8's stride-2 3x3 at full size
            {{16, 32, 32, 1, 2, 0}, 32, 2},   // ResNet8's 1x1 stride-2 projection at full size
            {{3, 21, 37, 3, 2, 0}, 5, 2},     // no padding, odd width: vector steps, then the scalar tail
            {{2, 20, 35, 1, 2, 1}, 3, 2},     // 1x1 with padding: only the odd columns are read
        };
        for (const auto& c : cases)
            for (bool with_dx : {true, false}) {
                const auto& g = c.g;
                INFO(describe_conv(g) << " out_c=" << c.out_c << " n=" << c.n << " dx=" << with_dx);
                const std::size_t in_size = g.channels * g.height * g.width, P = g.col_cols(), ckk = g.col_rows();
                const std::size_t K = g.kernel, OH = g.out_height(), OW = g.out_width();
                const auto x = random_vector<float>(c.n * in_size, 31), w = random_vector<float>(c.out_c * ckk, 32);
                const auto b = random_vector<float>(c.out_c, 33), dy = random_vector<float>(c.n * c.out_c * P, 34);
                const auto dw0 = random_vector<float>(c.out_c * ckk, 35), db0 = random_vector<float>(c.out_c, 36);
                const auto r = run_batch_conv(g, c.out_c, c.n, with_dx);
                std::vector<double> want_dw(dw0.begin(), dw0.end()), want_db(db0.begin(), db0.end()),
                    want_dx(c.n * in_size, 0.0);
                std::size_t bad_y = 0;
                for (std::size_t s = 0; s < c.n; ++s)
                    for (std::size_t o = 0; o < c.out_c; ++o)
                        for (std::size_t oy = 0; oy < OH; ++oy)
                            for (std::size_t ox = 0; ox < OW; ++ox) {
                                const std::size_t yi = ((s * c.out_c + o) * OH + oy) * OW + ox;
                                double acc = b[o];
                                want_db[o] += dy[yi];
                                for (std::size_t ch = 0; ch < g.channels; ++ch)
                                    for (std::size_t ky = 0; ky < K; ++ky)
                                        for (std::size_t kx = 0; kx < K; ++kx) {
                                            const auto iy = in_coord(g, oy, ky), ix = in_coord(g, ox, kx);
                                            if (!inside(g, iy, ix)) continue;
                                            const std::size_t xi = s * in_size + pixel(g, ch, iy, ix);
                                            const std::size_t wi = ((o * g.channels + ch) * K + ky) * K + kx;
                                            acc += static_cast<double>(w[wi]) * x[xi];
                                            want_dw[wi] += static_cast<double>(dy[yi]) * x[xi];
                                            want_dx[xi] += static_cast<double>(dy[yi]) * w[wi];
                                        }
                                bad_y += std::abs(r.y[yi] - acc) > 1e-4;
                            }
                std::size_t bad_dw = 0, bad_db = 0, bad_dx = 0;
                for (std::size_t i = 0; i < want_dw.size(); ++i) bad_dw += std::abs(r.dw[i] - want_dw[i]) > 1e-3;
                for (std::size_t i = 0; i < want_db.size(); ++i) bad_db += std::abs(r.db[i] - want_db[i]) > 1e-3;
                if (with_dx)
                    for (std::size_t i = 0; i < want_dx.size(); ++i) bad_dx += std::abs(r.dx[i] - want_dx[i]) > 1e-4;
                CHECK(bad_y == 0);
                CHECK(bad_dw == 0);
                CHECK(bad_db == 0);
                CHECK(bad_dx == 0);
            }
    });
}

TEST_CASE("the stride-1 weight gradient equals the double one within 16 u sum |dy x| on MyNet's, ResNet8's and odd 3x3 shapes") {
    // Each weight's error against the exact sum, over u times that weight's sum of |dy * x| (the
    // scale of any summation of those products), at most kappa (the constant of the 3x3 Winograd
    // weight-gradient test; the GEMM's lanes each sum a group's products in one chain, up to 5 * 169
    // here, and reach about 3.4); a lost or misplaced product is a ratio near 1 / (u * terms), over
    // ten thousand here. Float on every ISA; no dx, so only the weight gradient runs. Winograd off:
    // ResNet8's 32 x 32 shape would take Winograd's weight gradient, which test_winograd.cpp holds to
    // its own bound.
    const ConvCase cases[] = {
        {{3, 32, 32, 3, 1, 0}, 32, 2},   // MyNet's first convolution: 27 rows, a partial row tile
        {{32, 15, 15, 3, 1, 0}, 64, 6},  // MyNet's second; 6 samples: a group of 5 and one more
        {{64, 6, 6, 3, 1, 0}, 64, 3},    // MyNet's third
        {{16, 32, 32, 3, 1, 1}, 16, 2},  // ResNet8's first stage: a sweep of one sample (1024 positions)
        {{5, 9, 7, 3, 1, 1}, 13, 4},     // 13 output channels (a partial block), 45 rows, 9 x 7
        {{3, 5, 11, 3, 1, 2}, 7, 3},     // pad = K - 1: the pitch is the output row
        {{8, 7, 7, 3, 1, 1}, 16, 24},    // 24 samples of 49 positions: four groups of 6 (256+ positions each)
    };
    constexpr double kappa = 16.0, u = 1.0 / 16777216.0;
    for (const auto& c : cases) {
        const auto& g = c.g;
        INFO(describe_conv(g) << " out_c=" << c.out_c << " n=" << c.n);
        const std::size_t in_size = g.channels * g.height * g.width, P = g.col_cols(), ckk = g.col_rows();
        const std::size_t K = g.kernel, OH = g.out_height(), OW = g.out_width();
        const auto x = random_vector<float>(c.n * in_size, 41), w = random_vector<float>(c.out_c * ckk, 42);
        const auto dy = random_vector<float>(c.n * c.out_c * P, 43);
        std::vector<double> want(c.out_c * ckk, 0.0), scale(c.out_c * ckk, 0.0);
        for (std::size_t s = 0; s < c.n; ++s)
            for (std::size_t o = 0; o < c.out_c; ++o)
                for (std::size_t ch = 0; ch < g.channels; ++ch)
                    for (std::size_t ky = 0; ky < K; ++ky)
                        for (std::size_t kx = 0; kx < K; ++kx) {
                            const std::size_t wi = ((o * g.channels + ch) * K + ky) * K + kx;
                            for (std::size_t oy = 0; oy < OH; ++oy)
                                for (std::size_t ox = 0; ox < OW; ++ox) {
                                    const auto iy = in_coord(g, oy, ky), ix = in_coord(g, ox, kx);
                                    if (!inside(g, iy, ix)) continue;
                                    const double p = static_cast<double>(dy[((s * c.out_c + o) * OH + oy) * OW + ox]) *
                                                     x[s * in_size + pixel(g, ch, iy, ix)];
                                    want[wi] += p;
                                    scale[wi] += std::abs(p);
                                }
                        }
        oar_test::for_each_isa([&] {
            std::vector<float> dw(c.out_c * ckk, 0.0f), db(c.out_c, 0.0f);
            oar::set_conv_winograd(false);
            oar::kernel<oar::op::conv2d_backward, oar::cpu>::run(g, c.out_c, c.n, x.data(), w.data(), dy.data(),
                                                                 dw.data(), db.data(), static_cast<float*>(nullptr));
            oar::set_conv_winograd(true);
            double worst = 0.0;
            std::size_t bad = 0;
            for (std::size_t i = 0; i < dw.size(); ++i) {
                const double ratio = std::abs(dw[i] - want[i]) / (u * std::max(scale[i], 1e-30));
                worst = std::max(worst, ratio);
                bad += !(ratio <= kappa);  // NaN counts as bad
            }
            INFO("worst error / (u * scale) = " << worst);
            CHECK(bad == 0);
        });
    }
}

TEST_CASE("batch conv2d results are bit-identical whatever the thread count") {
    oar_test::for_each_isa([&] {
        const oar::ConvGeometry g{20, 14, 14, 5, 1, 2};
        std::vector<BatchConvResult> runs;
        for (std::size_t threads : {1u, 2u, 3u}) {
            oar::set_num_threads(threads);
            runs.push_back(run_batch_conv(g, 20, 11, true));
            // 3x3 over 24 samples: the weight-gradient GEMM in five groups, dx by Winograd
            runs.push_back(run_batch_conv(oar::ConvGeometry{8, 9, 9, 3, 1, 1}, 16, 24, true));
        }
        oar::set_num_threads(oar::default_thread_count());
        for (std::size_t t = 2; t < runs.size(); ++t) {  // runs alternate the two shapes
            CHECK(runs[t].y == runs[t % 2].y);
            CHECK(runs[t].dw == runs[t % 2].dw);
            CHECK(runs[t].db == runs[t % 2].db);
            CHECK(runs[t].dx == runs[t % 2].dx);
        }
    });
}

TEST_CASE("bias_relu gives the bits of bias_add followed by the ReLU, NaN passing through") {
    for (std::size_t inner : {1u, 37u}) {
        constexpr std::size_t n = 3, channels = 35;  // 35: SIMD vectors and a tail when inner == 1
        INFO("inner=" << inner);
        auto y0 = random_vector<float>(n * channels * inner, 1);  // in [-1, 1): about half cut
        y0[4] = std::numeric_limits<float>::quiet_NaN();
        const auto b = random_vector<float>(channels, 2);
        auto fused = y0, plain = y0;
        oar::kernel<oar::op::bias_relu, oar::cpu>::run(fused.data(), b.data(), n, channels, inner);
        oar::kernel<oar::op::bias_add, oar::cpu>::run(plain.data(), b.data(), n, channels, inner);
        oar::kernel<oar::op::map, oar::cpu>::run(oar::relu_fn{}, plain.data(), plain.data(), plain.size());
        std::size_t bad = 0, zeros = 0;
        for (std::size_t i = 0; i < y0.size(); ++i) {
            if (i == 4) continue;
            bad += fused[i] != plain[i];
            zeros += fused[i] == 0.0f;
        }
        CHECK(bad == 0);
        CHECK(zeros > y0.size() / 8);  // the ReLU did cut
        CHECK(std::isnan(fused[4]));
    }
}

TEST_CASE("conv2d with a fused ReLU gives the bits of conv2d followed by the ReLU layer, forward and backward") {
    oar_test::for_each_isa([&] {
        const ConvCase cases[] = {
            {{1, 28, 28, 5, 1, 2}, 20, 7},  // the course's layers: stride 1, col2im / flipped dx
            {{20, 14, 14, 5, 1, 2}, 20, 11},
            {{9, 7, 6, 3, 2, 1}, 4, 4},     // stride 2: the phase layout's forward and weight gradient
        };
        for (const auto& c : cases)
            for (bool with_dx : {true, false}) {
                const auto& g = c.g;
                INFO(describe_conv(g) << " out_c=" << c.out_c << " n=" << c.n << " dx=" << with_dx);
                const std::size_t in_size = g.channels * g.height * g.width, P = g.col_cols(), ckk = g.col_rows();
                const std::size_t ny = c.n * c.out_c * P;
                const auto x = random_vector<float>(c.n * in_size, 41), w = random_vector<float>(c.out_c * ckk, 42);
                const auto b = random_vector<float>(c.out_c, 43);  // all in [-1, 1): about half the outputs cut
                const auto dy = random_vector<float>(ny, 44);
                // Unfused: conv, ReLU layer forward; ReLU layer backward (mask by its input), conv backward.
                std::vector<float> pre(ny), y(ny), dmask(ny), dw(c.out_c * ckk, 0.5f), db(c.out_c, 0.25f);
                std::vector<float> dx(with_dx ? c.n * in_size : 0);
                oar::kernel<oar::op::conv2d_forward, oar::cpu>::run(g, c.out_c, c.n, x.data(), w.data(), b.data(),
                                                                    pre.data());
                oar::kernel<oar::op::map, oar::cpu>::run(oar::relu_fn{}, pre.data(), y.data(), ny);
                oar::kernel<oar::op::map_backward, oar::cpu>::run(oar::relu_fn{}, pre.data(), y.data(), dy.data(),
                                                                  dmask.data(), ny);
                oar::kernel<oar::op::conv2d_backward, oar::cpu>::run(g, c.out_c, c.n, x.data(), w.data(), dmask.data(),
                                                                     dw.data(), db.data(), with_dx ? dx.data() : nullptr);
                // Fused.
                std::vector<float> fy(ny, 7.0f), fdy = dy, fdw(c.out_c * ckk, 0.5f), fdb(c.out_c, 0.25f);
                std::vector<float> fdx(with_dx ? c.n * in_size : 0, 3.0f);
                oar::kernel<oar::op::conv2d_forward_relu, oar::cpu>::run(g, c.out_c, c.n, x.data(), w.data(), b.data(),
                                                                         fy.data());
                oar::kernel<oar::op::conv2d_backward_relu, oar::cpu>::run(g, c.out_c, c.n, x.data(), w.data(), fy.data(),
                                                                          fdy.data(), fdw.data(), fdb.data(),
                                                                          with_dx ? fdx.data() : nullptr);
                std::size_t negatives = 0;
                for (float v : pre) negatives += v < 0.0f;
                CHECK(negatives > ny / 8);
                CHECK(negatives < ny - ny / 8);
                CHECK(fy == y);
                CHECK(fdy == dmask);  // dy is left masked
                CHECK(fdw == dw);
                CHECK(fdb == db);
                CHECK(fdx == dx);
            }
    });
}

TEST_CASE("conv2d backward without dw (bf16_mixed computes it apart): dx, db and the ReLU's mask with the bits of the whole backward, dw untouched") {
    oar_test::for_each_isa([&] {
        const ConvCase cases[] = {
            {{20, 14, 14, 5, 1, 2}, 20, 11},  // Winograd dx, direct weight gradient (dot products)
            {{8, 9, 9, 3, 1, 1}, 16, 24},     // the weight-gradient GEMM in groups, Winograd dx
            {{16, 32, 32, 3, 1, 1}, 16, 4},   // Winograd's weight gradient
            {{9, 7, 6, 3, 2, 1}, 4, 4},       // stride 2: the phase layout
            {{8, 6, 6, 1, 1, 0}, 5, 3},       // pointwise: a GEMM per sample
            {{3, 10, 9, 3, 1, 1, 5, 1, 2}, 6, 3},  // not square: im2row + GEMM
        };
        for (const auto& c : cases)
            for (bool relu : {false, true}) {
                const auto& g = c.g;
                INFO(describe_conv(g) << " out_c=" << c.out_c << " n=" << c.n << " relu=" << relu);
                const std::size_t in_size = g.channels * g.height * g.width, P = g.col_cols(), ckk = g.col_rows();
                const std::size_t ny = c.n * c.out_c * P;
                const auto x = random_vector<float>(c.n * in_size, 51), w = random_vector<float>(c.out_c * ckk, 52);
                const auto y = random_vector<float>(ny, 53);  // the ReLU's output: about half of it masked
                const auto dy0 = random_vector<float>(ny, 54);
                auto run = [&](bool with_dw, std::vector<float>& dy, std::vector<float>& dw, std::vector<float>& db,
                               std::vector<float>& dx) {
                    dy = dy0;
                    dw.assign(c.out_c * ckk, 0.5f);
                    db.assign(c.out_c, 0.25f);
                    dx.assign(c.n * in_size, 3.0f);
                    if (relu)
                        oar::kernel<oar::op::conv2d_backward_relu, oar::cpu>::run(
                            g, c.out_c, c.n, x.data(), w.data(), y.data(), dy.data(), with_dw ? dw.data() : nullptr,
                            db.data(), dx.data());
                    else
                        oar::kernel<oar::op::conv2d_backward, oar::cpu>::run(g, c.out_c, c.n, x.data(), w.data(),
                                                                             dy.data(), with_dw ? dw.data() : nullptr,
                                                                             db.data(), dx.data());
                };
                std::vector<float> dy, dw, db, dx, ndy, ndw, ndb, ndx;
                run(true, dy, dw, db, dx);
                run(false, ndy, ndw, ndb, ndx);
                CHECK(ndx == dx);
                CHECK(ndb == db);
                CHECK(ndy == dy);  // masked in place as with dw
                CHECK(ndw == std::vector<float>(c.out_c * ckk, 0.5f));
                CHECK(dw != ndw);
            }
    });
}

TEST_CASE("round_bf16: the kernels read x and dy rounded to bf16, with the bits of the same kernels on rounded copies, on every path") {
    // bf16 mixed precision's Conv2D sets ConvGeometry::round_bf16 instead of rounding whole batches
    // into copies: the kernels round x and dy in the copies they make (padded, phase, pitched,
    // transposed, Winograd's interleave), and a sample's or a group's where a GEMM reads them as
    // they lie. Forward (plain, fused ReLU), backward (plain, fused ReLU: dy masked and rounded in place),
    // with and without dw and db: every output with the bits of the unflagged kernel on rounded x and
    // dy, the weights rounded by the caller in both.
    oar_test::for_each_isa([&] {
        const ConvCase cases[] = {
            {{20, 14, 14, 5, 1, 2}, 20, 19},       // Winograd forward and dx on 16 (8, 4) images, the rest direct
            {{1, 28, 28, 5, 1, 2}, 20, 3},         // the course CNN's first: direct forward, dot-product dw
            {{8, 9, 9, 3, 1, 1}, 16, 24},          // the weight-gradient GEMM in groups, Winograd dx
            {{16, 32, 32, 3, 1, 1}, 16, 5},        // Winograd's weight gradient
            {{3, 11, 11, 3, 1, 0}, 32, 6},         // direct stride 1 under 8 channels
            {{9, 7, 6, 3, 2, 1}, 4, 7},            // stride 2: the phase layout
            {{16, 32, 32, 3, 2, 1}, 8, 3},         // stride 2 on rows wide enough for copy_phases' vector steps
            {{8, 6, 6, 1, 1, 0}, 5, 3},            // pointwise: a GEMM per sample
            {{4, 8, 8, 1, 2, 0}, 6, 3},            // strided 1x1
            {{8, 32, 32, 1, 2, 0}, 8, 2},          // strided 1x1, vector steps
            {{3, 10, 9, 3, 1, 1, 5, 1, 2}, 6, 3},  // not square: im2col / im2row + GEMM
        };
        for (const auto& c : cases)
            for (bool relu : {false, true})
                for (int grads : {0, 1, 2}) {  // dw and db; db only; dw only
                    oar::ConvGeometry g = c.g, rg = c.g;
                    rg.round_bf16 = true;
                    INFO(describe_conv(g) << " out_c=" << c.out_c << " n=" << c.n << " relu=" << relu
                                          << " grads=" << grads);
                    const std::size_t in_size = g.channels * g.height * g.width, P = g.col_cols(), ckk = g.col_rows();
                    const std::size_t ny = c.n * c.out_c * P;
                    const auto x = random_vector<float>(c.n * in_size, 61), b = random_vector<float>(c.out_c, 63);
                    auto w = random_vector<float>(c.out_c * ckk, 62);
                    oar::round_to_bf16(w.data(), w.data(), w.size());
                    const auto ry = random_vector<float>(ny, 64);  // the ReLU's output: about half of it masked
                    const auto dy0 = random_vector<float>(ny, 65);
                    auto rx = x, rdy = dy0;
                    oar::round_to_bf16(rx.data(), rx.data(), rx.size());
                    oar::round_to_bf16(rdy.data(), rdy.data(), rdy.size());
                    REQUIRE(rx != x);  // the inputs have bits below bf16's
                    const bool with_dw = grads != 1, with_db = grads != 2;
                    auto run = [&](const oar::ConvGeometry& gg, const std::vector<float>& xx, std::vector<float> dy,
                                   std::vector<float>& y, std::vector<float>& dw, std::vector<float>& db,
                                   std::vector<float>& dx) {
                        y.assign(ny, 7.0f);
                        dw.assign(c.out_c * ckk, 0.5f);
                        db.assign(c.out_c, 0.25f);
                        dx.assign(c.n * in_size, 3.0f);
                        float* pdw = with_dw ? dw.data() : nullptr;
                        float* pdb = with_db ? db.data() : nullptr;
                        if (relu) {
                            oar::kernel<oar::op::conv2d_forward_relu, oar::cpu>::run(gg, c.out_c, c.n, xx.data(), w.data(),
                                                                                     b.data(), y.data());
                            oar::kernel<oar::op::conv2d_backward_relu, oar::cpu>::run(gg, c.out_c, c.n, xx.data(), w.data(),
                                                                                      ry.data(), dy.data(), pdw, pdb,
                                                                                      dx.data());
                        } else {
                            oar::kernel<oar::op::conv2d_forward, oar::cpu>::run(gg, c.out_c, c.n, xx.data(), w.data(),
                                                                                b.data(), y.data());
                            oar::kernel<oar::op::conv2d_backward, oar::cpu>::run(gg, c.out_c, c.n, xx.data(), w.data(),
                                                                                 dy.data(), pdw, pdb, dx.data());
                        }
                        return dy;
                    };
                    std::vector<float> y, dw, db, dx, ry_, rdw, rdb, rdx;
                    const auto dy_after = run(rg, x, dy0, y, dw, db, dx);
                    const auto rdy_after = run(g, rx, rdy, ry_, rdw, rdb, rdx);
                    CHECK(y == ry_);
                    CHECK(dx == rdx);
                    CHECK(dw == rdw);
                    CHECK(db == rdb);
                    CHECK(dy_after == (relu ? rdy_after : dy0));  // the fused ReLU's dy: masked and rounded in place
                }
    });
}

TEST_CASE("round_bf16 on the values where rounding is easy to get wrong: Winograd's in-register rounding and the copies' give round_to_bf16's bits") {
    // Ties (a low half of 0x8000 under an even and an odd bf16), carries into the exponent, the
    // largest floats (rounding to infinity), infinities, subnormals, -0 and NaNs whose payload lies
    // in the low half only (rounded without care they become infinities). Each value sits in its own
    // channel of its own image, the other inputs zero, so every output is finite or carries its one
    // NaN or infinity; compared bit for bit with the unflagged kernel on round_to_bf16's copies.
    const std::uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u, 0x3fffffffu,
                                      0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f800000u, 0xff800000u,
                                      0x00000001u, 0x00008000u, 0x807fffffu, 0x80000000u, 0x7f800001u,
                                      0xff800001u, 0x7fc00001u, 0x7f80ffffu, 0x3c01c000u, 0x00018000u};
    constexpr std::size_t S = sizeof(specials) / sizeof(specials[0]);
    auto bits_of = [](const std::vector<float>& v) {
        std::vector<std::uint32_t> b(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<std::uint32_t>(v[i]);
        return b;
    };
    oar_test::for_each_isa([&] {
        const ConvCase cases[] = {
            {{8, 6, 6, 3, 1, 1}, 8, 2 * S},  // Winograd F(4x4, 3x3): the values interleaved and rounded in registers
            {{3, 6, 6, 3, 1, 1}, 8, 2 * S},  // direct: rounded in the padded copy
            {{3, 34, 34, 3, 2, 1}, 8, 2 * S},  // stride 2: rounded in copy_phases' vector steps and its tail
        };
        for (const auto& c : cases) {
            oar::ConvGeometry g = c.g, rg = c.g;
            rg.round_bf16 = true;
            INFO(describe_conv(g));
            const std::size_t in_size = g.channels * g.height * g.width, ny = c.n * c.out_c * g.col_cols();
            std::vector<float> x(c.n * in_size, 0.0f);
            for (std::size_t s = 0; s < c.n; ++s)  // sample s: special s % S at one pixel of channel s % C
                x[s * in_size + (s % g.channels) * g.height * g.width + (s * 7) % (g.height * g.width)] =
                    std::bit_cast<float>(specials[s % S]);
            std::vector<float> w(c.out_c * g.col_rows(), 0.0f), b(c.out_c, 0.0f);
            for (std::size_t i = 0; i < w.size(); ++i) w[i] = i % 5 == 0 ? 1.0f : 0.0f;  // exact products
            auto rx = x;
            oar::round_to_bf16(rx.data(), rx.data(), rx.size());
            std::vector<float> y(ny), ry(ny);
            oar::kernel<oar::op::conv2d_forward, oar::cpu>::run(rg, c.out_c, c.n, x.data(), w.data(), b.data(), y.data());
            oar::kernel<oar::op::conv2d_forward, oar::cpu>::run(g, c.out_c, c.n, rx.data(), w.data(), b.data(), ry.data());
            CHECK(bits_of(y) == bits_of(ry));
        }
    });
}

TEST_CASE("bias_map gives the bits of bias_add followed by the map of its expression, on rows and planes") {
    const auto f = oar::expr::then(oar::leaky_relu_fn{-0.3f}, oar::hardswish_fn{}, oar::tanh_fn{});
    for (std::size_t inner : {1u, 37u}) {
        constexpr std::size_t n = 3, channels = 35;  // 35: whole vectors and a partial one when inner == 1
        INFO("inner=" << inner);
        const auto z0 = random_vector<float>(n * channels * inner, 5);
        const auto b = random_vector<float>(channels, 6);
        auto z = z0, plain = z0;
        std::vector<float> y(z0.size(), 9.0f), py(z0.size());
        oar::kernel<oar::op::bias_map, oar::cpu>::run(f, b.data(), static_cast<const float*>(nullptr),
                                                      static_cast<const float*>(nullptr), z.data(), y.data(), n, channels,
                                                      inner);
        oar::kernel<oar::op::bias_add, oar::cpu>::run(plain.data(), b.data(), n, channels, inner);
        oar::kernel<oar::op::map, oar::cpu>::run(f, plain.data(), py.data(), py.size());
        CHECK(z == plain);  // z keeps the layer's output, bias included
        CHECK(y == py);
        // Without a bias z is only read; with a scale and shift, y = f(z * s[c] + t[c]).
        const auto s = random_vector<float>(channels, 7), t = random_vector<float>(channels, 8);
        auto z2 = z0;
        oar::kernel<oar::op::bias_map, oar::cpu>::run(oar::relu_fn{}, static_cast<const float*>(nullptr), s.data(),
                                                      t.data(), z2.data(), y.data(), n, channels, inner);
        CHECK(z2 == z0);
        std::size_t bad = 0;
        for (std::size_t i = 0; i < z0.size(); ++i) {
            const std::size_t c = (i / inner) % channels;
            const double want = std::max(0.0, static_cast<double>(z0[i]) * s[c] + t[c]);
            bad += std::abs(y[i] - want) > 1e-6 * (std::abs(static_cast<double>(z0[i]) * s[c]) + std::abs(t[c]));
        }
        CHECK(bad == 0);
    }
}

TEST_CASE("conv2d_forward_map gives the bits of conv2d_forward followed by the map of its expression on every path") {
    oar_test::for_each_isa([&] {
        const ConvCase cases[] = {
            {{3, 9, 9, 3, 1, 1}, 5, 3},     // stride 1, few channels: the implicit GEMM
            {{8, 10, 10, 3, 1, 1}, 8, 19},  // 3x3, 8 channels: Winograd (and the direct path for the last few)
            {{9, 7, 6, 3, 2, 1}, 4, 4},     // stride 2: the phase layout
        };
        const auto f = oar::expr::then(oar::elu_fn{0.7f}, oar::sigmoid_fn{});
        for (const auto& c : cases) {
            const auto& g = c.g;
            INFO(describe_conv(g) << " out_c=" << c.out_c << " n=" << c.n);
            const std::size_t in_size = g.channels * g.height * g.width, ny = c.n * c.out_c * g.col_cols();
            const auto x = random_vector<float>(c.n * in_size, 51), w = random_vector<float>(c.out_c * g.col_rows(), 52);
            const auto b = random_vector<float>(c.out_c, 53);
            std::vector<float> z(ny), y(ny), fz(ny, 7.0f), fy(ny, 7.0f);
            oar::kernel<oar::op::conv2d_forward, oar::cpu>::run(g, c.out_c, c.n, x.data(), w.data(), b.data(), z.data());
            oar::kernel<oar::op::map, oar::cpu>::run(f, z.data(), y.data(), ny);
            oar::kernel<oar::op::conv2d_forward_map, oar::cpu>::run(g, c.out_c, c.n, x.data(), w.data(), b.data(), f,
                                                                    static_cast<const float*>(nullptr),
                                                                    static_cast<const float*>(nullptr), fz.data(),
                                                                    fy.data());
            CHECK(fz == z);
            CHECK(fy == y);
        }
    });
}
