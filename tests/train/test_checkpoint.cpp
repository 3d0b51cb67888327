// Tests of include/oar/train/checkpoint.hpp: weights in both layouts, mismatches named by key, files
// cut at every byte leaving the network untouched, optimizer state round trips, mismatched pairs,
// the course CNN against PyTorch in both directions (tests/train/torch_cnn_check.py), SIGKILL of a
// real child process in the middle of saving, and a resumed run bitwise equal to an uninterrupted one.
#include <doctest/doctest.h>  // TEST_CASE, CHECK, REQUIRE

#include <algorithm>   // std::equal, std::max
#include <chrono>      // std::chrono: the kill delay
#include <cmath>       // std::fabs
#include <csignal>     // SIGKILL
#include <cstddef>     // std::size_t, std::byte
#include <cstdint>     // std::uint64_t
#include <cstring>     // std::memcpy
#include <filesystem>  // std::filesystem: files in the checkpoint folder
#include <fstream>     // std::ifstream, std::ofstream
#include <memory>      // std::unique_ptr: the large network, shared with the forked child
#include <random>      // std::mt19937: the kill delay
#include <string>      // std::string
#include <thread>      // std::this_thread::sleep_for
#include <vector>      // std::vector

#include <sys/wait.h>  // ::waitpid, WIFSIGNALED
#include <unistd.h>    // ::fork, ::_exit

#include <oar/models/course.hpp>      // oar::course::CNN, oar::course::Image
#include <oar/oar.hpp>                // Network, layers, optimizers, DataLoader
#include <oar/train/checkpoint.hpp>   // under test

#include "support/errors.hpp"         // oar_test::message_of, contains
#include "support/process.hpp"        // oar_test::run_command: the torch cross-check
#include "support/python.hpp"   // oar_test::skip_without_python: no test venv
#include "support/temp_dir.hpp"       // oar_test::TempDir

namespace fs = std::filesystem;

namespace {

using oar_test::contains;
using oar_test::message_of;
using oar_test::TempDir;

using SmallMLP = oar::Sequential<oar::Flatten, oar::Linear<12, 8>, oar::ReLU, oar::Linear<8, 3>>;
using SmallNet = oar::Network<SmallMLP, oar::Shape<3, 4>>;
using CnnNet = oar::Network<oar::course::CNN, oar::course::Image>;

template <class Net>
std::vector<float> params_of(const Net& net) {
    const auto v = net.parameters().values();
    return {v.begin(), v.end()};
}

std::vector<std::byte> file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> b(c.size());
    if (!c.empty()) std::memcpy(b.data(), c.data(), c.size());
    return b;
}
void write_bytes(const std::string& path, const std::vector<std::byte>& b, std::size_t len) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(len));
}

/// One training step of a classifier on a deterministic batch: gives Adam non-zero moments.
template <class Net, class Opt>
void train_step(Net& net, Opt& opt, std::size_t batch, std::uint64_t seed) {
    using In = typename Net::input_shape;
    oar::Tensor x(batch, In::dims);
    oar::CounterRng rng{seed};
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = rng.uniform(0, i) * 2.0f - 1.0f;
    std::vector<std::int64_t> y(batch);
    for (std::size_t i = 0; i < batch; ++i) y[i] = static_cast<std::int64_t>(i % Net::output_shape::size);
    oar::CrossEntropyLoss loss;
    (void)loss(net.forward(x.view()), y);
    net.backward(loss.backward());
    opt.step();
    opt.clear_grad();
}

oar::TrainingState at_epoch(std::uint64_t e) {
    oar::TrainingState s;
    s.epoch = e;
    return s;
}

}  // namespace

