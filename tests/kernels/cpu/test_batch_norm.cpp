// Tests of oar/kernels/cpu/batch_norm.hpp: the forward (training and evaluation), the backward and
// the fold on every ISA this machine has, against BatchNorm's formulas written out here in long
// double; a tensor large enough to be split by channel over the pool gives the bits of one thread;
// every channel has the bits it has alone (the loops walk blocks of channels sample by sample);
// the fold's scale and shift are the evaluation forward's; the fused BatchNorm + ReLU kernels give
// the bits of the unfused ones; the backward with the statistics the forward kept has the bits of the
// one that sums them again.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/core/thread_pool.hpp>        // set_num_threads, default_pool
#include <oar/kernels/cpu/batch_norm.hpp>  // the header under test
#include <oar/kernels/cpu/elementwise.hpp> // relu_fn: the unfused ReLU

#include <cmath>    // std::sqrt, std::abs
#include <cstddef>  // std::size_t
#include <vector>   // std::vector

#include "support/isa.hpp"     // oar_test::for_each_isa
#include "support/random.hpp"  // oar_test::uniform_vector

namespace {

/// Relative closeness for float (values rounded to float once or twice) or double.
template <class T>
bool bn_close(T got, long double want) {
    const long double tol = sizeof(T) == 4 ? 4e-6L : 1e-13L;
    return std::abs(static_cast<long double>(got) - want) <= tol * (1 + std::abs(want));
}

template <class T>
struct BnCase {
    std::size_t n, channels, inner;
    std::vector<T> x, dy, gamma, beta;
    BnCase(std::size_t n_, std::size_t c_, std::size_t inner_)
        : n(n_), channels(c_), inner(inner_), x(oar_test::uniform_vector<T>(n_ * c_ * inner_, 21, -2.0, 3.0)),
          dy(oar_test::uniform_vector<T>(n_ * c_ * inner_, 22)), gamma(oar_test::uniform_vector<T>(c_, 23, 0.5, 2.0)),
          beta(oar_test::uniform_vector<T>(c_, 24)) {}
    std::size_t at(std::size_t b, std::size_t c, std::size_t i) const { return (b * channels + c) * inner + i; }
};

/// Forward and backward of one case in training or evaluation against long double.
template <class T>
void check_bn(const BnCase<T>& k, bool train) {
    INFO("n=", k.n, " channels=", k.channels, " inner=", k.inner, " train=", train);
    const std::size_t count = k.x.size();
    const float momentum = 0.9f, eps = 1e-5f;
    std::vector<T> rm0(k.channels), rv0(k.channels);
    for (std::size_t c = 0; c < k.channels; ++c) {
        rm0[c] = T(0.1) * T(c);
        rv0[c] = T(1) + T(0.5) * T(c);
    }
    auto rm = rm0, rv = rv0;
    std::vector<T> y(count), dx(count), dg(k.channels, T(0.25)), db(k.channels, T(-0.25));
    oar::kernel<oar::op::batch_norm_forward, oar::basic_cpu<T>>::run(k.n, k.channels, k.inner, k.x.data(),
                                                                      k.gamma.data(), k.beta.data(), rm.data(),
                                                                      rv.data(), train, momentum, eps, y.data());
    oar::kernel<oar::op::batch_norm_backward, oar::basic_cpu<T>>::run(k.n, k.channels, k.inner, k.x.data(),
                                                                       k.gamma.data(), rm0.data(), rv0.data(), train,
                                                                       eps, k.dy.data(), dg.data(), db.data(),
                                                                       dx.data());
    const long double m = static_cast<long double>(k.n * k.inner);
    std::size_t bad = 0;
    for (std::size_t c = 0; c < k.channels; ++c) {
        long double mean = rm0[c], var = rv0[c];
        if (train) {
            long double s = 0, q = 0;
            for (std::size_t b = 0; b < k.n; ++b)
                for (std::size_t i = 0; i < k.inner; ++i) s += k.x[k.at(b, c, i)];
            mean = s / m;
            for (std::size_t b = 0; b < k.n; ++b)
                for (std::size_t i = 0; i < k.inner; ++i) q += (k.x[k.at(b, c, i)] - mean) * (k.x[k.at(b, c, i)] - mean);
            var = q / m;
            const long double mu = momentum;  // the float's value, as the kernel uses it
            bad += !bn_close(rm[c], mu * rm0[c] + (1 - mu) * mean);
            bad += !bn_close(rv[c], mu * rv0[c] + (1 - mu) * var * m / (m - 1));
        } else {
            bad += rm[c] != rm0[c] || rv[c] != rv0[c];
        }
        const long double invstd = 1 / std::sqrt(var + static_cast<long double>(eps));
        long double sdy = 0, sdyx = 0;
        for (std::size_t b = 0; b < k.n; ++b)
            for (std::size_t i = 0; i < k.inner; ++i) {
                const std::size_t j = k.at(b, c, i);
                const long double xhat = (k.x[j] - mean) * invstd;
                bad += !bn_close(y[j], xhat * k.gamma[c] + k.beta[c]);
                sdy += k.dy[j];
                sdyx += k.dy[j] * xhat;
            }
        bad += !bn_close(dg[c], 0.25L + sdyx) || !bn_close(db[c], -0.25L + sdy);
        for (std::size_t b = 0; b < k.n; ++b)
            for (std::size_t i = 0; i < k.inner; ++i) {
                const std::size_t j = k.at(b, c, i);
                const long double xhat = (k.x[j] - mean) * invstd, g = k.gamma[c] * invstd;
                const long double want = train ? g * (k.dy[j] - sdy / m - xhat * sdyx / m) : g * k.dy[j];
                // dx is a difference of terms: its error is relative to their size, not to dx's.
                const long double size = std::abs(g) * (std::abs(k.dy[j]) + std::abs(sdy / m) + std::abs(xhat * sdyx / m));
                bad += std::abs(dx[j] - want) > (sizeof(T) == 4 ? 4e-6L : 1e-13L) * (1 + size);
            }
    }
    CHECK(bad == 0);
}

template <class T>
void check_bn_all() {
    for (const bool train : {true, false}) {
        check_bn(BnCase<T>(3, 2, 5), train);      // one task: below batch_norm_parallel_min
        check_bn(BnCase<T>(4, 3, 1500), train);   // one task per channel on the pool
        check_bn(BnCase<T>(7, 4, 1), train);      // BatchNorm1D's (n, features)
    }
}

}  // namespace

