// Tests of oar/core/precision.hpp: Network<..., cpu, bf16_mixed> against Network<..., cpu, fp32>
// and against double-precision references.
// - Linear and Conv2D under bf16_mixed compute the exact products of the bf16-rounded operands
//   (weights, input, output gradient) summed in fp32: forward, input gradient and weight gradient
//   are within (K + 2) 2^-24 sum|a_bf||b_bf| of the double sum of the rounded operands, K the length
//   of the sum (a bound that rounding only one operand, or none, would break).
// - The same values against the fp32 network: within k 2^-8 sum|a||b| with k = 1.02 (each operand
//   within 2^-9 of itself after rounding, each product within 2^-8 + 2^-18, plus the fp32 sums).
// - The course CNN end to end (4 layers of products; the loss, softmax and bias in fp32): logits
//   within k 2^-8 max|logit| and every parameter gradient within k 2^-8 ||g||_2 (L2 over the
//   tensor) of fp32's, k measured on these inputs (logits 1.50, gradients 15.7 for the first
//   convolution's weight, 7.3 to 10.0 for the other tensors) and checked at 2 and 20. The gradients'
//   k is large because a few ReLU signs and max-pooling choices flip when the values move by 2^-8,
//   moving whole terms of the gradient sums; the per-layer checks above bound the arithmetic itself.
// - A network that learns; checkpoints interchange between the policies; the same bits on 1, 2
//   and 3 threads; the AVX512-BF16 and AMX routes where the CPU has them (skipped, naming the
//   feature, elsewhere).
// - Elementwise tails run in the producer's epilogue (Linear + Sigmoid, Conv2D + Sigmoid, Conv2D +
//   an eval-mode BatchNorm2D folded): the bits of the layers one by one, whose products are the
//   rounded operands' (the gradient after the tail's backward included); fp32 fails that check.
// - bf16_mixed equals the fp32 network with rounded weights on the rounded input and output
//   gradient, bit for bit, also for a batch large enough that the forwards round it in chunks.
#include <oar/core/precision.hpp>  // the header under test

#include <doctest/doctest.h>
#include <oar/core/bf16.hpp>              // round_to_bf16: the references' operands
#include <oar/core/cpu_isa.hpp>           // cpu_supports, set_cpu_isa: the bf16 hardware routes
#include <oar/core/thread_pool.hpp>       // set_num_threads: results must not depend on it
#include <oar/kernels/cpu/gemm_bf16.hpp>  // precision_gemm<bf16_mixed>
#include <oar/layers/activation.hpp>
#include <oar/layers/batch_norm.hpp>
#include <oar/layers/conv2d.hpp>
#include <oar/layers/flatten.hpp>
#include <oar/layers/linear.hpp>
#include <oar/loss/cross_entropy.hpp>
#include <oar/models/course.hpp>   // course::CNN, course::Image
#include <oar/nn/network.hpp>
#include <oar/optim/adam.hpp>
#include <oar/train/checkpoint.hpp>  // save_weights, load_weights

#include <algorithm>   // std::max
#include <cmath>       // std::fabs, std::ldexp, std::sqrt
#include <cstdint>     // std::int64_t
#include <cstdlib>     // std::getenv, setenv, unsetenv: OAR_BF16_CONV_UNITS
#include <cstring>     // std::memcmp
#include <filesystem>  // std::filesystem::temp_directory_path
#include <span>        // std::span
#include <string>      // std::string
#include <vector>      // std::vector

#include "support/eval_reuse.hpp"  // oar_test::eval_forwards_match_train
#include "support/random.hpp"  // oar_test::random_vector
#include "support/skip.hpp"    // oar_test::skip: a route this CPU lacks

namespace precision_test {

using namespace oar;

constexpr double two_m8 = 1.0 / 256, two_m24 = 1.0 / 16777216;
inline double rb(float v) { return round_to_bf16(v); }

/// Largest |got - ref| / scale over a comparison, and whether every entry was inside its bound.
struct Gauge {
    double worst = 0;
    bool inside = true;
    void add(double got, double ref, double bound, double scale) {
        const double d = std::fabs(got - ref);
        if (!(d <= bound)) inside = false;
        if (scale > 0) worst = std::max(worst, d / scale);
    }
};

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <class Net>
basic_tensor_view<const float> view(const std::vector<float>& v, std::size_t batch) {
    return {v.data(), batch, Net::input_shape::dims};
}

constexpr std::size_t LI = 40, LO = 12, LB = 7;
using LinSeq = Sequential<Linear<LI, LO>>;
template <class P>
using LinNet = Network<LinSeq, Shape<LI>, cpu, P>;

/// Forward and backward of the one-Linear network of policy P on x and dy: y, dW and dx.
template <class P>
struct LinearRun {
    std::vector<float> y, dw, dx;
    LinearRun(LinNet<P>& net, const std::vector<float>& x, const std::vector<float>& dy) {
        net.clear_grad();
        auto out = net.forward(view<LinNet<P>>(x, LB));
        y.assign(out.data(), out.data() + out.size());
        dx.assign(LB * LI, 0.0f);
        net.backward({dy.data(), LB, make_dims(LO)}, {dx.data(), LB, make_dims(LI)});
        auto g = net.parameters().grads();
        dw.assign(g.begin(), g.begin() + LI * LO);
    }
};

/// Whether y, dW and dx of a bf16_mixed run are within (K + 2) 2^-24 sum|a_bf||b_bf| of the double
/// sums of the rounded operands' products (W, b: the network's parameters).
/// R: a LinearRun, or any run with the same y, dw and dx.
template <class R>
bool rounded_products(const R& r, const std::vector<float>& x, const std::vector<float>& dy, std::span<const float> p) {
    const float* W = p.data();
    const float* b = p.data() + Linear<LI, LO>::bias_offset;
    Gauge g;
    for (std::size_t i = 0; i < LB; ++i)
        for (std::size_t j = 0; j < LO; ++j) {
            double ref = b[j], abs = std::fabs(b[j]);
            for (std::size_t k = 0; k < LI; ++k) {
                ref += rb(x[i * LI + k]) * rb(W[k * LO + j]);
                abs += std::fabs(rb(x[i * LI + k]) * rb(W[k * LO + j]));
            }
            g.add(r.y[i * LO + j], ref, (LI + 2) * two_m24 * abs, 1);
        }
    for (std::size_t k = 0; k < LI; ++k)
        for (std::size_t j = 0; j < LO; ++j) {  // dW = x^T dy
            double ref = 0, abs = 0;
            for (std::size_t i = 0; i < LB; ++i) {
                ref += rb(x[i * LI + k]) * rb(dy[i * LO + j]);
                abs += std::fabs(rb(x[i * LI + k]) * rb(dy[i * LO + j]));
            }
            g.add(r.dw[k * LO + j], ref, (LB + 2) * two_m24 * abs, 1);
        }
    for (std::size_t i = 0; i < LB; ++i)
        for (std::size_t k = 0; k < LI; ++k) {  // dx = dy W^T
            double ref = 0, abs = 0;
            for (std::size_t j = 0; j < LO; ++j) {
                ref += rb(dy[i * LO + j]) * rb(W[k * LO + j]);
                abs += std::fabs(rb(dy[i * LO + j]) * rb(W[k * LO + j]));
            }
            g.add(r.dx[i * LI + k], ref, (LO + 2) * two_m24 * abs, 1);
        }
    return g.inside;
}

}  // namespace precision_test

