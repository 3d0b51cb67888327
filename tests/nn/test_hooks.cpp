// Observers on a Network (nn/network.hpp's forward(x, obs) / backward(dy, obs)) and the observers
// of nn/hooks.hpp: per-layer statistics, the NaN/Inf guard, and combining observers.
#include <oar/nn/hooks.hpp>

#include <doctest/doctest.h>

#include <oar/layers/activation.hpp>
#include <oar/layers/conv2d.hpp>
#include <oar/layers/flatten.hpp>
#include <oar/layers/linear.hpp>
#include <oar/layers/pool2d.hpp>
#include <oar/models/course.hpp>
#include <oar/nn/network.hpp>

#include "support/process.hpp"
#include "support/random.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace {
using namespace oar;
using CourseCNN = course::CNN;
using HooksCNN = Network<CourseCNN, Shape<1, 28, 28>>;

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
    HooksCNN net(1);
    const Tensor x = random_tensor(3, make_dims(1, 28, 28), 11);
    Recorder rec;
    net.set_step(41);
    net.forward(x, rec);
    REQUIRE(rec.records.size() == HooksCNN::num_layers);
    for (std::size_t i = 0; i < HooksCNN::num_layers; ++i) {
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
    REQUIRE(rec.records.size() == HooksCNN::num_layers);
    CHECK(rec.records[0].step == 42);  // eval passes do not count
    CHECK(rec.records[0].mode == Mode::eval);
    CHECK(net.step() == 42);
}

TEST_CASE("backward calls on_backward from the last layer to the first, with dy, dx and that layer's gradients") {
    HooksCNN net(2);
    const Tensor x = random_tensor(2, make_dims(1, 28, 28), 12);
    const Tensor dy = random_tensor(2, make_dims(10), 13);
    net.set_step(7);
    net.forward(x);
    Recorder rec;
    net.backward(dy, rec);
    REQUIRE(rec.records.size() == HooksCNN::num_layers);
    for (std::size_t k = 0; k < HooksCNN::num_layers; ++k) {
        const Record& r = rec.records[k];
        const std::size_t i = HooksCNN::num_layers - 1 - k;
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
        CHECK(r.param_offset == HooksCNN::info::param_offsets[i]);
        CHECK(r.grads_size == HooksCNN::info::param_blocks[i]);
        CHECK(r.grads_size >= HooksCNN::info::param_counts[i]);
    }
    // the first event's dy is a copy of the caller's dy; each later dy is the previous event's dx
    CHECK(rec.records[0].dy_values == std::vector<float>(dy.data(), dy.data() + dy.size()));
    for (std::size_t k = 1; k < HooksCNN::num_layers; ++k) CHECK(rec.records[k].dy == rec.records[k - 1].dx);

    Tensor dx(2, make_dims(1, 28, 28));
    rec.records.clear();
    net.backward(dy, dx.view(), rec);
    REQUIRE(rec.records.size() == HooksCNN::num_layers);
    CHECK(rec.records.back().dx == dx.data());
    CHECK(rec.records.back().dx_shape == "[2, 1, 28, 28]");
}

TEST_CASE("each layer's gradient span in on_backward is final: later layers do not change it") {
    HooksCNN net(3);
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
    HooksCNN net(4);
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
    REQUIRE(s.spans.size() == HooksCNN::num_layers);
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
        const std::size_t k = HooksCNN::num_layers - 1 - layer;
        CHECK(e.offset >= s.offsets[k]);
        CHECK(e.offset + e.size <= s.offsets[k] + s.spans[k].size());
    }
}

TEST_CASE("results are bitwise identical with and without an observer") {
    HooksCNN a(5), b(5);
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
    CHECK(rec.records.size() == 4 * HooksCNN::num_layers);
}

TEST_CASE("a tensor passed after dy is the input gradient, never taken for an observer") {
    static_assert(!LayerObserver<Tensor&, float>);
    static_assert(!LayerObserver<MutableTensorView, float>);
    static_assert(LayerObserver<Recorder&, float>);
    static_assert(LayerObserver<no_observer, float>);
    HooksCNN net(7);
    net.forward(random_tensor(2, make_dims(1, 28, 28), 22));
    Tensor dx(2, make_dims(1, 28, 28));
    net.backward(random_tensor(2, make_dims(10), 23), dx);
    CHECK_FALSE(std::all_of(dx.span().begin(), dx.span().end(), [](float v) { return v == 0.0f; }));
    Tensor wrong(2, make_dims(1, 28, 27));
    CHECK_THROWS_AS(net.backward(random_tensor(2, make_dims(10), 23), wrong), shape_error);
}

