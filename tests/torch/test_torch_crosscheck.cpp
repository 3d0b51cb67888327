// Cross-checks oar against libtorch (Debian's libtorch-dev 1.13, CPU, float32, one thread) on
// fixed inputs drawn from oar::CounterRng (never torch's RNG): Conv2D, MaxPool2D, AvgPool2D and
// Linear forward/backward, CrossEntropyLoss (on logits, and on probabilities), the SGD / Momentum / Adagrad / Adam updates with L2
// decay, three Adam training steps of the course's CNN, and ResNet8 and InceptionNet
// (models/resnet.hpp: Residual and Concat blocks, BatchNorm) for one Adam step in training and one
// in evaluation mode.
//
// "Agrees to 1e-5 relative" means, for every compared tensor a (oar) against b (torch):
//     max_i |a_i - b_i|  <=  1e-5 * max(max_i |b_i|, 1e-30)
// i.e. the worst elementwise error measured against the tensor's scale. Elementwise relative error
// is meaningless for float32 GEMM outputs near zero, where both sides carry rounding noise of the
// size of the tensor's large entries times the epsilon. Every comparison prints its error.
#include <algorithm>  // std::max
#include <cmath>      // std::fabs
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t, std::uint64_t
#include <cstdio>     // std::printf, std::snprintf
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

#include <doctest/doctest.h>  // TEST_CASE, CHECK_MESSAGE

// libtorch's headers are not clean under -Wall -Wextra -Wpedantic; CMake also puts them on the
// SYSTEM include path, this keeps the g++ command line below honest too.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <torch/torch.h>  // torch::Tensor, torch::nn::functional, torch::optim
#pragma GCC diagnostic pop

#include <map>  // std::map

#include <oar/models/course.hpp>  // course::CNN
#include <oar/models/resnet.hpp>  // models::ResNet8, models::InceptionNet
#include <oar/oar.hpp>            // the CPU API under test

namespace {

namespace F = torch::nn::functional;

constexpr double kRelTol = 1e-5;

/// Runs once per process: torch on one CPU thread (every tensor here is float32, made explicitly).
struct TorchSetup {
    TorchSetup() {
        torch::set_num_threads(1);
    }
};
const TorchSetup torch_setup{};

/// Largest error of a against b, and b's scale.
struct Agreement {
    double max_abs_err = 0.0;
    double scale = 0.0;
    double rel() const { return max_abs_err / std::max(scale, 1e-30); }
};

/// Compares oar's values with a torch tensor (same element count, row-major) and records the
/// result: a doctest check plus one printed line.
void expect_close(const std::string& what, std::span<const float> a, const torch::Tensor& b_in,
                  double tol = kRelTol) {
    const torch::Tensor b = b_in.detach().to(torch::kFloat32).contiguous();
    REQUIRE_MESSAGE(static_cast<std::size_t>(b.numel()) == a.size(),
                    what << ": oar has " << a.size() << " values, torch " << b.numel());
    const float* pb = b.data_ptr<float>();
    Agreement r;
    std::size_t worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double e = std::fabs(static_cast<double>(a[i]) - static_cast<double>(pb[i]));
        if (e > r.max_abs_err) {
            r.max_abs_err = e;
            worst = i;
        }
        r.scale = std::max(r.scale, std::fabs(static_cast<double>(pb[i])));
    }
    std::printf("  %-58s rel %.3e  (max |a-b| %.3e, max |b| %.3e)\n", what.c_str(), r.rel(), r.max_abs_err, r.scale);
    CHECK_MESSAGE(r.rel() <= tol, what << ": max |oar - torch| = " << r.max_abs_err << " at index " << worst
                                       << " (oar " << a[worst] << ", torch " << pb[worst] << "), max |torch| = "
                                       << r.scale << ", relative " << r.rel() << " > " << tol);
}

void expect_close(const std::string& what, float a, double b, double tol = kRelTol) {
    const double e = std::fabs(static_cast<double>(a) - b);
    const double rel = e / std::max(std::fabs(b), 1e-30);
    std::printf("  %-58s rel %.3e  (oar %.9g, torch %.9g)\n", what.c_str(), rel, static_cast<double>(a), b);
    CHECK_MESSAGE(rel <= tol, what << ": oar " << a << ", torch " << b << ", relative " << rel << " > " << tol);
}

/// n values uniform in [lo, hi) from stream `stream` of a fixed seed.
std::vector<float> uniform(std::uint64_t stream, std::size_t n, float lo, float hi) {
    const oar::CounterRng rng{20240601};
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * rng.uniform(stream, i);
    return v;
}

