// Tests of oar/layers/batch_norm.hpp: BatchNorm1D / BatchNorm2D's facts, training and evaluation
// forward against the definition, the running statistics (Paddle's momentum, the variance kept
// unbiased), finite-difference gradients in both modes, and the buffers' life in a network: in the
// state dict under Paddle's names, counted as non-trainable, untouched by the optimizer, saved and
// loaded by checkpoints; the backward reads the statistics the training forward kept (the bits of
// summing them again), not those of an older forward after an evaluation one.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/layers/batch_norm.hpp>  // the header under test

#include <cmath>    // std::sqrt, std::abs
#include <cstddef>  // std::size_t
#include <string>   // std::string
#include <vector>   // std::vector

#include <oar/core/thread_pool.hpp>  // set_num_threads, default_pool
#include <oar/layers/conv2d.hpp>      // Conv2D: a network with a BatchNorm2D
#include <oar/layers/flatten.hpp>     // Flatten
#include <oar/layers/linear.hpp>      // Linear
#include <oar/nn/network.hpp>         // Network
#include <oar/nn/summary.hpp>         // summary
#include <oar/optim/adam.hpp>         // Adam: must not step the buffers
#include <oar/testing/gradcheck.hpp>  // gradcheck_layer
#include <oar/train/checkpoint.hpp>   // save_weights, load_weights

#include "support/random.hpp"    // fill_random
#include "support/temp_dir.hpp"  // TempDir

namespace {

template <class L, class In>
void check_batch_norm_gradients(bool train) {
    oar::testing::GradcheckOptions o;
    o.train = train;
    o.batch = 3;
    const auto r = oar::testing::gradcheck_layer<L, In>(o);
    INFO(r.message);
    CHECK(r.ok);
}

}  // namespace

static_assert(oar::ParametricLayer<oar::BatchNorm2D<4>> && oar::BufferedLayer<oar::BatchNorm2D<4>>);
static_assert(oar::BufferedLayer<oar::BatchNorm1D<8>> && !oar::BufferedLayer<oar::Linear<2, 3>>);
static_assert(oar::BatchNorm2D<4>::check(oar::make_dims(4, 5, 5)).ok());
static_assert(oar::BatchNorm2D<4>::check(oar::make_dims(3, 5, 5)).kind == oar::check_kind::channels);
static_assert(oar::BatchNorm1D<8>::check(oar::make_dims(8)).ok() && oar::BatchNorm1D<8>::check(oar::make_dims(8, 5)).ok());
static_assert(oar::BatchNorm2D<4>{}.momentum == 0.9f && oar::BatchNorm2D<4>{}.epsilon == 1e-5f);
static_assert(oar::BatchNorm2D<4>{.momentum = 0.99f, .epsilon = 1e-3f}.momentum == 0.99f);

