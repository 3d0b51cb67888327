// Observers on a Network (nn/network.hpp's forward(x, obs) / backward(dy, obs)) and the observers
// of nn/hooks.hpp: per-layer statistics, the NaN/Inf guard, and combining observers.
#include <doctest/doctest.h>

#include <oar/layers/activation.hpp>
#include <oar/layers/conv2d.hpp>
#include <oar/layers/flatten.hpp>
#include <oar/layers/linear.hpp>
#include <oar/layers/pool2d.hpp>
#include <oar/nn/network.hpp>

#include "support/random.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace {
using namespace oar;
using CourseCNN = Sequential<Conv2D<1, 20, 5, 1, 2>, ReLU, MaxPool2D<2, 2>, Conv2D<20, 20, 5, 1, 2>, ReLU,
                             MaxPool2D<2, 2>, Flatten, Linear<980, 10>>;
using CNN = Network<CourseCNN, Shape<1, 28, 28>>;

Tensor random_tensor(std::size_t n, Dims d, std::uint64_t seed, double scale = 1.0) {
    Tensor t(n, d);
    oar_test::fill_random(t.span(), seed, scale);
    return t;
}

/// What a recording observer keeps of one event (views die with the call, so copy what matters).
struct Record {
    Pass pass;
    std::size_t index;
    std::string name;
    std::uint64_t step;
    Mode mode;
    const float* input;
    const float* output;
    std::string input_shape, output_shape, dy_shape, dx_shape;
    const float* dy;
    const float* dx;
    const float* grads;
    std::size_t grads_size, param_offset;
    std::vector<std::string> keys;
    std::vector<float> dy_values;  // copied: the arena's gradient buffers are reused layer after layer
};

struct Recorder {
    std::vector<Record> records;
    void keep(const LayerEvent& e) {
        Record r{e.pass, e.index, std::string(e.name), e.step, e.mode, e.input.data(), e.output.data(),
                 e.input.shape_string(), e.output.shape_string(), e.dy.shape_string(), e.dx.shape_string(),
                 e.dy.data(), e.dx.data(), e.param_grads.data(), e.param_grads.size(), e.param_offset, {}, {}};
        for (const auto& p : e.params) r.keys.push_back(p.key);
        r.dy_values.assign(e.dy.data(), e.dy.data() + e.dy.size());
        records.push_back(std::move(r));
    }
    void on_forward(const LayerEvent& e) { keep(e); }
    void on_backward(const LayerEvent& e) { keep(e); }
};

struct ForwardOnly {
    int calls = 0;
    void on_forward(const LayerEvent&) { ++calls; }
};

const std::vector<std::string> cnn_names{"Conv2D", "ReLU", "MaxPool2D", "Conv2D", "ReLU", "MaxPool2D", "Flatten", "Linear"};
}  // namespace

TEST_CASE("forward calls on_forward after every layer in order, with its input and output") {
    CNN net(1);
    const Tensor x = random_tensor(3, make_dims(1, 28, 28), 11);
    Recorder rec;
    net.set_step(41);
    net.forward(x, rec);
    REQUIRE(rec.records.size() == CNN::num_layers);
    for (std::size_t i = 0; i < CNN::num_layers; ++i) {
        const Record& r = rec.records[i];
        CHECK(r.pass == Pass::forward);
        CHECK(r.index == i);
        CHECK(r.name == cnn_names[i]);
        CHECK(r.step == 41);
        CHECK(r.mode == Mode::train);
        CHECK(r.input == net.activation(i).data());
        CHECK(r.output == net.activation(i + 1).data());
        CHECK(r.input_shape == net.activation(i).shape_string());
        CHECK(r.output_shape == net.activation(i + 1).shape_string());
        CHECK(r.dy == nullptr);
        CHECK(r.dx == nullptr);
    }
    CHECK(rec.records[0].input_shape == "[3, 1, 28, 28]");
    CHECK(rec.records[7].output_shape == "[3, 10]");
    CHECK(rec.records[0].keys == std::vector<std::string>{"0.weight", "0.bias"});
    CHECK(rec.records[1].keys.empty());
    CHECK(rec.records[3].keys == std::vector<std::string>{"3.weight", "3.bias"});
    CHECK(rec.records[7].keys == std::vector<std::string>{"7.weight", "7.bias"});
    CHECK(net.step() == 42);

    net.eval();
    rec.records.clear();
    net.forward(x, rec);
    REQUIRE(rec.records.size() == CNN::num_layers);
    CHECK(rec.records[0].step == 42);  // eval passes do not count
    CHECK(rec.records[0].mode == Mode::eval);
    CHECK(net.step() == 42);
}

