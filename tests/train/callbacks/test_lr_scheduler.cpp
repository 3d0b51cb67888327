// LRScheduler callback: the optimizer's rate in every step follows the schedule per epoch or per
// step (compared with the schedule stepped by hand), ReduceOnPlateau follows the monitored value,
// and the schedule's state is kept in the model's checkpoint_extra().
#include <doctest/doctest.h>

#include <oar/train/callbacks/lr_scheduler.hpp>

#include <vector>

#include <oar/oar.hpp>  // SGD

#include "support/toy_model.hpp"  // oar_test::toy_set, ToyNet

namespace {

/// The optimizer's rate seen after each step, and at each epoch's end.
struct Rates {
    std::vector<double> step, epoch, eval_loss;
    void on_train_batch_end(const oar::Logs& l) { step.push_back(l.lr); }
    void on_epoch_end(const oar::Logs& l) {
        epoch.push_back(l.lr);
        eval_loss.push_back(l.eval_loss);
    }
};

struct Setup {
    oar_test::ToyNet net{3};
    oar::SGD<> opt{net.parameters(), {.learning_rate = 0.1f}};
    oar::Model<oar_test::ToyNet> model{net};
    Setup() { model.prepare(opt); }
};

const auto train = oar_test::toy_set(50), valid = oar_test::toy_set(10, 2);  // 5 steps an epoch

}  // namespace

TEST_CASE("per epoch, StepDecay's rate holds through each epoch and changes at its end") {
    Setup s;
    oar::StepDecay sched(0.1, 2, 0.5), by_hand(0.1, 2, 0.5);
    oar::LRScheduler cb(sched);
    Rates r;
    s.model.fit(train, {.epochs = 5, .batch_size = 10}, cb, r);
    REQUIRE(r.step.size() == 25);
    for (std::size_t e = 0; e < 5; ++e) {
        for (std::size_t k = 0; k < 5; ++k) CHECK(r.step[e * 5 + k] == static_cast<double>(static_cast<float>(by_hand.last_lr())));
        CHECK(r.epoch[e] == static_cast<double>(static_cast<float>(by_hand.last_lr())));  // the epoch's rate
        by_hand.step();
    }
    CHECK(s.model.checkpoint_extra().at("lr_schedule.scheduler") == "StepDecay");
    CHECK(s.model.checkpoint_extra().at("lr_schedule.last_epoch") == "5");
}

TEST_CASE("per step, a warm-up then cosine schedule moves at every step") {
    Setup s;
    using Sched = oar::LinearWarmup<oar::CosineAnnealingDecay>;
    Sched sched(oar::CosineAnnealingDecay(0.1, 20), 5, 0.0, 0.1), by_hand(oar::CosineAnnealingDecay(0.1, 20), 5, 0.0, 0.1);
    oar::LRScheduler cb(sched, oar::LRStepMode::per_step);
    Rates r;
    s.model.fit(train, {.epochs = 3, .batch_size = 10}, cb, r);
    REQUIRE(r.step.size() == 15);
    for (std::size_t i = 0; i < 15; ++i) {
        CHECK(r.step[i] == static_cast<double>(static_cast<float>(by_hand.last_lr())));  // the rate step i used
        by_hand.step();
    }
    CHECK(r.step[2] > r.step[0]);   // warming up
    CHECK(r.step[14] < r.step[6]);  // annealing
}

TEST_CASE("ReduceOnPlateau steps with the validation loss at each epoch's end; per step it is refused") {
    Setup s;
    // "improving" means 30% below the best: the toy loss falls slower than that, so it plateaus
    const oar::ReduceOnPlateauOptions o{.factor = 0.5, .patience = 0, .threshold = 0.3};
    oar::ReduceOnPlateau sched(0.1, o);
    oar::LRScheduler cb(sched);
    Rates r;
    s.model.fit(train, &valid, {.epochs = 6, .batch_size = 10}, cb, r);
    oar::ReduceOnPlateau by_hand(0.1, o);
    for (std::size_t e = 0; e < 6; ++e) {
        CHECK(r.epoch[e] == static_cast<double>(static_cast<float>(by_hand.last_lr())));  // the epoch's rate
        by_hand.step(r.eval_loss[e]);
    }
    CHECK(by_hand.last_lr() < 0.1);  // it did reduce
    CHECK(s.opt.learning_rate() == static_cast<float>(by_hand.last_lr()));
    CHECK_THROWS_AS(oar::LRScheduler(sched, oar::LRStepMode::per_step), oar::value_error);
}

