// oar::Model: fit / evaluate / predict over a small network on a learnable toy set, checked
// against the course's manual loop written out here, bit for bit.
#include <doctest/doctest.h>

#include <oar/train/model.hpp>

#include <algorithm>   // std::reverse: the fake device network's layout
#include <cstdint>
#include <filesystem>  // std::filesystem::exists
#include <span>
#include <string>
#include <vector>

#include <oar/loss/label_mse.hpp>          // LabelMSELoss: the regressors' loss
#include <oar/metric/rounded_accuracy.hpp>  // RoundedAccuracy: the regressors' accuracy
#include <oar/oar.hpp>                      // layers, Network, optimizers

#include "support/temp_dir.hpp"   // TempDir: the checkpoint folder
#include "support/toy_model.hpp"  // oar_test::toy_set, ToyNet: a small learnable set and network

namespace {

using Net = oar_test::ToyNet;
using oar_test::bitwise_equal;

oar::data::InMemoryDataset toy(std::size_t n, std::size_t offset = 0) { return oar_test::toy_set(n, offset); }
std::vector<float> weights(const Net& net) { return oar_test::weights_of(net); }

/// Records every event it sees.
struct Recorder {
    std::vector<std::string> events;
    std::vector<oar::Logs> batches, epochs, evals;
    void on_train_begin(const oar::Logs&) { events.push_back("train_begin"); }
    void on_epoch_begin(const oar::Logs& l) { events.push_back("epoch_begin " + std::to_string(l.epoch)); }
    void on_train_batch_end(const oar::Logs& l) { batches.push_back(l); }
    void on_eval_end(const oar::Logs& l) {
        events.push_back("eval_end");
        evals.push_back(l);
    }
    void on_epoch_end(const oar::Logs& l) {
        events.push_back("epoch_end " + std::to_string(l.epoch));
        epochs.push_back(l);
    }
    void on_train_end(const oar::Logs&) { events.push_back("train_end"); }
};

/// Stops training after `at` global steps (a hook that takes the model).
struct StopAt {
    std::uint64_t at;
    template <class M>
    void on_train_batch_end(M& model, const oar::Logs& l) {
        if (l.global_step == at) model.stop_training();
    }
};

}  // namespace

TEST_CASE("fit trains, validates every epoch and returns a History of the epochs' logs") {
    const auto train = toy(200), valid = toy(40, 1000);
    Net net(3);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::Model model(net);
    model.prepare(opt, oar::CrossEntropyLoss<>{}, {oar::top_k_accuracy(1), oar::top_k_accuracy(2)});
    const auto before = model.evaluate(valid);
    Recorder rec;
    const oar::History h = model.fit(train, &valid, {.epochs = 3, .batch_size = 20}, rec);
    REQUIRE(h.epochs.size() == 3);
    CHECK_FALSE(h.stopped_early);
    CHECK(h.epochs[2].has_eval);
    CHECK(h.epochs[2].at("eval_acc") >= 0.95);
    CHECK(h.epochs[2].at("eval_acc_top2") >= h.epochs[2].at("eval_acc"));
    CHECK(h.epochs[2].at("eval_loss") < before.loss / 3);
    CHECK(h.epochs[2].loss < h.epochs[0].loss);
    CHECK(h.epochs[2].global_step == 30);
    CHECK(model.progress() == oar::Progress{3, 0, 30});
    // The events in order, and a batch's logs.
    const std::vector<std::string> expected{"train_begin", "epoch_begin 0", "eval_end", "epoch_end 0",
                                            "epoch_begin 1", "eval_end", "epoch_end 1",
                                            "epoch_begin 2", "eval_end", "epoch_end 2", "train_end"};
    CHECK(rec.events == expected);
    REQUIRE(rec.batches.size() == 30);
    CHECK(rec.batches[12].epoch == 1);
    CHECK(rec.batches[12].step == 3);
    CHECK(rec.batches[12].steps == 10);
    CHECK(rec.batches[12].global_step == 13);
    CHECK(rec.batches[12].samples == 60);
    CHECK(rec.batches[12].lr == doctest::Approx(0.01));
    CHECK(rec.batches[12].ms_per_step > 0.0);
    CHECK(rec.evals[0].mode == "eval");
    CHECK(rec.evals[0].samples == 40);
    // The evaluation that ran in fit is evaluate()'s: same loss and accuracy.
    const auto after = model.evaluate(valid, 7);
    CHECK(after.loss == doctest::Approx(h.epochs[2].eval_loss).epsilon(1e-6));
    CHECK(after.metric("acc") == h.epochs[2].at("eval_acc"));
    CHECK(net.training());  // evaluate put the network back in training mode
}

