// Tests of oar/models/resnet.hpp: ResNet8 and InceptionNet compile with the shapes and counts
// torch gives the same modules, train on synthetic 3x32x32 data with the loss falling, and save and
// load their weights and running statistics. (Their numbers against libtorch: tests/torch/.)
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/models/resnet.hpp>  // the header under test

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <string>   // std::string
#include <vector>   // std::vector

#include <oar/loss/cross_entropy.hpp>  // CrossEntropyLoss
#include <oar/nn/network.hpp>          // Network
#include <oar/nn/summary.hpp>          // summary
#include <oar/optim/adam.hpp>          // Adam
#include <oar/train/checkpoint.hpp>    // save_weights, load_weights

#include "support/random.hpp"    // fill_random
#include "support/temp_dir.hpp"  // TempDir

namespace {

using Res = oar::models::ResNet8<8>;
using Inc = oar::models::InceptionNet<>;
using ResInfo = Res::bind<oar::models::CifarImage>;
using IncInfo = Inc::bind<oar::models::CifarImage>;

/// Trains `steps` Adam steps on one fixed synthetic batch (labels a function of the image) and
/// returns the first and last losses.
template <class Net>
std::pair<float, float> train_briefly(Net& net, int steps) {
    constexpr std::size_t n = 16;
    oar::Tensor x(n, oar::make_dims(3, 32, 32));
    oar_test::fill_random(x.span(), 21);
    std::vector<std::int64_t> labels(n);
    for (std::size_t i = 0; i < n; ++i) {
        // The class is the quadrant of the first channel's mean brightness pattern: learnable.
        double s = 0;
        for (std::size_t k = 0; k < 32 * 32; ++k) s += x[i * 3 * 1024 + k];
        labels[i] = static_cast<std::int64_t>(i % 4) + (s > 0 ? 4 : 0);
    }
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::CrossEntropyLoss loss;
    float first = 0, last = 0;
    net.train();
    for (int s = 0; s < steps; ++s) {
        const float l = loss(net.forward(x.view()), labels);
        if (s == 0) first = l;
        last = l;
        net.clear_grad();
        net.backward(loss.backward());
        opt.step();
    }
    return {first, last};
}

}  // namespace

// Counts as torch counts the same modules (tests/torch/ builds them): weights and biases (the
// convolutions before a BatchNorm have none), and BatchNorm's running mean and variance as buffers.
static_assert(ResInfo::output_dims == oar::make_dims(10));
static_assert(ResInfo::total_params == (3 * 8 * 9) + 2 * 8                                    // stem (no conv bias)
                                           + 2 * (2 * (8 * 8 * 9) + 2 * 2 * 8)                  // two basic blocks
                                           + (8 * 16 * 9) + (16 * 16 * 9) + 2 * 2 * 16          // projection body
                                           + (8 * 16) + 2 * 16                                  // its shortcut
                                           + 16 * 10 + 10);                                     // classifier
static_assert(ResInfo::total_buffers == 2 * 8 + 2 * 2 * 2 * 8 + 3 * 2 * 16);
static_assert(IncInfo::output_dims == oar::make_dims(10));
static_assert(IncInfo::dims[5] == oar::make_dims(32, 16, 16));  // the Concat: 8 + 16 + 8 channels
static_assert(ResInfo::total_flops > 2 * 5 * (8 * 8 * 9) * 32 * 32);  // the five 8-channel convolutions at least

TEST_CASE("ResNet8 and InceptionNet train on synthetic 3x32x32 data with the loss falling") {
    oar::Network<Res, oar::models::CifarImage> res(1);
    const auto [r0, r1] = train_briefly(res, 12);
    INFO("ResNet8 loss " << r0 << " -> " << r1);
    CHECK(r1 < 0.5f * r0);
    oar::Network<Inc, oar::models::CifarImage> inc(2);
    const auto [i0, i1] = train_briefly(inc, 12);
    INFO("InceptionNet loss " << i0 << " -> " << i1);
    CHECK(i1 < 0.8f * i0);
}

TEST_CASE("ResNet8 saves and loads its weights and running statistics, and evaluates the same afterwards") {
    using Net = oar::Network<Res, oar::models::CifarImage>;
    Net net(3);
    train_briefly(net, 2);  // running statistics away from their start
    const auto& bufs = net.parameters().buffer_entries();
    REQUIRE(bufs.size() == 16);  // 8 BatchNorm2D layers, mean and variance each
    CHECK(bufs[0].key == "1._mean");
    CHECK(bufs[2].key == "3.body.1._mean");
    CHECK(bufs[15].key == "7.shortcut.1._variance");
    oar::Tensor x(2, oar::make_dims(3, 32, 32));
    oar_test::fill_random(x.span(), 5);
    net.eval();
    const auto y = net.forward(x.view());
    const std::vector<float> want(y.data(), y.data() + y.size());

    oar_test::TempDir tmp;
    const std::string file = (tmp.path / "resnet.safetensors").string();
    oar::save_weights(file, net);
    Net other(9);
    oar::load_weights(file, other);
    const auto a = other.parameters().host_buffers(), b = net.parameters().host_buffers();
    CHECK(std::vector<float>(a.begin(), a.end()) == std::vector<float>(b.begin(), b.end()));
    other.eval();
    const auto y2 = other.forward(x.view());
    CHECK(std::vector<float>(y2.data(), y2.data() + y2.size()) == want);
    // The nested layers appear in the summary, indented under their block.
    const std::string table = oar::summary<Net>();
    CHECK(table.find("\n   7.shortcut.0 Conv2D") != std::string::npos);
}