TEST_CASE("BatchNorm2D normalises each channel with the batch's statistics and updates the running ones") {
    constexpr std::size_t n = 3, C = 2, H = 4, W = 5;
    oar::Network<oar::Sequential<oar::BatchNorm2D<C>>, oar::Shape<C, H, W>> net;
    auto& p = net.parameters();
    REQUIRE(p.buffer_entries().size() == 2);
    CHECK(p.buffer_entries()[0].key == "0._mean");
    CHECK(p.buffer_entries()[1].key == "0._variance");
    const auto start = p.host_buffers();
    CHECK(start[p.buffer_entries()[0].offset] == 0.0f);
    CHECK(start[p.buffer_entries()[1].offset] == 1.0f);
    // gamma = (2, 0.5), beta = (1, -1)
    p.value(p.entry("0.weight"))[0] = 2.0f;
    p.value(p.entry("0.weight"))[1] = 0.5f;
    p.value(p.entry("0.bias"))[0] = 1.0f;
    p.value(p.entry("0.bias"))[1] = -1.0f;
    oar::Tensor x(n, oar::make_dims(C, H, W));
    oar_test::fill_random(x.span(), 3, 2.0);
    const auto y = net.forward(x.view());
    for (std::size_t c = 0; c < C; ++c) {
        double s = 0, q = 0;
        for (std::size_t b = 0; b < n; ++b)
            for (std::size_t i = 0; i < H * W; ++i) s += x[(b * C + c) * H * W + i];
        const double mean = s / (n * H * W);
        for (std::size_t b = 0; b < n; ++b)
            for (std::size_t i = 0; i < H * W; ++i) q += std::pow(x[(b * C + c) * H * W + i] - mean, 2);
        const double var = q / (n * H * W);
        const double g = c == 0 ? 2.0 : 0.5, be = c == 0 ? 1.0 : -1.0;
        for (std::size_t b = 0; b < n; ++b)
            for (std::size_t i = 0; i < H * W; ++i) {
                const std::size_t k = (b * C + c) * H * W + i;
                CHECK(std::abs(y[k] - ((x[k] - mean) / std::sqrt(var + 1e-5) * g + be)) < 1e-5);
            }
        const auto st = p.host_buffers();
        CHECK(std::abs(st[p.buffer_entries()[0].offset + c] - 0.1 * mean) < 1e-6);
        CHECK(std::abs(st[p.buffer_entries()[1].offset + c] - (0.9 + 0.1 * var * (n * H * W) / (n * H * W - 1))) < 1e-6);
    }
    // Evaluation uses the running statistics and leaves them alone.
    const std::vector<float> before(p.host_buffers().begin(), p.host_buffers().end());
    net.eval();
    const auto ye = net.forward(x.view());
    const auto st = p.host_buffers();
    CHECK(std::vector<float>(st.begin(), st.end()) == before);
    const float m0 = st[p.buffer_entries()[0].offset], v0 = st[p.buffer_entries()[1].offset];
    CHECK(std::abs(ye[0] - ((x[0] - m0) / std::sqrt(v0 + 1e-5f) * 2.0f + 1.0f)) < 1e-5);
}

TEST_CASE("BatchNorm gradients match finite differences, in training and in evaluation") {
    check_batch_norm_gradients<oar::BatchNorm2D<3>, oar::Shape<3, 4, 5>>(true);
    check_batch_norm_gradients<oar::BatchNorm2D<3>, oar::Shape<3, 4, 5>>(false);
    check_batch_norm_gradients<oar::BatchNorm1D<6>, oar::Shape<6>>(true);
    check_batch_norm_gradients<oar::BatchNorm1D<4>, oar::Shape<4, 7>>(true);
    check_batch_norm_gradients<oar::BatchNorm1D<6>, oar::Shape<6>>(false);
}

TEST_CASE("buffers are non-trainable: counted apart by summary, untouched by Adam with L2Decay, saved and loaded") {
    using Seq = oar::Sequential<oar::Conv2D<1, 4, 3, 1, 1>, oar::BatchNorm2D<4>, oar::Flatten, oar::Linear<64, 3>>;
    using Net = oar::Network<Seq, oar::Shape<1, 4, 4>>;
    static_assert(Net::info::total_buffers == 8 && Net::info::buffer_counts[1] == 8);
    static_assert(Net::info::total_params == 4 * 9 + 4 + 8 + 64 * 3 + 3);
    const std::string s = oar::summary<Net>();
    CHECK(s.find("Trainable params: " + std::to_string(Net::info::total_params)) != std::string::npos);
    CHECK(s.find("Non-trainable params: 8") != std::string::npos);
    Net net(1);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.1f, .weight_decay = oar::L2Decay(0.5f)});
    oar::Tensor x(4, oar::make_dims(1, 4, 4));
    oar_test::fill_random(x.span(), 9, 1.0);
    const auto y = net.forward(x.view());
    const std::vector<float> stats(net.parameters().host_buffers().begin(), net.parameters().host_buffers().end());
    oar::Tensor dy(4, y.dims());
    oar_test::fill_random(dy.span(), 10, 1.0);
    net.backward(dy.view());
    opt.step();
    const auto after = net.parameters().host_buffers();
    CHECK(std::vector<float>(after.begin(), after.end()) == stats);  // the optimizer never sees buffers
    CHECK(net.state_dict().size() == 6 + 2);
    // Saved and loaded with the weights.
    oar_test::TempDir tmp;
    const std::string file = (tmp.path / "bn.safetensors").string();
    oar::save_weights(file, net);
    Net other(7);
    oar::load_weights(file, other);
    const auto ob = other.parameters().host_buffers();
    CHECK(std::vector<float>(ob.begin(), ob.end()) == stats);
    const auto ov = other.parameters().host_values(), nv = net.parameters().host_values();
    CHECK(std::vector<float>(ov.begin(), ov.end()) == std::vector<float>(nv.begin(), nv.end()));
}