TEST_CASE("fit is the course's manual loop: the same weights, bit for bit") {
    const auto train = toy(90);
    Net a(11), b(11);
    oar::Adam opt_a(a.parameters(), {.learning_rate = 0.003f, .weight_decay = oar::L2Decay(1e-4f)});
    oar::Adam opt_b(b.parameters(), {.learning_rate = 0.003f, .weight_decay = oar::L2Decay(1e-4f)});
    oar::Model model(a);
    model.prepare(opt_a);
    model.fit(train, {.epochs = 2, .batch_size = 16, .seed = 5});

    oar::data::DataLoader loader(train, {.batch_size = 16, .shuffle = true, .seed = 5});
    oar::CrossEntropyLoss loss_fn;
    b.train();
    for (std::uint64_t epoch = 0; epoch < 2; ++epoch)
        for (auto&& batch : loader.epoch(epoch)) {
            auto logits = b.forward(batch.images);
            loss_fn(logits, batch.labels);
            b.backward(loss_fn.backward());
            opt_b.step();
            opt_b.clear_grad();
        }
    CHECK(bitwise_equal(weights(a), weights(b)));
    CHECK_FALSE(bitwise_equal(weights(a), weights(Net(11))));  // it did train
}

TEST_CASE("a callback that stops training ends fit after that step, and fit again goes on bit for bit") {
    const auto train = toy(100), valid = toy(20, 500);
    const oar::FitOptions opts{.epochs = 4, .batch_size = 16, .seed = 9};
    Net whole(2);
    oar::Momentum opt_w(whole.parameters(), {.learning_rate = 0.05f});
    oar::Model mw(whole);
    mw.prepare(opt_w, oar::CrossEntropyLoss<>{}, {oar::top_k_accuracy()});
    mw.fit(train, &valid, opts);

    Net parts(2);
    oar::Momentum opt_p(parts.parameters(), {.learning_rate = 0.05f});
    oar::Model mp(parts);
    mp.prepare(opt_p, oar::CrossEntropyLoss<>{}, {oar::top_k_accuracy()});
    const oar::History first = mp.fit(train, &valid, opts, StopAt{10});  // 7 steps per epoch: inside epoch 1
    CHECK(first.stopped_early);
    CHECK(mp.interrupted());
    CHECK(first.epochs.size() == 1);
    CHECK(mp.progress() == oar::Progress{1, 3, 10});
    Recorder rec;
    const oar::History rest = mp.fit(train, &valid, opts, rec);
    CHECK_FALSE(rest.stopped_early);
    CHECK(rest.epochs.size() == 3);
    CHECK(rec.batches.front().step == 4);  // the resumed epoch starts at its fourth batch
    CHECK(rec.batches.size() == 28 - 10);
    CHECK(mp.progress() == oar::Progress{4, 0, 28});
    CHECK(bitwise_equal(weights(whole), weights(parts)));
}

