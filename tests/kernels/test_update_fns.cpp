// Tests of oar/kernels/update_fns.hpp: each optimizer functor applied to scalars, over several
// steps, against its formula written out here in long double (Paddle's update rules with L2
// decay g' = g + l2 p); Adam's folded lr_t / eps_t form against PyTorch's bias-corrected form.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/update_fns.hpp>  // the header under test

#include <cmath>     // std::sqrt, std::pow, std::abs
#include <cstddef>   // std::size_t
#include <iterator>  // std::size

namespace {

constexpr double grads[] = {0.3, -1.2, 0.05, 2.0, -0.7};

/// |got - want| within `rel` of the magnitude of want (or of 1 near zero).
bool close(long double got, long double want, long double rel) {
    return std::abs(got - want) <= rel * (std::abs(want) > 1 ? std::abs(want) : 1.0L);
}

}  // namespace

TEST_CASE("sgd_fn subtracts lr times the L2-decayed gradient") {
    const oar::sgd_fn f{0.1f, 0.01f};
    double p = 0.8, s1 = 123, s2 = 456;
    long double want = 0.8L;
    const long double lr = 0.1f, l2 = 0.01f;  // the functor's float hyperparameters
    for (double g : grads) {
        f(p, g, s1, s2);
        want -= lr * (g + l2 * want);
        CHECK(close(p, want, 1e-15L));
    }
    CHECK(s1 == 123);  // sgd keeps no state
    CHECK(s2 == 456);
}

TEST_CASE("momentum_fn keeps a velocity v = mu v + g' and steps by lr v") {
    const oar::momentum_fn f{0.05f, 0.001f, 0.9f, false};
    double p = -0.4, v = 0.0, unused = 7;
    long double wp = -0.4L, wv = 0;
    const long double lr = 0.05f, l2 = 0.001f, mu = 0.9f;
    for (double g : grads) {
        f(p, g, v, unused);
        const long double gd = g + l2 * wp;
        wv = mu * wv + gd;
        wp -= lr * wv;
        CHECK(close(v, wv, 1e-15L));
        CHECK(close(p, wp, 1e-15L));
    }
    CHECK(unused == 7);
}

TEST_CASE("momentum_fn with nesterov steps by lr (g' + mu v) with the new velocity") {
    const oar::momentum_fn f{0.05f, 0.001f, 0.9f, true};
    double p = -0.4, v = 0.1, unused = 0;
    long double wp = -0.4L, wv = 0.1L;
    const long double lr = 0.05f, l2 = 0.001f, mu = 0.9f;
    for (double g : grads) {
        f(p, g, v, unused);
        const long double gd = g + l2 * wp;
        wv = mu * wv + gd;
        wp -= lr * (gd + mu * wv);
        CHECK(close(v, wv, 1e-15L));
        CHECK(close(p, wp, 1e-15L));
    }
}

TEST_CASE("adagrad_fn accumulates squared gradients and divides by their root plus eps") {
    const oar::adagrad_fn f{0.1f, 0.002f, 1e-6f};
    double p = 1.5, m = 0.1, unused = 0;
    long double wp = 1.5L, wm = 0.1L;
    const long double lr = 0.1f, l2 = 0.002f, eps = 1e-6f;
    for (double g : grads) {
        f(p, g, m, unused);
        const long double gd = g + l2 * wp;
        wm += gd * gd;
        wp -= lr * gd / (std::sqrt(wm) + eps);
        CHECK(close(m, wm, 1e-15L));
        CHECK(close(p, wp, 1e-15L));
    }
}

TEST_CASE("adam_fn with lr_t and eps_t equals PyTorch's bias-corrected Adam step by step") {
    // the decay rates and L2 coefficient as the functor sees them (float); lr_t and eps_t are
    // computed here in long double and rounded to float once
    const long double lr = 1e-3L, b1 = 0.9f, b2 = 0.999f, eps = 1e-8L, l2 = 0.01f;
    double p = 0.25, m = 0, v = 0;
    long double wp = 0.25L, wm = 0, wv = 0;
    for (std::size_t t = 1; t <= std::size(grads); ++t) {
        const double g = grads[t - 1];
        // Paddle's folded form, as the optimizer would compute lr_t and eps_t for step t
        const long double c2 = std::sqrt(1 - std::pow(b2, static_cast<long double>(t)));
        const long double c1 = 1 - std::pow(b1, static_cast<long double>(t));
        const oar::adam_fn f{static_cast<float>(lr * c2 / c1), static_cast<float>(eps * c2), static_cast<float>(b1),
                             static_cast<float>(b2), static_cast<float>(l2)};
        f(p, g, m, v);
        // PyTorch's form with bias-corrected moments (L2 decay added to the gradient first)
        const long double gd = g + l2 * wp;
        wm = b1 * wm + (1 - b1) * gd;
        wv = b2 * wv + (1 - b2) * gd * gd;
        const long double mhat = wm / (1 - std::pow(b1, static_cast<long double>(t)));
        const long double vhat = wv / (1 - std::pow(b2, static_cast<long double>(t)));
        wp -= lr * mhat / (std::sqrt(vhat) + eps);
        INFO("t=", t);
        CHECK(close(m, wm, 1e-12L));  // p and wp differ by ~1e-10, and g' sees l2 p
        CHECK(close(v, wv, 1e-12L));
        CHECK(std::abs(p - wp) < 1e-9L);  // steps are ~1e-3; lr_t / eps_t carry float rounding (6e-8)
    }
    CHECK(std::abs(p - 0.25) > 1e-4);  // it moved
}