using namespace precision_test;

TEST_CASE("bf16_mixed Linear: fp32 sums of the bf16-rounded weights, inputs and output gradients") {
    LinNet<fp32> f(5);
    LinNet<bf16_mixed> h(5);
    static_assert(std::is_same_v<LinNet<bf16_mixed>::precision, bf16_mixed>);
    static_assert(std::is_same_v<Network<LinSeq, Shape<LI>>::precision, fp32>);  // the default
    REQUIRE(same_bits(f.parameters().values(), h.parameters().values()));  // one initialisation
    const auto x = oar_test::random_vector<float>(LB * LI, 11);
    const auto dy = oar_test::random_vector<float>(LB * LO, 12);
    const auto p = f.parameters().values();
    const float* W = p.data();  // (LI, LO)
    const LinearRun<fp32> rf(f, x, dy);
    const LinearRun<bf16_mixed> rh(h, x, dy);
    Gauge k_y, k_dw, k_dx;
    for (std::size_t i = 0; i < LB; ++i)
        for (std::size_t j = 0; j < LO; ++j) {
            double abs = 0;
            for (std::size_t k = 0; k < LI; ++k) abs += std::fabs(double(x[i * LI + k]) * W[k * LO + j]);
            k_y.add(rh.y[i * LO + j], rf.y[i * LO + j], 1.02 * two_m8 * abs, two_m8 * abs);
        }
    for (std::size_t k = 0; k < LI; ++k)
        for (std::size_t j = 0; j < LO; ++j) {  // dW = x^T dy
            double abs = 0;
            for (std::size_t i = 0; i < LB; ++i) abs += std::fabs(double(x[i * LI + k]) * dy[i * LO + j]);
            k_dw.add(rh.dw[k * LO + j], rf.dw[k * LO + j], 1.02 * two_m8 * abs, two_m8 * abs);
        }
    for (std::size_t i = 0; i < LB; ++i)
        for (std::size_t k = 0; k < LI; ++k) {  // dx = dy W^T
            double abs = 0;
            for (std::size_t j = 0; j < LO; ++j) abs += std::fabs(double(dy[i * LO + j]) * W[k * LO + j]);
            k_dx.add(rh.dx[i * LI + k], rf.dx[i * LI + k], 1.02 * two_m8 * abs, two_m8 * abs);
        }
    CHECK(rounded_products(rh, x, dy, p));
    CHECK(k_y.inside);
    CHECK(k_dw.inside);
    CHECK(k_dx.inside);
    CHECK(k_y.worst > 0.05);  // the products did change: the check is not of fp32 against itself
    MESSAGE("Linear k (|bf16 - fp32| / 2^-8 sum|a||b|): y " << k_y.worst << ", dW " << k_dw.worst << ", dx "
                                                            << k_dx.worst);
}