TEST_CASE("BatchNorm's CPU forward and backward on every ISA match the formulas in long double") {
    oar_test::for_each_isa([] {
        check_bn_all<float>();
        check_bn_all<double>();
    });
}

TEST_CASE("BatchNorm's CPU kernels split by channel over the pool give the bits of one thread") {
    const std::size_t threads = oar::default_pool().size();
    const BnCase<float> k(4, 5, 1024);
    static_assert(4 * 5 * 1024 >= oar::cpu_detail::batch_norm_parallel_min);
    auto run = [&](std::size_t t) {
        oar::set_num_threads(t);
        std::vector<float> rm(5, 0.5f), rv(5, 2.0f), y(k.x.size()), dx(k.x.size()), dg(5), db(5);
        oar::kernel<oar::op::batch_norm_forward, oar::cpu>::run(k.n, k.channels, k.inner, k.x.data(), k.gamma.data(),
                                                                k.beta.data(), rm.data(), rv.data(), true, 0.9f, 1e-5f,
                                                                y.data());
        oar::kernel<oar::op::batch_norm_backward, oar::cpu>::run(k.n, k.channels, k.inner, k.x.data(),
                                                                 k.gamma.data(), rm.data(), rv.data(), true, 1e-5f,
                                                                 k.dy.data(), dg.data(), db.data(), dx.data());
        y.insert(y.end(), dx.begin(), dx.end());
        y.insert(y.end(), rm.begin(), rm.end());
        y.insert(y.end(), rv.begin(), rv.end());
        y.insert(y.end(), dg.begin(), dg.end());
        y.insert(y.end(), db.begin(), db.end());
        return y;
    };
    const auto one = run(1), two = run(2), three = run(3);
    oar::set_num_threads(threads);
    CHECK(one == two);
    CHECK(one == three);
}