TEST_CASE("predict returns the eval-mode outputs in the dataset's order") {
    const auto set = toy(13);
    Net net(4);
    oar::SGD opt(net.parameters(), {.learning_rate = 0.1f});
    oar::Model model(net);
    model.prepare(opt);
    const oar::Tensor out = model.predict(set, 5);
    REQUIRE(out.batch() == 13);
    net.eval();
    for (std::size_t i = 0; i < 13; ++i) {
        const auto s = set.get(i);
        auto y = net.forward(oar::TensorView(s.image.data(), 1, s.dims));
        for (std::size_t k = 0; k < 4; ++k) CHECK(out[i * 4 + k] == y[k]);
    }
}

TEST_CASE("the course's regressors train through LabelMSELoss and RoundedAccuracy") {
    using Reg = oar::Network<oar::Sequential<oar::Flatten, oar::Linear<36, 1>>, oar::Shape<1, 6, 6>>;
    const auto set = toy(120);
    Reg net(1);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.02f});
    oar::Model<Reg, oar::LabelMSELoss> model(net);
    model.prepare(opt, {}, {oar::Metric("acc", oar::RoundedAccuracy(0, 3))});
    const double before = model.evaluate(set).loss;
    const auto h = model.fit(set, &set, {.epochs = 5, .batch_size = 10});
    CHECK(h.epochs.back().eval_loss < before / 4);
    CHECK(h.epochs.back().at("eval_acc") >= 0.5);
}

TEST_CASE("misuse is named: fit before prepare, two metrics of one name, an unknown log value, the wrong optimizer type") {
    const auto set = toy(10);
    Net net(1);
    oar::Model model(net);
    CHECK_THROWS_WITH_AS(model.fit(set, {.epochs = 1}), "oar: Model::fit: call prepare(optimizer, loss, metrics) first",
                         oar::value_error);
    oar::SGD opt(net.parameters());
    CHECK_THROWS_WITH_AS(model.prepare(opt, oar::CrossEntropyLoss<>{}, {oar::top_k_accuracy(), oar::top_k_accuracy()}),
                         "oar: Model::prepare: two metrics are named 'acc'", oar::value_error);
    model.prepare(opt);
    CHECK_THROWS_AS(model.optimizer<oar::Adam<>>(), oar::value_error);
    CHECK(&model.optimizer<oar::SGD<>>() == &opt);
    CHECK_THROWS_WITH_AS(model.fit(set, {.epochs = 1, .eval_freq = 0}), "oar: Model::fit: eval_freq must be at least 1",
                         oar::value_error);
    const auto h = model.fit(set, {.epochs = 1, .batch_size = 4});
    CHECK_THROWS_WITH_AS(h.epochs[0].at("eval_acc"),
                         "oar: Logs: no value named 'eval_acc' at epoch 0 (there are: loss, lr)", oar::value_error);
    CHECK_THROWS_AS(oar::top_k_accuracy(0), oar::value_error);
}

namespace {

/// A stand-in for Network<..., oar::cuda> (which needs nvcc and a GPU): the toy network whose
/// outputs live in "device memory" = a buffer holding them in reverse order, readable on the host
/// only through the static to_host(), as Network<cuda> does. A Model that read the outputs'
/// data directly for its metrics or predict() would see the wrong logits.
class FakeDeviceNet {
public:
    using sequential = Net::sequential;
    using output_shape = Net::output_shape;
    using value_type = float;
    using view_type = oar::TensorView;
    explicit FakeDeviceNet(std::uint64_t seed) : net_(seed) {}
    std::uint64_t seed() const { return net_.seed(); }
    std::uint64_t step() const { return net_.step(); }
    void set_step(std::uint64_t s) { net_.set_step(s); }