TEST_CASE("weights round-trip in the paddle layout and in the torch layout, with torch's shapes on disk") {
    TempDir dir;
    SmallNet a(1), b(2), c(3);
    REQUIRE(params_of(a) != params_of(b));
    oar::save_weights(dir.file("p.safetensors"), a);
    oar::load_weights(dir.file("p.safetensors"), b);
    CHECK(params_of(a) == params_of(b));

    oar::save_weights(dir.file("t.safetensors"), a, oar::WeightLayout::torch);
    const auto st = oar::io::read_safetensors(dir.file("t.safetensors"));
    CHECK(st.metadata().at("oar.layout") == "torch");
    CHECK(st.at("1.weight").shape == std::vector<std::uint64_t>{8, 12});  // torch's [out, in]
    CHECK(st.at("3.weight").shape == std::vector<std::uint64_t>{3, 8});
    CHECK(st.at("1.bias").shape == std::vector<std::uint64_t>{8});
    const auto w = st.values<float>("1.weight");
    const auto mem = a.parameters().value(a.parameters().entry("1.weight"));  // [12, 8]
    CHECK(w[2 * 12 + 5] == mem[5 * 8 + 2]);
    oar::load_weights(dir.file("t.safetensors"), c);  // the metadata says torch
    CHECK(params_of(a) == params_of(c));
}

TEST_CASE("a file without oar metadata is read in the layout the caller names") {
    TempDir dir;
    SmallNet a(1), b(2), c(3);
    // As torch would write it: [out, in] weights, no "oar.layout".
    std::vector<std::vector<float>> keep;
    std::vector<oar::io::TensorRef> refs;
    for (const auto& e : a.parameters().entries()) {
        const auto v = a.parameters().value(e);
        if (e.dims.rank == 2) {
            auto& t = keep.emplace_back(v.size());
            for (std::size_t r = 0; r < e.dims.d[0]; ++r)
                for (std::size_t k = 0; k < e.dims.d[1]; ++k) t[k * e.dims.d[0] + r] = v[r * e.dims.d[1] + k];
            refs.push_back(oar::io::TensorRef::of<float>(e.key, {e.dims.d[1], e.dims.d[0]}, t));
        } else {
            refs.push_back(oar::io::TensorRef::of<float>(e.key, {e.dims.d[0]}, v));
        }
    }
    oar::io::write_safetensors(dir.file("torchish.safetensors"), refs, {{"format", "pt"}});
    const std::string msg = message_of<oar::shape_error>([&] { oar::load_weights(dir.file("torchish.safetensors"), b); });
    CHECK(contains(msg, "key '1.weight' has shape [8, 12], expected [12, 8]"));
    CHECK(params_of(b) != params_of(a));
    oar::load_weights(dir.file("torchish.safetensors"), c, oar::WeightLayout::torch);
    CHECK(params_of(c) == params_of(a));
}

TEST_CASE("name, shape and dtype mismatches name the key with both shapes or dtypes and change nothing") {
    TempDir dir;
    SmallNet net(7);
    const auto before = params_of(net);
    const std::vector<float> w(12 * 8), b8(8), w3(8 * 3), b3(3), extra(2);
    const std::vector<double> w64(12 * 8);
    auto load = [&](std::vector<oar::io::TensorRef> refs) {
        oar::io::write_safetensors(dir.file("m.safetensors"), refs);
        return [&] { oar::load_weights(dir.file("m.safetensors"), net); };
    };
    using R = oar::io::TensorRef;
    CHECK(contains(message_of<oar::value_error>(load({R::of<float>("1.weight", {12, 8}, w), R::of<float>("1.bias", {8}, b8),
                                                      R::of<float>("3.weight", {8, 3}, w3)})),
                   "key '3.bias' is missing (expected F32 [3])"));
    CHECK(contains(message_of<oar::shape_error>(load({R::of<float>("1.weight", {12, 8}, w), R::of<float>("1.bias", {8}, b8),
                                                      R::of<float>("3.weight", {3, 8}, w3), R::of<float>("3.bias", {3}, b3)})),
                   "key '3.weight' has shape [3, 8], expected [8, 3]"));
    CHECK(contains(message_of<oar::value_error>(load({R::of<double>("1.weight", {12, 8}, w64), R::of<float>("1.bias", {8}, b8),
                                                      R::of<float>("3.weight", {8, 3}, w3), R::of<float>("3.bias", {3}, b3)})),
                   "key '1.weight' is F64 [12, 8], expected F32 [12, 8]"));
    CHECK(contains(message_of<oar::value_error>(load({R::of<float>("1.weight", {12, 8}, w), R::of<float>("1.bias", {8}, b8),
                                                      R::of<float>("3.weight", {8, 3}, w3), R::of<float>("3.bias", {3}, b3),
                                                      R::of<float>("4.bias", {2}, extra)})),
                   "unexpected key '4.bias'"));
    CHECK(params_of(net) == before);
}