namespace {

/// The outputs of a training or evaluation forward and backward (relu: the fused BatchNorm + ReLU
/// kernels; kept: the backward reads the forward's statistics) of channels [c, c + count) of k,
/// run on those channels alone when alone, else on the whole tensor (the others then dropped).
struct BnOutputs {
    std::vector<float> y, dx, dy, rm, rv, dg, db;
    std::vector<double> stats;
    bool operator==(const BnOutputs&) const = default;
};
BnOutputs run_bn(const BnCase<float>& k, std::size_t c, bool alone, bool train, bool relu, bool kept) {
    const std::size_t C = alone ? 1 : k.channels, c0 = alone ? 0 : c, n = k.n, inner = k.inner;
    std::vector<float> x(n * C * inner), dy(x.size()), gamma(C), beta(C), rm(C), rv(C);
    for (std::size_t j = 0; j < C; ++j) {
        const std::size_t from = alone ? c : j;
        gamma[j] = k.gamma[from];
        beta[j] = k.beta[from];
        rm[j] = 0.1f * static_cast<float>(from);
        rv[j] = 1.0f + 0.5f * static_cast<float>(from);
        for (std::size_t b = 0; b < n; ++b)
            for (std::size_t i = 0; i < inner; ++i) {
                x[(b * C + j) * inner + i] = k.x[k.at(b, from, i)];
                dy[(b * C + j) * inner + i] = k.dy[k.at(b, from, i)];
            }
    }
    const auto rm0 = rm, rv0 = rv;
    std::vector<float> y(x.size()), dx(x.size()), dg(C, 0.25f), db(C, -0.25f);
    std::vector<double> stats(2 * C, -1.0);
    double* st = train && kept ? stats.data() : nullptr;
    if (relu) {
        oar::kernel<oar::op::batch_norm_forward_relu, oar::cpu>::run(n, C, inner, x.data(), gamma.data(), beta.data(),
                                                                     rm.data(), rv.data(), train, 0.9f, 1e-5f, y.data(), st);
        oar::kernel<oar::op::batch_norm_backward_relu, oar::cpu>::run(n, C, inner, x.data(), gamma.data(), rm0.data(),
                                                                      rv0.data(), train, 1e-5f, y.data(), dy.data(),
                                                                      dg.data(), db.data(), dx.data(), st);
    } else {
        oar::kernel<oar::op::batch_norm_forward, oar::cpu>::run(n, C, inner, x.data(), gamma.data(), beta.data(),
                                                                rm.data(), rv.data(), train, 0.9f, 1e-5f, y.data(), st);
        oar::kernel<oar::op::batch_norm_backward, oar::cpu>::run(n, C, inner, x.data(), gamma.data(), rm0.data(),
                                                                 rv0.data(), train, 1e-5f, dy.data(), dg.data(),
                                                                 db.data(), dx.data(), st);
    }
    BnOutputs out;  // channel c0 of each
    for (std::size_t b = 0; b < n; ++b)
        for (std::size_t i = 0; i < inner; ++i) {
            const std::size_t at = (b * C + c0) * inner + i;
            out.y.push_back(y[at]);
            out.dx.push_back(dx[at]);
            out.dy.push_back(dy[at]);
        }
    out.rm = {rm[c0]};
    out.rv = {rv[c0]};
    out.dg = {dg[c0]};
    out.db = {db[c0]};
    out.stats = {stats[c0], stats[C + c0]};
    return out;
}

}  // namespace

TEST_CASE("BatchNorm's CPU kernels walk the samples over blocks of channels: each channel has the bits it has alone") {
    // The loops take a block of channels' rows of one sample before the next sample's; every
    // channel's sums must still see its own values in the order of a tensor of that channel alone.
    // 70 channels: a block of 64 and one of 6; 130 of BatchNorm1D's rows: three blocks; 3 channels
    // of 1030: split over the pool.
    const std::size_t threads = oar::default_pool().size();
    oar_test::for_each_isa([] {
        for (const std::size_t t : {1, 2}) {
            oar::set_num_threads(t);
            for (const auto& k : {BnCase<float>(5, 70, 7), BnCase<float>(3, 130, 1), BnCase<float>(4, 3, 1030)})
                for (const bool train : {true, false})
                    for (const bool relu : {false, true})
                        for (const bool kept : {false, true}) {
                            std::size_t bad = 0;
                            for (std::size_t c = 0; c < k.channels; ++c)
                                bad += !(run_bn(k, c, false, train, relu, kept) == run_bn(k, c, true, train, relu, kept));
                            INFO("n=" << k.n << " channels=" << k.channels << " inner=" << k.inner << " threads=" << t
                                      << " train=" << train << " relu=" << relu << " kept=" << kept);
                            CHECK(bad == 0);
                        }
        }
    });
    oar::set_num_threads(threads);
}