TEST_CASE("backward calls on_backward from the last layer to the first, with dy, dx and that layer's gradients") {
    CNN net(2);
    const Tensor x = random_tensor(2, make_dims(1, 28, 28), 12);
    const Tensor dy = random_tensor(2, make_dims(10), 13);
    net.set_step(7);
    net.forward(x);
    Recorder rec;
    net.backward(dy, rec);
    REQUIRE(rec.records.size() == CNN::num_layers);
    for (std::size_t k = 0; k < CNN::num_layers; ++k) {
        const Record& r = rec.records[k];
        const std::size_t i = CNN::num_layers - 1 - k;
        CHECK(r.pass == Pass::backward);
        CHECK(r.index == i);
        CHECK(r.name == cnn_names[i]);
        CHECK(r.step == 7);  // the forward this backward follows
        CHECK(r.dy_shape == net.activation(i + 1).shape_string());
        CHECK(r.input == net.activation(i).data());
        if (i > 0) {
            CHECK(r.dx_shape == net.activation(i).shape_string());
            CHECK(r.dx != nullptr);
        } else {
            CHECK(r.dx == nullptr);  // not asked for
        }
        CHECK(r.param_offset == CNN::info::param_offsets[i]);
        CHECK(r.grads_size == CNN::info::param_blocks[i]);
        CHECK(r.grads_size >= CNN::info::param_counts[i]);
    }
    // the first event's dy is a copy of the caller's dy; each later dy is the previous event's dx
    CHECK(rec.records[0].dy_values == std::vector<float>(dy.data(), dy.data() + dy.size()));
    for (std::size_t k = 1; k < CNN::num_layers; ++k) CHECK(rec.records[k].dy == rec.records[k - 1].dx);

    Tensor dx(2, make_dims(1, 28, 28));
    rec.records.clear();
    net.backward(dy, dx.view(), rec);
    REQUIRE(rec.records.size() == CNN::num_layers);
    CHECK(rec.records.back().dx == dx.data());
    CHECK(rec.records.back().dx_shape == "[2, 1, 28, 28]");
}

TEST_CASE("each layer's gradient span in on_backward is final: later layers do not change it") {
    CNN net(3);
    const Tensor x = random_tensor(4, make_dims(1, 28, 28), 14);
    const Tensor dy = random_tensor(4, make_dims(10), 15);
    net.forward(x);
    struct Snapshot {
        std::vector<std::vector<float>> blocks;
        std::vector<std::size_t> offsets;
        void on_backward(const LayerEvent& e) {
            blocks.emplace_back(e.param_grads.begin(), e.param_grads.end());
            offsets.push_back(e.param_offset);
        }
    } snap;
    net.backward(dy, snap);
    const auto g = net.parameters().grads();
    for (std::size_t k = 0; k < snap.blocks.size(); ++k)
        CHECK(std::equal(snap.blocks[k].begin(), snap.blocks[k].end(), g.begin() + static_cast<std::ptrdiff_t>(snap.offsets[k])));
}

TEST_CASE("the parameter-gradient spans of the layers tile the flat gradient buffer exactly, in reverse order") {
    CNN net(4);
    net.forward(random_tensor(2, make_dims(1, 28, 28), 16));
    struct Spans {
        std::vector<std::span<float>> spans;
        std::vector<std::size_t> offsets;
        void on_backward(const LayerEvent& e) {
            spans.push_back(e.param_grads);
            offsets.push_back(e.param_offset);
        }
    } s;
    net.backward(random_tensor(2, make_dims(10), 17), s);
    const auto g = net.parameters().grads();
    REQUIRE(s.spans.size() == CNN::num_layers);
    // walking the events backwards, each span begins where the previous one ended
    float* expected = g.data() + g.size();
    for (std::size_t k = 0; k < s.spans.size(); ++k) {
        CHECK(s.spans[k].data() + s.spans[k].size() == expected);
        CHECK(s.spans[k].data() == g.data() + s.offsets[k]);
        expected = s.spans[k].data();
    }
    CHECK(expected == g.data());
    // and every named tensor lies inside its layer's span
    std::size_t covered = 0;
    for (const auto& sp : s.spans) covered += sp.size();
    CHECK(covered == g.size());
    for (const auto& e : net.parameters().entries()) {
        const std::size_t layer = std::stoul(e.key.substr(0, e.key.find('.')));
        const std::size_t k = CNN::num_layers - 1 - layer;
        CHECK(e.offset >= s.offsets[k]);
        CHECK(e.offset + e.size <= s.offsets[k] + s.spans[k].size());
    }
}

TEST_CASE("results are bitwise identical with and without an observer") {
    CNN a(5), b(5);
    const Tensor x = random_tensor(3, make_dims(1, 28, 28), 18);
    const Tensor dy = random_tensor(3, make_dims(10), 19);
    Tensor dxa(3, make_dims(1, 28, 28)), dxb(3, make_dims(1, 28, 28));
    Recorder rec;
    for (int step = 0; step < 2; ++step) {
        const auto ya = a.forward(x);
        const auto yb = b.forward(x, rec);
        CHECK(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)) == 0);
        a.backward(dy, dxa.view());
        b.backward(dy, dxb.view(), rec);
    }
    CHECK(std::memcmp(dxa.data(), dxb.data(), dxa.size() * sizeof(float)) == 0);
    const auto ga = a.parameters().grads(), gb = b.parameters().grads();
    CHECK(std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float)) == 0);
    CHECK(a.step() == b.step());
    CHECK(rec.records.size() == 4 * CNN::num_layers);
}

TEST_CASE("an observer with only on_forward is not called in backward") {
    CNN net(6);
    ForwardOnly f;
    net.forward(random_tensor(1, make_dims(1, 28, 28), 20), f);
    CHECK(f.calls == int(CNN::num_layers));
    net.backward(random_tensor(1, make_dims(10), 21), f);
    CHECK(f.calls == int(CNN::num_layers));
}