TEST_CASE("an observer with only on_forward is not called in backward") {
    HooksCNN net(6);
    ForwardOnly f;
    net.forward(random_tensor(1, make_dims(1, 28, 28), 20), f);
    CHECK(f.calls == int(HooksCNN::num_layers));
    net.backward(random_tensor(1, make_dims(10), 21), f);
    CHECK(f.calls == int(HooksCNN::num_layers));
}

// ---------------------------------------------------------------------------------------------
// nn/hooks.hpp
// ---------------------------------------------------------------------------------------------

namespace {
constexpr float finf = std::numeric_limits<float>::infinity();
constexpr float qnan = std::numeric_limits<float>::quiet_NaN();

/// Copies every tensor LayerStats reports, in LayerStats' order, for the numpy reference.
struct Capture {
    std::vector<std::vector<float>> blocks;
    void keep(std::span<const float> v) { blocks.emplace_back(v.begin(), v.end()); }
    void on_forward(const LayerEvent& e) {
        keep(e.input.span());
        keep(e.output.span());
    }
    void on_backward(const LayerEvent& e) {
        keep(e.dy.span());
        if (e.dx.data()) keep(e.dx.span());
        for (const auto& p : e.params) keep(std::span<const float>(e.param_grads).subspan(p.offset - e.param_offset, p.size));
    }
};

/// numpy's statistics of each block: {count, mean, std, min, max, non_finite} per line.
std::vector<std::vector<double>> numpy_stats(const std::vector<std::vector<float>>& blocks) {
    oar_test::TempDir dir;
    {
        std::ofstream values(dir.file("values.f32"), std::ios::binary), sizes(dir.file("sizes.txt"));
        for (const auto& b : blocks) {
            values.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size() * sizeof(float)));
            sizes << b.size() << '\n';
        }
    }
    const auto run = oar_test::run_command(std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR + "/tests/nn/tensor_stats.py " +
                                           dir.file("values.f32") + " " + dir.file("sizes.txt") + " 2>&1");
    REQUIRE_MESSAGE(run.status == 0, run.output);
    std::vector<std::vector<double>> out;
    std::istringstream in(run.output);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::vector<double> row;
        std::string tok;
        while (ls >> tok) row.push_back(tok == "nan" ? std::numeric_limits<double>::quiet_NaN() : std::stod(tok));
        out.push_back(row);
    }
    return out;
}

void check_row_against(const LayerStatsRow& r, const std::vector<double>& ref) {
    INFO("layer ", r.layer, " ", r.name, " ", r.tensor, " ", r.shape);
    REQUIRE(ref.size() == 6);
    CHECK(double(r.stats.count) == ref[0]);
    CHECK(double(r.stats.non_finite) == ref[5]);
    const double got[4] = {r.stats.mean, r.stats.std, r.stats.min, r.stats.max};
    for (int k = 0; k < 4; ++k) {
        if (std::isnan(ref[1 + k])) {
            CHECK(std::isnan(got[k]));
        } else {
            // both sum float32 data in double; only the summation order differs
            CHECK(got[k] == doctest::Approx(ref[1 + k]).epsilon(1e-9).scale(1e-12));
        }
    }
}
}  // namespace

