// Tests of include/oar/nn/init.hpp: zeros, XavierUniform and Kaiming-normal initialisation, their
// statistics, and determinism by (seed, parameter index).
//
// Statistical bounds are 6 standard errors; the seeds are fixed, so the checks are deterministic
// and a correct initialiser misses them with probability about 1e-9.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cmath>    // std::sqrt, std::abs
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t
#include <span>     // std::span
#include <utility>  // std::pair
#include <vector>   // std::vector

#include <oar/nn/init.hpp>  // under test

using oar::init_kind;
using oar::make_dims;
using oar::ParamSpec;

namespace {

constexpr double z = 6.0;

struct Moments {
    double mean = 0, var = 0, min = 0, max = 0;
};

template <class T>
Moments moments(const std::vector<T>& v) {
    Moments m;
    m.min = m.max = static_cast<double>(v[0]);
    double s = 0, s2 = 0;
    for (T x : v) {
        const double d = static_cast<double>(x);
        s += d;
        s2 += d * d;
        m.min = d < m.min ? d : m.min;
        m.max = d > m.max ? d : m.max;
    }
    const double n = static_cast<double>(v.size());
    m.mean = s / n;
    m.var = s2 / n - m.mean * m.mean;
    return m;
}

template <class T = float>
std::vector<T> init(const ParamSpec& spec, std::uint64_t seed, std::size_t index, T fill = T(123)) {
    std::vector<T> v(spec.dims.size(), fill);
    oar::initialize(spec, std::span<T>(v), oar::CounterRng{seed}, index);
    return v;
}

double correlation(const std::vector<float>& a, const std::vector<float>& b) {
    const Moments ma = moments(a), mb = moments(b);
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        s += (static_cast<double>(a[i]) - ma.mean) * (static_cast<double>(b[i]) - mb.mean);
    return s / static_cast<double>(a.size()) / std::sqrt(ma.var * mb.var);
}

}  // namespace

TEST_CASE("zeros initialisation overwrites every value with 0") {
    const ParamSpec bias{"bias", make_dims(37), init_kind::zeros, 5, 37};
    for (float v : init(bias, 1, 0, 9.5f)) CHECK(v == 0.0f);
    for (double v : init<double>(bias, 1, 0, -3.0)) CHECK(v == 0.0);
}

TEST_CASE("xavier_uniform draws from U(-a, a) with a = sqrt(6 / (fan_in + fan_out))") {
    for (const auto& fans : {std::pair<std::size_t, std::size_t>{980, 10}, {784, 512}, {3, 4000}}) {
        const std::size_t fan_in = fans.first, fan_out = fans.second;  // no structured binding: INFO captures
        const ParamSpec w{"weight", make_dims(fan_in, fan_out), init_kind::xavier_uniform, fan_in, fan_out};
        const auto v = init(w, 42, 3);
        const double a = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
        const double n = static_cast<double>(v.size());
        const Moments m = moments(v);
        INFO("fan_in ", fan_in, ", fan_out ", fan_out, ", a = ", a);
        CHECK(m.min >= -a * (1 + 1e-6));
        CHECK(m.max <= a * (1 + 1e-6));
        CHECK(m.min < -0.99 * a);  // the whole interval is used
        CHECK(m.max > 0.99 * a);
        // U(-a, a): variance a^2/3, fourth central moment a^4/5.
        CHECK(std::abs(m.mean) < z * std::sqrt(a * a / 3.0 / n));
        CHECK(std::abs(m.var - a * a / 3.0) < z * std::sqrt((a * a * a * a / 5.0 - a * a * a * a / 9.0) / n));
    }
}

TEST_CASE("init_scheme::torch draws weights and biases from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), whatever the kind") {
    for (const auto kind : {init_kind::kaiming_normal, init_kind::xavier_uniform, init_kind::zeros}) {
        const std::size_t fan_in = 20 * 5 * 5, count = 20000;
        const ParamSpec p{"weight", make_dims(count), kind, fan_in, 500};
        std::vector<float> v(count, 7.0f);
        oar::initialize(p, std::span<float>(v), oar::CounterRng{5}, 2, oar::init_scheme::torch);
        const double a = 1.0 / std::sqrt(static_cast<double>(fan_in));
        const double n = static_cast<double>(count);
        const Moments m = moments(v);
        CHECK(m.min >= -a * (1 + 1e-6));
        CHECK(m.max <= a * (1 + 1e-6));
        CHECK(m.min < -0.99 * a);
        CHECK(m.max > 0.99 * a);
        CHECK(std::abs(m.mean) < z * std::sqrt(a * a / 3.0 / n));
        CHECK(std::abs(m.var - a * a / 3.0) < z * std::sqrt((a * a * a * a / 5.0 - a * a * a * a / 9.0) / n));
    }
    // The default scheme is Paddle's: the same spec gives N(0, sqrt(2/fan_in)), not the uniform.
    const ParamSpec w{"weight", make_dims(20, 1, 5, 5), init_kind::kaiming_normal, 25, 500};
    std::vector<float> paddle(500), torch(500);
    oar::initialize(w, std::span<float>(paddle), oar::CounterRng{5}, 0);
    oar::initialize(w, std::span<float>(torch), oar::CounterRng{5}, 0, oar::init_scheme::torch);
    CHECK(paddle != torch);
    CHECK(moments(paddle).max > 0.2 + 1e-3);  // N(0, 0.283) exceeds torch's bound 1/sqrt(25) = 0.2 in 500 draws
}