namespace {

/// Network<BatchNorm2D<C>>'s backward after a forward in `forward_mode` (the backward in training)
/// against op::batch_norm_backward run on the same input without kept statistics: dx, dgamma and
/// dbeta bit-equal. train_first: a training forward of another input before, whose statistics the
/// backward must not read after an evaluation forward.
void check_kept_statistics(bool eval_forward, std::size_t threads) {
    INFO("eval_forward=", eval_forward, " threads=", threads);
    oar::set_num_threads(threads);
    constexpr std::size_t n = 4, C = 3, H = 33, W = 32;  // large enough to be split by channel over the pool
    oar::Network<oar::Sequential<oar::BatchNorm2D<C>>, oar::Shape<C, H, W>> net;
    auto& p = net.parameters();
    for (std::size_t c = 0; c < C; ++c) {
        p.value(p.entry("0.weight"))[c] = 0.5f + static_cast<float>(c);
        p.value(p.entry("0.bias"))[c] = 0.25f - static_cast<float>(c);
    }
    oar::Tensor x(n, oar::make_dims(C, H, W)), x_other(n, oar::make_dims(C, H, W)), dy(n, oar::make_dims(C, H, W)),
        dx(n, oar::make_dims(C, H, W));
    oar_test::fill_random(x.span(), 11, 2.0);
    oar_test::fill_random(x_other.span(), 12, 3.0);
    oar_test::fill_random(dy.span(), 13, 1.0);
    net.train();
    net.forward(eval_forward ? x_other.view() : x.view());
    if (eval_forward) {
        net.eval();
        net.forward(x.view());
        net.train();
    }
    const std::vector<float> running(p.host_buffers().begin(), p.host_buffers().end());
    net.clear_grad();
    net.backward(dy.view(), dx.view());

    std::vector<float> want_dx(n * C * H * W), dgamma(C, 0.0f), dbeta(C, 0.0f);
    const auto gamma = p.value(p.entry("0.weight"));
    oar::kernel<oar::op::batch_norm_backward, oar::basic_cpu<float>>::run(
        n, C, H * W, x.span().data(), gamma.data(), running.data() + p.buffer_entries()[0].offset,
        running.data() + p.buffer_entries()[1].offset, true, 1e-5f, dy.span().data(), dgamma.data(), dbeta.data(),
        want_dx.data());
    CHECK(std::vector<float>(dx.span().begin(), dx.span().end()) == want_dx);
    const auto grads = p.grads();
    CHECK(std::vector<float>(grads.begin() + p.entry("0.weight").offset, grads.begin() + p.entry("0.weight").offset + C) == dgamma);
    CHECK(std::vector<float>(grads.begin() + p.entry("0.bias").offset, grads.begin() + p.entry("0.bias").offset + C) == dbeta);
}

}  // namespace

TEST_CASE("BatchNorm2D's backward reads the statistics its training forward kept: the bits of summing them again") {
    const std::size_t threads = oar::default_pool().size();
    for (const std::size_t t : {1, 2, 3}) {
        check_kept_statistics(false, t);
        check_kept_statistics(true, t);  // after an evaluation forward: sums them again, not the older ones
    }
    oar::set_num_threads(threads);
}