    view_type forward(view_type x) {
        const auto y = net_.forward(x);
        device_.assign(y.data(), y.data() + y.size());
        std::reverse(device_.begin(), device_.end());
        return {device_.data(), y.batch(), y.dims()};
    }
    void backward(view_type dy) { net_.backward(to_host_view(dy)); }
    static std::vector<float> to_host(view_type v) {
        std::vector<float> h(v.data(), v.data() + v.size());
        std::reverse(h.begin(), h.end());
        return h;
    }
    void train() { net_.train(); }
    void eval() { net_.eval(); }
    bool training() const { return net_.training(); }
    auto& parameters() { return net_.parameters(); }
    const auto& parameters() const { return net_.parameters(); }

private:
    view_type to_host_view(view_type dy) {
        grad_ = to_host(dy);  // the fake loss hands back its gradient as "device memory" too
        return {grad_.data(), dy.batch(), dy.dims()};
    }
    Net net_;
    std::vector<float> device_, grad_;
};

/// CrossEntropyLoss over FakeDeviceNet's device outputs (as CrossEntropyLoss<oar::cuda>).
class FakeDeviceLoss {
public:
    static constexpr bool device_outputs = true;
    float forward(oar::TensorView out, std::span<const std::int64_t> labels) {
        host_ = FakeDeviceNet::to_host(out);
        const float l = ce_(oar::TensorView(host_.data(), out.batch(), out.dims()), labels);
        const auto g = ce_.backward();
        grad_.assign(g.data(), g.data() + g.size());
        std::reverse(grad_.begin(), grad_.end());
        batch_ = g.batch();
        dims_ = g.dims();
        return l;
    }
    oar::TensorView backward() const { return {grad_.data(), batch_, dims_}; }

private:
    oar::CrossEntropyLoss<> ce_;
    std::vector<float> host_, grad_;
    std::size_t batch_ = 0;
    oar::Dims dims_{};
};

}  // namespace

TEST_CASE("a network whose outputs live on a device trains as the host network: metrics and predict read to_host()") {
    static_assert(oar::detail::device_network<FakeDeviceNet> && !oar::detail::device_network<Net>);
    static_assert(oar::detail::device_loss<FakeDeviceLoss> && !oar::detail::device_loss<oar::CrossEntropyLoss<>>);
    const auto train = toy(120), valid = toy(40, 1000);
    const oar::FitOptions fo{.epochs = 2, .batch_size = 20, .seed = 5};

    Net host(11);
    oar::Adam host_opt(host.parameters(), {.learning_rate = 0.01f});
    oar::Model host_model(host);
    host_model.prepare(host_opt, oar::CrossEntropyLoss<>{}, {oar::top_k_accuracy(1)});
    const oar::History hh = host_model.fit(train, &valid, fo);

    FakeDeviceNet dev(11);
    oar::Adam dev_opt(dev.parameters(), {.learning_rate = 0.01f});
    oar::Model<FakeDeviceNet, FakeDeviceLoss> dev_model(dev);
    dev_model.prepare(dev_opt, FakeDeviceLoss{}, {oar::top_k_accuracy(1)});
    const oar::History dh = dev_model.fit(train, &valid, fo);

    CHECK(bitwise_equal(weights(host), oar_test::weights_of(dev)));
    REQUIRE(dh.epochs.size() == 2);
    for (std::size_t e = 0; e < 2; ++e) {
        CHECK(dh.epochs[e].loss == hh.epochs[e].loss);
        CHECK(dh.epochs[e].at("acc") == hh.epochs[e].at("acc"));
        CHECK(dh.epochs[e].at("eval_acc") == hh.epochs[e].at("eval_acc"));
        CHECK(dh.epochs[e].eval_loss == hh.epochs[e].eval_loss);
    }
    CHECK(hh.epochs[1].at("eval_acc") > 0.5);  // it learned: equal accuracies are not both chance
    const auto hp = host_model.predict(valid, 16), dp = dev_model.predict(valid, 16);
    CHECK(bitwise_equal(std::vector<float>(hp.data(), hp.data() + hp.size()),
                        std::vector<float>(dp.data(), dp.data() + dp.size())));
    const oar::EvalResult he = host_model.evaluate(valid, 16), de = dev_model.evaluate(valid, 16);
    CHECK(de.metric("acc") == he.metric("acc"));
    CHECK(de.loss == he.loss);
}

