// Tests of oar/kernels/cpu/update.hpp: the fused update loop with each functor over a flat buffer
// (length not a multiple of any vector width), against the update formulas written out here in
// long double, with the state buffers the functor uses and null for those it does not, on every
// ISA the CPU has; Adam's vector body gives every value the bits of its formula evaluated one
// rounded operation at a time, on every ISA and wherever a run of values starts.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cpu/update.hpp>  // the header under test

#include <cmath>    // std::sqrt, std::abs
#include <cstddef>  // std::size_t
#include <iterator> // std::size
#include <vector>   // std::vector

#include "support/isa.hpp"     // oar_test::for_each_isa: every ISA the CPU has
#include "support/random.hpp"  // oar_test::uniform_vector: seeded inputs in [lo, hi)

namespace {

using oar_test::for_each_isa;
using oar_test::uniform_vector;

constexpr std::size_t n = 37;

/// Relative closeness for the float backend (one rounding per operation) or the double one.
template <class T>
bool close(T got, long double want) {
    const long double tol = sizeof(T) == 4 ? 1e-6L : 1e-14L;
    return std::abs(static_cast<long double>(got) - want) <= tol * (1 + std::abs(want));
}

template <class T>
void check_sgd() {
    const oar::sgd_fn f{0.1f, 0.01f};
    auto p = uniform_vector<T>(n, 1);
    const auto p0 = p, g = uniform_vector<T>(n, 2);
    oar::kernel<oar::op::fused_update, oar::basic_cpu<T>>::run(f, n, p.data(), g.data(), nullptr, nullptr);
    const long double lr = 0.1f, l2 = 0.01f;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad += !close(p[i], p0[i] - lr * (g[i] + l2 * static_cast<long double>(p0[i])));
    CHECK(bad == 0);
}

template <class T>
void check_momentum(bool nesterov) {
    INFO("nesterov=", nesterov);
    const oar::momentum_fn f{0.05f, 0.001f, 0.9f, nesterov};
    auto p = uniform_vector<T>(n, 3), v = uniform_vector<T>(n, 4);
    const auto p0 = p, v0 = v, g = uniform_vector<T>(n, 5);
    oar::kernel<oar::op::fused_update, oar::basic_cpu<T>>::run(f, n, p.data(), g.data(), v.data(), nullptr);
    const long double lr = 0.05f, l2 = 0.001f, mu = 0.9f;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const long double gd = g[i] + l2 * p0[i];
        const long double nv = mu * v0[i] + gd;
        const long double np = p0[i] - lr * (nesterov ? gd + mu * nv : nv);
        bad += !close(v[i], nv) || !close(p[i], np);
    }
    CHECK(bad == 0);
}

template <class T>
void check_adagrad() {
    const oar::adagrad_fn f{0.1f, 0.002f, 1e-6f};
    auto p = uniform_vector<T>(n, 6), m = uniform_vector<T>(n, 7, 0.0, 2.0);
    const auto p0 = p, m0 = m, g = uniform_vector<T>(n, 8);
    oar::kernel<oar::op::fused_update, oar::basic_cpu<T>>::run(f, n, p.data(), g.data(), m.data(), nullptr);
    const long double lr = 0.1f, l2 = 0.002f, eps = 1e-6f;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const long double gd = g[i] + l2 * p0[i];
        const long double nm = m0[i] + gd * gd;
        bad += !close(m[i], nm) || !close(p[i], p0[i] - lr * gd / (std::sqrt(nm) + eps));
    }
    CHECK(bad == 0);
}

template <class T>
void check_adam() {
    const oar::adam_fn f{0.01f, 1e-7f, 0.9f, 0.999f, 0.0005f};
    auto p = uniform_vector<T>(n, 9), m = uniform_vector<T>(n, 10), v = uniform_vector<T>(n, 11, 0.0, 1.0);
    const auto p0 = p, m0 = m, v0 = v, g = uniform_vector<T>(n, 12);
    oar::kernel<oar::op::fused_update, oar::basic_cpu<T>>::run(f, n, p.data(), g.data(), m.data(), v.data());
    const long double lr_t = 0.01f, eps_t = 1e-7f, b1 = 0.9f, b2 = 0.999f, l2 = 0.0005f;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const long double gd = g[i] + l2 * p0[i];
        const long double nm = b1 * m0[i] + (1 - b1) * gd;
        const long double nv = b2 * v0[i] + (1 - b2) * gd * gd;
        bad += !close(m[i], nm) || !close(v[i], nv) || !close(p[i], p0[i] - lr_t * nm / (std::sqrt(nv) + eps_t));
    }
    CHECK(bad == 0);
}

/// Records which state slots the loop hands it: a functor may write its unused slots freely.
struct probe_fn {
    template <class T>
    void operator()(T& p, T g, T& s1, T& s2) const {
        p += g;
        s1 += 1;
        s2 += 2;
    }
};

}  // namespace

TEST_CASE("fused update with sgd_fn and null state matches p -= lr (g + l2 p)") {
    for_each_isa([] {
        check_sgd<float>();
        check_sgd<double>();
    });
}