TEST_CASE("kaiming_normal draws from N(0, sqrt(2 / fan_in))") {
    const std::size_t fan_in = 32 * 3 * 3;
    const ParamSpec w{"weight", make_dims(64, 32, 3, 3), init_kind::kaiming_normal, fan_in, 64 * 3 * 3};
    const auto v = init(w, 7, 0);
    const double sd = std::sqrt(2.0 / static_cast<double>(fan_in));
    const double n = static_cast<double>(v.size());
    const Moments m = moments(v);
    INFO("sd expected ", sd, ", got ", std::sqrt(m.var));
    CHECK(std::abs(m.mean) < z * sd / std::sqrt(n));
    CHECK(std::abs(m.var / (sd * sd) - 1.0) < z * std::sqrt(2.0 / n));
    // Normal, not uniform: about 4.55% of the draws lie beyond 2 sd (uniform would give 0).
    std::size_t beyond = 0;
    for (float x : v) beyond += std::abs(static_cast<double>(x)) > 2 * sd;
    const double p = 0.0455, frac = static_cast<double>(beyond) / n;
    CHECK(std::abs(frac - p) < z * std::sqrt(p * (1 - p) / n));
}

TEST_CASE("the course CNN's first Conv2D weight has std sqrt(2/25) within its sampling error") {
    const ParamSpec w{"weight", make_dims(20, 1, 5, 5), init_kind::kaiming_normal, 25, 500};
    const auto v = init(w, 0, 0);
    const Moments m = moments(v);
    const double sd = std::sqrt(2.0 / 25.0), n = 500;
    CHECK(std::abs(m.mean) < z * sd / std::sqrt(n));
    CHECK(std::abs(std::sqrt(m.var) / sd - 1.0) < z * std::sqrt(0.5 / n));  // se of a sample sd: sd / sqrt(2n)
}

TEST_CASE("initialisation is a pure function of seed and parameter index") {
    const ParamSpec x{"w", make_dims(100, 30), init_kind::xavier_uniform, 100, 30};
    const ParamSpec k{"w", make_dims(16, 3, 3, 3), init_kind::kaiming_normal, 27, 144};
    CHECK(init(x, 5, 2) == init(x, 5, 2));
    CHECK(init(k, 5, 2) == init(k, 5, 2));
    // Whatever was drawn before, and whatever the buffer held.
    (void)init(x, 5, 0);
    (void)init(k, 5, 1);
    CHECK(init(x, 5, 2, -1.0f) == init(x, 5, 2, 77.0f));
    // Element i depends on i only: a shorter tensor gets a prefix of a longer one's values.
    const ParamSpec shorter{"w", make_dims(100, 3), init_kind::xavier_uniform, 100, 30};  // same fans
    const auto a = init(x, 5, 2), b = init(shorter, 5, 2);
    CHECK(std::vector<float>(a.begin(), a.begin() + 300) == b);
}

TEST_CASE("different parameter indices and different seeds get independent values") {
    const ParamSpec x{"w", make_dims(200, 50), init_kind::xavier_uniform, 200, 50};
    const ParamSpec k{"w", make_dims(200, 50), init_kind::kaiming_normal, 200, 50};
    const double bound = z / std::sqrt(200.0 * 50.0);
    CHECK(init(x, 1, 0) != init(x, 1, 1));
    CHECK(init(x, 1, 0) != init(x, 2, 0));
    CHECK(std::abs(correlation(init(x, 1, 0), init(x, 1, 1))) < bound);
    CHECK(std::abs(correlation(init(x, 1, 0), init(x, 2, 0))) < bound);
    CHECK(std::abs(correlation(init(k, 1, 0), init(k, 1, 1))) < bound);
    CHECK(std::abs(correlation(init(k, 9, 4), init(k, 10, 4))) < bound);
    // A xavier and a kaiming tensor at the same index share a stream but are still not equal.
    CHECK(init(x, 1, 0) != init(k, 1, 0));
}

TEST_CASE("a double buffer receives the same draws as a float one, up to float rounding") {
    const ParamSpec k{"w", make_dims(10, 10), init_kind::kaiming_normal, 10, 10};
    const auto f = init<float>(k, 3, 1);
    const auto d = init<double>(k, 3, 1);
    for (std::size_t i = 0; i < f.size(); ++i) CHECK(static_cast<double>(f[i]) == doctest::Approx(d[i]).epsilon(1e-6));
}