TEST_CASE("a resumed schedule: the saved rate (Paddle's rule) or the position with the rate of the schedule built now") {
    // A 2-epoch run whose milestone is 2 (its end) saves its schedule at epoch 2, rate 0.01.
    Setup first;
    oar::MultiStepDecay short_run(0.1, {2});
    oar::LRScheduler cb(short_run);
    first.model.fit(train, {.epochs = 2, .batch_size = 10}, cb);
    REQUIRE(first.model.checkpoint_extra().at("lr_schedule.last_epoch") == "2");
    const auto resume = [&](oar::LRResume how) {
        Setup s;
        s.model.set_progress(first.model.progress());
        s.model.checkpoint_extra() = first.model.checkpoint_extra();
        oar::MultiStepDecay longer(0.1, {3});  // the 4-epoch run's milestone
        oar::LRScheduler resumed(longer, oar::LRStepMode::per_epoch, "eval_loss", how);
        Rates r;
        s.model.fit(train, {.epochs = 4, .batch_size = 10}, resumed, r);
        return r.epoch;  // the rates epochs 2 and 3 trained at
    };
    const std::vector<double> position = resume(oar::LRResume::position);
    REQUIRE(position.size() == 2);
    CHECK(position[0] == static_cast<double>(0.1f));   // epoch 2 of a 4-epoch run: before its milestone
    CHECK(position[1] == static_cast<double>(0.01f));  // epoch 3: after it
    const std::vector<double> saved = resume(oar::LRResume::saved_rate);
    REQUIRE(saved.size() == 2);
    CHECK(saved[0] == static_cast<double>(0.01f));  // the short run's last rate carries over
    CHECK(saved[1] == static_cast<double>(0.01f));
    // Built with the same arguments, both continue with the same rates.
    Setup same;
    same.model.set_progress(first.model.progress());
    same.model.checkpoint_extra() = first.model.checkpoint_extra();
    oar::MultiStepDecay again(0.1, {2});
    oar::LRScheduler by_position(again, oar::LRStepMode::per_epoch, "eval_loss", oar::LRResume::position);
    Rates r;
    same.model.fit(train, {.epochs = 3, .batch_size = 10}, by_position, r);
    REQUIRE(r.epoch.size() == 1);
    CHECK(r.epoch[0] == static_cast<double>(0.01f));
}

TEST_CASE("LRResume::position is refused for ReduceOnPlateau, whose rate is not a function of the epoch") {
    oar::ReduceOnPlateau plateau(0.1, {});
    CHECK_THROWS_WITH_AS(oar::LRScheduler(plateau, oar::LRStepMode::per_epoch, "eval_loss", oar::LRResume::position),
                         doctest::Contains("LRResume::position needs a schedule with step(epoch)"), oar::value_error);
}

TEST_CASE("ReduceOnPlateau's monitor is checked when fit begins: a typo, or eval_loss without validation data") {
    Setup s;
    oar::ReduceOnPlateau sched(0.1, {});
    oar::LRScheduler typo(sched, oar::LRStepMode::per_epoch, "eval_los");
    CHECK_THROWS_WITH_AS(s.model.fit(train, &valid, {.epochs = 2, .batch_size = 10}, typo),
                         doctest::Contains("LRScheduler: monitor 'eval_los' is not a value fit logs"), oar::value_error);
    oar::LRScheduler no_valid(sched);
    CHECK_THROWS_WITH_AS(s.model.fit(train, {.epochs = 2, .batch_size = 10}, no_valid),
                         doctest::Contains("monitor 'eval_loss' is a validation value, but fit has no validation data"),
                         oar::value_error);
    CHECK(s.model.progress().global_step == 0);
    oar::LRScheduler on_loss(sched, oar::LRStepMode::per_epoch, "loss");
    CHECK_NOTHROW(s.model.fit(train, {.epochs = 1, .batch_size = 10}, on_loss));
    // A schedule that steps by position monitors nothing: nothing to check.
    Setup fresh;  // s's model keeps the plateau's state for a resume
    oar::StepDecay step(0.1, 1, 0.5);
    oar::LRScheduler by_epoch(step);
    CHECK_NOTHROW(fresh.model.fit(train, {.epochs = 2, .batch_size = 10}, by_epoch));
}
