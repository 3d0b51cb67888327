// Tests of oar/kernels/cpu/softmax.hpp: row softmax and its backward against the explicit
// Jacobian in long double, and the fused softmax + cross-entropy (loss against log-sum-exp in long
// double, gradient against softmax - onehot, optional outputs), including logits of +-1e4 where a
// naive exp overflows.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cpu/softmax.hpp>  // the header under test

#include <cmath>    // std::exp, std::log, std::isfinite
#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <vector>   // std::vector

#include "support/random.hpp"  // oar_test::random_vector: seeded, scaled inputs

namespace {

using oar_test::random_vector;

/// Softmax of one row in long double (max subtracted, so it is exact to long double rounding).
std::vector<long double> ref_softmax(const auto* z, std::size_t cols) {
    long double m = z[0];
    for (std::size_t j = 1; j < cols; ++j) m = z[j] > m ? z[j] : m;
    long double s = 0;
    std::vector<long double> p(cols);
    for (std::size_t j = 0; j < cols; ++j) s += p[j] = std::exp(static_cast<long double>(z[j]) - m);
    for (auto& v : p) v /= s;
    return p;
}

long double ref_logsumexp(const auto* z, std::size_t cols) {
    long double m = z[0];
    for (std::size_t j = 1; j < cols; ++j) m = z[j] > m ? z[j] : m;
    long double s = 0;
    for (std::size_t j = 0; j < cols; ++j) s += std::exp(static_cast<long double>(z[j]) - m);
    return m + std::log(s);
}

}  // namespace

TEST_CASE("softmax forward matches a long double reference and every row sums to one") {
    for (std::size_t cols : {1u, 2u, 10u, 33u}) {
        constexpr std::size_t rows = 5;
        INFO("cols=", cols);
        const auto xf = random_vector<float>(rows * cols, cols, 6.0);
        const auto xd = random_vector<double>(rows * cols, cols, 6.0);
        std::vector<float> yf(rows * cols);
        std::vector<double> yd(rows * cols);
        oar::kernel<oar::op::softmax_forward, oar::cpu>::run(xf.data(), yf.data(), rows, cols);
        oar::kernel<oar::op::softmax_forward, oar::cpu64>::run(xd.data(), yd.data(), rows, cols);
        for (std::size_t r = 0; r < rows; ++r) {
            const auto pf = ref_softmax(xf.data() + r * cols, cols);
            const auto pd = ref_softmax(xd.data() + r * cols, cols);
            double sf = 0, sd = 0;
            for (std::size_t j = 0; j < cols; ++j) {
                CHECK(static_cast<double>(std::abs(yf[r * cols + j] - pf[j])) <= 1e-6 * static_cast<double>(pf[j]) + 1e-12);
                CHECK(static_cast<double>(std::abs(yd[r * cols + j] - pd[j])) <= 1e-14 * static_cast<double>(pd[j]) + 1e-300);
                sf += yf[r * cols + j];
                sd += yd[r * cols + j];
            }
            CHECK(std::abs(sf - 1.0) < 1e-5);
            CHECK(std::abs(sd - 1.0) < 1e-13);
        }
    }
}

TEST_CASE("softmax backward equals the Jacobian-vector product (diag(y) - y y^T) dy") {
    constexpr std::size_t rows = 4, cols = 7;
    const auto x = random_vector<double>(rows * cols, 1, 3.0);
    const auto dy = random_vector<double>(rows * cols, 2);
    std::vector<double> y(rows * cols), dx(rows * cols);
    oar::kernel<oar::op::softmax_forward, oar::cpu64>::run(x.data(), y.data(), rows, cols);
    oar::kernel<oar::op::softmax_backward, oar::cpu64>::run(y.data(), dy.data(), dx.data(), rows, cols);
    for (std::size_t r = 0; r < rows; ++r) {
        const auto p = ref_softmax(x.data() + r * cols, cols);
        for (std::size_t j = 0; j < cols; ++j) {
            long double want = 0;  // sum_i dy_i * d y_i / d x_j
            for (std::size_t i = 0; i < cols; ++i) want += dy[r * cols + i] * p[i] * ((i == j ? 1 : 0) - p[j]);
            CHECK(static_cast<double>(std::abs(dx[r * cols + j] - want)) < 1e-14);
        }
    }
    // and in float
    std::vector<float> yf(rows * cols), dyf(dy.begin(), dy.end()), dxf(rows * cols);
    const std::vector<float> xf(x.begin(), x.end());
    oar::kernel<oar::op::softmax_forward, oar::cpu>::run(xf.data(), yf.data(), rows, cols);
    oar::kernel<oar::op::softmax_backward, oar::cpu>::run(yf.data(), dyf.data(), dxf.data(), rows, cols);
    for (std::size_t i = 0; i < rows * cols; ++i) CHECK(std::abs(dxf[i] - dx[i]) < 1e-6);
}

TEST_CASE("softmax of logits of +-1e4 is finite and puts the mass on the largest logits") {
    const std::vector<float> x = {1e4f, -1e4f, 0.0f, 1e4f,  //
                                  -1e4f, -1e4f, -1e4f, -1e4f};
    std::vector<float> y(8);
    oar::kernel<oar::op::softmax_forward, oar::cpu>::run(x.data(), y.data(), 2, 4);
    for (float v : y) CHECK(std::isfinite(v));
    CHECK(y[0] == 0.5f);
    CHECK(y[1] == 0.0f);
    CHECK(y[2] == 0.0f);
    CHECK(y[3] == 0.5f);
    for (std::size_t j = 4; j < 8; ++j) CHECK(y[j] == 0.25f);
}