namespace precision_test {
/// The Conv2D checks of the test case below on the active ISA's route, for C input channels.
template <std::size_t C>
void check_conv2d_bf16_mixed() {
    constexpr std::size_t O = 8, H = 6, N = 3, KK = 3;
    using Seq = Sequential<Conv2D<C, O, KK, 1, 1>, Flatten>;
    using SeqRelu = Sequential<Conv2D<C, O, KK, 1, 1>, ReLU, Flatten>;
    Network<Seq, Shape<C, H, H>, cpu, fp32> f(7);
    Network<Seq, Shape<C, H, H>, cpu, bf16_mixed> h(7);
    Network<SeqRelu, Shape<C, H, H>, cpu, bf16_mixed> hr(7);
    static_assert(decltype(hr)::fuses_relu(0));
    const auto x = oar_test::random_vector<float>(N * C * H * H, 21);
    const auto dy = oar_test::random_vector<float>(N * O * H * H, 22);
    const auto p = f.parameters().values();
    const float* w = p.data();  // (O, C, 3, 3)
    constexpr std::size_t bo = Conv2D<C, O, KK, 1, 1>::bias_offset;  // the bias starts on a cache line
    const float* b = w + bo;
    auto run = [&](auto& net, std::vector<float>& y, std::vector<float>& dw, std::vector<float>& dx) {
        net.clear_grad();
        auto out = net.forward(view<std::remove_reference_t<decltype(net)>>(x, N));
        y.assign(out.data(), out.data() + out.size());
        dx.assign(x.size(), 0.0f);
        net.backward({dy.data(), N, make_dims(O * H * H)}, {dx.data(), N, make_dims(C, H, H)});
        auto g = net.parameters().grads();  // the weight's gradient, then the bias's
        dw.assign(g.begin(), g.begin() + O * C * KK * KK);
        dw.insert(dw.end(), g.begin() + bo, g.begin() + bo + O);
    };
    std::vector<float> yf, dwf, dxf, yh, dwh, dxh, yr, dwr, dxr;
    run(f, yf, dwf, dxf);
    run(h, yh, dwh, dxh);
    run(hr, yr, dwr, dxr);
    // References in double: the sums of rounded products, their absolute sums, and the unrounded ones.
    const std::size_t ny = N * O * H * H, nw = O * C * KK * KK, nx = N * C * H * H;
    std::vector<double> y_r(ny), y_ar(ny), y_a(ny), w_r(nw + O), w_ar(nw + O), w_a(nw + O), x_r(nx), x_ar(nx), x_a(nx);
    for (std::size_t s = 0; s < N; ++s)
        for (std::size_t o = 0; o < O; ++o)
            for (std::size_t py = 0; py < H; ++py)
                for (std::size_t px = 0; px < H; ++px) {
                    const std::size_t yi = ((s * O + o) * H + py) * H + px;
                    w_r[nw + o] += rb(dy[yi]);  // the bias gradient sums the rounded dy
                    w_ar[nw + o] += std::fabs(rb(dy[yi]));
                    w_a[nw + o] += std::fabs(dy[yi]);
                    for (std::size_t c = 0; c < C; ++c)
                        for (std::size_t ky = 0; ky < KK; ++ky)
                            for (std::size_t kx = 0; kx < KK; ++kx) {
                                const std::ptrdiff_t iy = std::ptrdiff_t(py + ky) - 1, ix = std::ptrdiff_t(px + kx) - 1;
                                if (iy < 0 || ix < 0 || iy >= std::ptrdiff_t(H) || ix >= std::ptrdiff_t(H)) continue;
                                const std::size_t xi = ((s * C + c) * H + std::size_t(iy)) * H + std::size_t(ix);
                                const std::size_t wi = ((o * C + c) * KK + ky) * KK + kx;
                                y_r[yi] += rb(x[xi]) * rb(w[wi]);
                                y_ar[yi] += std::fabs(rb(x[xi]) * rb(w[wi]));
                                y_a[yi] += std::fabs(double(x[xi]) * w[wi]);
                                w_r[wi] += rb(x[xi]) * rb(dy[yi]);
                                w_ar[wi] += std::fabs(rb(x[xi]) * rb(dy[yi]));
                                w_a[wi] += std::fabs(double(x[xi]) * dy[yi]);
                                x_r[xi] += rb(dy[yi]) * rb(w[wi]);
                                x_ar[xi] += std::fabs(rb(dy[yi]) * rb(w[wi]));
                                x_a[xi] += std::fabs(double(dy[yi]) * w[wi]);
                            }
                }
    Gauge tight, tight_dw, tight_dx, k;
    const double ky_len = C * KK * KK + 2, kw_len = N * H * H + 2, kx_len = O * KK * KK + 2;
    for (std::size_t i = 0; i < ny; ++i) {
        const double bi = b[i / (H * H) % O];
        tight.add(yh[i], y_r[i] + bi, ky_len * two_m24 * (y_ar[i] + std::fabs(bi)), 1);
        k.add(yh[i], yf[i], 1.02 * two_m8 * y_a[i], two_m8 * y_a[i]);
    }
    for (std::size_t i = 0; i < nw + O; ++i) {
        tight_dw.add(dwh[i], w_r[i], kw_len * two_m24 * w_ar[i], 1);
        k.add(dwh[i], dwf[i], 1.02 * two_m8 * w_a[i], two_m8 * w_a[i]);
    }
    for (std::size_t i = 0; i < nx; ++i) {
        tight_dx.add(dxh[i], x_r[i], kx_len * two_m24 * x_ar[i], 1);
        k.add(dxh[i], dxf[i], 1.02 * two_m8 * x_a[i], two_m8 * x_a[i]);
    }
    CHECK(tight.inside);
    CHECK(tight_dw.inside);
    CHECK(tight_dx.inside);
    CHECK(k.inside);
    CHECK(k.worst > 0.05);
    MESSAGE("Conv2D k (|bf16 - fp32| / 2^-8 sum|a||b|): " << k.worst);
    // With the ReLU fused: the unfused layer's values with max(., 0), gradients masked the same way.
    Gauge fused;
    for (std::size_t i = 0; i < ny; ++i) fused.add(yr[i], std::max(yh[i], 0.0f), 0, 1);
    CHECK(fused.inside);
    std::vector<float> dy_masked(dy);
    for (std::size_t i = 0; i < ny; ++i)
        if (!(yr[i] > 0)) dy_masked[i] = 0;
    Network<Seq, Shape<C, H, H>, cpu, bf16_mixed> hm(7);
    hm.forward(view<decltype(hm)>(x, N));
    std::vector<float> dxm(nx);
    hm.backward({dy_masked.data(), N, make_dims(O * H * H)}, {dxm.data(), N, make_dims(C, H, H)});
    CHECK(same_bits(dxm, dxr));
    const auto gm = std::span<const float>(hm.parameters().grads());
    CHECK(same_bits(gm.first(nw), std::span<const float>(dwr).first(nw)));
    CHECK(same_bits(gm.subspan(bo, O), std::span<const float>(dwr).subspan(nw, O)));
}
}  // namespace precision_test

