// What callbacks build on: Logs' values by name, MonitorMode's direction, the Callback concept and
// the hook callers, which take a hook in its (model, logs) or (logs) form and skip an absent one.
#include <doctest/doctest.h>

#include <oar/train/callbacks/callback.hpp>  // under test

#include <string>  // std::string
#include <vector>  // std::vector

namespace {
struct FakeModel {
    int calls = 0;
};
/// Hooks in both forms; on_train_end absent.
struct Both {
    std::vector<std::string> seen;
    void on_train_begin(FakeModel& m, const oar::Logs&) {
        ++m.calls;
        seen.push_back("train_begin(model)");
    }
    void on_epoch_begin(const oar::Logs& l) { seen.push_back("epoch_begin " + std::to_string(l.epoch)); }
    void on_epoch_end(FakeModel& m, const oar::Logs&) {
        ++m.calls;
        seen.push_back("epoch_end(model)");
    }
    void on_train_batch_end(const oar::Logs& l) { seen.push_back("batch " + std::to_string(l.step)); }
    void on_eval_end(const oar::Logs& l) { seen.push_back(std::string("eval ") + std::string(l.mode)); }
};
struct NoHooks {};
static_assert(oar::Callback<Both, FakeModel>);
static_assert(!oar::Callback<NoHooks, FakeModel>);
}  // namespace

TEST_CASE("the hook callers call the form a callback has and skip an absent hook") {
    Both cb;
    FakeModel m;
    oar::Logs l;
    l.epoch = 2;
    l.step = 5;
    oar::detail::cb_train_begin(cb, m, l);
    oar::detail::cb_epoch_begin(cb, m, l);
    oar::detail::cb_batch_end(cb, m, l);
    l.mode = "eval";
    oar::detail::cb_eval_end(cb, m, l);
    oar::detail::cb_epoch_end(cb, m, l);
    oar::detail::cb_train_end(cb, m, l);  // absent: nothing
    CHECK(cb.seen == std::vector<std::string>{"train_begin(model)", "epoch_begin 2", "batch 5", "eval eval",
                                              "epoch_end(model)"});
    CHECK(m.calls == 2);
}

TEST_CASE("Logs gives loss, lr, metrics and eval values by name, and names what there is otherwise") {
    oar::Logs l;
    l.loss = 0.5;
    l.lr = 0.01;
    l.metrics = {{"acc", 0.75}};
    CHECK(l.get("loss") == 0.5);
    CHECK(l.get("lr") == 0.01);
    CHECK(l.get("acc") == 0.75);
    CHECK_FALSE(l.get("eval_loss").has_value());  // no validation this epoch
    l.has_eval = true;
    l.eval_loss = 0.25;
    l.eval_metrics = {{"acc", 0.8}};
    CHECK(l.at("eval_loss") == 0.25);
    CHECK(l.at("eval_acc") == 0.8);
    CHECK_THROWS_WITH_AS(l.at("f1"), "oar: Logs: no value named 'f1' at epoch 0 (there are: loss, lr, acc, eval_loss, eval_acc)",
                         oar::value_error);
}

TEST_CASE("MonitorMode auto maximizes names with acc in them and minimizes the rest") {
    CHECK(oar::monitor_maximizes("eval_acc", oar::MonitorMode::auto_));
    CHECK_FALSE(oar::monitor_maximizes("eval_loss", oar::MonitorMode::auto_));
    CHECK(oar::monitor_maximizes("eval_loss", oar::MonitorMode::max));
    CHECK_FALSE(oar::monitor_maximizes("acc", oar::MonitorMode::min));
}