TEST_CASE("softmax cross-entropy loss equals log-sum-exp minus the label's logit") {
    constexpr std::size_t rows = 6, cols = 10;
    const auto z = random_vector<float>(rows * cols, 9, 5.0);
    const std::vector<std::int64_t> labels = {0, 9, 3, 3, 7, 1};
    std::vector<float> losses(rows), dz(rows * cols, 42.0f);
    const float scale = 1.0f / rows;
    const double total = oar::kernel<oar::op::softmax_cross_entropy, oar::cpu>::run(
        z.data(), labels.data(), rows, cols, scale, losses.data(), dz.data());
    long double want_total = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        const auto lbl = static_cast<std::size_t>(labels[r]);
        const long double want = ref_logsumexp(z.data() + r * cols, cols) - z[r * cols + lbl];
        want_total += want;
        CHECK(static_cast<double>(std::abs(losses[r] - want)) <= 1e-6 * static_cast<double>(want) + 1e-6);
        const auto p = ref_softmax(z.data() + r * cols, cols);
        for (std::size_t j = 0; j < cols; ++j) {
            const long double g = scale * (p[j] - (j == lbl ? 1 : 0));
            CHECK(static_cast<double>(std::abs(dz[r * cols + j] - g)) < 1e-7);
        }
    }
    CHECK(static_cast<double>(std::abs(total - want_total)) < 1e-9 * static_cast<double>(want_total));
}

TEST_CASE("softmax cross-entropy in double matches long double to 1e-13") {
    constexpr std::size_t rows = 3, cols = 5;
    const auto z = random_vector<double>(rows * cols, 19, 20.0);
    const std::vector<std::int64_t> labels = {4, 0, 2};
    std::vector<double> losses(rows), dz(rows * cols);
    const double total = oar::kernel<oar::op::softmax_cross_entropy, oar::cpu64>::run(
        z.data(), labels.data(), rows, cols, 1.0, losses.data(), dz.data());
    long double want_total = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        const long double want = ref_logsumexp(z.data() + r * cols, cols) - z[r * cols + static_cast<std::size_t>(labels[r])];
        want_total += want;
        CHECK(static_cast<double>(std::abs(losses[r] - want)) <= 1e-13 * (1 + static_cast<double>(want)));
        const auto p = ref_softmax(z.data() + r * cols, cols);
        for (std::size_t j = 0; j < cols; ++j)
            CHECK(static_cast<double>(std::abs(dz[r * cols + j] - (p[j] - (static_cast<std::int64_t>(j) == labels[r])))) <
                  1e-14);
    }
    CHECK(static_cast<double>(std::abs(total - want_total)) < 1e-12 * (1 + static_cast<double>(want_total)));
}

TEST_CASE("softmax cross-entropy stays finite for logits of +-1e4") {
    const std::vector<float> z = {1e4f, -1e4f, 0.0f, 1e4f,  //
                                  -1e4f, 1e4f, -1e4f, -1e4f};
    const std::vector<std::int64_t> labels = {1, 1};
    std::vector<float> losses(2), dz(8);
    const double total =
        oar::kernel<oar::op::softmax_cross_entropy, oar::cpu>::run(z.data(), labels.data(), 2, 4, 1.0f, losses.data(), dz.data());
    CHECK(std::isfinite(total));
    for (float v : losses) CHECK(std::isfinite(v));
    for (float v : dz) CHECK(std::isfinite(v));
    // row 0: lse = 1e4 + log 2, label logit -1e4; row 1: the label holds all the mass
    CHECK(std::abs(losses[0] - (2e4 + std::log(2.0))) < 1e-2);
    CHECK(losses[1] == 0.0f);
    CHECK(std::abs(total - (2e4 + std::log(2.0))) < 1e-9);
    const std::vector<float> want_dz = {0.5f, -1.0f, 0.0f, 0.5f,  //
                                        0.0f, 0.0f, 0.0f, 0.0f};
    for (std::size_t i = 0; i < 8; ++i) CHECK(std::abs(dz[i] - want_dz[i]) < 1e-7f);
}

TEST_CASE("softmax cross-entropy accepts null losses and null dz and returns the same total") {
    constexpr std::size_t rows = 4, cols = 3;
    const auto z = random_vector<double>(rows * cols, 77, 2.0);
    const std::vector<std::int64_t> labels = {0, 1, 2, 1};
    std::vector<double> losses(rows), dz(rows * cols);
    using K = oar::kernel<oar::op::softmax_cross_entropy, oar::cpu64>;
    const double full = K::run(z.data(), labels.data(), rows, cols, 0.5, losses.data(), dz.data());
    const double no_losses = K::run(z.data(), labels.data(), rows, cols, 0.5, nullptr, dz.data());
    const double eval_only = K::run(z.data(), labels.data(), rows, cols, 0.5, nullptr, nullptr);
    CHECK(no_losses == full);
    CHECK(eval_only == full);
    double sum = 0;
    for (double l : losses) sum += l;
    CHECK(std::abs(sum - full) < 1e-14);
}