// On this CPU's vector ISA (the fp32 kernels on rounded copies), and on the AVX512-BF16 and AMX
// routes where the CPU has them, which compute the same exact products summed in fp32 in another
// order: with the bf16 convolution switch on, all three products on the im2col route
// (kernels/cpu/conv_bf16.hpp: im2col + gemm_bf16); with it off, from 8 input channels the weight
// gradient alone on the units (conv2d_bf16_dw) beside the fp32 kernels' forward and input gradient.
// The same bounds hold on each.
TEST_CASE("bf16_mixed Conv2D (and its fused ReLU): fp32 sums of the bf16-rounded operands") {
    const ConvGeometry eight{8, 6, 6, 3, 1, 1};  // check_conv2d_bf16_mixed<8>'s convolution
    {
        INFO("Conv2D on the default ISA, ", cpu_isa_name(active_cpu_isa()));
        precision_test::check_conv2d_bf16_mixed<3>();
        precision_test::check_conv2d_bf16_mixed<8>();
    }
    for (cpu_isa isa : {cpu_isa::avx512_bf16, cpu_isa::amx}) {
        if (!cpu_supports(isa)) {
            oar_test::skip(std::string("bf16_mixed Conv2D on ") + std::string(cpu_isa_name(isa)) + ": " +
                           cpu_isa_unsupported_reason(isa));
            continue;
        }
        set_cpu_isa(isa);
        for (bool units : {false, true}) {
            set_conv_bf16_units(units);
            INFO("Conv2D on ", cpu_isa_name(isa), units ? ", the im2col route" : ", the weight gradient on the units");
            CHECK(conv_bf16_dw_applies(eight, 8));
            CHECK_FALSE(conv_bf16_dw_applies({3, 6, 6, 3, 1, 1}, 8));
            precision_test::check_conv2d_bf16_mixed<3>();
            precision_test::check_conv2d_bf16_mixed<8>();
        }
        set_conv_bf16_units(default_conv_bf16_units());
        set_cpu_isa(default_cpu_isa());
    }
    set_cpu_isa(std::min(default_cpu_isa(), cpu_isa::avx512));  // no bf16 units: the fp32 kernels throughout
    CHECK_FALSE(conv_bf16_dw_applies(eight, 8));
    set_cpu_isa(default_cpu_isa());
}

TEST_CASE("OAR_BF16_CONV_UNITS sets the bf16 convolution switch's default (0 or 1, else off) and any other value is a clear error") {
    const char* was = std::getenv("OAR_BF16_CONV_UNITS");
    const std::string saved = was ? was : "";
    unsetenv("OAR_BF16_CONV_UNITS");
    CHECK_FALSE(default_conv_bf16_units());
    setenv("OAR_BF16_CONV_UNITS", "", 1);
    CHECK_FALSE(default_conv_bf16_units());
    setenv("OAR_BF16_CONV_UNITS", "1", 1);
    CHECK(default_conv_bf16_units());
    setenv("OAR_BF16_CONV_UNITS", "0", 1);
    CHECK_FALSE(default_conv_bf16_units());
    for (const char* bad : {"on", "01", "2", " 1", "0 ", "-1"}) {
        setenv("OAR_BF16_CONV_UNITS", bad, 1);
        CHECK_THROWS_WITH_AS(default_conv_bf16_units(), doctest::Contains("OAR_BF16_CONV_UNITS: expected 0 or 1, got"),
                             value_error);
    }
    if (was)
        setenv("OAR_BF16_CONV_UNITS", saved.c_str(), 1);
    else
        unsetenv("OAR_BF16_CONV_UNITS");
    set_conv_bf16_units(true);
    CHECK(conv_bf16_units());
    set_conv_bf16_units(false);
    CHECK_FALSE(conv_bf16_units());
    set_conv_bf16_units(default_conv_bf16_units());
}

namespace precision_test {
using course::CNN;
using course::Image;
template <class P>
using CnnNet = Network<CNN, Image, cpu, P>;

/// One forward, loss and backward of the course CNN of policy P on a fixed batch.
template <class P>
struct CnnPass {
    std::vector<float> logits, grads;
    float loss = 0;
    explicit CnnPass(CnnNet<P>& net, std::size_t batch = 6) {
        const auto x = oar_test::random_vector<float>(batch * 28 * 28, 31, 1.0);
        std::vector<std::int64_t> labels(batch);
        for (std::size_t i = 0; i < batch; ++i) labels[i] = std::int64_t(i % 10);
        CrossEntropyLoss<> ce;
        net.clear_grad();
        auto z = net.forward(view<CnnNet<P>>(x, batch));
        logits.assign(z.data(), z.data() + z.size());
        loss = ce(z, labels);
        net.backward(ce.backward());
        auto g = net.parameters().grads();
        grads.assign(g.begin(), g.end());
    }
};
}  // namespace precision_test

TEST_CASE("bf16_mixed course CNN: logits, loss and gradients near fp32's") {
    CnnNet<fp32> f(3);
    CnnNet<bf16_mixed> h(3);
    const CnnPass<fp32> pf(f);
    const CnnPass<bf16_mixed> ph(h);
    double zmax = 0, dz = 0;
    for (std::size_t i = 0; i < pf.logits.size(); ++i) {
        zmax = std::max(zmax, std::fabs(double(pf.logits[i])));
        dz = std::max(dz, std::fabs(double(ph.logits[i]) - pf.logits[i]));
    }
    const double k_logits = dz / (two_m8 * zmax);
    CHECK(k_logits > 0.01);  // bf16 did change them
    CHECK(k_logits <= 2.0);
    CHECK(std::fabs(ph.loss - pf.loss) <= 1.0 * two_m8 * std::fabs(pf.loss));
    double k_grads = 0;
    for (const ParamEntry& e : f.parameters().entries()) {
        double diff2 = 0, norm2 = 0;
        for (std::size_t i = e.offset; i < e.offset + e.size; ++i) {
            const double d = double(ph.grads[i]) - pf.grads[i];
            diff2 += d * d;
            norm2 += double(pf.grads[i]) * pf.grads[i];
        }
        const double k = std::sqrt(diff2 / norm2) / two_m8;
        CHECK_MESSAGE(k <= 20.0, e.key);
        k_grads = std::max(k_grads, k);
    }
    MESSAGE("course CNN: k of logits " << k_logits << " (of max|logit|), of gradients " << k_grads
                                       << " (of ||g||_2 per tensor); loss " << pf.loss << " vs " << ph.loss);
}