/// "1e-05", "0.1": a decay coefficient as a label.
std::string fmt(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

void fill_uniform(std::span<float> out, std::uint64_t stream, float lo, float hi) {
    const auto v = uniform(stream, out.size(), lo, hi);
    std::copy(v.begin(), v.end(), out.begin());
}

/// A float32 torch tensor holding a copy of `values` with shape `sizes`.
torch::Tensor to_torch(std::span<const float> values, std::vector<std::int64_t> sizes, bool requires_grad = false) {
    auto t = torch::from_blob(const_cast<float*>(values.data()), sizes, torch::kFloat32).clone();
    return t.set_requires_grad(requires_grad);
}

/// oar's Linear weight is [In, Out] (Paddle), torch's [Out, In].
torch::Tensor linear_weight_to_torch(std::span<const float> w_in_out, std::int64_t in, std::int64_t out,
                                     bool requires_grad = false) {
    auto t = torch::from_blob(const_cast<float*>(w_in_out.data()), {in, out}, torch::kFloat32).t().contiguous();
    return t.set_requires_grad(requires_grad);
}

std::vector<std::int64_t> torch_sizes(std::size_t batch, const oar::Dims& d) {
    std::vector<std::int64_t> s{static_cast<std::int64_t>(batch)};
    for (std::size_t i = 0; i < d.rank; ++i) s.push_back(static_cast<std::int64_t>(d.d[i]));
    return s;
}

/// A network of a single layer: forward and backward of that layer with oar's own buffers.
template <class L, class InShape>
using Single = oar::Network<oar::Sequential<L>, InShape>;

/// Conv2D<InC, OutC, K, S, P, HasBias> on [N, InC, H, W]: output, input grad, weight grad, bias grad
/// (torch's bias=None without one); K, S and P per axis.
template <std::size_t InC, std::size_t OutC, oar::Size2 K, oar::Size2 S, oar::Size2 P, std::size_t H, std::size_t W,
          oar::Bias HasBias = oar::Bias::yes>
void check_conv2d(std::size_t n, std::uint64_t stream) {
    constexpr bool has_bias = HasBias == oar::Bias::yes;
    Single<oar::Conv2D<InC, OutC, K, S, P, HasBias>, oar::Shape<InC, H, W>> net;
    auto& ps = net.parameters();
    REQUIRE(ps.entries().size() == (has_bias ? 2u : 1u));
    const auto& we = ps.entry("0.weight");
    fill_uniform(ps.value(we), stream + 0, -0.3f, 0.3f);
    if constexpr (has_bias) fill_uniform(ps.value(ps.entry("0.bias")), stream + 1, -0.5f, 0.5f);  // used by forward

    oar::Tensor x(n, oar::Shape<InC, H, W>::dims);
    fill_uniform(x.span(), stream + 2, -1.0f, 1.0f);
    const auto y = net.forward(x);
    oar::Tensor dy(n, y.dims());
    fill_uniform(dy.span(), stream + 3, -1.0f, 1.0f);
    oar::Tensor dx(n, x.dims());
    net.clear_grad();
    net.backward(dy, dx);

    auto tw = to_torch(ps.value(we), {OutC, InC, K.h, K.w}, true);
    auto tx = to_torch(x.span(), torch_sizes(n, x.dims()), true);
    auto opts = F::Conv2dFuncOptions()
                    .stride({static_cast<std::int64_t>(S.h), static_cast<std::int64_t>(S.w)})
                    .padding({static_cast<std::int64_t>(P.h), static_cast<std::int64_t>(P.w)});
    torch::Tensor tb;
    if constexpr (has_bias) {
        tb = to_torch(ps.value(ps.entry("0.bias")), {OutC}, true);
        opts = opts.bias(tb);
    }
    auto ty = F::conv2d(tx, tw, opts);
    ty.backward(to_torch(dy.span(), torch_sizes(n, y.dims())));

    REQUIRE(ty.sizes().vec() == torch_sizes(n, y.dims()));
    expect_close("output", y.span(), ty);
    expect_close("input grad", dx.span(), tx.grad());
    expect_close("weight grad", ps.grad(we), tw.grad());
    if constexpr (has_bias) expect_close("bias grad", ps.grad(ps.entry("0.bias")), tb.grad());
}

/// A parameter-free layer on [N, C, H, W] (pooling, activations): output and input grad against a
/// torch function of the input; inputs uniform in [-range, range].
template <class L, std::size_t C, std::size_t H, std::size_t W, class TorchFn>
void check_unary(std::size_t n, std::uint64_t stream, TorchFn&& torch_fn, float range = 1.0f, L layer = L{}) {
    Single<L, oar::Shape<C, H, W>> net;
    net.template layer<0>() = layer;
    oar::Tensor x(n, oar::Shape<C, H, W>::dims);
    fill_uniform(x.span(), stream + 0, -range, range);
    const auto y = net.forward(x);
    oar::Tensor dy(n, y.dims());
    fill_uniform(dy.span(), stream + 1, -1.0f, 1.0f);
    oar::Tensor dx(n, x.dims());
    net.backward(dy, dx);

    auto tx = to_torch(x.span(), torch_sizes(n, x.dims()), true);
    auto ty = torch_fn(tx);
    ty.backward(to_torch(dy.span(), torch_sizes(n, y.dims())));
    REQUIRE(ty.sizes().vec() == torch_sizes(n, y.dims()));
    expect_close("output", y.span(), ty);
    expect_close("input grad", dx.span(), tx.grad());
}

}  // namespace

TEST_CASE("Conv2D<1,20,5,1,2> forward and backward agree with libtorch") {
    std::printf("Conv2D<1,20,5,1,2> on [8,1,28,28]\n");
    check_conv2d<1, 20, 5, 1, 2, 28, 28>(8, 100);
}

TEST_CASE("Conv2D<20,20,5,1,2> forward and backward agree with libtorch") {
    std::printf("Conv2D<20,20,5,1,2> on [8,20,14,14]\n");
    check_conv2d<20, 20, 5, 1, 2, 14, 14>(8, 110);
}