TEST_CASE("a weights file cut at every byte is refused and leaves the network untouched") {
    TempDir dir;
    SmallNet a(1), b(2);
    oar::save_weights(dir.file("w.safetensors"), a, oar::WeightLayout::torch);
    const auto full = file_bytes(dir.file("w.safetensors"));
    const auto before = params_of(b);
    std::size_t refused = 0;
    for (std::size_t len = 0; len < full.size(); ++len) {
        write_bytes(dir.file("cut.safetensors"), full, len);
        try {
            oar::load_weights(dir.file("cut.safetensors"), b);
            FAIL_CHECK("a file cut at byte " << len << " of " << full.size() << " was accepted");
        } catch (const oar::format_error& e) {
            ++refused;
            if (!contains(e.what(), "cut.safetensors")) FAIL_CHECK(e.what());
        }
        const auto now = b.parameters().values();  // compared in place (g++ 12 warns falsely on a temporary vector here)
        if (!std::equal(now.begin(), now.end(), before.begin(), before.end())) FAIL_CHECK("the network changed at cut " << len);
    }
    CHECK(refused == full.size());
    const auto after = params_of(b);
    CHECK(after == before);
}

TEST_CASE("a checkpoint restores weights, Adam's moments and step count, the learning rate and the training state") {
    TempDir dir;
    SmallNet net(1);
    oar::Adam<> opt(net.parameters(), {.learning_rate = 0.01f, .weight_decay = oar::L2Decay(1e-4f)});
    for (int i = 0; i < 3; ++i) train_step(net, opt, 5, 100 + i);
    opt.set_learning_rate(0.0123f);
    oar::TrainingState ts{.epoch = 2, .global_step = 3, .rng_seed = 99, .sampler_epoch = 2,
                          .extra = {{"lr_schedule.last_epoch", "2"}, {"note", "a \"quoted\" value"}}};
    oar::save_checkpoint(dir.path.string(), "ckpt", net, opt, ts);
    CHECK(fs::exists(dir.file("ckpt.safetensors")));
    CHECK(fs::exists(dir.file("ckpt.state.safetensors")));
    CHECK_FALSE(fs::exists(dir.file("ckpt.safetensors.prev")));
    CHECK(oar::checkpoint_exists(dir.path.string(), "ckpt"));
    const auto st = oar::io::read_safetensors(dir.file("ckpt.state.safetensors"));
    CHECK(st.at("1.weight.moment1").shape == std::vector<std::uint64_t>{12, 8});
    CHECK(st.at("3.bias.moment2").shape == std::vector<std::uint64_t>{3});

    SmallNet fresh(1);
    oar::Adam<> fresh_opt(fresh.parameters(), {.learning_rate = 0.5f, .weight_decay = oar::L2Decay(1e-4f)});
    const auto got = oar::load_checkpoint(dir.path.string(), "ckpt", fresh, fresh_opt);
    CHECK(params_of(fresh) == params_of(net));
    CHECK(fresh_opt.step_count() == 3);
    CHECK(fresh_opt.learning_rate() == 0.0123f);
    CHECK(fresh.step() == net.step());
    auto s1 = opt.state(), s2 = fresh_opt.state();
    REQUIRE(s1.size() == 2);
    for (std::size_t k = 0; k < 2; ++k) CHECK(std::equal(s1[k].second.begin(), s1[k].second.end(), s2[k].second.begin()));
    CHECK(got.epoch == 2);
    CHECK(got.global_step == 3);
    CHECK(got.rng_seed == 99);
    CHECK(got.sampler_epoch == 2);
    CHECK(got.network_step == net.step());
    CHECK(got.network_seed == 1);
    CHECK(got.extra == ts.extra);
    // Both continue identically.
    train_step(net, opt, 5, 200);
    train_step(fresh, fresh_opt, 5, 200);
    CHECK(params_of(fresh) == params_of(net));
}