TEST_CASE("bf16_mixed gives the same bits on 1, 2 and 3 threads") {
    std::vector<float> logits1, grads1;
    for (std::size_t threads : {1u, 2u, 3u}) {
        set_num_threads(threads);
        CnnNet<bf16_mixed> h(4);
        const CnnPass<bf16_mixed> ph(h, 16);
        if (threads == 1) {
            logits1 = ph.logits;
            grads1 = ph.grads;
        } else {
            CHECK_MESSAGE(same_bits(ph.logits, logits1), threads << " threads");
            CHECK_MESSAGE(same_bits(ph.grads, grads1), threads << " threads");
        }
    }
    set_num_threads(default_thread_count());
}

TEST_CASE("a bf16_mixed network learns: four Gaussian classes in 16 dimensions") {
    using Seq = Sequential<Linear<16, 32>, ReLU, Linear<32, 4>>;
    Network<Seq, Shape<16>, cpu, bf16_mixed> net(9);
    Adam<> opt(net.parameters(), {.learning_rate = 1e-2f});
    CrossEntropyLoss<> ce;
    constexpr std::size_t B = 32;
    const auto centres = oar_test::random_vector<float>(4 * 16, 41, 1.0);
    auto batch = [&](std::uint64_t seed, std::vector<float>& x, std::vector<std::int64_t>& y) {
        const auto noise = oar_test::random_vector<float>(B * 16, seed, 0.8);
        x.resize(B * 16);
        y.resize(B);
        for (std::size_t i = 0; i < B; ++i) {
            y[i] = std::int64_t((i * 7 + seed) % 4);
            for (std::size_t d = 0; d < 16; ++d) x[i * 16 + d] = centres[std::size_t(y[i]) * 16 + d] + noise[i * 16 + d];
        }
    };
    std::vector<float> x;
    std::vector<std::int64_t> y;
    float first = 0, last = 0;
    for (std::uint64_t step = 0; step < 150; ++step) {
        batch(100 + step, x, y);
        const float loss = ce(net.forward(view<decltype(net)>(x, B)), y);
        if (step == 0) first = loss;
        last = loss;
        net.backward(ce.backward());
        opt.step();
        opt.clear_grad();
    }
    batch(7, x, y);  // held out
    net.eval();
    auto z = net.forward(view<decltype(net)>(x, B));
    std::size_t right = 0;
    for (std::size_t i = 0; i < B; ++i) {
        std::size_t best = 0;
        for (std::size_t c = 1; c < 4; ++c)
            if (z.data()[i * 4 + c] > z.data()[i * 4 + best]) best = c;
        right += best == std::size_t(y[i]);
    }
    CHECK(last < 0.25f * first);
    CHECK(right >= 30);  // of 32
    MESSAGE("loss " << first << " -> " << last << ", held-out " << right << "/32");
}

TEST_CASE("checkpoints are fp32 and load into a network of either precision") {
    const std::string dir = (std::filesystem::temp_directory_path() / "oar_test_precision").string();
    std::filesystem::create_directories(dir);
    CnnNet<fp32> f(11);
    CnnNet<bf16_mixed> h(12);
    { const CnnPass<bf16_mixed> step(h); }  // gradients present, parameters as initialised
    save_weights(dir + "/f.safetensors", f);
    load_weights(dir + "/f.safetensors", h);
    CHECK(same_bits(f.parameters().values(), h.parameters().values()));
    CHECK(same_bits(CnnPass<bf16_mixed>(h).logits, CnnPass<bf16_mixed>(h).logits));
    // A trained bf16 network's fp32 master weights back into an fp32 network, bit for bit.
    Adam<> opt(h.parameters(), {.learning_rate = 1e-3f});
    { const CnnPass<bf16_mixed> step(h); }
    opt.step();
    save_weights(dir + "/h.safetensors", h);
    CnnNet<fp32> g(13);
    load_weights(dir + "/h.safetensors", g);
    CHECK(same_bits(g.parameters().values(), h.parameters().values()));
    CHECK(!same_bits(g.parameters().values(), f.parameters().values()));  // the step moved them
    std::filesystem::remove_all(dir);
}

TEST_CASE("bf16_mixed on the AVX512-BF16 and AMX routes: the same products, summed in another order") {
    const auto x = oar_test::random_vector<float>(LB * LI, 51);
    const auto dy = oar_test::random_vector<float>(LB * LO, 52);
    LinNet<bf16_mixed> base(6);
    const LinearRun<bf16_mixed> ref(base, x, dy);  // the fp32 route of this CPU's vector ISA
    for (cpu_isa isa : {cpu_isa::avx512_bf16, cpu_isa::amx}) {
        if (!cpu_supports(isa)) {
            oar_test::skip(std::string("bf16_mixed on ") + std::string(cpu_isa_name(isa)) + ": " +
                           cpu_isa_unsupported_reason(isa));
            continue;
        }
        set_cpu_isa(isa);
        LinNet<bf16_mixed> h(6);
        const LinearRun<bf16_mixed> r(h, x, dy);
        set_cpu_isa(default_cpu_isa());
        // The same exact products as the fp32 route, summed in fp32 in another order.
        CHECK_MESSAGE(rounded_products(r, x, dy, h.parameters().values()), cpu_isa_name(isa));
        CHECK_MESSAGE(rounded_products(ref, x, dy, base.parameters().values()), cpu_isa_name(isa));
    }
}