TEST_CASE("Conv2D with rectangular kernels, per-axis strides and padding, and without bias agrees with libtorch") {
    std::printf("Conv2D kernel 3x5, stride 1x2, padding 1x2 on [4,3,11,13]\n");
    check_conv2d<3, 6, oar::Size2{3, 5}, oar::Size2{1, 2}, oar::Size2{1, 2}, 11, 13>(4, 150);
    std::printf("Conv2D kernel 1x7, stride 1, padding 0x3, no bias on [4,8,9,12]\n");
    check_conv2d<8, 8, oar::Size2{1, 7}, 1, oar::Size2{0, 3}, 9, 12, oar::Bias::no>(4, 160);
    std::printf("Conv2D 3x3, stride 1, padding 1, no bias (implicit GEMM, flipped dx) on [4,16,10,10]\n");
    check_conv2d<16, 16, 3, 1, 1, 10, 10, oar::Bias::no>(4, 170);
    std::printf("Conv2D 5x5, stride 1, padding 2, no bias (Winograd) on [8,20,14,14]\n");
    check_conv2d<20, 20, 5, 1, 2, 14, 14, oar::Bias::no>(8, 180);
    std::printf("Conv2D 1x1, stride 2, no bias (a projection shortcut) on [4,8,8,8]\n");
    check_conv2d<8, 16, 1, 2, 0, 8, 8, oar::Bias::no>(4, 190);
}

TEST_CASE("MyNet's Conv2D<3,32,3> and Conv2D<64,64,3> agree with libtorch") {
    std::printf("Conv2D<3,32,3> on [2,3,32,32] (implicit GEMM in row panels of uneven heights)\n");
    check_conv2d<3, 32, 3, 1, 0, 32, 32>(2, 210);
    std::printf("Conv2D<64,64,3> on [20,64,6,6] (weight gradient in groups of 16 samples and 4)\n");
    check_conv2d<64, 64, 3, 1, 0, 6, 6>(20, 220);
}

TEST_CASE("Conv2D<3,4,3,2,0> with stride 2 and no padding agrees with libtorch") {
    std::printf("Conv2D<3,4,3,2,0> on [5,3,9,9]\n");
    check_conv2d<3, 4, 3, 2, 0, 9, 9>(5, 120);
    std::printf("Conv2D<3,4,3,2,0> on [5,3,10,10] (the last row and column are not covered)\n");
    check_conv2d<3, 4, 3, 2, 0, 10, 10>(5, 130);
}

TEST_CASE("MaxPool2D<2,2> forward and backward agree with libtorch") {
    std::printf("MaxPool2D<2,2> on [8,20,28,28]\n");
    check_unary<oar::MaxPool2D<2, 2>, 20, 28, 28>(8, 200, [](const torch::Tensor& x) {
        return F::max_pool2d(x, F::MaxPool2dFuncOptions(2).stride(2));
    });
}

TEST_CASE("AvgPool2D<2,2> forward and backward agree with libtorch") {
    std::printf("AvgPool2D<2,2> on [8,20,28,28]\n");
    check_unary<oar::AvgPool2D<2, 2>, 20, 28, 28>(8, 210, [](const torch::Tensor& x) {
        return F::avg_pool2d(x, F::AvgPool2dFuncOptions(2).stride(2));
    });
}

TEST_CASE("AdaptiveAvgPool2D (<1,1> global, <2,3> uneven, <4,4> overlapping) agrees with libtorch") {
    std::printf("AdaptiveAvgPool2D on [4,3,7,9] and [4,2,5,5]\n");
    check_unary<oar::AdaptiveAvgPool2D<1, 1>, 3, 7, 9>(
        4, 290, [](const torch::Tensor& x) { return F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions({1, 1})); });
    check_unary<oar::AdaptiveAvgPool2D<2, 3>, 3, 7, 9>(
        4, 300, [](const torch::Tensor& x) { return F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions({2, 3})); });
    check_unary<oar::AdaptiveAvgPool2D<4, 4>, 2, 5, 5>(
        4, 310, [](const torch::Tensor& x) { return F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions({4, 4})); });
}

TEST_CASE("GELU, Hardswish, LeakyReLU (also slope 0.2), ELU (also alpha 0.5) and Identity agree with libtorch") {
    std::printf("activations on [4,3,8,8], inputs in [-5, 5]\n");
    check_unary<oar::GELU, 3, 8, 8>(4, 220, [](const torch::Tensor& x) { return F::gelu(x); }, 5.0f);
    check_unary<oar::Hardswish, 3, 8, 8>(4, 230, [](const torch::Tensor& x) { return torch::hardswish(x); }, 5.0f);
    check_unary<oar::LeakyReLU, 3, 8, 8>(4, 240, [](const torch::Tensor& x) { return F::leaky_relu(x); }, 5.0f);
    check_unary<oar::LeakyReLU, 3, 8, 8>(
        4, 250, [](const torch::Tensor& x) { return F::leaky_relu(x, F::LeakyReLUFuncOptions().negative_slope(0.2)); },
        5.0f, oar::LeakyReLU{0.2f});
    check_unary<oar::ELU, 3, 8, 8>(4, 260, [](const torch::Tensor& x) { return F::elu(x); }, 5.0f);
    check_unary<oar::ELU, 3, 8, 8>(
        4, 270, [](const torch::Tensor& x) { return F::elu(x, F::ELUFuncOptions().alpha(0.5)); }, 5.0f, oar::ELU{0.5f});
    check_unary<oar::Identity, 3, 8, 8>(4, 280, [](const torch::Tensor& x) { return x * 1.0; }, 5.0f);
}