TEST_CASE("a network on a device checkpoints through the common code and refuses layer hooks by name") {
    const auto train = toy(40);
    FakeDeviceNet dev(2);
    oar::SGD opt(dev.parameters(), {.learning_rate = 0.1f});
    oar::Model<FakeDeviceNet, FakeDeviceLoss> model(dev);
    model.prepare(opt, FakeDeviceLoss{}, {oar::top_k_accuracy(1)});
    model.fit(train, {.epochs = 1, .batch_size = 20, .verbose = 0});
    oar_test::TempDir tmp;
    const std::string dir = tmp.path.string();
    model.save_checkpoint(dir, "latest");
    FakeDeviceNet other(9);
    oar::SGD opt2(other.parameters(), {.learning_rate = 0.1f});
    oar::Model<FakeDeviceNet, FakeDeviceLoss> reloaded(other);
    reloaded.prepare(opt2, FakeDeviceLoss{});
    reloaded.load_checkpoint(dir, "latest");
    CHECK(bitwise_equal(oar_test::weights_of(other), oar_test::weights_of(dev)));
    model.add_layer_hook([](const oar::LayerEvent&) {});
    CHECK_THROWS_WITH_AS(model.fit(train, {.epochs = 2, .batch_size = 20}),
                         doctest::Contains("layer hook(s) (TerminateOnNonFinite with layers on, Diagnostics, "
                                           "add_layer_hook) but the network is on the GPU"),
                         oar::value_error);
}

// ---------------------------------------------------------------------------------------------
// Issue 24: an API without traps

#include <oar/data/transforms.hpp>  // transform, RandomCrop, RandomHorizontalFlip: an augmented set

#include <iostream>  // std::cerr: fit's note
#include <sstream>   // std::ostringstream: capturing it

#include "support/errors.hpp"  // message_of, contains

namespace {
/// Captures std::cerr while alive.
struct CaptureCerr {
    std::ostringstream out;
    std::streambuf* old = std::cerr.rdbuf(out.rdbuf());
    ~CaptureCerr() { std::cerr.rdbuf(old); }
};

using oar_test::contains;

/// Stops fit after its first step.
struct StopNow {
    template <class M>
    void on_train_batch_end(M& m, const oar::Logs&) { m.stop_training(); }
};
}  // namespace

TEST_CASE("fit tells an augmented dataset each epoch: other crops every epoch, the same per seed and num_workers") {
    const auto base = toy(40);
    auto run = [&](std::size_t workers, std::uint64_t seed) {
        auto aug = oar::data::transform(base, oar::data::RandomCrop(6, 1), oar::data::RandomHorizontalFlip());
        aug.set_seed(seed);
        Net net(4);
        oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
        oar::Model model(net);
        model.prepare(opt);
        std::vector<std::uint64_t> epochs;
        struct Epochs {
            decltype(aug)* a;
            std::vector<std::uint64_t>* e;
            void on_epoch_end(const oar::Logs&) { e->push_back(a->epoch()); }
        };
        model.fit(aug, {.epochs = 3, .batch_size = 8, .num_workers = workers, .seed = 2}, Epochs{&aug, &epochs});
        CHECK(epochs == std::vector<std::uint64_t>{0, 1, 2});
        return weights(net);
    };
    const auto w0 = run(0, 1);
    CHECK(bitwise_equal(w0, run(2, 1)));   // the same bits whatever num_workers
    CHECK(!bitwise_equal(w0, run(0, 5)));  // another seed, other crops
    // Through a ready loader too, and the samples differ from epoch to epoch.
    auto aug = oar::data::transform(base, oar::data::RandomCrop(6, 1));
    oar::data::DataLoader loader(aug, {.batch_size = 40});
    std::vector<std::vector<float>> firsts;
    Net net(4);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::Model model(net);
    model.prepare(opt);
    struct Peek {
        decltype(aug)* a;
        std::vector<std::vector<float>>* f;
        void on_epoch_begin(const oar::Logs&) {}
        void on_train_batch_end(const oar::Logs&) { f->push_back(a->get(0).image); }
    };
    model.fit(loader, {.epochs = 3}, Peek{&aug, &firsts});
    REQUIRE(firsts.size() == 3);
    CHECK(aug.epoch() == 2);
    CHECK((firsts[0] != firsts[1] || firsts[1] != firsts[2]));
}

