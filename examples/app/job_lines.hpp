// The lines train_mnist prints and the callbacks that print them, shared by its CPU run
// (train_mnist.cpp, g++) and its GPU run (train_mnist_gpu.cu, nvcc): where the output goes, the
// course's line every --log-every batches, one line per epoch, a callback that may be absent, and
// the --lr-schedule callbacks. Program code, not library code; nvcc-clean (no simdjson).
#pragma once

#include <oar/optim/lr_scheduler.hpp>  // StepDecay, MultiStepDecay, CosineAnnealingDecay, ReduceOnPlateau
#include <oar/train/callbacks/callback.hpp>      // Logs, detail::cb_*
#include <oar/train/callbacks/lr_scheduler.hpp>  // LRScheduler callback

#include <algorithm>  // std::max
#include <chrono>    // std::chrono::steady_clock
#include <cstdarg>   // va_list: say()
#include <cstddef>   // std::size_t
#include <cstdint>   // std::int64_t
#include <cstdio>    // std::FILE, std::vfprintf, std::fflush
#include <memory>    // std::unique_ptr: optional callbacks
#include <optional>  // std::optional: the schedules
#include <string>    // std::string: describe

#include "train_options.hpp"  // TrainOptions, ScheduleOption

namespace lines {

using clock_type = std::chrono::steady_clock;
inline double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// Where the program's lines go: stdout (on rank 0 only under MPI), and this rank's log file if
/// there is one (--log-dir's workerlog.<rank>).
struct Output {
    bool to_stdout = true;
    std::FILE* log = nullptr;
};
inline Output out;

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline void say(const char* fmt, ...) {
    va_list args;
    if (out.to_stdout) {
        va_start(args, fmt);
        std::vfprintf(stdout, fmt, args);
        va_end(args);
    }
    if (out.log) {
        va_start(args, fmt);
        std::vfprintf(out.log, fmt, args);
        va_end(args);
    }
}

inline void flush_output() {
    std::fflush(stdout);
    if (out.log) std::fflush(out.log);
}

/// The course's log line every --log-every batches (when the output is not a terminal).
struct CourseLog {
    std::size_t every;
    void on_train_batch_end(const oar::Logs& l) {
        const std::size_t batch = l.step - 1;
        if (every && batch % every == 0) {
            say("epoch: %zu, batch: %zu, loss is: %.4f, acc is: %.4f\n", l.epoch, batch, l.loss,
                l.metrics.empty() ? 0.0 : l.metrics[0].second);
            flush_output();  // a pipe or a log file sees each line as it comes
        }
    }
};

/// One line per epoch: train and valid loss and accuracy, time and training speed (all ranks'
/// images: `ranks` processes each train this rank's share); sums this rank's training images and
/// step seconds for the result line.
struct EpochLine {
    double ranks = 1;
    std::size_t trained = 0;
    double train_seconds = 0;
    double step_seconds = 0;
    clock_type::time_point t0 = clock_type::now();
    void on_epoch_begin(const oar::Logs&) { t0 = clock_type::now(); }
    void on_train_batch_end(const oar::Logs& l) {
        trained += l.batch_size;
        step_seconds = l.step_seconds;
    }
    void on_epoch_end(const oar::Logs& l) {
        train_seconds += l.step_seconds;
        const double acc = l.metrics.empty() ? 0.0 : l.metrics[0].second;
        const double vacc = l.eval_metrics.empty() ? 0.0 : l.eval_metrics[0].second;
        say("epoch %zu: train loss %.4f acc %.4f | valid loss %.4f acc %.4f | %.1f s, %.0f img/s, lr %g\n", l.epoch,
            l.loss, acc, l.eval_loss, vacc, seconds_since(t0),
            ranks * static_cast<double>(l.samples) / l.step_seconds, l.lr);
        flush_output();
        step_seconds = 0;
    }
    void on_train_end(const oar::Logs&) {
        train_seconds += step_seconds;  // an epoch cut short by a signal
        step_seconds = 0;
    }
    /// Training images per second over the run, all ranks.
    double images_per_sec() const { return ranks * static_cast<double>(trained) / train_seconds; }
};

/// A callback that may be absent: forwards every hook when set.
template <class C>
struct Maybe {
    std::unique_ptr<C> c;
    template <class M> void on_train_begin(M& m, const oar::Logs& l) { if (c) oar::detail::cb_train_begin(*c, m, l); }
    template <class M> void on_epoch_begin(M& m, const oar::Logs& l) { if (c) oar::detail::cb_epoch_begin(*c, m, l); }
    template <class M> void on_train_batch_end(M& m, const oar::Logs& l) { if (c) oar::detail::cb_batch_end(*c, m, l); }
    template <class M> void on_epoch_end(M& m, const oar::Logs& l) { if (c) oar::detail::cb_epoch_end(*c, m, l); }
    template <class M> void on_eval_end(M& m, const oar::Logs& l) { if (c) oar::detail::cb_eval_end(*c, m, l); }
    template <class M> void on_train_end(M& m, const oar::Logs& l) { if (c) oar::detail::cb_train_end(*c, m, l); }
};

/// The schedule in words for the job's header line: "constant", "cosine per epoch",
/// "x0.1 from epoch 4" (multistep per epoch; per batch: "multi-step decay per batch"), ...
inline std::string describe_schedule(const oar::TrainOptions& c) {
    using K = oar::ScheduleOption::Kind;
    const auto& s = c.lr_schedule;
    if (s.kind == K::multistep && !c.lr_step_per_batch) {
        std::string out;
        for (const std::int64_t m : s.milestones_for(c.epochs)) {
            if (m >= static_cast<std::int64_t>(c.epochs)) continue;  // after the run: never applied
            out += (out.empty() ? "x" : ", x") + oar::detail::concat(s.gamma) + " from epoch " + std::to_string(m);
        }
        return out.empty() ? std::string("constant") : out;
    }
    const char* what = s.kind == K::step        ? "step decay"
                       : s.kind == K::multistep ? "multi-step decay"
                       : s.kind == K::cosine    ? "cosine"
                       : s.kind == K::plateau   ? "reduce on plateau"
                                                : nullptr;
    if (!what) return "constant";
    return std::string(what) + (c.lr_step_per_batch ? " per batch" : " per epoch");
}

/// --lr-schedule: the schedule and its LRScheduler callback (stepped per epoch, or per batch with
/// --lr-step-per batch: then sizes count batches and cosine's T_MAX defaults to epochs x
/// batches_per_epoch), at most one set. Not copyable or movable: the callbacks point at the schedules.
/// Step and multi-step schedules resume from the checkpoint's position with the rate of the schedule
/// built now (LRResume::position): the default milestone follows --epochs, so a run resumed with
/// more epochs trains its remaining epochs as the longer run does. Cosine (whose recursive rates
/// are not its closed form's bits) and plateau resume with their saved rate, as Paddle's do.
struct Schedules {
    std::optional<oar::StepDecay> step_s;
    std::optional<oar::MultiStepDecay> multi_s;
    std::optional<oar::CosineAnnealingDecay> cos_s;
    std::optional<oar::ReduceOnPlateau> plateau_s;
    Maybe<oar::LRScheduler<oar::StepDecay>> step;
    Maybe<oar::LRScheduler<oar::MultiStepDecay>> multi;
    Maybe<oar::LRScheduler<oar::CosineAnnealingDecay>> cosine;
    Maybe<oar::LRScheduler<oar::ReduceOnPlateau>> plateau;

