// Tests of oar/layers/dropout.hpp: in training a fraction p of the elements is zeroed (within a
// binomial tolerance) and the rest scaled by 1/(1-p); evaluation and p = 0 are the identity; the
// mask is a pure function of (seed, layer index, step, element), so the same context gives the same
// mask and backward uses forward's mask, while another step, layer or seed gives another one.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/layers/dropout.hpp>  // the header under test

#include <cmath>    // std::abs, std::sqrt
#include <cstddef>  // std::size_t
#include <vector>   // std::vector

#include <oar/nn/network.hpp>         // Network: step counting across forward passes
#include <oar/nn/sequential.hpp>      // Sequential
#include <oar/testing/gradcheck.hpp>  // gradcheck_layer

#include <cstdint>  // std::uint64_t
#include <cstring>  // std::memcmp

#include "support/isa.hpp"  // oar_test::for_each_isa: every ISA the CPU has

namespace {

constexpr std::size_t n = 20000;  // elements per draw: 2 samples of 10000
const oar::Dims dims = oar::make_dims(10000);

/// Nonzero inputs, so that a zero output means "dropped".
std::vector<float> inputs() {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = 1.0f + static_cast<float>(i % 13) * 0.25f;
    return x;
}

std::vector<float> run_forward(const oar::Dropout& d, oar::Context<oar::cpu>& ctx, const std::vector<float>& x) {
    std::vector<float> y(n, -1.0f);
    d.forward(ctx, dims, x.data(), y.data(), 2);
    return y;
}

std::size_t count_zeros(const std::vector<float>& y) {
    std::size_t z = 0;
    for (float v : y) z += v == 0.0f;
    return z;
}

std::size_t count_differences(const std::vector<float>& a, const std::vector<float>& b) {
    std::size_t d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d += (a[i] == 0.0f) != (b[i] == 0.0f);
    return d;
}

/// The number of drops is Binomial(n, p): accept within 5 standard deviations (a false failure
/// has probability ~6e-7 for a given seed, and the seeds are fixed, so the test is deterministic).
void check_drop_fraction(std::size_t zeros, double p) {
    const double mean = static_cast<double>(n) * p, sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
    INFO("zeros=", zeros, " expected ", mean, " +- ", 5 * sd);
    CHECK(std::abs(static_cast<double>(zeros) - mean) <= 5 * sd);
}

template <std::size_t P>
void check_train_statistics(std::uint64_t seed) {
    const oar::Dropout d{static_cast<float>(P) / 100.0f};
    oar::Context<oar::cpu> ctx;
    ctx.rng.seed = seed;
    ctx.step = 3;
    ctx.layer_index = 1;
    const auto x = inputs();
    const auto y = run_forward(d, ctx, x);
    const double p = static_cast<double>(P) / 100.0;
    INFO("Dropout p=", P, "% seed ", seed);
    check_drop_fraction(count_zeros(y), p);
    std::size_t bad_scale = 0;
    for (std::size_t i = 0; i < n; ++i)
        if (y[i] != 0.0f) bad_scale += std::abs(y[i] - x[i] / (1.0 - p)) > 1e-6 * std::abs(x[i] / (1.0 - p));
    CHECK(bad_scale == 0);
    // The mean is preserved in expectation: sum(y) ~ sum(x), within a few standard deviations.
    double sx = 0.0, sy = 0.0, sx2 = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        sx += x[i];
        sy += y[i];
        sx2 += static_cast<double>(x[i]) * x[i];
    }
    const double sd = std::sqrt(sx2 * p / (1 - p));  // Var(y_i) = x_i^2 p / (1-p)
    CHECK(std::abs(sy - sx) <= 5 * sd);
}

}  // namespace