TEST_CASE("update functors run in float with float state") {
    const oar::adam_fn f{0.01f, 1e-8f, 0.9f, 0.99f, 0.0f};
    float p = 1.0f, m = 0.0f, v = 0.0f;
    f(p, 0.5f, m, v);
    CHECK(m == doctest::Approx(0.05));
    CHECK(v == doctest::Approx(0.0025).epsilon(1e-5));
    CHECK(p == doctest::Approx(1.0 - 0.01 * 0.05 / (0.05 + 1e-8)).epsilon(1e-6));
    const oar::sgd_fn s{0.5f, 0.0f};
    float q = 2.0f, unused = 0.0f;
    s(q, 1.0f, unused, unused);
    CHECK(q == 1.5f);
}

namespace {
// The update functors as one formula each, as they were written before the rules were split from
// the L2 decay (expr::decayed): the composition must give these bits.
struct old_sgd {
    float lr, l2;
    void operator()(float& p, float g, float&, float&) const { p -= lr * (g + l2 * p); }
};
struct old_momentum {
    float lr, l2, mu;
    bool nesterov;
    void operator()(float& p, float g, float& v, float&) const {
        const float gd = g + l2 * p;
        v = mu * v + gd;
        p -= lr * (nesterov ? gd + mu * v : v);
    }
};
struct old_adagrad {
    float lr, l2, eps;
    void operator()(float& p, float g, float& m, float&) const {
        const float gd = g + l2 * p;
        m += gd * gd;
        p -= lr * gd / (std::sqrt(m) + eps);
    }
};
struct old_adam {
    float lr_t, eps_t, b1, b2, l2;
    void operator()(float& p, float g, float& m, float& v) const {
        const float gd = g + l2 * p;
        m = b1 * m + (1.0f - b1) * gd;
        v = b2 * v + (1.0f - b2) * gd * gd;
        p -= lr_t * m / (std::sqrt(v) + eps_t);
    }
};
/// Runs both functors over 200 steps of pseudo-random gradients; true when every p, s1, s2 agrees in bits.
template <class New, class Old>
bool same_bits(const New& f, const Old& o) {
    float p1 = 0.7f, a1 = 0.1f, b1 = 0.2f, p2 = p1, a2 = a1, b2 = b1;
    unsigned s = 12345;
    for (int i = 0; i < 200; ++i) {
        s = s * 1664525u + 1013904223u;
        const float g = static_cast<float>(static_cast<int>(s >> 8) % 20001 - 10000) / 3000.0f;
        f(p1, g, a1, b1);
        o(p2, g, a2, b2);
        if (p1 != p2 || a1 != a2 || b1 != b2) return false;
    }
    return p1 != 0.7f;
}
}  // namespace

TEST_CASE("the update functors, rules composed with the L2 decay (expr::decayed), give the bits of the one-formula functors") {
    CHECK(same_bits(oar::sgd_fn{0.1f, 0.01f}, old_sgd{0.1f, 0.01f}));
    CHECK(same_bits(oar::momentum_fn{0.05f, 0.02f, 0.9f, false}, old_momentum{0.05f, 0.02f, 0.9f, false}));
    CHECK(same_bits(oar::momentum_fn{0.05f, 0.02f, 0.9f, true}, old_momentum{0.05f, 0.02f, 0.9f, true}));
    CHECK(same_bits(oar::adagrad_fn{0.1f, 0.001f, 1e-6f}, old_adagrad{0.1f, 0.001f, 1e-6f}));
    CHECK(same_bits(oar::adam_fn{0.001f, 1e-8f, 0.9f, 0.999f, 0.01f}, old_adam{0.001f, 1e-8f, 0.9f, 0.999f, 0.01f}));
    CHECK(!same_bits(oar::adam_fn{0.001f, 1e-8f, 0.9f, 0.999f, 0.01f}, old_adam{0.001f, 1e-8f, 0.9f, 0.999f, 0.02f}));
    // A rule alone, fed the decay by hand, is the composed functor.
    float p = 1.5f, v = 0.25f, d = 0;
    oar::momentum_rule{0.05f, 0.9f, false}(p, oar::expr::l2_decay{0.02f}(p, 0.3f), v, d);
    float q = 1.5f, w = 0.25f;
    oar::momentum_fn{0.05f, 0.02f, 0.9f, false}(q, 0.3f, w, d);
    CHECK(p == q);
    CHECK(v == w);
}