TEST_CASE("a checkpoint saved with torch-layout weights loads back through its layout metadata") {
    TempDir dir;
    SmallNet net(1);
    oar::Momentum<> opt(net.parameters());
    train_step(net, opt, 4, 3);
    oar::save_checkpoint(dir.path.string(), "t", net, opt, at_epoch(4), oar::WeightLayout::torch);
    CHECK(oar::io::read_safetensors(dir.file("t.safetensors")).at("1.weight").shape == std::vector<std::uint64_t>{8, 12});
    SmallNet fresh(2);
    oar::Momentum<> fresh_opt(fresh.parameters());
    CHECK(oar::load_checkpoint(dir.path.string(), "t", fresh, fresh_opt).epoch == 4);
    CHECK(params_of(fresh) == params_of(net));
    const auto a = opt.state()[0].second, b = fresh_opt.state()[0].second;
    CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
}

TEST_CASE("a mismatched pair, another optimizer kind or a cut state file is refused before anything changes") {
    TempDir dir;
    const std::string d = dir.path.string();
    SmallNet net(1);
    oar::Adam<> opt(net.parameters());
    train_step(net, opt, 4, 1);
    oar::save_checkpoint(d, "a", net, opt, {});
    train_step(net, opt, 4, 2);
    oar::save_checkpoint(d, "b", net, opt, {});
    fs::copy_file(dir.file("b.safetensors"), dir.file("a.safetensors"), fs::copy_options::overwrite_existing);

    SmallNet fresh(5);
    oar::Adam<> fresh_opt(fresh.parameters());
    const auto before = params_of(fresh);
    const std::string msg = message_of<oar::format_error>([&] { (void)oar::load_checkpoint(d, "a", fresh, fresh_opt); });
    CHECK(contains(msg, "a.safetensors"));
    CHECK(contains(msg, "a mismatched pair"));
    CHECK(params_of(fresh) == before);
    CHECK(fresh_opt.step_count() == 0);

    oar::Momentum<> momentum(fresh.parameters());
    CHECK(contains(message_of<oar::value_error>([&] { (void)oar::load_checkpoint(d, "b", fresh, momentum); }),
                   "buffers 'moment1,moment2', this optimizer has 'velocity'"));
    CHECK(params_of(fresh) == before);

    const auto state = file_bytes(dir.file("b.state.safetensors"));
    for (std::size_t len = 0; len < state.size(); len += 7) {
        write_bytes(dir.file("b.state.safetensors"), state, len);
        CHECK_THROWS_AS((void)oar::load_checkpoint(d, "b", fresh, fresh_opt), oar::format_error);
    }
    CHECK(params_of(fresh) == before);
    CHECK(fresh_opt.step_count() == 0);
    CHECK(contains(message_of<oar::io_error>([&] { (void)oar::load_checkpoint(d, "none", fresh, fresh_opt); }), "none.state.safetensors"));
}

TEST_CASE("a save killed between replacing the weights and the state file loads the previous checkpoint whole") {
    TempDir dir;
    const std::string d = dir.path.string();
    SmallNet net(1);
    oar::Adam<> opt(net.parameters());
    train_step(net, opt, 4, 1);
    oar::save_checkpoint(d, "c", net, opt, at_epoch(1));
    const auto old_params = params_of(net);
    const auto old_weights = file_bytes(dir.file("c.safetensors"));
    train_step(net, opt, 4, 2);
    // Simulate the kill: the new weights renamed in, the previous kept as ".prev", the old state file.
    fs::copy_file(dir.file("c.safetensors"), dir.file("c.safetensors.prev"));
    oar::save_weights(dir.file("c.safetensors"), net);
    REQUIRE(file_bytes(dir.file("c.safetensors")) != old_weights);

    SmallNet fresh(9);
    oar::Adam<> fresh_opt(fresh.parameters());
    CHECK(oar::load_checkpoint(d, "c", fresh, fresh_opt).epoch == 1);
    CHECK(params_of(fresh) == old_params);
    CHECK(fresh_opt.step_count() == 1);
    // The next save repairs and replaces the pair, leaving no ".prev".
    oar::save_checkpoint(d, "c", net, opt, at_epoch(2));
    CHECK_FALSE(fs::exists(dir.file("c.safetensors.prev")));
    CHECK(oar::load_checkpoint(d, "c", fresh, fresh_opt).epoch == 2);
    CHECK(params_of(fresh) == params_of(net));
}