static_assert(oar::Layer<oar::Dropout> && !oar::ParametricLayer<oar::Dropout>);
static_assert(oar::Layer<oar::DropoutPercent<30>> && !oar::ParametricLayer<oar::DropoutPercent<30>>);
static_assert(oar::Dropout::name == "Dropout" && oar::DropoutPercent<30>::name == "Dropout");
static_assert(oar::Dropout::output_dims(oar::make_dims(4, 5)) == oar::make_dims(4, 5));
static_assert(oar::Dropout::flops(oar::make_dims(4, 5)) == 20);
static_assert(oar::Dropout::workspace(oar::make_dims(4, 5)) == 0);
static_assert(oar::Dropout::check(oar::make_dims(1, 28, 28)).ok());

TEST_CASE("Dropout's drop probability is Paddle's 0.5 by default, or the value it is built with") {
    CHECK(oar::Dropout{}.p == 0.5f);
    CHECK(oar::Dropout{0.2f}.p == 0.2f);
    CHECK(oar::Dropout{0.2}.p == 0.2f);  // a double literal converts without narrowing
    const oar::Dropout braced = {0.3f};   // as an element of a Sequential's braced list
    CHECK(braced.p == 0.3f);
    CHECK(oar::DropoutPercent<30>{}.p == 0.3f);
    CHECK(oar::DropoutPercent<0>{}.p == 0.0f);
    CHECK(oar::DropoutPercent<30>{0.6f}.p == 0.6f);
}

TEST_CASE("Dropout in training zeroes about p of the elements and scales the kept ones by 1/(1-p)") {
    check_train_statistics<50>(1);
    check_train_statistics<30>(2);
    check_train_statistics<10>(3);
    check_train_statistics<90>(4);
}

TEST_CASE("Dropout in evaluation mode, or with p = 0, is the identity") {
    const auto x = inputs();
    oar::Context<oar::cpu> ctx;
    ctx.mode = oar::Mode::eval;
    CHECK(run_forward(oar::Dropout{}, ctx, x) == x);
    ctx.mode = oar::Mode::train;
    CHECK(run_forward(oar::Dropout{0.0f}, ctx, x) == x);
    oar::Dropout d;
    d.p = 0.0f;
    CHECK(run_forward(d, ctx, x) == x);
}

TEST_CASE("Dropout draws the same mask for the same seed, layer and step, and another one otherwise") {
    const oar::Dropout d;
    const auto x = inputs();
    oar::Context<oar::cpu> ctx;
    ctx.rng.seed = 42;
    ctx.step = 7;
    ctx.layer_index = 2;
    const auto base = run_forward(d, ctx, x);
    CHECK(run_forward(d, ctx, x) == base);
    oar::Context<oar::cpu> same = ctx;  // an independent context with the same coordinates
    CHECK(run_forward(d, same, x) == base);

    // Two independent p = 0.5 masks disagree on about half the elements.
    auto other = [&](auto change) {
        oar::Context<oar::cpu> c = ctx;
        change(c);
        const auto y = run_forward(d, c, x);
        INFO("differences ", count_differences(base, y));
        check_drop_fraction(count_differences(base, y), 0.5);
    };
    other([](auto& c) { c.step = 8; });
    other([](auto& c) { c.step = 7 + (1ull << 32); });
    other([](auto& c) { c.layer_index = 3; });
    other([](auto& c) { c.rng.seed = 43; });
}

TEST_CASE("Dropout backward applies forward's mask and scale to the gradient") {
    oar::Dropout d{0.4f};
    const auto x = inputs();
    oar::Context<oar::cpu> ctx;
    ctx.rng.seed = 5;
    ctx.step = 11;
    const auto y = run_forward(d, ctx, x);
    std::vector<float> dy(n), dx(n, -1.0f);
    for (std::size_t i = 0; i < n; ++i) dy[i] = 0.5f - static_cast<float>(i % 7);
    d.backward(ctx, dims, x.data(), y.data(), dy.data(), dx.data(), 2);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const bool kept = y[i] != 0.0f;
        const double want = kept ? dy[i] / (1.0 - 0.4f) : 0.0;
        bad += std::abs(dx[i] - want) > 1e-6 * (1 + std::abs(want));
    }
    CHECK(bad == 0);
    d.backward(ctx, dims, x.data(), y.data(), dy.data(), static_cast<float*>(nullptr), 2);  // dx null: nothing to do
}