TEST_CASE("LayerStats reports every layer's shapes and statistics as numpy computes them, forward and backward") {
    HooksCNN net(8);
    const Tensor x = random_tensor(3, make_dims(1, 28, 28), 30);
    const Tensor dy = random_tensor(3, make_dims(10), 31);
    Tensor dx(3, make_dims(1, 28, 28));
    LayerStats stats;
    Capture cap;
    net.set_step(5);
    net.forward(x, observers(stats, cap));
    net.backward(dy, dx.view(), observers(stats, cap));
    const auto& rows = stats.rows();
    // forward: input and output of 8 layers; backward: dy, dx, and 6 parameter gradients
    REQUIRE(rows.size() == 2 * 8 + 2 * 8 + 6);
    REQUIRE(cap.blocks.size() == rows.size());
    CHECK(rows[0].tensor == "input");
    CHECK(rows[0].shape == "[3, 1, 28, 28]");
    CHECK(rows[0].name == "Conv2D");
    CHECK(rows[0].step == 5);
    CHECK(rows[1].tensor == "output");
    CHECK(rows[1].shape == "[3, 20, 28, 28]");
    CHECK(rows[15].shape == "[3, 10]");
    CHECK(rows[16].pass == Pass::backward);
    CHECK(rows[16].layer == 7);
    CHECK(rows[16].tensor == "output grad");
    CHECK(rows[17].tensor == "input grad");
    CHECK(rows[17].shape == "[3, 980]");
    CHECK(rows[18].tensor == "7.weight grad");
    CHECK(rows[18].shape == "[980, 10]");
    CHECK(rows[19].tensor == "7.bias grad");
    CHECK(rows.back().tensor == "0.bias grad");
    CHECK(rows.back().shape == "[20]");
    const auto ref = numpy_stats(cap.blocks);
    REQUIRE(ref.size() == rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) check_row_against(rows[i], ref[i]);
    // not a degenerate comparison: the statistics differ from layer to layer
    CHECK(rows[1].stats.min < 0.0);  // conv output before ReLU
    CHECK(rows[3].stats.min == 0.0);  // after ReLU
}

TEST_CASE("LayerStats counts NaN and infinities and takes the statistics over the finite values") {
    HooksCNN net(9);
    Tensor x = random_tensor(2, make_dims(1, 28, 28), 32);
    x[5] = qnan;
    x[100] = finf;
    x[900] = -finf;
    LayerStats stats;
    Capture cap;
    net.forward(x, observers(stats, cap));
    const auto& rows = stats.rows();
    REQUIRE(rows.size() == 16);
    CHECK(rows[0].stats.non_finite == 3);
    CHECK(rows[0].stats.count == 2 * 784);
    // the direct computation on the input: the 1565 finite values
    double sum = 0, lo = 1e300, hi = -1e300;
    for (std::size_t i = 0; i < x.size(); ++i)
        if (i != 5 && i != 100 && i != 900) {
            sum += x[i];
            lo = std::min(lo, double(x[i]));
            hi = std::max(hi, double(x[i]));
        }
    const double mean = sum / 1565.0;
    double sq = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
        if (i != 5 && i != 100 && i != 900) sq += (x[i] - mean) * (x[i] - mean);
    CHECK(rows[0].stats.mean == doctest::Approx(mean).epsilon(1e-12));
    CHECK(rows[0].stats.std == doctest::Approx(std::sqrt(sq / 1565.0)).epsilon(1e-12));
    CHECK(rows[0].stats.min == lo);
    CHECK(rows[0].stats.max == hi);
    // the bad values spread through the convolution: counts in later layers match numpy's
    CHECK(rows[1].stats.non_finite > 3);
    const auto ref = numpy_stats(cap.blocks);
    REQUIRE(ref.size() == rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) check_row_against(rows[i], ref[i]);
}

TEST_CASE("LayerStats prints a table to an ostream or a FILE*") {
    HooksCNN net(10);
    const Tensor x = random_tensor(1, make_dims(1, 28, 28), 33);
    std::ostringstream os;
    {
        LayerStats printer(os);
        net.forward(x, printer);
        CHECK(printer.rows().empty());  // printed, not kept
    }
    std::vector<std::string> lines;
    {
        std::istringstream in(os.str());
        for (std::string l; std::getline(in, l);) lines.push_back(l);
    }
    REQUIRE(lines.size() == 1 + 16);
    CHECK(lines[0] == LayerStats::header());
    CHECK(lines[0].find("non-finite") != std::string::npos);
    CHECK(lines[1].find("0 Conv2D") != std::string::npos);
    CHECK(lines[1].find("input") != std::string::npos);
    CHECK(lines[1].find("[1, 1, 28, 28]") != std::string::npos);
    CHECK(lines[16].find("7 Linear") != std::string::npos);
    CHECK(lines[16].find("[1, 10]") != std::string::npos);

    oar_test::TempDir dir;
    LayerStats collected;
    net.set_step(0);  // the same step as the printed pass, so the same table
    net.forward(x, collected);
    std::FILE* f = std::fopen(dir.file("table.txt").c_str(), "w");
    REQUIRE(f != nullptr);
    collected.print(f);
    std::fclose(f);
    std::ifstream in(dir.file("table.txt"));
    std::stringstream text;
    text << in.rdbuf();
    std::ostringstream again;
    collected.print(again);
    CHECK(text.str() == again.str());
    CHECK(text.str() == os.str());  // same numbers: the same input and weights
}