namespace {

/// max|a - b| / max|b|, as tests/torch and torch_cnn_check.py measure agreement.
double relative_error(std::span<const float> a, std::span<const float> b) {
    double err = 0, scale = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        err = std::max(err, std::fabs(static_cast<double>(a[i]) - b[i]));
        scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
    }
    return err / std::max(scale, 1e-30);
}

std::string torch_script() { return std::string(OAR_SOURCE_DIR) + "/tests/train/torch_cnn_check.py"; }

}  // namespace

TEST_CASE("the course CNN trained in oar and saved in the torch layout gives the same logits in a torch nn.Sequential") {
    TempDir dir;
    CnnNet net(3);
    oar::Adam<> opt(net.parameters(), {.learning_rate = 0.001f, .weight_decay = oar::L2Decay(1e-5f)});
    for (int i = 0; i < 3; ++i) train_step(net, opt, 16, 10 + i);
    net.eval();
    oar::Tensor x(8, oar::course::Image::dims);
    oar::CounterRng rng{77};
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = rng.uniform(1, i);
    const auto out = net.forward(x.view());
    const std::vector<float> logits(out.data(), out.data() + out.size());
    oar::save_weights(dir.file("cnn.safetensors"), net, oar::WeightLayout::torch);
    oar::io::write_safetensors(dir.file("io.safetensors"),
                               {oar::io::TensorRef::of<float>("x", {8, 1, 28, 28}, std::span<const float>(x.data(), x.size())),
                                oar::io::TensorRef::of<float>("logits", {8, 10}, logits)});
    if (oar_test::skip_without_python("torch, safetensors")) return;
    const auto r = oar_test::run_command(std::string(OAR_PYTHON) + " " + torch_script() + " check " + dir.file("cnn.safetensors") +
                                         " " + dir.file("io.safetensors") + " 2>&1");
    MESSAGE("oar -> torch: " << r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "rel="));
}

TEST_CASE("a torch-initialised and torch-trained course CNN loaded into oar gives torch's logits") {
    if (oar_test::skip_without_python("torch, safetensors")) return;
    TempDir dir;
    const auto r = oar_test::run_command(std::string(OAR_PYTHON) + " " + torch_script() + " make " + dir.file("torch.safetensors") +
                                         " " + dir.file("io.safetensors") + " 2>&1");
    INFO(r.output);
    REQUIRE(r.status == 0);
    CnnNet net(0);
    const auto before = params_of(net);
    // torch's file has no oar metadata: read as paddle, its Linear weight does not fit.
    CHECK(contains(message_of<oar::shape_error>([&] { oar::load_weights(dir.file("torch.safetensors"), net); }),
                   "key '7.weight' has shape [10, 980], expected [980, 10]"));
    CHECK(params_of(net) == before);
    oar::load_weights(dir.file("torch.safetensors"), net, oar::WeightLayout::torch);
    const auto io = oar::io::read_safetensors(dir.file("io.safetensors"));
    const auto x = io.values<float>("x");
    const auto want = io.values<float>("logits");
    REQUIRE(x.size() == 8 * 28 * 28);
    net.eval();
    const auto out = net.forward(oar::TensorView(x.data(), 8, oar::course::Image::dims));
    const double rel = relative_error({out.data(), out.size()}, want);
    MESSAGE("torch -> oar: rel=" << rel);
    CHECK(out.size() == want.size());  // 8 x 10 logits, all compared
    CHECK(rel <= 1e-5);
    CHECK(params_of(net) != before);   // the logits come from torch's weights, loaded, not the initial ones
}

namespace {

using BigMLP = oar::Sequential<oar::Flatten, oar::Linear<1024, 512>, oar::ReLU, oar::Linear<512, 512>>;  // 3 MB of weights
using BigNet = oar::Network<BigMLP, oar::Shape<1024>>;

/// Sets every parameter and every Adam moment of generation g to the value g, so a loaded
/// checkpoint shows whether its two files (and each file's parts) come from the same save.
void fill_generation(BigNet& net, oar::Adam<>& opt, std::uint64_t g) {
    for (const auto& e : net.parameters().entries()) {
        auto v = net.parameters().value(e);
        std::fill(v.begin(), v.end(), static_cast<float>(g));
    }
    for (auto& [name, buf] : opt.state())
        for (const auto& e : net.parameters().entries())
            std::fill(buf.begin() + static_cast<std::ptrdiff_t>(e.offset), buf.begin() + static_cast<std::ptrdiff_t>(e.offset + e.size),
                      static_cast<float>(g));
    opt.set_step_count(g);
}

/// Every parameter and moment equals `g`?
bool uniform_generation(BigNet& net, oar::Adam<>& opt, float g) {
    for (const auto& e : net.parameters().entries())
        for (float v : net.parameters().value(e))
            if (v != g) return false;
    for (auto& [name, buf] : opt.state())
        for (const auto& e : net.parameters().entries())
            for (std::size_t i = 0; i < e.size; ++i)
                if (buf[e.offset + i] != g) return false;
    return opt.step_count() == static_cast<std::uint64_t>(g);
}

}  // namespace