TEST_CASE("BatchNorm2D<4> and BatchNorm1D<6>: training forward, gradients, running statistics and evaluation agree with libtorch") {
    std::printf("BatchNorm2D<4> on [5,4,6,7]\n");
    {
        Single<oar::BatchNorm2D<4>, oar::Shape<4, 6, 7>> net;
        auto& ps = net.parameters();
        fill_uniform(ps.value(ps.entry("0.weight")), 320, 0.5f, 1.5f);
        fill_uniform(ps.value(ps.entry("0.bias")), 321, -0.5f, 0.5f);
        oar::Tensor x(5, oar::Shape<4, 6, 7>::dims);
        fill_uniform(x.span(), 322, -2.0f, 3.0f);
        const auto y = net.forward(x);
        oar::Tensor dy(5, y.dims());
        fill_uniform(dy.span(), 323, -1.0f, 1.0f);
        oar::Tensor dx(5, x.dims());
        net.clear_grad();
        net.backward(dy, dx);

        auto tw = to_torch(ps.value(ps.entry("0.weight")), {4}, true);
        auto tb = to_torch(ps.value(ps.entry("0.bias")), {4}, true);
        auto rm = torch::zeros({4});
        auto rv = torch::ones({4});
        auto tx = to_torch(x.span(), torch_sizes(5, x.dims()), true);
        // Paddle's momentum 0.9 keeps 90 % of the running value: torch's momentum 0.1.
        auto ty = F::batch_norm(tx, rm, rv, F::BatchNormFuncOptions().weight(tw).bias(tb).training(true).momentum(0.1).eps(1e-5));
        ty.backward(to_torch(dy.span(), torch_sizes(5, y.dims())));
        expect_close("output", y.span(), ty);
        expect_close("input grad", dx.span(), tx.grad());
        expect_close("weight grad", ps.grad(ps.entry("0.weight")), tw.grad());
        expect_close("bias grad", ps.grad(ps.entry("0.bias")), tb.grad());
        const auto st = ps.host_buffers();
        const auto& me = ps.buffer_entries()[0];
        const auto& ve = ps.buffer_entries()[1];
        expect_close("running mean (_mean)", st.subspan(me.offset, me.size), rm);
        expect_close("running variance (_variance)", st.subspan(ve.offset, ve.size), rv);
        net.eval();
        const auto ye = net.forward(x);
        auto tye = F::batch_norm(tx.detach(), rm, rv, F::BatchNormFuncOptions().weight(tw.detach()).bias(tb.detach()).training(false).eps(1e-5));
        expect_close("evaluation output", ye.span(), tye);
    }
    std::printf("BatchNorm1D<6> on [8,6]\n");
    {
        Single<oar::BatchNorm1D<6>, oar::Shape<6>> net;
        oar::Tensor x(8, oar::Shape<6>::dims);
        fill_uniform(x.span(), 330, -1.0f, 2.0f);
        const auto y = net.forward(x);
        oar::Tensor dy(8, y.dims());
        fill_uniform(dy.span(), 331, -1.0f, 1.0f);
        oar::Tensor dx(8, x.dims());
        net.backward(dy, dx);
        auto rm = torch::zeros({6});
        auto rv = torch::ones({6});
        auto tx = to_torch(x.span(), torch_sizes(8, x.dims()), true);
        auto ty = F::batch_norm(tx, rm, rv, F::BatchNormFuncOptions().weight(torch::ones({6})).bias(torch::zeros({6})).training(true).momentum(0.1).eps(1e-5));
        ty.backward(to_torch(dy.span(), torch_sizes(8, y.dims())));
        expect_close("output", y.span(), ty);
        expect_close("input grad", dx.span(), tx.grad());
        const auto st = net.parameters().host_buffers();
        expect_close("running variance (_variance)", st.subspan(net.parameters().buffer_entries()[1].offset, 6), rv);
    }
}

TEST_CASE("Linear<980,10> forward and backward agree with libtorch (weight transposed)") {
    std::printf("Linear<980,10> on [8,980]\n");
    constexpr std::size_t n = 8;
    Single<oar::Linear<980, 10>, oar::Shape<980>> net(7);  // oar's XavierUniform init
    auto& ps = net.parameters();
    const auto& we = ps.entry("0.weight");
    const auto& be = ps.entry("0.bias");
    fill_uniform(ps.value(be), 300, -0.5f, 0.5f);

    oar::Tensor x(n, oar::Shape<980>::dims);
    fill_uniform(x.span(), 301, -1.0f, 1.0f);
    const auto y = net.forward(x);
    oar::Tensor dy(n, y.dims());
    fill_uniform(dy.span(), 302, -1.0f, 1.0f);
    oar::Tensor dx(n, x.dims());
    net.backward(dy, dx);

    auto tw = linear_weight_to_torch(ps.value(we), 980, 10, true);  // [10, 980]
    auto tb = to_torch(ps.value(be), {10}, true);
    auto tx = to_torch(x.span(), {n, 980}, true);
    auto ty = F::linear(tx, tw, tb);
    ty.backward(to_torch(dy.span(), {n, 10}));

    expect_close("output", y.span(), ty);
    expect_close("input grad", dx.span(), tx.grad());
    expect_close("weight grad ([in,out] vs torch [out,in]^T)", ps.grad(we), tw.grad().t());
    expect_close("bias grad", ps.grad(be), tb.grad());
}