TEST_CASE("first_non_finite finds a NaN or infinity at every position, in float and double") {
    for (std::size_t n : {1u, 7u, 8u, 33u, 100u}) {
        for (std::size_t at = 0; at < n; ++at) {
            for (double bad : {double(qnan), double(finf), -double(finf)}) {
                std::vector<float> f = oar_test::random_vector<float>(n, n + at);
                std::vector<double> d = oar_test::random_vector<double>(n, n + at);
                CHECK(first_non_finite(std::span<const float>(f)) == n);
                CHECK(first_non_finite(std::span<const double>(d)) == n);
                f[at] = float(bad);
                d[at] = bad;
                if (at + 1 < n) f[n - 1] = finf;  // a later one does not hide the first
                CHECK(first_non_finite(std::span<const float>(f)) == at);
                CHECK(first_non_finite(std::span<const double>(d)) == at);
            }
        }
    }
    const std::vector<float> extremes{std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                                      std::numeric_limits<float>::denorm_min(), 0.0f, -0.0f};
    CHECK(all_finite(std::span<const float>(extremes)));
}

TEST_CASE("NonFiniteGuard names the step, layer 0 and the element when the input holds an infinity") {
    HooksCNN net(11);
    Tensor x = random_tensor(2, make_dims(1, 28, 28), 34);
    x[784 + 3 * 28 + 5] = finf;  // sample 1, pixel (0, 3, 5)
    net.set_step(12);
    NonFiniteGuard guard;
    CHECK_THROWS_WITH_AS(net.forward(x, guard),
                         "oar: non-finite value at training step 12, layer 0 (Conv2D), forward: input element 873 of "
                         "[2, 1, 28, 28] (sample 1, at [0, 3, 5]) is inf",
                         non_finite_error);
    x[784 + 3 * 28 + 5] = 0.5f;
    net.eval();
    x[0] = qnan;
    CHECK_THROWS_WITH_AS(net.forward(x, guard), doctest::Contains("an eval pass after 12 training steps, layer 0"),
                         non_finite_error);
    // it is a value_error, so code catching those catches it
    CHECK_THROWS_AS(net.forward(x, guard), value_error);
}

TEST_CASE("NonFiniteGuard names a NaN weight as a parameter of its layer, or the output it spoils") {
    HooksCNN net(12);
    const Tensor x = random_tensor(2, make_dims(1, 28, 28), 35);
    auto w = net.parameters().value(net.parameters().entry("3.weight"));
    w[1 * 500 + 2 * 25 + 3 * 5 + 4] = qnan;  // [1, 2, 3, 4] of [20, 20, 5, 5]
    net.set_step(3);
    NonFiniteGuard guard;
    CHECK_THROWS_WITH_AS(net.forward(x, guard),
                         "oar: non-finite value at training step 3, layer 3 (Conv2D), forward: parameter 3.weight "
                         "element 569 of [20, 20, 5, 5] (at [1, 2, 3, 4]) is nan",
                         non_finite_error);
    NonFiniteGuard outputs_only({.check_parameters = false});
    CHECK_THROWS_WITH_AS(net.forward(x, outputs_only),
                         doctest::Contains("training step 3, layer 3 (Conv2D), forward: output element 196 of "
                                           "[2, 20, 14, 14] (sample 0, at [1, 0, 0]) is nan"),
                         non_finite_error);
}