TEST_CASE("a child process killed with SIGKILL while saving large checkpoints always leaves the previous one loadable") {
    TempDir dir;
    const std::string d = dir.path.string();
    auto net = std::make_unique<BigNet>(1);
    auto opt = std::make_unique<oar::Adam<>>(net->parameters());
    fill_generation(*net, *opt, 1);
    oar::save_checkpoint(d, "k", *net, *opt, at_epoch(1));
    oar::save_weights(dir.file("w.safetensors"), *net);
    std::mt19937 gen(std::random_device{}());
    std::uint64_t last = 1, next = 2;
    float last_weights = 1;
    std::size_t advanced = 0, interrupted = 0;
    // Six rounds, and more (up to 40) until a kill has landed in the middle of a write: the delays
    // are random, and on a slow build (ASan, a loaded host) a child spends long stretches filling
    // its next generation in memory, so six kills can all miss the writes.
    for (int round = 0; round < 6 || (interrupted == 0 && round < 40); ++round) {
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            // The child: save generation after generation until killed (9 MB per checkpoint pair, 3 MB weights).
            for (std::uint64_t g = next;; ++g) {
                fill_generation(*net, *opt, g);
                oar::save_checkpoint(d, "k", *net, *opt, at_epoch(g));
                oar::save_weights(dir.file("w.safetensors"), *net);
            }
        }
        const int delay_ms = std::uniform_int_distribution<int>(5, 600)(gen);
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        REQUIRE(::kill(child, SIGKILL) == 0);
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        CHECK(WIFSIGNALED(status));

        BigNet fresh(2);
        oar::Adam<> fresh_opt(fresh.parameters());
        const auto ts = oar::load_checkpoint(d, "k", fresh, fresh_opt);
        INFO("round " << round << ", killed after " << delay_ms << " ms, loaded generation " << ts.epoch);
        CHECK(ts.epoch >= last);
        CHECK(uniform_generation(fresh, fresh_opt, static_cast<float>(ts.epoch)));
        BigNet weights_only(3);
        oar::load_weights(dir.file("w.safetensors"), weights_only);
        const float w0 = weights_only.parameters().value(weights_only.parameters().entries()[0])[0];
        CHECK(w0 >= static_cast<float>(last_weights));
        bool uniform = true;
        for (const auto& e : weights_only.parameters().entries())
            for (float v : weights_only.parameters().value(e)) uniform = uniform && v == w0;
        CHECK(uniform);
        const std::string via = fs::exists(dir.file("k.safetensors.prev")) ? " (the pair through .prev)" : "";
        MESSAGE("SIGKILL after " << delay_ms << " ms: checkpoint generation " << ts.epoch << via << ", weights file generation " << w0);
        last_weights = w0;
        if (ts.epoch > last) ++advanced;
        last = ts.epoch;
        next = last + 1000;  // a new range, so that generations never repeat across rounds
        interrupted += oar::io::remove_stale_temporaries(dir.file("k.safetensors")) +
                       oar::io::remove_stale_temporaries(dir.file("k.state.safetensors")) +
                       oar::io::remove_stale_temporaries(dir.file("w.safetensors"));
    }
    MESSAGE(interrupted << " half-written temporary files left by the killed children (removed)");
    CHECK(advanced > 0);     // the children did save between kills
    CHECK(interrupted > 0);  // and were killed in the middle of writing
    std::size_t temporaries = 0;
    for (const auto& e : fs::directory_iterator(dir.path)) temporaries += contains(e.path().filename().string(), ".tmp.");
    CHECK(temporaries == 0);
}

