// LRScheduler, as paddle.callbacks.LRScheduler: steps a learning-rate schedule (optim/
// lr_scheduler.hpp) after every training step or every epoch and hands the rate to the model's
// optimizer; ReduceOnPlateau is stepped with a monitored value at each epoch's end. The
// schedule's state rides in the model's checkpoint_extra() ("lr_schedule.*"), so a resumed run
// (Model::load_checkpoint) continues the schedule exactly.
#pragma once

#include <cstdint>  // std::int64_t
#include <string>   // std::string
#include <utility>  // std::move

#include "../../core/error.hpp"          // value_error
#include "../../optim/lr_scheduler.hpp"  // LRState, the schedules
#include "callback.hpp"                  // Logs

namespace oar {

enum class LRStepMode { per_epoch, per_step };

/// What a resumed run (a schedule state in the model's checkpoint_extra()) takes from the checkpoint.
///   saved_rate: the position and the rate saved there (Paddle's set_state_dict; the schedule must
///               be built with the same arguments as before);
///   position:   the position only; the rate is the schedule's own there (step(last_epoch), the
///               closed form), so a schedule built with other arguments continues as if it had been
///               built so from the start: train_mnist's default milestone follows --epochs, and a
///               2-epoch run resumed to 4 epochs trains as a 4-epoch run. For StepDecay and
///               MultiStepDecay, whose rate is a function of the epoch, both give the same bits
///               when the arguments are the same. Needs a schedule with step(epoch).
enum class LRResume { saved_rate, position };

/// Borrows the schedule: it must outlive fit.
template <class S>
    requires(LRSchedule<S> || requires(S& s, double m) { s.step(m); s.state(); s.load_state(LRState{}); })
class LRScheduler {
public:
    static constexpr bool on_metric = !LRSchedule<S>;  ///< ReduceOnPlateau: step(value)

    explicit LRScheduler(S& schedule, LRStepMode mode = LRStepMode::per_epoch, std::string monitor = "eval_loss",
                         LRResume resume = LRResume::saved_rate)
        : s_(&schedule), mode_(mode), monitor_(std::move(monitor)), resume_(resume) {
        if (on_metric && mode_ == LRStepMode::per_step)
            throw value_error("LRScheduler: ReduceOnPlateau steps with a monitored value, once per epoch, not per step");
        if (resume_ == LRResume::position && !has_closed_form)
            throw value_error("LRScheduler: LRResume::position needs a schedule with step(epoch); "
                              "ReduceOnPlateau has none (its rate depends on the values it saw), so it resumes "
                              "with its saved rate (LRResume::saved_rate)");
    }

    /// A resumed model brings the schedule's state: load it; then the optimizer gets the rate.
    /// ReduceOnPlateau's monitor must name a value fit will log (value_error here otherwise,
    /// before anything trains).
    template <class M>
    void on_train_begin(M& model, const Logs& l) {
        if constexpr (on_metric) l.check_monitor("LRScheduler", monitor_);
        LRState st;
        for (const auto& [k, v] : model.checkpoint_extra())
            if (k.rfind(prefix, 0) == 0) st[k.substr(prefix.size())] = v;
        if (!st.empty()) {
            s_->load_state(st);
            if constexpr (has_closed_form)
                if (resume_ == LRResume::position) s_->step(s_->last_epoch());
        }
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
    /// step(epoch): the rate at an epoch without stepping there (not ReduceOnPlateau's step(value)).
    static constexpr bool has_closed_form = !on_metric && requires(S& s, std::int64_t e) { s.step(e); };

    template <class M>
    void apply(M& model) {
        model.set_learning_rate(static_cast<float>(s_->last_lr()));
        auto& extra = model.checkpoint_extra();
        for (const auto& [k, v] : s_->state()) extra[prefix + k] = v;
    }

    S* s_;
    LRStepMode mode_;
    std::string monitor_;
    LRResume resume_;
};

}  // namespace oar