TEST_CASE("CrossEntropyLoss (mean) and its logits gradient agree with libtorch, also for logits near +-1000") {
    constexpr std::size_t n = 12, classes = 10;
    auto logits = uniform(400, n * classes, -4.0f, 4.0f);
    std::vector<std::int64_t> labels(n);
    const oar::CounterRng rng{20240601};
    for (std::size_t i = 0; i < n; ++i) labels[i] = static_cast<std::int64_t>(rng.below(401, i, classes));
    // Rows 8..11: huge logits, where a naive exp overflows float (exp(89) = inf).
    const auto big = uniform(402, 4 * classes, -1000.0f, 1000.0f);
    std::copy(big.begin(), big.end(), logits.begin() + 8 * classes);
    logits[9 * classes + static_cast<std::size_t>(labels[9])] = 1000.0f;    // label is the clear winner
    logits[10 * classes + static_cast<std::size_t>(labels[10])] = -1000.0f;  // label is the clear loser
    for (std::size_t j = 0; j < classes; ++j) logits[11 * classes + j] = 1000.0f;  // all tied at +1000

    for (const bool large : {false, true}) {
        const std::size_t rows = large ? n : 8;
        std::printf("CrossEntropyLoss on [%zu,10]%s\n", rows, large ? " with rows of logits in [-1000, 1000]" : "");
        const oar::TensorView z(logits.data(), rows, oar::make_dims(classes));
        oar::CrossEntropyLoss<> ce;
        const float loss = ce.forward(z, std::span<const std::int64_t>(labels.data(), rows));

        auto tz = to_torch(std::span<const float>(logits.data(), rows * classes),
                           {static_cast<std::int64_t>(rows), classes}, true);
        auto tl = torch::from_blob(labels.data(), {static_cast<std::int64_t>(rows)}, torch::kInt64).clone();
        auto tloss = F::cross_entropy(tz, tl);  // reduction mean
        tloss.backward();

        REQUIRE(std::isfinite(loss));
        expect_close("loss", loss, tloss.item<double>());
        expect_close("d loss / d logits", ce.backward().span(), tz.grad());
    }
}

TEST_CASE("CrossEntropyLoss(use_softmax=false) on probabilities agrees with libtorch's nll_loss(log p)") {
    constexpr std::size_t rows = 9, classes = 10;
    // Rows of positive values normalised to 1: what a Softmax output layer hands the loss.
    auto probs = uniform(410, rows * classes, 0.01f, 1.0f);
    for (std::size_t r = 0; r < rows; ++r) {
        float s = 0.0f;
        for (std::size_t j = 0; j < classes; ++j) s += probs[r * classes + j];
        for (std::size_t j = 0; j < classes; ++j) probs[r * classes + j] /= s;
    }
    std::vector<std::int64_t> labels(rows);
    const oar::CounterRng rng{20240602};
    for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<std::int64_t>(rng.below(411, i, classes));
    for (const auto red : {oar::Reduction::mean, oar::Reduction::sum}) {
        const bool mean = red == oar::Reduction::mean;
        std::printf("CrossEntropyLoss(use_softmax=false) on [%zu,10], reduction %s\n", rows, mean ? "mean" : "sum");
        oar::CrossEntropyLoss<> ce(red, false);
        const float loss = ce.forward(oar::TensorView(probs.data(), rows, oar::make_dims(classes)), labels);
        auto tp = to_torch(probs, {static_cast<std::int64_t>(rows), classes}, true);
        auto tl = torch::from_blob(labels.data(), {static_cast<std::int64_t>(rows)}, torch::kInt64).clone();
        auto opts = F::NLLLossFuncOptions();
        if (mean) opts.reduction(torch::kMean);
        else opts.reduction(torch::kSum);
        auto tloss = F::nll_loss(torch::log(tp), tl, opts);
        tloss.backward();
        expect_close("loss", loss, tloss.item<double>());
        expect_close("d loss / d probabilities", ce.backward().span(), tp.grad());
    }
}

namespace {

/// Parameters and gradients of one flat buffer the optimizers update (odd size: a padded tail).
constexpr std::size_t kOptSize = 1003;

oar::ParameterSet make_param_set() {
    const oar::Dims d = oar::make_dims(kOptSize);
    return oar::ParameterSet((kOptSize + 15) / 16 * 16, {oar::ParamEntry{"0.weight", d, 0, kOptSize}});
}

/// Every optimizer runs twice: with the course's L2Decay(1e-5), and with 0.1, where the decay term
/// moves the parameters by far more than the 1e-5 tolerance (at 1e-5 a missing or doubled decay
/// would go unnoticed by SGD, Momentum and Adagrad). Parameters are drawn in [-0.05, 0.05] so that
/// float rounding of p (ulp ~4e-9) stays well below 1e-5 of the update p_t - p_0 being compared.
///
/// Runs `steps` updates of oar's optimizer (made by make_oar) and torch's (made by make_torch)
/// from the same parameters with the same gradients, comparing the parameters after each step
/// and the update so far (p_t - p_0, computed in double from both sides' float parameters).
template <class MakeOar, class MakeTorch>
void check_optimizer(const std::string& name, std::uint64_t stream, float p_scale, MakeOar&& make_oar,
                     MakeTorch&& make_torch, int steps = 3) {
    std::printf("%s\n", name.c_str());
    auto ps = make_param_set();
    const auto& e = ps.entries()[0];
    fill_uniform(ps.value(e), stream, -p_scale, p_scale);
    const std::vector<float> p0(ps.value(e).begin(), ps.value(e).end());
    auto opt = make_oar(ps);

    auto tp = to_torch(ps.value(e), {kOptSize}, true);
    auto topt = make_torch(std::vector<torch::Tensor>{tp});

    for (int t = 1; t <= steps; ++t) {
        // Gradients of mixed scale, a few exactly zero (the L2 term alone moves those).
        auto g = uniform(stream + static_cast<std::uint64_t>(t), kOptSize, -1.0f, 1.0f);
        for (std::size_t i = 0; i < kOptSize; ++i) {
            if (i % 97 == 0) g[i] = 0.0f;
            else if (i % 5 == 0) g[i] *= 1e-3f;
        }
        ps.clear_grad();
        std::copy(g.begin(), g.end(), ps.grad(e).begin());
        opt.step();
        tp.mutable_grad() = to_torch(g, {kOptSize});
        topt.step();

        const auto pa = ps.value(e);
        expect_close(name + ", step " + std::to_string(t) + ": parameters", pa, tp);
        std::vector<float> da(kOptSize), db(kOptSize);
        const auto tpc = tp.detach().contiguous();
        const float* pb = tpc.data_ptr<float>();
        for (std::size_t i = 0; i < kOptSize; ++i) {
            da[i] = static_cast<float>(static_cast<double>(pa[i]) - p0[i]);
            db[i] = static_cast<float>(static_cast<double>(pb[i]) - p0[i]);
        }
        expect_close(name + ", step " + std::to_string(t) + ": update p_t - p_0", da, to_torch(db, {kOptSize}));
    }
}

}  // namespace

