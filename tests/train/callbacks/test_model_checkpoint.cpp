// ModelCheckpoint with Model::save_checkpoint / load_checkpoint: a run stopped after epoch 2 (or
// inside an epoch) and resumed in fresh objects ends bit for bit where an uninterrupted run ends,
// LR schedule and dropout included; what is saved when; only the writer saves.
#include <doctest/doctest.h>

#include <oar/train/callbacks/model_checkpoint.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include <oar/oar.hpp>                    // Adam
#include <oar/train/callbacks/lr_scheduler.hpp>     // LRScheduler: its state rides in the checkpoint

#include "support/temp_dir.hpp"   // oar_test::TempDir
#include "support/toy_model.hpp"  // oar_test::toy_set, ToyNet (with dropout)

namespace fs = std::filesystem;

namespace {

const auto train_set = oar_test::toy_set(70);
const auto valid_set = oar_test::toy_set(20, 9);
const oar::FitOptions opts{.epochs = 4, .batch_size = 10, .seed = 3};  // 7 steps an epoch

struct StopAt {
    std::uint64_t at;
    template <class M>
    void on_train_batch_end(M& model, const oar::Logs& l) {
        if (l.global_step == at) model.stop_training();
    }
};

/// One training process: fresh network, optimizer, schedule and model; optionally resumed from
/// dir/latest; trains up to `epochs` (or until a stop at global step `stop_at`).
std::vector<float> session(const fs::path& dir, std::size_t epochs, bool resume, std::uint64_t stop_at = 0) {
    oar_test::ToyNet net(21);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.02f, .weight_decay = oar::L2Decay(1e-4f)});
    oar::StepDecay sched(0.02, 1, 0.7);
    oar::Model model(net);
    model.prepare(opt, oar::CrossEntropyLoss<>{}, {oar::top_k_accuracy()});
    if (resume) model.load_checkpoint(dir.string(), "latest");
    oar::LRScheduler lr(sched);
    oar::ModelCheckpoint ckpt({.dir = dir.string(), .save_freq = 0});
    auto o = opts;
    o.epochs = epochs;
    if (stop_at) model.fit(train_set, &valid_set, o, lr, StopAt{stop_at}, ckpt);
    else model.fit(train_set, &valid_set, o, lr, ckpt);
    return oar_test::weights_of(net);
}

}  // namespace

TEST_CASE("stopped after epoch 2 and resumed to epoch 4 in fresh objects, training ends bit for bit as one 4-epoch run") {
    oar_test::TempDir a, b;
    const auto whole = session(a.path, 4, false);
    session(b.path, 2, false);
    CHECK(fs::exists(b.path / "latest.safetensors"));
    CHECK(fs::exists(b.path / "latest.state.safetensors"));
    const auto resumed = session(b.path, 4, true);
    CHECK(oar_test::bitwise_equal(whole, resumed));
    // and the checkpoint mattered: two epochs from scratch are somewhere else
    oar_test::TempDir c;
    CHECK_FALSE(oar_test::bitwise_equal(whole, session(c.path, 2, false)));
}

TEST_CASE("a fit interrupted inside an epoch saves 'latest' there, and resuming ends bit for bit the same") {
    oar_test::TempDir a, b;
    const auto whole = session(a.path, 4, false);
    session(b.path, 4, false, 11);  // stops after step 11: epoch 1, batch 4 of 7
    oar_test::ToyNet probe(0);
    oar::Adam probe_opt(probe.parameters());
    oar::Model pm(probe);
    pm.prepare(probe_opt);
    pm.load_checkpoint(b.path.string(), "latest");
    CHECK(pm.progress() == oar::Progress{1, 4, 11});
    CHECK(pm.checkpoint_extra().at("lr_schedule.last_epoch") == "1");
    const auto resumed = session(b.path, 4, true);
    CHECK(oar_test::bitwise_equal(whole, resumed));
}