TEST_CASE("in a Network, each training forward draws a new mask and backward uses the last forward's") {
    oar::Network<oar::Sequential<oar::Dropout>, oar::Shape<10000>> net(9);
    const auto xv = inputs();
    oar::Tensor x(2, dims), dy(2, dims), dx(2, dims);
    for (std::size_t i = 0; i < n; ++i) {
        x[i] = xv[i];
        dy[i] = 1.0f;
    }
    const auto y1v = net.forward(x.view());
    const std::vector<float> y1(y1v.data(), y1v.data() + n);
    const auto y2v = net.forward(x.view());
    const std::vector<float> y2(y2v.data(), y2v.data() + n);
    CHECK(net.step() == 2);
    check_drop_fraction(count_differences(y1, y2), 0.5);
    net.backward(dy.view(), dx.view());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad += (dx[i] == 0.0f) != (y2[i] == 0.0f) || (dx[i] != 0.0f && dx[i] != 2.0f);
    CHECK(bad == 0);
    net.eval();  // evaluation neither masks nor counts steps
    const auto ye = net.forward(x.view());
    CHECK(std::vector<float>(ye.data(), ye.data() + n) == xv);
    CHECK(net.step() == 2);
}

TEST_CASE("Dropout with p set outside [0, 1) at run time throws value_error") {
    const auto x = inputs();
    oar::Context<oar::cpu> ctx;
    oar::Dropout d;
    d.p = 1.0f;
    CHECK_THROWS_AS(run_forward(d, ctx, x), oar::value_error);
    d.p = -0.1f;
    CHECK_THROWS_AS(run_forward(d, ctx, x), oar::value_error);
}

TEST_CASE("Dropout gradients match finite differences in training and in evaluation") {
    oar::testing::GradcheckOptions o;
    o.train = true;
    const auto train = oar::testing::gradcheck_layer<oar::Dropout, oar::Shape<4, 5>>(o);
    INFO(train.message);
    CHECK(train.ok);
    CHECK(train.checked == 2 * 20);
    o.train = false;
    const auto eval = oar::testing::gradcheck_layer<oar::DropoutPercent<30>, oar::Shape<4, 5>>(o);
    INFO(eval.message);
    CHECK(eval.ok);
    CHECK(eval.checked == 2 * 20);
}

TEST_CASE("the dropout kernel's mask is CounterRng::uniform(stream, i) < p bit for bit, on every ISA and length") {
    // The ISA bodies run Philox on one block per vector lane; lengths with whole vectors of blocks,
    // leftover blocks and leftover elements, and a stream whose high word is set.
    const oar::CounterRng rng{0x0123456789ABCDEFull};
    oar_test::for_each_isa([&] {
        for (std::size_t count : {std::size_t(3), std::size_t(37), std::size_t(4 * 37 + 3), std::size_t(20011)})
            for (std::uint64_t stream : {std::uint64_t(7), (std::uint64_t(5) << 32) | 3u}) {
                INFO("count ", count, ", stream ", stream);
                std::vector<float> x(count), y(count, -1.0f);
                for (std::size_t i = 0; i < count; ++i) x[i] = static_cast<float>(i) * 0.5f - 3.0f;
                oar::kernel<oar::op::dropout, oar::cpu>::run(rng, stream, 0.3f, 1.25f, x.data(), y.data(), count);
                std::size_t bad = 0;
                for (std::size_t i = 0; i < count; ++i) {
                    const float want = rng.uniform(stream, i) < 0.3f ? 0.0f : x[i] * 1.25f;
                    bad += std::memcmp(&want, &y[i], sizeof want) != 0;
                }
                CHECK(bad == 0);
            }
    });
}