TEST_CASE("NonFiniteGuard stops at the layer where huge weights overflow to infinity") {
    HooksCNN net(13);
    Tensor x = random_tensor(2, make_dims(1, 28, 28), 36);
    for (float& v : x.span()) v = std::abs(v);
    // every weight of the last Linear at 1e37: 980 non-negative inputs, some positive, overflow float
    for (float& v : net.parameters().value(net.parameters().entry("7.weight"))) v = 1e37f;
    net.set_step(40);
    NonFiniteGuard guard;
    bool thrown = false;
    try {
        net.forward(x, guard);
    } catch (const non_finite_error& e) {
        thrown = true;
        const std::string m = e.what();
        CHECK(m.find("training step 40, layer 7 (Linear), forward: output element ") != std::string::npos);
        CHECK(m.find("is inf") != std::string::npos);
    }
    CHECK(thrown);
    // without the guard the same pass silently returns infinities
    CHECK_FALSE(all_finite(std::span<const float>(net.forward(x).span())));
}

TEST_CASE("NonFiniteGuard checks backward: the loss gradient, then parameter gradients before the input gradient") {
    HooksCNN net(14);
    const Tensor x = random_tensor(2, make_dims(1, 28, 28), 37);
    NonFiniteGuard guard;
    net.set_step(21);
    net.forward(x, guard);  // clean: no throw
    Tensor dy = random_tensor(2, make_dims(10), 38);
    dy[13] = qnan;
    CHECK_THROWS_WITH_AS(net.backward(dy, guard),
                         "oar: non-finite value at training step 21, layer 7 (Linear), backward: output gradient "
                         "element 13 of [2, 10] (sample 1, at [3]) is nan",
                         non_finite_error);
    // a finite but huge loss gradient: the weight gradient sums over the batch and overflows first
    for (float& v : dy.span()) v = 3e38f;
    net.clear_grad();
    CHECK_THROWS_WITH_AS(net.backward(dy, guard),
                         doctest::Contains("training step 21, layer 7 (Linear), backward: parameter gradient 7.weight element "),
                         non_finite_error);
    // clean again: a whole backward passes, including the first layer's dx when asked
    net.clear_grad();
    Tensor dx(2, make_dims(1, 28, 28));
    CHECK_NOTHROW(net.backward(random_tensor(2, make_dims(10), 39), dx.view(), guard));
}

TEST_CASE("the guard changes nothing on clean data, and guard + stats combine with observers()") {
    HooksCNN a(15), b(15);
    const Tensor x = random_tensor(4, make_dims(1, 28, 28), 40);
    const Tensor dy = random_tensor(4, make_dims(10), 41);
    NonFiniteGuard guard;
    LayerStats stats;
    Recorder rec;
    const auto ya = a.forward(x);
    const auto yb = b.forward(x, observers(guard, stats, rec));
    CHECK(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)) == 0);
    a.backward(dy);
    b.backward(dy, observers(guard, stats, rec, ForwardOnly{}));
    const auto ga = a.parameters().grads(), gb = b.parameters().grads();
    CHECK(std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float)) == 0);
    CHECK(stats.rows().size() == 2 * 8 + 8 + 7 + 6);  // no dx row for layer 0
    CHECK(rec.records.size() == 16);
    // members are held by reference when passed as lvalues, by value when temporaries
    auto list = observers(rec, ForwardOnly{});
    a.forward(x, list);
    CHECK(rec.records.size() == 24);
    CHECK(std::get<1>(list.members()).calls == 8);
}

TEST_CASE("check_finite_parameters names the parameter, element and step after an optimizer step") {
    HooksCNN net(16);
    CHECK_NOTHROW(check_finite_parameters(net.parameters(), 9));
    auto b = net.parameters().value(net.parameters().entry("3.bias"));
    b[4] = -finf;
    CHECK_THROWS_WITH_AS(check_finite_parameters(net.parameters(), 9),
                         "oar: non-finite value after the optimizer step of training step 9: parameter 3.bias "
                         "element 4 of [20] (at [4]) is -inf",
                         non_finite_error);
    b[4] = 0.0f;
    net.parameters().value(net.parameters().entry("7.weight"))[10 * 10 + 9] = qnan;
    CHECK_THROWS_WITH_AS(check_finite_parameters(net.parameters(), 9),
                         doctest::Contains("parameter 7.weight element 109 of [980, 10] (at [10, 9]) is nan"),
                         non_finite_error);
}