TEST_CASE("SGD with L2 decay agrees with torch::optim::SGD(weight_decay)") {
    for (const float wd : {1e-5f, 0.1f}) {
        check_optimizer(
            "SGD(lr 0.01, L2 " + fmt(wd) + ")", 500, 0.05f,
            [&](oar::ParameterSet& ps) { return oar::SGD<>(ps, {.learning_rate = 0.01f, .weight_decay = oar::L2Decay(wd)}); },
            [&](std::vector<torch::Tensor> p) {
                return torch::optim::SGD(p, torch::optim::SGDOptions(0.01).weight_decay(wd));
            });
    }
}

TEST_CASE("Momentum with L2 decay agrees with torch::optim::SGD(momentum 0.9, dampening 0), plain and Nesterov") {
    for (const bool nesterov : {false, true})
        for (const float wd : {1e-5f, 0.1f}) {
            check_optimizer(
                std::string(nesterov ? "Momentum(Nesterov, " : "Momentum(") + "lr 0.01, mu 0.9, L2 " + fmt(wd) + ")",
                510, 0.05f,
                [&](oar::ParameterSet& ps) {
                    return oar::Momentum<>(ps, {.learning_rate = 0.01f,
                                                .momentum = 0.9f,
                                                .use_nesterov = nesterov,
                                                .weight_decay = oar::L2Decay(wd)});
                },
                [&](std::vector<torch::Tensor> p) {
                    return torch::optim::SGD(
                        p, torch::optim::SGDOptions(0.01).momentum(0.9).dampening(0).nesterov(nesterov).weight_decay(wd));
                });
        }
}

TEST_CASE("Adagrad with L2 decay agrees with torch::optim::Adagrad(eps 1e-6)") {
    for (const float wd : {1e-5f, 0.1f}) {
        check_optimizer(
            "Adagrad(lr 0.01, eps 1e-6, L2 " + fmt(wd) + ")", 520, 0.05f,
            [&](oar::ParameterSet& ps) {
                return oar::Adagrad<>(ps, {.learning_rate = 0.01f, .weight_decay = oar::L2Decay(wd)});
            },
            [&](std::vector<torch::Tensor> p) {
                return torch::optim::Adagrad(
                    p, torch::optim::AdagradOptions(0.01).eps(1e-6).initial_accumulator_value(0).weight_decay(wd));
            });
    }
}

TEST_CASE("Adam(1e-3, L2Decay(1e-5)) agrees with torch::optim::Adam(1e-3, weight_decay 1e-5) over 3 steps") {
    for (const float wd : {1e-5f, 0.1f}) {
        check_optimizer(
            "Adam(lr 1e-3, L2 " + fmt(wd) + ")", 530, 0.05f,
            [&](oar::ParameterSet& ps) {
                return oar::Adam<>(ps, {.learning_rate = 1e-3f, .weight_decay = oar::L2Decay(wd)});
            },
            [&](std::vector<torch::Tensor> p) {
                return torch::optim::Adam(p, torch::optim::AdamOptions(1e-3).weight_decay(wd));
            });
    }
}