namespace precision_test {

/// Layer 0's values in a pass run layer by layer (an observer makes Network unfuse every tail):
/// its output z, and in the backward the gradient dz it received.
struct FirstLayer {
    std::vector<float> z, dz;
    void on_forward(const LayerEvent& e) {
        if (e.index == 0) z.assign(e.output.data(), e.output.data() + e.output.size());
    }
    void on_backward(const LayerEvent& e) {
        if (e.index == 0) dz.assign(e.dy.data(), e.dy.data() + e.dy.size());
    }
};

/// A run's values: the network's output y, its input gradient dx and the whole gradient buffer.
struct TailRun {
    std::vector<float> y, dx, grads;
    template <class Net, class... Obs>
    TailRun(Net& net, const std::vector<float>& x, const std::vector<float>& dy, std::size_t n, Obs&... obs) {
        net.clear_grad();
        auto out = net.forward(view<Net>(x, n), obs...);
        y.assign(out.data(), out.data() + out.size());
        dx.assign(x.size(), 0.0f);
        net.backward({dy.data(), n, Net::output_shape::dims}, {dx.data(), n, Net::input_shape::dims}, obs...);
        auto g = net.parameters().grads();
        grads.assign(g.begin(), g.end());
    }
};

/// Whether a 3x3, stride 1, pad 1 convolution of N samples (C -> O channels, H x H) computed z from
/// x, weights w and bias b, and dw, db, dx from dz, as fp32 sums of the bf16-rounded operands: each
/// within (K + 2) 2^-24 sum|a_bf||b_bf| of the double sum of the rounded products, K the length of
/// the sum; the bias gradient sums the rounded dz. dz and the gradients may be null (forward only).
inline bool conv_rounded_products(std::size_t N, std::size_t C, std::size_t O, std::size_t H, const float* x,
                                  const float* w, const float* b, const float* z, const float* dz, const float* dw,
                                  const float* db, const float* dx) {
    constexpr std::size_t KK = 3;
    const std::size_t ny = N * O * H * H, nw = O * C * KK * KK, nx = N * C * H * H;
    std::vector<double> z_r(ny), z_a(ny), w_r(nw + O), w_a(nw + O), x_r(nx), x_a(nx);
    for (std::size_t s = 0; s < N; ++s)
        for (std::size_t o = 0; o < O; ++o)
            for (std::size_t py = 0; py < H; ++py)
                for (std::size_t px = 0; px < H; ++px) {
                    const std::size_t yi = ((s * O + o) * H + py) * H + px;
                    const double g = dz ? rb(dz[yi]) : 0.0;
                    w_r[nw + o] += g;
                    w_a[nw + o] += std::fabs(g);
                    for (std::size_t c = 0; c < C; ++c)
                        for (std::size_t ky = 0; ky < KK; ++ky)
                            for (std::size_t kx = 0; kx < KK; ++kx) {
                                const std::ptrdiff_t iy = std::ptrdiff_t(py + ky) - 1, ix = std::ptrdiff_t(px + kx) - 1;
                                if (iy < 0 || ix < 0 || iy >= std::ptrdiff_t(H) || ix >= std::ptrdiff_t(H)) continue;
                                const std::size_t xi = ((s * C + c) * H + std::size_t(iy)) * H + std::size_t(ix);
                                const std::size_t wi = ((o * C + c) * KK + ky) * KK + kx;
                                z_r[yi] += rb(x[xi]) * rb(w[wi]);
                                z_a[yi] += std::fabs(rb(x[xi]) * rb(w[wi]));
                                w_r[wi] += rb(x[xi]) * g;
                                w_a[wi] += std::fabs(rb(x[xi]) * g);
                                x_r[xi] += g * rb(w[wi]);
                                x_a[xi] += std::fabs(g * rb(w[wi]));
                            }
                }
    Gauge gz, gw, gx;
    for (std::size_t i = 0; i < ny; ++i) {
        const double bi = b[i / (H * H) % O];
        gz.add(z[i], z_r[i] + bi, double(C * KK * KK + 2) * two_m24 * (z_a[i] + std::fabs(bi)), 1);
    }
    if (dz) {
        for (std::size_t i = 0; i < nw + O; ++i)
            gw.add(i < nw ? dw[i] : db[i - nw], w_r[i], double(N * H * H + 2) * two_m24 * w_a[i], 1);
        for (std::size_t i = 0; i < nx; ++i) gx.add(dx[i], x_r[i], double(O * KK * KK + 2) * two_m24 * x_a[i], 1);
    }
    return gz.inside && gw.inside && gx.inside;
}

}  // namespace precision_test