TEST_CASE("fused update with momentum_fn, plain and nesterov, matches the velocity formulas") {
    for_each_isa([] {
        check_momentum<float>(false);
        check_momentum<float>(true);
        check_momentum<double>(false);
        check_momentum<double>(true);
    });
}

TEST_CASE("fused update with adagrad_fn and a null second state matches the adagrad formula") {
    for_each_isa([] {
        check_adagrad<float>();
        check_adagrad<double>();
    });
}

TEST_CASE("fused update with adam_fn matches the folded Adam formula on every element") {
    for_each_isa([] {
        check_adam<float>();
        check_adam<double>();
    });
}

namespace {

/// Adam as adam_rule writes it on g + l2 p, every operation rounded to T on its own (volatile: no
/// FMA contraction here whatever this file's flags): the bits the vector body must give.
template <class T>
void adam_unfused(const oar::adam_fn& f, T& p, T g, T& m, T& v) {
    volatile T l2p = T(f.l2) * p;
    const T gd = g + l2p;
    volatile T b1m = T(f.b1) * m, c1g = (T(1) - T(f.b1)) * gd;
    m = b1m + c1g;
    volatile T b2v = T(f.b2) * v, c2gg = (T(1) - T(f.b2)) * gd * gd;
    v = b2v + c2gg;
    volatile T root = std::sqrt(v);
    p -= T(f.lr_t) * m / (root + T(f.eps_t));
}

/// Adam over one buffer of 1003 values (no multiple of any width), whole and cut into runs at
/// odd offsets, on every ISA: each value's bits are those of adam_unfused, wherever its run starts
/// and whichever ISA runs it (a parameter server's slice against the trainers' whole buffer).
template <class T>
void check_adam_bits() {
    const std::size_t len = 1003;
    const oar::adam_fn f{0.01f, 1e-7f, 0.9f, 0.999f, 0.0005f};
    const auto p0 = uniform_vector<T>(len, 21), m0 = uniform_vector<T>(len, 22, -0.1, 0.1),
               v0 = uniform_vector<T>(len, 23, 0.0, 0.01), g = uniform_vector<T>(len, 24);
    auto pw = p0, mw = m0, vw = v0;
    for (std::size_t i = 0; i < len; ++i) adam_unfused<T>(f, pw[i], g[i], mw[i], vw[i]);
    const std::size_t cuts[] = {0, 1, 4, 21, 100, 517, 518, 999, len};
    using K = oar::kernel<oar::op::fused_update, oar::basic_cpu<T>>;
    for_each_isa([&] {
        auto p = p0, m = m0, v = v0;
        K::run(f, len, p.data(), g.data(), m.data(), v.data());
        std::size_t bad = 0;
        for (std::size_t i = 0; i < len; ++i) bad += p[i] != pw[i] || m[i] != mw[i] || v[i] != vw[i];
        CHECK_MESSAGE(bad == 0, "whole buffer: values with other bits than the unfused formula");
        p = p0, m = m0, v = v0;
        for (std::size_t c = 0; c + 1 < std::size(cuts); ++c)
            K::run(f, cuts[c + 1] - cuts[c], p.data() + cuts[c], g.data() + cuts[c], m.data() + cuts[c],
                   v.data() + cuts[c]);
        bad = 0;
        for (std::size_t i = 0; i < len; ++i) bad += p[i] != pw[i] || m[i] != mw[i] || v[i] != vw[i];
        CHECK_MESSAGE(bad == 0, "runs from odd offsets: values with other bits than the whole buffer's");
    });
}

}  // namespace

TEST_CASE("fused Adam: the same bits on every ISA and wherever a run starts (each operation rounded, no FMA)") {
    check_adam_bits<float>();
    check_adam_bits<double>();
}

TEST_CASE("fused update hands each element its own state slots, and scratch ones for null buffers") {
    std::vector<float> p(n, 0.0f), g(n), s1(n, 10.0f), s2(n, 20.0f);
    for (std::size_t i = 0; i < n; ++i) g[i] = static_cast<float>(i);
    using K = oar::kernel<oar::op::fused_update, oar::cpu>;
    K::run(probe_fn{}, n, p.data(), g.data(), s1.data(), s2.data());
    for (std::size_t i = 0; i < n; ++i) {
        CHECK(p[i] == static_cast<float>(i));
        CHECK(s1[i] == 11.0f);
        CHECK(s2[i] == 22.0f);
    }
    K::run(probe_fn{}, n, p.data(), g.data(), s1.data(), nullptr);  // s2 absent: s1 still per element
    for (std::size_t i = 0; i < n; ++i) CHECK(s1[i] == 12.0f);
    K::run(probe_fn{}, n, p.data(), g.data(), nullptr, nullptr);  // no state at all: p still updated
    for (std::size_t i = 0; i < n; ++i) CHECK(p[i] == 3.0f * static_cast<float>(i));
    K::run(probe_fn{}, 0, nullptr, nullptr, nullptr, nullptr);  // n = 0 touches nothing
}