    Schedules(const oar::TrainOptions& c, std::size_t batches_per_epoch) {
        using Sched = oar::ScheduleOption::Kind;
        const double lr0 = static_cast<double>(c.lr);
        const auto& ls = c.lr_schedule;
        const auto mode = c.lr_step_per_batch ? oar::LRStepMode::per_step : oar::LRStepMode::per_epoch;
        const std::size_t run_steps = c.lr_step_per_batch ? c.epochs * std::max<std::size_t>(batches_per_epoch, 1) : c.epochs;
        if (ls.kind == Sched::step) {
            step_s.emplace(lr0, static_cast<std::int64_t>(ls.step_size), ls.gamma);
            step.c = std::make_unique<oar::LRScheduler<oar::StepDecay>>(*step_s, mode, "eval_loss", oar::LRResume::position);
        } else if (ls.kind == Sched::multistep) {
            multi_s.emplace(lr0, ls.milestones_for(run_steps), ls.gamma);
            multi.c = std::make_unique<oar::LRScheduler<oar::MultiStepDecay>>(*multi_s, mode, "eval_loss",
                                                                               oar::LRResume::position);
        } else if (ls.kind == Sched::cosine) {
            cos_s.emplace(lr0, static_cast<std::int64_t>(ls.t_max ? ls.t_max : run_steps));
            cosine.c = std::make_unique<oar::LRScheduler<oar::CosineAnnealingDecay>>(*cos_s, mode);
        } else if (ls.kind == Sched::plateau) {
            plateau_s.emplace(lr0, oar::ReduceOnPlateauOptions{.factor = ls.gamma,
                                                                .patience = static_cast<std::int64_t>(ls.patience)});
            plateau.c = std::make_unique<oar::LRScheduler<oar::ReduceOnPlateau>>(*plateau_s);
        }
    }
    /// A resumed model: the schedule takes its state from the checkpoint and sets the rate the next
    /// step trains at (what its on_train_begin in fit does; doing it twice changes nothing).
    template <class M>
    void resume(M& model) {
        const oar::Logs none{};
        step.on_train_begin(model, none);
        multi.on_train_begin(model, none);
        cosine.on_train_begin(model, none);
        plateau.on_train_begin(model, none);
    }
    Schedules(const Schedules&) = delete;
    Schedules& operator=(const Schedules&) = delete;
};

}  // namespace lines