TEST_CASE("bf16_mixed in an elementwise tail: Linear + Sigmoid, Conv2D + Sigmoid, Conv2D + folded BatchNorm2D") {
    // Each tail runs in its producer's epilogue (forward_map, then the chain's backward and the
    // producer's): the same bits as the layers one by one, whose products must sum the rounded
    // operands, the gradient entering the producer (after the tail's backward) included. The fp32
    // policy fails the same check: it tells rounded operands from unrounded ones.
    SUBCASE("Linear + Sigmoid") {
        using Seq = Sequential<Linear<LI, LO>, Sigmoid>;
        using Net = Network<Seq, Shape<LI>, cpu, bf16_mixed>;
        static_assert(Net::epilogue_length(0) == 1);
        const auto x = oar_test::random_vector<float>(LB * LI, 61);
        const auto dy = oar_test::random_vector<float>(LB * LO, 62);
        Net fused(5), layered(5);
        Network<Seq, Shape<LI>, cpu, fp32> single(5);
        const TailRun rf(fused, x, dy, LB);
        FirstLayer first, first32;
        const TailRun rl(layered, x, dy, LB, first);
        const TailRun r32(single, x, dy, LB, first32);
        CHECK(same_bits(rf.y, rl.y));
        CHECK(same_bits(rf.dx, rl.dx));
        CHECK(same_bits(rf.grads, rl.grads));
        struct {
            std::vector<float> y, dw, dx;
        } lin{first.z, {rl.grads.begin(), rl.grads.begin() + LI * LO}, rl.dx},
            lin32{first32.z, {r32.grads.begin(), r32.grads.begin() + LI * LO}, r32.dx};
        CHECK(rounded_products(lin, x, first.dz, fused.parameters().values()));
        CHECK_FALSE(rounded_products(lin32, x, first32.dz, single.parameters().values()));
    }
    constexpr std::size_t C = 3, O = 4, H = 5, N = 2;
    const auto x = oar_test::random_vector<float>(N * C * H * H, 63);
    const auto dy = oar_test::random_vector<float>(N * O * H * H, 64);
    constexpr std::size_t bo = Conv2D<C, O, 3, 1, 1>::bias_offset;
    SUBCASE("Conv2D + Sigmoid, training") {
        using Seq = Sequential<Conv2D<C, O, 3, 1, 1>, Sigmoid, Flatten>;
        using Net = Network<Seq, Shape<C, H, H>, cpu, bf16_mixed>;
        static_assert(Net::epilogue_length(0) == 1);
        Net fused(7), layered(7);
        Network<Seq, Shape<C, H, H>, cpu, fp32> single(7);
        const TailRun rf(fused, x, dy, N);
        FirstLayer first, first32;
        const TailRun rl(layered, x, dy, N, first);
        const TailRun r32(single, x, dy, N, first32);
        CHECK(same_bits(rf.y, rl.y));
        CHECK(same_bits(rf.dx, rl.dx));
        CHECK(same_bits(rf.grads, rl.grads));
        const float* w = fused.parameters().values().data();
        CHECK(conv_rounded_products(N, C, O, H, x.data(), w, w + bo, first.z.data(), first.dz.data(), rl.grads.data(),
                                    rl.grads.data() + bo, rl.dx.data()));
        CHECK_FALSE(conv_rounded_products(N, C, O, H, x.data(), w, w + bo, first32.z.data(), first32.dz.data(),
                                          r32.grads.data(), r32.grads.data() + bo, r32.dx.data()));
    }
    SUBCASE("Conv2D + BatchNorm2D folded in evaluation mode") {
        using Seq = Sequential<Conv2D<C, O, 3, 1, 1>, BatchNorm2D<O>, Flatten>;
        using Net = Network<Seq, Shape<C, H, H>, cpu, bf16_mixed>;
        static_assert(Net::folds_batch_norm(0));
        Net fused(8), layered(8);
        Network<Seq, Shape<C, H, H>, cpu, fp32> single(8);
        for (auto* net : {&fused, &layered}) {  // running statistics away from (0, 1): a training pass
            net->forward(view<Net>(x, N));
            net->eval();
        }
        single.forward(view<decltype(single)>(x, N));
        single.eval();
        FirstLayer first, first32;
        auto yf = fused.forward(view<Net>(x, N));
        const std::vector<float> y_fused(yf.data(), yf.data() + yf.size());
        const std::vector<float> z_fused(fused.activation(1).data(), fused.activation(1).data() + y_fused.size());
        auto yl = layered.forward(view<Net>(x, N), first);
        const std::vector<float> y_layered(yl.data(), yl.data() + yl.size());
        single.forward(view<decltype(single)>(x, N), first32);
        CHECK(same_bits(z_fused, first.z));  // the producer's own output, as the layer computes it
        // The fold's z * scale + shift against the layer's two roundings: within 2^-22 (|z scale| +
        // |y|) + 2^-21 |y| (tests/nn/test_network.cpp's fold bound), scale = weight / sqrt(var + eps).
        std::vector<double> gamma, var;
        for (const auto& e : fused.state_dict()) {
            if (e.key == "1.weight") gamma.assign(e.values.begin(), e.values.end());
            if (e.key == "1._variance") var.assign(e.values.begin(), e.values.end());
        }
        REQUIRE(gamma.size() == O);
        REQUIRE(var.size() == O);
        Gauge fold;
        for (std::size_t i = 0; i < y_fused.size(); ++i) {
            const std::size_t c = i / (H * H) % O;
            const double scale = gamma[c] / std::sqrt(var[c] + double(BatchNorm2D<O>{}.epsilon)), yl = y_layered[i];
            fold.add(y_fused[i], yl, std::ldexp(std::fabs(first.z[i] * scale) + std::fabs(yl), -22) +
                                         std::ldexp(std::fabs(yl), -21), 1);
        }
        CHECK(fold.inside);
        const float* w = fused.parameters().values().data();
        CHECK(conv_rounded_products(N, C, O, H, x.data(), w, w + bo, first.z.data(), nullptr, nullptr, nullptr,
                                    nullptr));
        CHECK_FALSE(conv_rounded_products(N, C, O, H, x.data(), w, w + bo, first32.z.data(), nullptr, nullptr,
                                          nullptr, nullptr));
    }
}