TEST_CASE("BatchNorm's fold gives the evaluation forward's scale and shift on every ISA") {
    oar_test::for_each_isa([] {
        constexpr std::size_t channels = 3;
        const auto gamma = oar_test::uniform_vector<float>(channels, 31, 0.5, 2.0);
        const auto beta = oar_test::uniform_vector<float>(channels, 32);
        std::vector<float> rm{0.1f, -0.3f, 0.7f}, rv{1.0f, 0.25f, 3.0f}, scale(channels), shift(channels);
        oar::kernel<oar::op::batch_norm_fold, oar::cpu>::run(channels, gamma.data(), beta.data(), rm.data(), rv.data(),
                                                             1e-5f, scale.data(), shift.data());
        // x = 0 gives the shift and x = 1 the rounded scale + shift, with or without a fused multiply-add.
        std::vector<float> x{0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 1.0f}, y(6);
        oar::kernel<oar::op::batch_norm_forward, oar::cpu>::run(1, channels, 2, x.data(), gamma.data(), beta.data(),
                                                                rm.data(), rv.data(), false, 0.9f, 1e-5f, y.data());
        for (std::size_t c = 0; c < channels; ++c) {
            INFO("channel ", c);
            CHECK(y[2 * c] == shift[c]);
            CHECK(y[2 * c + 1] == scale[c] + shift[c]);
        }
    });
}

namespace {

/// The fused BatchNorm + ReLU kernels against op::batch_norm_forward / _backward with relu_fn's
/// forward and backward as separate passes: every output bit-equal (y, the running statistics, dx,
/// dgamma, dbeta, and dy masked in place).
template <class T>
void check_bn_relu(const BnCase<T>& k, bool train, std::size_t threads) {
    INFO("n=", k.n, " channels=", k.channels, " inner=", k.inner, " train=", train, " threads=", threads);
    oar::set_num_threads(threads);
    using cpu = oar::basic_cpu<T>;
    const std::size_t count = k.x.size();
    const oar::relu_fn relu{};
    std::vector<T> rm(k.channels, T(0.5)), rv(k.channels, T(2)), y(count), g(count), dx(count);
    std::vector<T> dg(k.channels, T(0.25)), db(k.channels, T(-0.25));
    auto frm = rm, frv = rv, fy = y, fdx = dx, fdg = dg, fdb = db, fdy = k.dy;
    oar::kernel<oar::op::batch_norm_forward, cpu>::run(k.n, k.channels, k.inner, k.x.data(), k.gamma.data(), k.beta.data(),
                                                       rm.data(), rv.data(), train, 0.9f, 1e-5f, y.data());
    for (std::size_t i = 0; i < count; ++i) y[i] = relu(y[i]);
    for (std::size_t i = 0; i < count; ++i) g[i] = relu.backward(y[i], y[i], k.dy[i]);
    oar::kernel<oar::op::batch_norm_backward, cpu>::run(k.n, k.channels, k.inner, k.x.data(), k.gamma.data(), rm.data(),
                                                        rv.data(), train, 1e-5f, g.data(), dg.data(), db.data(),
                                                        dx.data());
    oar::kernel<oar::op::batch_norm_forward_relu, cpu>::run(k.n, k.channels, k.inner, k.x.data(), k.gamma.data(),
                                                            k.beta.data(), frm.data(), frv.data(), train, 0.9f, 1e-5f,
                                                            fy.data());
    oar::kernel<oar::op::batch_norm_backward_relu, cpu>::run(k.n, k.channels, k.inner, k.x.data(), k.gamma.data(),
                                                             frm.data(), frv.data(), train, 1e-5f, fy.data(), fdy.data(),
                                                             fdg.data(), fdb.data(), fdx.data());
    std::size_t zeros = 0;
    for (const T v : y) zeros += v == T(0);
    CHECK(zeros > count / 5);  // the ReLU masks a part of every case
    CHECK(zeros < count);
    CHECK(fy == y);
    CHECK(frm == rm);
    CHECK(frv == rv);
    CHECK(fdy == g);
    CHECK(fdx == dx);
    CHECK(fdg == dg);
    CHECK(fdb == db);
}

}  // namespace

TEST_CASE("BatchNorm + ReLU fused on every ISA and 1, 2, 3 threads: the bits of the two kernels one after the other") {
    const std::size_t threads = oar::default_pool().size();
    oar_test::for_each_isa([] {
        for (const std::size_t t : {1, 2, 3})
            for (const bool train : {true, false}) {
                check_bn_relu(BnCase<float>(3, 2, 5), train, t);
                check_bn_relu(BnCase<float>(4, 5, 1030), train, t);  // split by channel over the pool
                check_bn_relu(BnCase<double>(7, 4, 1), train, t);
                check_bn_relu(BnCase<double>(4, 5, 1030), train, t);
            }
    });
    oar::set_num_threads(threads);
}

