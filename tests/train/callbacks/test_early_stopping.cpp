// EarlyStopping: patience, min_delta, mode, baseline and restoring the best weights, first on
// hand-made logs (the decision alone), then inside a real fit.
#include <doctest/doctest.h>

#include <oar/train/callbacks/early_stopping.hpp>

#include <optional>
#include <vector>

#include <oar/oar.hpp>  // SGD

#include "support/toy_model.hpp"  // oar_test::toy_set, ToyNet

namespace {

oar::Logs eval_logs(std::size_t epoch, double eval_loss, double eval_acc) {
    oar::Logs l;
    l.epoch = epoch;
    l.has_eval = true;
    l.eval_loss = eval_loss;
    l.eval_metrics = {{"acc", eval_acc}};
    return l;
}

struct Fixture {
    oar_test::ToyNet net{1};
    oar::SGD<> opt{net.parameters()};
    oar::Model<oar_test::ToyNet> model{net};
    Fixture() { model.prepare(opt); }

    /// Feeds the values (eval_loss, eval_acc) epoch by epoch until the callback stops; returns the
    /// epoch it stopped after, if it did.
    std::optional<std::size_t> run(oar::EarlyStopping& es, const std::vector<std::pair<double, double>>& values) {
        model.stop_training(false);
        es.on_train_begin(oar::Logs{});
        for (std::size_t e = 0; e < values.size(); ++e) {
            es.on_epoch_end(model, eval_logs(e, values[e].first, values[e].second));
            if (model.stop_requested()) return e;
        }
        return std::nullopt;
    }
};

}  // namespace

TEST_CASE("EarlyStopping stops after `patience` epochs without an improvement larger than min_delta") {
    Fixture f;
    oar::EarlyStopping p0({.patience = 0});
    CHECK(f.run(p0, {{1.0, 0}, {0.9, 0}, {0.95, 0}, {0.5, 0}}) == 2u);
    oar::EarlyStopping p2({.patience = 2});
    CHECK(f.run(p2, {{1.0, 0}, {0.9, 0}, {0.95, 0}, {0.92, 0}, {0.91, 0}}) == 4u);
    CHECK(p2.best() == 0.9);
    CHECK(p2.best_epoch() == 1);
    oar::EarlyStopping p2b({.patience = 2});
    CHECK(f.run(p2b, {{1.0, 0}, {0.9, 0}, {0.95, 0}, {0.92, 0}, {0.8, 0}, {0.85, 0}}) == std::nullopt);
    // min_delta: 1.0 -> 0.96 is not an improvement of more than 0.05; 1.0 -> 0.9 is
    oar::EarlyStopping d({.patience = 0, .min_delta = 0.05});
    CHECK(f.run(d, {{1.0, 0}, {0.9, 0}, {0.86, 0}}) == 2u);
}

TEST_CASE("EarlyStopping maximises accuracy (auto or max mode) and waits for a baseline") {
    Fixture f;
    oar::EarlyStopping acc({.monitor = "eval_acc", .patience = 0});
    CHECK(f.run(acc, {{9, 0.5}, {9, 0.6}, {9, 0.55}}) == 2u);
    oar::EarlyStopping loss_max({.mode = oar::MonitorMode::max, .patience = 0});
    CHECK(f.run(loss_max, {{1.0, 0}, {0.9, 0}}) == 1u);
    // the baseline 0.7 is never beaten: with patience 1 it stops after the second epoch
    oar::EarlyStopping base({.monitor = "eval_acc", .patience = 1, .baseline = 0.7});
    CHECK(f.run(base, {{9, 0.5}, {9, 0.6}, {9, 0.9}}) == 1u);
    CHECK_FALSE(base.best().has_value());
}

TEST_CASE("EarlyStopping puts the best epoch's weights back when it stops") {
    Fixture f;
    oar::EarlyStopping es({.patience = 0});
    es.on_train_begin(oar::Logs{});
    const auto best = oar_test::weights_of(f.net);
    es.on_epoch_end(f.model, eval_logs(0, 1.0, 0));
    f.net.parameters().values()[3] += 1.0f;  // training moved on
    es.on_epoch_end(f.model, eval_logs(1, 2.0, 0));
    CHECK(f.model.stop_requested());
    CHECK(oar_test::bitwise_equal(oar_test::weights_of(f.net), best));
}

TEST_CASE("inside fit, EarlyStopping ends training early and History says so; an unknown monitor is named") {
    const auto train = oar_test::toy_set(60), valid = oar_test::toy_set(20, 5);
    oar_test::ToyNet net(2);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::Model model(net);
    model.prepare(opt, oar::CrossEntropyLoss<>{}, {oar::top_k_accuracy()});
    oar::EarlyStopping es({.monitor = "eval_acc", .patience = 1, .baseline = 1.5});  // accuracy never exceeds 1
    const auto h = model.fit(train, &valid, {.epochs = 10, .batch_size = 10}, es);
    CHECK(h.stopped_early);
    CHECK(h.epochs.size() == 2);
    CHECK(es.stopped_epoch() == 1u);
    oar::EarlyStopping typo({.monitor = "eval_accuracy"});
    const auto steps = model.progress().global_step;
    CHECK_THROWS_WITH_AS(model.fit(train, &valid, {.epochs = 12, .batch_size = 10}, typo),
                         doctest::Contains("EarlyStopping: monitor 'eval_accuracy' is not a value fit logs (there are: "
                                           "loss, lr, acc, eval_loss, eval_acc)"),
                         oar::value_error);
    CHECK(model.progress().global_step == steps);  // reported before anything trained
    CHECK_THROWS_AS(oar::EarlyStopping({.monitor = ""}), oar::value_error);
}

TEST_CASE("EarlyStopping on a validation value without validation data is an error when fit begins") {
    const auto train = oar_test::toy_set(60);
    oar_test::ToyNet net(2);
    oar::SGD opt(net.parameters());
    oar::Model model(net);
    model.prepare(opt);
    oar::EarlyStopping es;  // monitors eval_loss
    CHECK_THROWS_WITH_AS(model.fit(train, {.epochs = 3, .batch_size = 10}, es),
                         doctest::Contains("EarlyStopping: monitor 'eval_loss' is a validation value, but fit has no "
                                           "validation data"),
                         oar::value_error);
    CHECK(model.progress().global_step == 0);
    oar::EarlyStopping on_loss({.monitor = "loss"});
    CHECK_NOTHROW(model.fit(train, {.epochs = 1, .batch_size = 10}, on_loss));
}