TEST_CASE("The course CNN: 3 Adam steps on one batch agree with the same model in libtorch") {
    using Net = oar::Network<oar::course::CNN, oar::course::Image>;
    constexpr std::int64_t n = 8;
    Net net(2024);  // oar's own (Paddle-default) initialisation
    auto& ps = net.parameters();
    oar::Adam<> opt(ps, {.learning_rate = 1e-3f, .weight_decay = oar::L2Decay(1e-5f)});
    oar::CrossEntropyLoss<> ce;

    oar::Tensor x(n, oar::Shape<1, 28, 28>::dims);
    fill_uniform(x.span(), 600, 0.0f, 1.0f);
    std::vector<std::int64_t> labels(n);
    const oar::CounterRng rng{20240601};
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(rng.below(601, i, 10));

    // The same model in torch, from oar's initial weights.
    const char* keys[] = {"0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias"};
    auto tw1 = to_torch(ps.value(ps.entry("0.weight")), {20, 1, 5, 5}, true);
    auto tb1 = to_torch(ps.value(ps.entry("0.bias")), {20}, true);
    auto tw2 = to_torch(ps.value(ps.entry("3.weight")), {20, 20, 5, 5}, true);
    auto tb2 = to_torch(ps.value(ps.entry("3.bias")), {20}, true);
    auto tw3 = linear_weight_to_torch(ps.value(ps.entry("7.weight")), 980, 10, true);  // [10, 980]
    auto tb3 = to_torch(ps.value(ps.entry("7.bias")), {10}, true);
    std::vector<torch::Tensor> tparams{tw1, tb1, tw2, tb2, tw3, tb3};
    torch::optim::Adam topt(tparams, torch::optim::AdamOptions(1e-3).weight_decay(1e-5));
    auto tx = to_torch(x.span(), {n, 1, 28, 28});
    auto tl = torch::from_blob(labels.data(), {n}, torch::kInt64).clone();
    const auto conv = [](const torch::Tensor& b) { return F::Conv2dFuncOptions().bias(b).stride(1).padding(2); };
    const auto pool = F::MaxPool2dFuncOptions(2).stride(2);

    /// torch's view of oar's tensor `key` (the Linear weight transposed back to oar's layout).
    auto as_oar_layout = [&](std::size_t k, const torch::Tensor& t) { return k == 4 ? t.t() : t; };

    for (int step = 1; step <= 3; ++step) {
        std::printf("Course CNN, Adam step %d\n", step);
        net.clear_grad();
        const auto logits = net.forward(x);
        const float loss = ce.forward(logits, labels);
        net.backward(ce.backward());

        topt.zero_grad();
        auto h = F::max_pool2d(torch::relu(F::conv2d(tx, tw1, conv(tb1))), pool);
        h = F::max_pool2d(torch::relu(F::conv2d(h, tw2, conv(tb2))), pool);
        auto tlogits = F::linear(h.flatten(1), tw3, tb3);
        auto tloss = F::cross_entropy(tlogits, tl);
        tloss.backward();

        const std::string s = "step " + std::to_string(step) + ": ";
        expect_close(s + "logits", logits.span(), tlogits);
        expect_close(s + "loss", loss, tloss.item<double>());
        for (std::size_t k = 0; k < tparams.size(); ++k)
            expect_close(s + keys[k] + " grad", ps.grad(ps.entry(keys[k])), as_oar_layout(k, tparams[k].grad()));

        // torch steps from oar's gradients (compared above), as in the ResNet8 case below: Adam's
        // first steps divide each gradient entry by its own magnitude, so an entry near zero whose
        // rounding differs between the libraries (it depends on the ISA's summation width) may
        // move its weight by up to the learning rate, and every later step would inherit that.
        for (std::size_t k = 0; k < tparams.size(); ++k) {
            const auto g = ps.grad(ps.entry(keys[k]));
            tparams[k].mutable_grad() = k == 4 ? linear_weight_to_torch(g, 980, 10)
                                               : to_torch(g, tparams[k].sizes().vec());
        }
        opt.step();
        topt.step();
        for (std::size_t k = 0; k < tparams.size(); ++k)
            expect_close(s + keys[k] + " after Adam", ps.value(ps.entry(keys[k])), as_oar_layout(k, tparams[k]));
    }
}

namespace {

/// A network's parameters (leaves requiring gradients) and buffers as torch tensors by state-dict
/// key, copied from oar and laid out as oar lays them out (a Linear weight stays [In, Out]).
struct TorchState {
    std::map<std::string, torch::Tensor> tensors;
    std::vector<std::string> param_keys, buffer_keys;
    std::vector<torch::Tensor> params;

    explicit TorchState(const oar::ParameterSet& ps) {
        for (const auto& e : ps.entries()) {
            tensors[e.key] = to_torch(ps.value(e), sizes(e.dims), true);
            param_keys.push_back(e.key);
            params.push_back(tensors[e.key]);
        }
        const auto b = ps.host_buffers();
        for (const auto& e : ps.buffer_entries()) {
            tensors[e.key] = to_torch(b.subspan(e.offset, e.size), sizes(e.dims));
            buffer_keys.push_back(e.key);
        }
    }
    const torch::Tensor& operator[](const std::string& key) const { return tensors.at(key); }
    static std::vector<std::int64_t> sizes(const oar::Dims& d) {
        auto s = torch_sizes(1, d);
        s.erase(s.begin());
        return s;
    }