namespace {

/// The backward with the statistics the training forward kept (op::batch_norm_forward's and
/// _forward_relu's stats) against the backward that sums them again: dx, dgamma, dbeta and the
/// masked dy bit-equal; the kept statistics are the mean and biased variance of each channel.
template <class T>
void check_bn_kept(const BnCase<T>& k, bool relu, std::size_t threads) {
    INFO("n=", k.n, " channels=", k.channels, " inner=", k.inner, " relu=", relu, " threads=", threads);
    oar::set_num_threads(threads);
    using cpu = oar::basic_cpu<T>;
    const std::size_t count = k.x.size();
    std::vector<T> rm(k.channels, T(0.5)), rv(k.channels, T(2)), y(count), dx(count), kdx(count);
    std::vector<T> dg(k.channels, T(0.25)), db(k.channels, T(-0.25)), kdg = dg, kdb = db;
    std::vector<double> stats(2 * k.channels, -1.0);
    auto dy = k.dy, kdy = k.dy;
    if (relu)
        oar::kernel<oar::op::batch_norm_forward_relu, cpu>::run(k.n, k.channels, k.inner, k.x.data(), k.gamma.data(),
                                                                k.beta.data(), rm.data(), rv.data(), true, 0.9f, 1e-5f,
                                                                y.data(), stats.data());
    else
        oar::kernel<oar::op::batch_norm_forward, cpu>::run(k.n, k.channels, k.inner, k.x.data(), k.gamma.data(),
                                                           k.beta.data(), rm.data(), rv.data(), true, 0.9f, 1e-5f,
                                                           y.data(), stats.data());
    const long double m = static_cast<long double>(k.n * k.inner);
    for (std::size_t c = 0; c < k.channels; ++c) {
        long double s = 0, q = 0;
        for (std::size_t b = 0; b < k.n; ++b)
            for (std::size_t i = 0; i < k.inner; ++i) s += k.x[k.at(b, c, i)];
        const long double mean = s / m;
        for (std::size_t b = 0; b < k.n; ++b)
            for (std::size_t i = 0; i < k.inner; ++i) q += (k.x[k.at(b, c, i)] - mean) * (k.x[k.at(b, c, i)] - mean);
        CHECK(bn_close(stats[c], mean));
        CHECK(bn_close(stats[k.channels + c], q / m));
    }
    if (relu) {
        oar::kernel<oar::op::batch_norm_backward_relu, cpu>::run(k.n, k.channels, k.inner, k.x.data(), k.gamma.data(),
                                                                 rm.data(), rv.data(), true, 1e-5f, y.data(), dy.data(),
                                                                 dg.data(), db.data(), dx.data());
        oar::kernel<oar::op::batch_norm_backward_relu, cpu>::run(k.n, k.channels, k.inner, k.x.data(), k.gamma.data(),
                                                                 rm.data(), rv.data(), true, 1e-5f, y.data(), kdy.data(),
                                                                 kdg.data(), kdb.data(), kdx.data(), stats.data());
    } else {
        oar::kernel<oar::op::batch_norm_backward, cpu>::run(k.n, k.channels, k.inner, k.x.data(), k.gamma.data(),
                                                            rm.data(), rv.data(), true, 1e-5f, dy.data(), dg.data(),
                                                            db.data(), dx.data());
        oar::kernel<oar::op::batch_norm_backward, cpu>::run(k.n, k.channels, k.inner, k.x.data(), k.gamma.data(),
                                                            rm.data(), rv.data(), true, 1e-5f, kdy.data(), kdg.data(),
                                                            kdb.data(), kdx.data(), stats.data());
    }
    CHECK(kdx == dx);
    CHECK(kdg == dg);
    CHECK(kdb == db);
    CHECK(kdy == dy);
}

}  // namespace

TEST_CASE("BatchNorm backward with the forward's kept statistics, every ISA and 1, 2, 3 threads: the bits of summing them again") {
    const std::size_t threads = oar::default_pool().size();
    oar_test::for_each_isa([] {
        for (const std::size_t t : {1, 2, 3})
            for (const bool relu : {false, true}) {
                check_bn_kept(BnCase<float>(3, 2, 5), relu, t);
                check_bn_kept(BnCase<float>(4, 5, 1030), relu, t);  // split by channel over the pool
                check_bn_kept(BnCase<double>(7, 4, 1), relu, t);
                check_bn_kept(BnCase<double>(4, 5, 1030), relu, t);
            }
    });
    oar::set_num_threads(threads);
}