TEST_CASE("fit without validation: fit(train), fit(train, nullptr, opts), fit(loader), fit(loader, nullptr, opts)") {
    const auto train = toy(40);
    Net a(6), b(6), c(6), d(6);
    oar::SGD oa(a.parameters(), {.learning_rate = 0.05f}), ob(b.parameters(), {.learning_rate = 0.05f}),
        oc(c.parameters(), {.learning_rate = 0.05f}), od(d.parameters(), {.learning_rate = 0.05f});
    oar::Model ma(a), mb(b), mc(c), md(d);
    ma.prepare(oa);
    mb.prepare(ob);
    mc.prepare(oc);
    md.prepare(od);
    CHECK(ma.fit(train).epochs.size() == 1);  // one epoch of batch size 1, shuffled with seed 0
    CHECK(mb.fit(train, nullptr, {}).epochs.size() == 1);
    oar::data::DataLoader lc(train, {.shuffle = true}), ld(train, {.shuffle = true});
    CHECK(mc.fit(lc).epochs.size() == 1);
    Recorder rec;
    CHECK(md.fit(ld, nullptr, {.epochs = 1}, rec).epochs.size() == 1);
    CHECK_FALSE(rec.epochs[0].has_eval);
    CHECK(bitwise_equal(weights(a), weights(b)));
    CHECK(bitwise_equal(weights(a), weights(c)));
    CHECK(bitwise_equal(weights(a), weights(d)));
}

TEST_CASE("fit over a loader refuses the options it would ignore, naming them") {
    const auto train = toy(20);
    Net net(1);
    oar::SGD opt(net.parameters(), {.learning_rate = 0.05f});
    oar::Model model(net);
    model.prepare(opt);
    oar::data::DataLoader loader(train, {.batch_size = 4});
    using oar_test::contains;
    using oar_test::message_of;
    CHECK(contains(message_of<oar::value_error>([&] { model.fit(loader, {.batch_size = 4}); }), "FitOptions::batch_size is set"));
    CHECK(contains(message_of<oar::value_error>([&] { model.fit(loader, {.shuffle = false}); }), "FitOptions::shuffle"));
    CHECK(contains(message_of<oar::value_error>([&] { model.fit(loader, nullptr, {.drop_last = true}); }), "FitOptions::drop_last"));
    CHECK(contains(message_of<oar::value_error>([&] { model.fit(loader, &train, {.num_workers = 2}); }), "FitOptions::num_workers"));
    CHECK(model.progress().global_step == 0);  // refused before training
    CHECK_NOTHROW(model.fit(loader, {.epochs = 1, .seed = 3, .eval_batch_size = 7}));
}

TEST_CASE("fit with batch size 1 over a large dataset says so on stderr; verbose 0 or batches say nothing") {
    const auto big = toy(oar::FitOptions::large_set_note + 1);
    Net net(1);
    oar::SGD opt(net.parameters(), {.learning_rate = 0.001f});
    oar::Model model(net);
    model.prepare(opt);
    {
        CaptureCerr cap;
        model.fit(big, {.verbose = 1}, StopNow{});
        CHECK(contains(cap.out.str(), "batch_size is 1 (the default, as Paddle's): 10001 steps an epoch"));
    }
    for (const oar::FitOptions& o : {oar::FitOptions{.verbose = 0}, oar::FitOptions{.batch_size = 64}}) {
        CaptureCerr cap;
        model.fit(big, o, StopNow{});
        CHECK(cap.out.str().empty());
    }
    CaptureCerr cap;
    model.fit(toy(100), {.verbose = 2}, StopNow{});
    CHECK(cap.out.str().empty());
}