    /// Conv2D without bias at `prefix` ("3.body.0."), stride and padding s, p.
    torch::Tensor conv(const torch::Tensor& x, const std::string& prefix, std::int64_t s, std::int64_t p) const {
        return F::conv2d(x, (*this)[prefix + "weight"], F::Conv2dFuncOptions().stride(s).padding(p));
    }
    /// Conv2D with bias.
    torch::Tensor conv_b(const torch::Tensor& x, const std::string& prefix, std::int64_t s, std::int64_t p) const {
        return F::conv2d(x, (*this)[prefix + "weight"],
                         F::Conv2dFuncOptions().bias((*this)[prefix + "bias"]).stride(s).padding(p));
    }
    /// BatchNorm2D: Paddle's momentum 0.9 keeps 90 % of the running value, torch's momentum 0.1.
    torch::Tensor bn(const torch::Tensor& x, const std::string& prefix, bool train) const {
        return F::batch_norm(x, (*this)[prefix + "_mean"], (*this)[prefix + "_variance"],
                             F::BatchNormFuncOptions()
                                 .weight((*this)[prefix + "weight"])
                                 .bias((*this)[prefix + "bias"])
                                 .training(train)
                                 .momentum(0.1)
                                 .eps(1e-5));
    }
    /// Linear with oar's [In, Out] weight.
    torch::Tensor linear(const torch::Tensor& x, const std::string& prefix) const {
        return F::linear(x, (*this)[prefix + "weight"].t(), (*this)[prefix + "bias"]);
    }
};

/// ResNet8<W> in torch (the layer indices of models/resnet.hpp in the keys).
torch::Tensor resnet8_torch(const TorchState& t, const torch::Tensor& x, bool train) {
    auto h = torch::relu(t.bn(t.conv(x, "0.", 1, 1), "1.", train));
    for (const std::string b : {"3.", "5."}) {
        auto body = torch::relu(t.bn(t.conv(h, b + "body.0.", 1, 1), b + "body.1.", train));
        body = t.bn(t.conv(body, b + "body.3.", 1, 1), b + "body.4.", train);
        h = torch::relu(body + h);  // the block's sum, then the ReLU layer after it
    }
    auto body = torch::relu(t.bn(t.conv(h, "7.body.0.", 2, 1), "7.body.1.", train));
    body = t.bn(t.conv(body, "7.body.3.", 1, 1), "7.body.4.", train);
    const auto shortcut = t.bn(t.conv(h, "7.shortcut.0.", 2, 0), "7.shortcut.1.", train);
    h = torch::relu(body + shortcut);
    h = F::adaptive_avg_pool2d(h, F::AdaptiveAvgPool2dFuncOptions({1, 1})).flatten(1);
    return t.linear(h, "11.");
}

/// InceptionNet in torch.
torch::Tensor inception_torch(const TorchState& t, const torch::Tensor& x, bool train) {
    const auto pool = F::MaxPool2dFuncOptions(2).stride(2);
    auto h = F::max_pool2d(torch::relu(t.bn(t.conv(x, "0.", 1, 1), "1.", train)), pool);
    const auto b0 = torch::relu(t.conv_b(h, "4.0.0.", 1, 0));
    const auto b1 = torch::relu(t.conv_b(torch::relu(t.conv_b(h, "4.1.0.", 1, 0)), "4.1.2.", 1, 1));
    const auto b2 = torch::relu(t.conv_b(h, "4.2.0.", 1, 2));
    h = F::max_pool2d(torch::cat({b0, b1, b2}, 1), pool);
    h = F::adaptive_avg_pool2d(h, F::AdaptiveAvgPool2dFuncOptions({1, 1})).flatten(1);
    return t.linear(h, "8.");
}

/// One Adam step of `Model` on a batch of 4 in training mode, then one in evaluation mode (with
/// the running statistics and weights the first step left), against `torch_forward` on the same
/// weights: logits, loss, every parameter's gradient, every parameter after the step and every
/// running statistic after it, each to 1e-5 relative to its tensor's largest value (expect_close:
/// a bias that starts at zero is compared at the scale of its tensor, about the learning rate).
template <class Model, class TorchForward>
void check_model_steps(const std::string& name, std::uint64_t seed, TorchForward&& torch_forward) {
    using Net = oar::Network<Model, oar::models::CifarImage>;
    constexpr std::int64_t n = 4;
    Net net(seed);  // oar's own (Paddle-default) initialisation
    auto& ps = net.parameters();
    oar::Adam<> opt(ps, {.learning_rate = 1e-3f});
    oar::CrossEntropyLoss<> ce;
    TorchState t(ps);
    REQUIRE(!t.buffer_keys.empty());
    torch::optim::Adam topt(t.params, torch::optim::AdamOptions(1e-3));

    oar::Tensor x(n, oar::models::CifarImage::dims);
    fill_uniform(x.span(), seed + 1, -1.0f, 1.0f);
    std::vector<std::int64_t> labels(n);
    const oar::CounterRng rng{20240601};
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(rng.below(seed + 2, i, 10));
    const auto tx = to_torch(x.span(), {n, 3, 32, 32});
    const auto tl = torch::from_blob(labels.data(), {n}, torch::kInt64).clone();

    for (const bool train : {true, false}) {
        const std::string s = name + (train ? ", training: " : ", evaluation: ");
        std::printf("%s%s mode, one Adam step\n", name.c_str(), train ? " training" : " evaluation");
        if (train) net.train();
        else net.eval();
        net.clear_grad();
        const auto logits = net.forward(x);
        const float loss = ce.forward(logits, labels);
        net.backward(ce.backward());

        topt.zero_grad();
        const torch::Tensor tlogits = torch_forward(t, tx, train);
        const torch::Tensor tloss = F::cross_entropy(tlogits, tl);
        tloss.backward();

        expect_close(s + "logits", logits.span(), tlogits);
        expect_close(s + "loss", loss, tloss.item<double>());
        for (const auto& k : t.param_keys) expect_close(s + k + " grad", ps.grad(ps.entry(k)), t[k].grad());

        // Adam's first steps divide each gradient entry by its own magnitude (m / (sqrt(v) + 1e-8)),
        // so an entry near zero, whose rounding differs between the two libraries, may move its
        // parameter by anything up to the learning rate. torch therefore steps from oar's
        // gradients (compared above): the parameters after the step check Adam's arithmetic, and
        // that it moves every parameter and no buffer, and the next mode starts from equal weights.
        for (const auto& k : t.param_keys) {
            const auto g = ps.grad(ps.entry(k));
            t[k].mutable_grad() = to_torch(g, t[k].sizes().vec());
        }
        opt.step();
        topt.step();
        for (const auto& k : t.param_keys) expect_close(s + k + " after Adam", ps.value(ps.entry(k)), t[k]);
        const auto b = ps.host_buffers();
        for (const auto& e : ps.buffer_entries()) expect_close(s + e.key, b.subspan(e.offset, e.size), t[e.key]);
    }
}

}  // namespace

TEST_CASE("ResNet8 (Residual blocks, BatchNorm): one Adam step in training and one in evaluation mode agree with libtorch") {
    check_model_steps<oar::models::ResNet8<>>("ResNet8", 700, resnet8_torch);
}

TEST_CASE("InceptionNet (a Concat of three branches): one Adam step in training and one in evaluation mode agree with libtorch") {
    check_model_steps<oar::models::InceptionNet<>>("InceptionNet", 710, inception_torch);
}
