// LRScheduler, as paddle.callbacks.LRScheduler: steps a learning-rate schedule (optim/
// lr_scheduler.hpp) after every training step or every epoch and hands the rate to the model's
// optimizer; ReduceOnPlateau is stepped with a monitored value at each epoch's end. The
// schedule's state rides in the model's checkpoint_extra() ("lr_schedule.*"), so a resumed run
// (Model::load_checkpoint) continues the schedule exactly.
#pragma once

#include <string>   // std::string
#include <utility>  // std::move

#include "../core/error.hpp"          // value_error
#include "../optim/lr_scheduler.hpp"  // LRState, the schedules
#include "model.hpp"                  // Logs

namespace oar {

enum class LRStepMode { per_epoch, per_step };

/// Borrows the schedule: it must outlive fit.
template <class S>
    requires(LRSchedule<S> || requires(S& s, double m) { s.step(m); s.state(); s.load_state(LRState{}); })
class LRScheduler {
public:
    static constexpr bool on_metric = !LRSchedule<S>;  ///< ReduceOnPlateau: step(value)

    explicit LRScheduler(S& schedule, LRStepMode mode = LRStepMode::per_epoch, std::string monitor = "eval_loss")
        : s_(&schedule), mode_(mode), monitor_(std::move(monitor)) {
        if (on_metric && mode_ == LRStepMode::per_step)
            throw value_error("LRScheduler: ReduceOnPlateau steps with a monitored value, once per epoch, not per step");
    }

    /// A resumed model brings the schedule's state: load it; then the optimizer gets the rate.
    template <class M>
    void on_train_begin(M& model, const Logs&) {
        LRState st;
        for (const auto& [k, v] : model.checkpoint_extra())
            if (k.rfind(prefix, 0) == 0) st[k.substr(prefix.size())] = v;
        if (!st.empty()) s_->load_state(st);
        apply(model);
    }
    template <class M>
    void on_train_batch_end(M& model, const Logs&) {
        if constexpr (!on_metric) {
            if (mode_ != LRStepMode::per_step) return;
            s_->step();
            apply(model);
        }
    }
    template <class M>
    void on_epoch_end(M& model, const Logs& l) {
        if (mode_ != LRStepMode::per_epoch) return;
        if constexpr (on_metric) {
            if (monitor_.rfind("eval_", 0) == 0 && !l.has_eval) return;
            s_->step(l.at(monitor_));
        } else {
            s_->step();
        }
        apply(model);
    }

private:
    static inline const std::string prefix = "lr_schedule.";

    template <class M>
    void apply(M& model) {
        model.set_learning_rate(static_cast<float>(s_->last_lr()));
        auto& extra = model.checkpoint_extra();
        for (const auto& [k, v] : s_->state()) extra[prefix + k] = v;
    }

    S* s_;
    LRStepMode mode_;
    std::string monitor_;
};

}  // namespace oar