namespace {

using ToyModel = oar::Sequential<oar::Flatten, oar::Linear<64, 32>, oar::ReLU, oar::DropoutPercent<20>, oar::Linear<32, 4>>;
using ToyNet = oar::Network<ToyModel, oar::Shape<1, 8, 8>>;

/// 96 learnable samples: class c lights row 2c and 2c + 1 of an 8x8 image over deterministic noise.
oar::data::InMemoryDataset toy_dataset() {
    std::vector<float> images;
    std::vector<std::int64_t> labels;
    oar::CounterRng rng{11};
    for (std::size_t i = 0; i < 96; ++i) {
        const std::size_t c = (i * 5) % 4;
        for (std::size_t p = 0; p < 64; ++p)
            images.push_back((p / 8 == 2 * c || p / 8 == 2 * c + 1 ? 1.0f : 0.0f) + 0.3f * rng.uniform(2, i * 64 + p));
        labels.push_back(static_cast<std::int64_t>(c));
    }
    return oar::data::InMemoryDataset(std::move(images), std::move(labels), oar::make_dims(1, 8, 8));
}

/// Everything one training run owns, built fresh from the same configuration.
struct ToyRun {
    const oar::data::InMemoryDataset& data;
    ToyNet net{42};
    oar::Adam<> opt{net.parameters(), {.learning_rate = 0.01f, .weight_decay = oar::L2Decay(1e-3f)}};
    oar::data::DataLoader<oar::data::InMemoryDataset> loader{data, {.batch_size = 10, .shuffle = true, .seed = 5}};
    std::uint64_t global_step = 0;
    explicit ToyRun(const oar::data::InMemoryDataset& d) : data(d) {}

    /// The course's manual loop: forward, loss, backward, step, clear_grad, for epochs [from, to).
    void train(std::uint64_t from, std::uint64_t to) {
        oar::CrossEntropyLoss loss;
        net.train();
        for (std::uint64_t e = from; e < to; ++e) {
            REQUIRE(loader.current_epoch() == e);
            for (auto&& b : loader()) {
                (void)loss(net.forward(b.images.view()), b.labels);
                net.backward(loss.backward());
                opt.step();
                opt.clear_grad();
                ++global_step;
            }
        }
    }
    std::vector<std::vector<float>> optimizer_state() {
        std::vector<std::vector<float>> out;
        for (auto& [name, buf] : opt.state()) out.emplace_back(buf.begin(), buf.end());
        return out;
    }
};

}  // namespace

TEST_CASE("training 2 epochs, saving, loading into fresh objects and training 2 more equals 4 epochs bitwise") {
    TempDir dir;
    const auto data = toy_dataset();
    ToyRun straight(data);
    straight.train(0, 4);

    {
        ToyRun first(data);
        first.train(0, 2);
        oar::TrainingState ts;
        ts.epoch = 2;
        ts.global_step = first.global_step;
        ts.sampler_epoch = first.loader.current_epoch();
        ts.rng_seed = 5;
        oar::save_checkpoint(dir.path.string(), "epoch_2", first.net, first.opt, ts);
        REQUIRE(params_of(first.net) != params_of(straight.net));
    }
    ToyRun resumed(data);
    const auto ts = oar::load_checkpoint(dir.path.string(), "epoch_2", resumed.net, resumed.opt);
    CHECK(ts.network_seed == resumed.net.seed());
    resumed.loader.set_epoch(ts.sampler_epoch);
    resumed.global_step = ts.global_step;
    resumed.train(ts.epoch, 4);

    CHECK(resumed.global_step == straight.global_step);
    CHECK(resumed.net.step() == straight.net.step());
    CHECK(resumed.opt.step_count() == straight.opt.step_count());
    CHECK(params_of(resumed.net) == params_of(straight.net));
    CHECK(resumed.optimizer_state() == straight.optimizer_state());

    // The dropout step is part of what must be restored: without it the run diverges.
    ToyRun forgetful(data);
    (void)oar::load_checkpoint(dir.path.string(), "epoch_2", forgetful.net, forgetful.opt);
    forgetful.net.set_step(0);
    forgetful.loader.set_epoch(ts.sampler_epoch);
    forgetful.train(ts.epoch, 4);
    CHECK(params_of(forgetful.net) != params_of(straight.net));
}