TEST_CASE("predict(images) gives each sample's class and the softmax of its outputs, without labels") {
    const auto train = toy(200), test = toy(30, 700);
    Net net(3);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::Model model(net);
    model.prepare(opt, {}, {oar::top_k_accuracy()});  // {}: the default loss, no explicit-constructor warning
    model.fit(train, {.epochs = 3, .batch_size = 20});
    oar::Tensor images(test.size(), test.dims());
    std::copy(test.images().begin(), test.images().end(), images.data());
    const oar::Prediction p = model.predict(images, 7);  // in batches of 7: 7, 7, 7, 7, 2
    REQUIRE(p.classes.size() == 30);
    CHECK(p.probabilities.batch() == 30);
    const oar::Tensor logits = model.predict(test);
    const std::size_t k = logits.dims().size();
    CHECK(p.probabilities.dims().size() == k);
    std::size_t right = 0;
    for (std::size_t i = 0; i < 30; ++i) {
        const float* row = logits.data() + i * k;
        const float* prob = p.probabilities.data() + i * k;
        CHECK(p.classes[i] == std::max_element(row, row + k) - row);
        double sum = 0.0;
        for (std::size_t c = 0; c < k; ++c) sum += prob[c];
        CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
        CHECK(prob[p.classes[i]] == *std::max_element(prob, prob + k));
        right += p.classes[i] == test.labels()[i];
    }
    CHECK(right >= 27);
    CHECK(net.training());
    oar::Tensor wrong(2, oar::make_dims(36));
    CHECK(contains(oar_test::message_of<oar::shape_error>([&] { (void)model.predict(wrong); }), "the network takes"));
}

TEST_CASE("Model's checkpoints go through the prepared optimizer: Adam's step count is saved and restored, SGD's has none") {
    const auto train = toy(40);
    oar_test::TempDir tmp;
    const std::string dir = tmp.path.string();
    {
        Net net(4);
        oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
        oar::Model model(net);
        model.prepare(opt);
        model.fit(train, {.epochs = 1, .batch_size = 10, .verbose = 0});
        REQUIRE(opt.step_count() == 4);
        model.save_checkpoint(dir, "adam");
        const auto meta = oar::io::read_safetensors(oar::checkpoint_state_path(dir, "adam")).metadata();
        CHECK(meta.at("optimizer.step_count") == "4");
        CHECK(meta.at("optimizer.state") == "moment1,moment2");
        Net other(5);
        oar::Adam opt2(other.parameters());
        oar::Model reloaded(other);
        reloaded.prepare(opt2);
        reloaded.load_checkpoint(dir, "adam");
        CHECK(opt2.step_count() == 4);
        CHECK(opt2.learning_rate() == 0.01f);
        CHECK(bitwise_equal(weights(other), weights(net)));
        for (std::size_t b = 0; b < 2; ++b)  // the moments came back too
            CHECK(bitwise_equal(std::vector<float>(opt2.state()[b].second.begin(), opt2.state()[b].second.end()),
                                std::vector<float>(opt.state()[b].second.begin(), opt.state()[b].second.end())));
    }
    Net net(6);
    oar::SGD opt(net.parameters(), {.learning_rate = 0.1f});
    oar::Model model(net);
    model.prepare(opt);
    model.fit(train, {.epochs = 1, .batch_size = 10, .verbose = 0});
    model.save_checkpoint(dir, "sgd");
    const auto meta = oar::io::read_safetensors(oar::checkpoint_state_path(dir, "sgd")).metadata();
    CHECK(meta.count("optimizer.step_count") == 0);
    CHECK(meta.at("optimizer.state").empty());
    oar::SGD opt2(net.parameters(), {.learning_rate = 0.5f});
    oar::Model reloaded(net);
    reloaded.prepare(opt2);
    reloaded.load_checkpoint(dir, "sgd");
    CHECK(opt2.learning_rate() == 0.1f);
}