namespace precision_test {
/// The network's weights (every "*.weight" entry; biases untouched) rounded to bf16 in place.
template <class Net>
void round_weights(Net& net) {
    auto v = net.parameters().values();
    for (const ParamEntry& e : net.parameters().entries())
        if (e.key.ends_with("weight")) round_to_bf16(v.data() + e.offset, v.data() + e.offset, e.size);
}
inline std::vector<float> rounded_copy(const std::vector<float>& v) {
    std::vector<float> r(v.size());
    round_to_bf16(v.data(), r.data(), r.size());
    return r;
}
/// The bf16_mixed network of Seq on In (initialised with `seed`) against the fp32 one with its
/// weights rounded, on the rounded x (n samples) and on the rounded output gradient (random, from
/// dy_seed): the same bits in y, dx and every gradient.
template <class Seq, class In>
void check_rounded_network(const std::vector<float>& x, std::size_t n, std::uint64_t seed, std::uint64_t dy_seed) {
    Network<Seq, In, cpu, bf16_mixed> h(seed);
    Network<Seq, In, cpu, fp32> f(seed);
    round_weights(f);
    const auto dy = oar_test::random_vector<float>(n * decltype(h)::output_shape::dims.size(), dy_seed);
    const TailRun rh(h, x, dy, n);
    const TailRun rf(f, rounded_copy(x), rounded_copy(dy), n);
    CHECK(same_bits(rh.y, rf.y));
    CHECK(same_bits(rh.dx, rf.dx));
    CHECK(same_bits(rh.grads, rf.grads));
}
}  // namespace precision_test

TEST_CASE("bf16_mixed is the fp32 kernels on rounded operands, bit for bit, with a large batch rounded in chunks") {
    // A batch whose rounded input exceeds bf16_chunk_values: Linear's forward product rounds and runs
    // it in chunks (32 samples here, then 13); Conv2D's kernels round x and dy a sample or a group at
    // a time, or as Winograd interleaves them (ConvGeometry::round_bf16; Winograd's groups of 16, 8
    // or 4 images by ISA, a partial one at the end). The fp32 network with the same weights rounded, on the
    // rounded input and output gradient, must give the same bits: y, dx, the weight gradients (and
    // Conv2D's bias gradient, a sum of the rounded dy; Linear's bias gradient sums the unrounded dy).
    constexpr std::size_t C = 8, H = 32, N = 45;
    static_assert(bf16_chunk_values / (C * H * H) < N, "the batch must be rounded in more than one chunk");
    // The fp32 route: on a CPU with AVX512-BF16 or AMX, Conv2D and Linear would take those units.
    set_cpu_isa(std::min(default_cpu_isa(), cpu_isa::avx512));
    const auto x = oar_test::random_vector<float>(N * C * H * H, 71);
    SUBCASE("Conv2D + ReLU (Winograd forward and input gradient)") {
        using Seq = Sequential<Conv2D<C, 8, 3, 1, 1>, ReLU, Flatten>;
        static_assert(Network<Seq, Shape<C, H, H>, cpu, bf16_mixed>::fuses_relu(0));
        check_rounded_network<Seq, Shape<C, H, H>>(x, N, 3, 72);
    }
    SUBCASE("Conv2D alone (its plain backward: Winograd's weight gradient and input gradient)") {
        check_rounded_network<Sequential<Conv2D<C, 8, 3, 1, 1>, Flatten>, Shape<C, H, H>>(x, N, 5, 74);
    }
    SUBCASE("Conv2D, stride 2, alone (the phase layout's kernels)") {
        check_rounded_network<Sequential<Conv2D<C, 8, 3, 2, 1>, Flatten>, Shape<C, H, H>>(x, N, 6, 75);
    }
    SUBCASE("Linear") {
        using Seq = Sequential<Flatten, Linear<C * H * H, 10>>;
        Network<Seq, Shape<C, H, H>, cpu, bf16_mixed> h(4);
        Network<Seq, Shape<C, H, H>, cpu, fp32> f(4);
        round_weights(f);
        const auto dy = oar_test::random_vector<float>(N * 10, 73);
        const TailRun rh(h, x, dy, N);
        const TailRun rf(f, rounded_copy(x), rounded_copy(dy), N);
        CHECK(same_bits(rh.y, rf.y));
        CHECK(same_bits(rh.dx, rf.dx));
        constexpr std::size_t nw = C * H * H * 10;
        CHECK(same_bits(std::span<const float>(rh.grads).first(nw), std::span<const float>(rf.grads).first(nw)));
    }
    set_cpu_isa(default_cpu_isa());
}

TEST_CASE("a bf16_mixed network's eval-mode forwards reuse its Linear weights packed for the bf16 units while the parameters are unchanged") {
    // Two Linears wide enough for the units (N >= 32: their weights packed once and kept) and one
    // narrower (the fp32 kernel); train-mode forwards never use the kept copies: they are the
    // reference. On every path this CPU has (the units where it has them).
    using Seq = Sequential<Flatten, Linear<60, 48>, ReLU, Linear<48, 40>, Sigmoid, Linear<40, 10>>;
    for (oar::cpu_isa isa : oar::supported_cpu_isas()) {
        oar::set_cpu_isa(isa);
        INFO(std::string(oar::cpu_isa_name(isa)));
        Network<Seq, Shape<60>, cpu, bf16_mixed> net(3);
        Tensor x(7, make_dims(60));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 37) % 101) / 50.0f - 1.0f;
        const auto check_eval = [&](const char* what) { return oar_test::eval_forwards_match_train(net, x, what); };
        const auto before = check_eval("fresh network");
        Adam opt(net.parameters(), {.learning_rate = 0.05f});
        CrossEntropyLoss<> ce;
        const std::vector<std::int64_t> y = {0, 1, 2, 3, 4, 5, 6};
        ce(net.forward(x), y);
        net.backward(ce.backward());
        opt.step();
        const auto after = check_eval("after an optimizer step");
        CHECK(after != before);
        net.parameters().values()[net.parameters().entry("1.weight").offset + 5] += 0.5f;  // a write through values()
        CHECK(check_eval("after a write through values()") != after);
    }
    oar::set_cpu_isa(oar::default_cpu_isa());
}