TEST_CASE("ModelCheckpoint saves epoch_<n> every save_freq epochs and 'best' when the monitored value improves") {
    oar_test::TempDir tmp;
    oar_test::ToyNet net(2);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::Model model(net);
    model.prepare(opt, oar::CrossEntropyLoss<>{}, {oar::top_k_accuracy()});
    oar::ModelCheckpoint ckpt({.dir = (tmp.path / "ck").string(), .save_freq = 2, .monitor = "eval_loss"});
    struct Losses {
        std::vector<double> v;
        void on_epoch_end(const oar::Logs& l) { v.push_back(l.eval_loss); }
    } losses;
    model.fit(train_set, &valid_set, opts, losses, ckpt);
    std::vector<std::string> expected;
    double best = 1e300;
    for (std::size_t e = 0; e < 4; ++e) {
        if ((e + 1) % 2 == 0) expected.push_back("epoch_" + std::to_string(e + 1));
        if (losses.v[e] < best) {
            best = losses.v[e];
            expected.push_back("best");
        }
        expected.push_back("latest");
    }
    CHECK(ckpt.saved() == expected);
    CHECK(ckpt.best() == best);
    for (const char* stem : {"epoch_2", "epoch_4", "best", "latest"})
        CHECK(fs::exists(tmp.path / "ck" / (std::string(stem) + ".safetensors")));
    // a rank other than 0 saves nothing
    oar::ModelCheckpoint other({.dir = (tmp.path / "r1").string(), .is_writer = false});
    model.set_progress({});
    model.fit(train_set, &valid_set, opts, other);
    CHECK(other.saved().empty());
    CHECK_FALSE(fs::exists(tmp.path / "r1"));
    CHECK_THROWS_AS(oar::ModelCheckpoint({.dir = ""}), oar::value_error);
}

TEST_CASE("loading a checkpoint of another model is refused with the key named, and nothing changes") {
    oar_test::TempDir tmp;
    session(tmp.path, 1, false);
    using Other = oar::Network<oar::Sequential<oar::Flatten, oar::Linear<36, 4>>, oar::Shape<1, 6, 6>>;
    Other net(1);
    const auto before = oar_test::weights_of(net);
    oar::Adam opt(net.parameters());
    oar::Model model(net);
    model.prepare(opt);
    CHECK_THROWS_AS(model.load_checkpoint(tmp.path.string(), "latest"), oar::error);
    CHECK(oar_test::bitwise_equal(before, oar_test::weights_of(net)));
    CHECK(model.progress() == oar::Progress{});
    CHECK_THROWS_AS(model.load_checkpoint(tmp.path.string(), "nothing_here"), oar::io_error);
}

TEST_CASE("a ModelCheckpoint monitor fit will not log is reported when fit begins, before an epoch trains") {
    oar_test::TempDir dir;
    oar_test::ToyNet net(21);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.02f});
    oar::Model model(net);
    model.prepare(opt, {}, {oar::top_k_accuracy()});
    oar::ModelCheckpoint typo({.dir = dir.path.string(), .monitor = "eval_accuracy"});
    CHECK_THROWS_WITH_AS(model.fit(train_set, &valid_set, opts, typo),
                         doctest::Contains("ModelCheckpoint: monitor 'eval_accuracy' is not a value fit logs"),
                         oar::value_error);
    oar::ModelCheckpoint no_valid({.dir = dir.path.string(), .monitor = "eval_acc"});
    CHECK_THROWS_WITH_AS(model.fit(train_set, opts, no_valid),
                         doctest::Contains("monitor 'eval_acc' is a validation value, but fit has no validation data"),
                         oar::value_error);
    CHECK(model.progress().global_step == 0);
    CHECK(typo.saved().empty());
    CHECK(no_valid.saved().empty());
    // Not the writer: it saves nothing, so it checks nothing (other ranks validate on none).
    oar::ModelCheckpoint other({.dir = dir.path.string(), .save_freq = 0, .save_latest = false, .monitor = "eval_acc",
                                .is_writer = false});
    CHECK_NOTHROW(model.fit(train_set, {.epochs = 1, .batch_size = 10}, other));
    // A training value works without validation and writes "best".
    oar::ModelCheckpoint on_acc({.dir = dir.path.string(), .save_freq = 0, .save_latest = false, .monitor = "acc"});
    model.fit(train_set, {.epochs = 2, .batch_size = 10}, on_acc);
    CHECK(!on_acc.saved().empty());
}
