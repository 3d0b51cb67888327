// Learning-rate schedules with paddle.optimizer.lr's names and semantics: StepDecay, MultiStepDecay,
// CosineAnnealingDecay, LinearWarmup, ReduceOnPlateau. A schedule holds the rate in double, as
// Paddle's Python floats do; apply(optimizer) hands it to an optimizer as float. state() and
// load_state() are string key/values (Paddle's state_dict keys) so a checkpoint can store them in
// its metadata and a resumed schedule continues exactly: doubles are written in shortest
// round-trip form.
#pragma once

#include <algorithm>    // std::max
#include <charconv>     // std::to_chars, std::from_chars: exact, locale-free number text
#include <cctype>       // std::tolower for Paddle's case-insensitive modes
#include <cmath>        // std::cos, std::pow, std::isfinite
#include <concepts>     // std::same_as
#include <cstdint>      // std::int64_t
#include <map>          // std::map: the state
#include <numbers>      // std::numbers::pi
#include <optional>     // std::optional: ReduceOnPlateau's best (Paddle's None)
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <system_error> // std::errc from from_chars
#include <type_traits>  // std::is_same_v
#include <utility>      // std::move
#include <vector>       // std::vector: milestones

#include "../core/error.hpp"  // value_error, detail::concat
#include "optimizer.hpp"      // Optimizer: what apply() sets

namespace oar {

/// A schedule's state as text: Paddle's state_dict keys ("last_epoch", "last_lr", ...) plus
/// "scheduler" (its class name, checked on load). Nested schedules prefix their keys
/// ("LinearWarmup_LR.last_lr").
using LRState = std::map<std::string, std::string>;

/// LRSchedule: step() advances one epoch (or step); last_lr() is the rate for the current one;
/// apply(opt) sets it on an optimizer; state()/load_state() save and restore it.
/// (ReduceOnPlateau is stepped with a metric: step(metric), so it is not an LRSchedule.)
template <class S>
concept LRSchedule = requires(S& s, const S& cs, const LRState& st) {
    s.step();
    { cs.last_lr() } -> std::same_as<double>;
    { cs.last_epoch() } -> std::same_as<std::int64_t>;
    { cs.state() } -> std::same_as<LRState>;
    s.load_state(st);
};

namespace detail {
inline std::string lr_text(double x) {
    char buf[40];
    const auto r = std::to_chars(buf, buf + sizeof buf, x);
    return std::string(buf, r.ptr);
}
inline std::string lr_text(std::int64_t x) { return std::to_string(x); }

inline const std::string& lr_find(const LRState& s, std::string_view schedule, const std::string& key) {
    const auto it = s.find(key);
    if (it == s.end()) throw value_error(concat(schedule, ": load_state: missing key '", key, "'"));
    return it->second;
}
inline double lr_read_double(const LRState& s, std::string_view schedule, const std::string& key) {
    const std::string& t = lr_find(s, schedule, key);
    double v = 0;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size() || !std::isfinite(v))
        throw value_error(concat(schedule, ": load_state: key '", key, "' is '", t, "', not a finite number"));
    return v;
}
inline std::int64_t lr_read_int(const LRState& s, std::string_view schedule, const std::string& key) {
    const std::string& t = lr_find(s, schedule, key);
    std::int64_t v = 0;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size())
        throw value_error(concat(schedule, ": load_state: key '", key, "' is '", t, "', not an integer"));
    return v;
}
inline void lr_require(bool ok, std::string_view schedule, std::string_view what) {
    if (!ok) throw value_error(concat(schedule, ": ", what));
}
inline double lr_checked_rate(std::string_view schedule, std::string_view arg, double v) {
    if (!std::isfinite(v) || v < 0)
        throw value_error(concat(schedule, ": ", arg, " must be finite and >= 0, got ", v));
    return v;
}
inline double lr_checked_gamma(std::string_view schedule, std::string_view arg, double v) {
    if (!std::isfinite(v) || v < 0 || v >= 1.0)
        throw value_error(concat(schedule, ": ", arg, " must be in [0, 1) so that the rate decays, got ", v));
    return v;
}
inline std::string lr_lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}
}  // namespace detail

/// What every epoch-driven schedule shares (paddle.optimizer.lr.LRScheduler): base_lr, last_lr,
/// last_epoch. Construction performs Paddle's first step(), so last_epoch() is 0 and last_lr()
/// the rate of epoch 0.
template <class Derived>
class LRSchedulerBase {
public:
    double last_lr() const { return last_lr_; }
    double operator()() const { return last_lr_; }  ///< as Paddle's scheduler(): the current rate
    std::int64_t last_epoch() const { return last_epoch_; }
    double base_lr() const { return base_lr_; }

    /// Moves to the next epoch: Paddle's step() without an argument.
    void step() {
        ++last_epoch_;
        last_lr_ = self().get_lr();
    }
    /// Jumps to `epoch`: Paddle's step(epoch), which uses the closed form where a schedule has one.
    void step(std::int64_t epoch) {
        detail::lr_require(epoch >= 0, Derived::name, detail::concat("step(epoch): epoch must be >= 0, got ", epoch));
        last_epoch_ = epoch;
        last_lr_ = self().closed_form_lr();
    }

    /// Sets the optimizer's learning rate to last_lr() (as float).
    template <Optimizer O>
    void apply(O& optimizer) const {
        optimizer.set_learning_rate(static_cast<float>(last_lr_));
    }

    LRState state() const {
        LRState s{{"scheduler", std::string(Derived::name)},
                  {"last_epoch", detail::lr_text(last_epoch_)},
                  {"last_lr", detail::lr_text(last_lr_)}};
        self().add_state(s);
        return s;
    }
    /// Restores what state() saved. The schedule must have been built with the same arguments
    /// (Paddle's rule); the kind is checked, and nothing changes unless every key reads well.
    void load_state(const LRState& s) {
        const std::string& kind = detail::lr_find(s, Derived::name, "scheduler");
        if (kind != Derived::name)
            throw value_error(detail::concat(Derived::name, ": load_state: the state is a ", kind, "'s"));
        const std::int64_t epoch = detail::lr_read_int(s, Derived::name, "last_epoch");
        const double lr = detail::lr_read_double(s, Derived::name, "last_lr");
        detail::lr_require(epoch >= 0, Derived::name, "load_state: last_epoch must be >= 0");
        self().read_state(s);  // may throw: before anything of ours changes
        last_epoch_ = epoch;
        last_lr_ = lr;
    }

protected:
    explicit LRSchedulerBase(double learning_rate)
        : base_lr_(detail::lr_checked_rate(Derived::name, "learning_rate", learning_rate)), last_lr_(base_lr_) {}
    /// Paddle's constructor ends with step(): epoch 0. Called by the derived constructor once its
    /// members are set.
    void start() { step(); }
    void add_state(LRState&) const {}
    void read_state(const LRState&) {}
    double closed_form_lr() const { return self().get_lr(); }

    double base_lr_;
    double last_lr_;
    std::int64_t last_epoch_ = -1;

private:
    Derived& self() { return static_cast<Derived&>(*this); }
    const Derived& self() const { return static_cast<const Derived&>(*this); }
};

/// paddle.optimizer.lr.StepDecay(learning_rate, step_size, gamma=0.1):
/// lr = learning_rate * gamma^(epoch / step_size) (integer division). torch: StepLR.
class StepDecay : public LRSchedulerBase<StepDecay> {
    friend class LRSchedulerBase<StepDecay>;

public:
    static constexpr std::string_view name = "StepDecay";

    StepDecay(double learning_rate, std::int64_t step_size, double gamma = 0.1)
        : LRSchedulerBase(learning_rate), step_size_(step_size), gamma_(detail::lr_checked_gamma(name, "gamma", gamma)) {
        detail::lr_require(step_size > 0, name, detail::concat("step_size must be a positive integer, got ", step_size));
        start();
    }
    std::int64_t step_size() const { return step_size_; }
    double gamma() const { return gamma_; }

private:
    double get_lr() const { return base_lr_ * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_)); }

    std::int64_t step_size_;
    double gamma_;
};

/// paddle.optimizer.lr.MultiStepDecay(learning_rate, milestones, gamma=0.1): the rate is multiplied
/// by gamma at each milestone epoch. torch: MultiStepLR.
class MultiStepDecay : public LRSchedulerBase<MultiStepDecay> {
    friend class LRSchedulerBase<MultiStepDecay>;

public:
    static constexpr std::string_view name = "MultiStepDecay";

    MultiStepDecay(double learning_rate, std::vector<std::int64_t> milestones, double gamma = 0.1)
        : LRSchedulerBase(learning_rate), milestones_(std::move(milestones)),
          gamma_(detail::lr_checked_gamma(name, "gamma", gamma)) {
        for (std::size_t i = 0; i < milestones_.size(); ++i) {
            detail::lr_require(milestones_[i] >= 0, name,
                               detail::concat("milestones must be >= 0, milestones[", i, "] is ", milestones_[i]));
            if (i > 0)
                detail::lr_require(milestones_[i - 1] < milestones_[i], name,
                                   detail::concat("milestones must be strictly increasing, milestones[", i - 1, "] = ",
                                                  milestones_[i - 1], " and milestones[", i, "] = ", milestones_[i]));
        }
        start();
    }
    const std::vector<std::int64_t>& milestones() const { return milestones_; }
    double gamma() const { return gamma_; }

private:
    double get_lr() const {
        std::size_t passed = 0;
        while (passed < milestones_.size() && last_epoch_ >= milestones_[passed]) ++passed;
        return base_lr_ * std::pow(gamma_, static_cast<double>(passed));
    }

    std::vector<std::int64_t> milestones_;
    double gamma_;
};

/// paddle.optimizer.lr.CosineAnnealingDecay(learning_rate, T_max, eta_min=0). step() follows
/// Paddle's recursive form (each rate from the last one, as torch's CosineAnnealingLR also does),
/// step(epoch) the closed form eta_min + (lr - eta_min)(1 + cos(pi epoch / T_max)) / 2. The two
/// agree in exact arithmetic and past T_max both rise again (no restart clamp).
class CosineAnnealingDecay : public LRSchedulerBase<CosineAnnealingDecay> {
    friend class LRSchedulerBase<CosineAnnealingDecay>;

public:
    static constexpr std::string_view name = "CosineAnnealingDecay";

    CosineAnnealingDecay(double learning_rate, std::int64_t T_max, double eta_min = 0.0)
        : LRSchedulerBase(learning_rate), t_max_(T_max), eta_min_(detail::lr_checked_rate(name, "eta_min", eta_min)) {
        detail::lr_require(T_max > 0, name, detail::concat("T_max must be a positive integer, got ", T_max));
        start();
    }
    std::int64_t T_max() const { return t_max_; }
    double eta_min() const { return eta_min_; }

private:
    double get_lr() const {
        constexpr double pi = std::numbers::pi;
        const auto e = static_cast<double>(last_epoch_), t = static_cast<double>(t_max_);
        if (last_epoch_ == 0) return base_lr_;
        if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0)
            return last_lr_ + (base_lr_ - eta_min_) * (1 - std::cos(pi / t)) / 2;
        return (1 + std::cos(pi * e / t)) / (1 + std::cos(pi * (e - 1) / t)) * (last_lr_ - eta_min_) + eta_min_;
    }
    double closed_form_lr() const {
        return eta_min_ + (base_lr_ - eta_min_) *
                              (1 + std::cos(std::numbers::pi * static_cast<double>(last_epoch_) / static_cast<double>(t_max_))) / 2;
    }

    std::int64_t t_max_;
    double eta_min_;
};

/// paddle.optimizer.lr.LinearWarmup(learning_rate, warmup_steps, start_lr, end_lr): for epochs
/// before warmup_steps the rate rises linearly from start_lr towards end_lr; afterwards it is
/// learning_rate (a number) or the wrapped schedule's rate at epoch - warmup_steps (Paddle calls
/// its step(epoch - warmup_steps), the closed form). Inner: double, StepDecay, MultiStepDecay or
/// CosineAnnealingDecay.
template <class Inner = double>
class LinearWarmup : public LRSchedulerBase<LinearWarmup<Inner>> {
    using base = LRSchedulerBase<LinearWarmup<Inner>>;
    friend base;
    static_assert(std::is_same_v<Inner, double> || std::is_same_v<Inner, StepDecay> ||
                      std::is_same_v<Inner, MultiStepDecay> || std::is_same_v<Inner, CosineAnnealingDecay>,
                  "oar: LinearWarmup wraps a number or an epoch schedule (StepDecay, MultiStepDecay, "
                  "CosineAnnealingDecay); ReduceOnPlateau is stepped with a metric, so warm it up by hand");

public:
    static constexpr std::string_view name = "LinearWarmup";

    LinearWarmup(Inner learning_rate, std::int64_t warmup_steps, double start_lr, double end_lr)
        : base(detail::lr_checked_rate(name, "start_lr", start_lr)), inner_(std::move(learning_rate)),
          warmup_steps_(warmup_steps), start_lr_(start_lr), end_lr_(detail::lr_checked_rate(name, "end_lr", end_lr)) {
        if constexpr (std::is_same_v<Inner, double>) detail::lr_checked_rate(name, "learning_rate", inner_);
        detail::lr_require(warmup_steps > 0, name,
                           detail::concat("warmup_steps must be a positive integer, got ", warmup_steps));
        detail::lr_require(end_lr > start_lr, name,
                           detail::concat("end_lr (", end_lr, ") must be greater than start_lr (", start_lr, ")"));
        this->start();
    }
    const Inner& inner() const { return inner_; }
    std::int64_t warmup_steps() const { return warmup_steps_; }

private:
    double get_lr() {
        const std::int64_t e = this->last_epoch_;
        if (e < warmup_steps_)
            return (end_lr_ - start_lr_) * static_cast<double>(e) / static_cast<double>(warmup_steps_) + start_lr_;
        if constexpr (std::is_same_v<Inner, double>) {
            return inner_;
        } else {
            inner_.step(e - warmup_steps_);
            return inner_.last_lr();
        }
    }
    double closed_form_lr() { return get_lr(); }
    void add_state(LRState& s) const {
        if constexpr (!std::is_same_v<Inner, double>)
            for (const auto& [k, v] : inner_.state()) s.emplace("LinearWarmup_LR." + k, v);
    }
    void read_state(const LRState& s) {
        if constexpr (!std::is_same_v<Inner, double>) {
            LRState in;
            const std::string prefix = "LinearWarmup_LR.";
            for (const auto& [k, v] : s)
                if (k.rfind(prefix, 0) == 0) in.emplace(k.substr(prefix.size()), v);
            Inner copy = inner_;
            copy.load_state(in);  // throws before inner_ changes
            inner_ = std::move(copy);
        }
    }

    Inner inner_;
    std::int64_t warmup_steps_;
    double start_lr_;
    double end_lr_;
};

/// A plain number (an int too, as Paddle accepts) makes a LinearWarmup<double>.
template <class N>
    requires std::is_arithmetic_v<N>
LinearWarmup(N, std::int64_t, double, double) -> LinearWarmup<double>;

/// Arguments of ReduceOnPlateau, with Paddle's defaults; mode and threshold_mode are Paddle's
/// strings ("min"/"max", "rel"/"abs"; case does not matter).
struct ReduceOnPlateauOptions {
    std::string mode = "min";
    double factor = 0.1;
    std::int64_t patience = 10;
    double threshold = 1e-4;
    std::string threshold_mode = "rel";
    std::int64_t cooldown = 0;
    double min_lr = 0.0;
    double epsilon = 1e-8;
};

/// paddle.optimizer.lr.ReduceOnPlateau(learning_rate, mode='min', factor=0.1, patience=10,
/// threshold=1e-4, threshold_mode='rel', cooldown=0, min_lr=0, epsilon=1e-8): step(metric) once
/// per epoch; after more than `patience` epochs without improvement the rate is multiplied by
/// factor (not below min_lr, and only if it falls by more than epsilon), then `cooldown` epochs
/// are skipped. Paddle's semantics, which differ from torch's ReduceLROnPlateau in one place: in
/// cooldown Paddle ignores the metric entirely (torch still records a new best). Without cooldown
/// the two agree. Unlike the others, last_epoch() starts at 0 and construction steps nothing.
class ReduceOnPlateau {
public:
    static constexpr std::string_view name = "ReduceOnPlateau";

    explicit ReduceOnPlateau(double learning_rate, ReduceOnPlateauOptions o = {})
        : opt_(std::move(o)), last_lr_(detail::lr_checked_rate(name, "learning_rate", learning_rate)),
          base_lr_(last_lr_) {
        opt_.mode = detail::lr_lower(opt_.mode);
        opt_.threshold_mode = detail::lr_lower(opt_.threshold_mode);
        detail::lr_require(opt_.mode == "min" || opt_.mode == "max", name,
                           detail::concat("mode must be 'min' or 'max', got '", opt_.mode, "'"));
        detail::lr_require(opt_.threshold_mode == "rel" || opt_.threshold_mode == "abs", name,
                           detail::concat("threshold_mode must be 'rel' or 'abs', got '", opt_.threshold_mode, "'"));
        detail::lr_checked_gamma(name, "factor", opt_.factor);
        detail::lr_require(opt_.patience >= 0, name, detail::concat("patience must be >= 0, got ", opt_.patience));
        detail::lr_require(opt_.cooldown >= 0, name, detail::concat("cooldown must be >= 0, got ", opt_.cooldown));
        detail::lr_checked_rate(name, "threshold", opt_.threshold);
        detail::lr_checked_rate(name, "min_lr", opt_.min_lr);
        detail::lr_checked_rate(name, "epsilon", opt_.epsilon);
    }

    /// One epoch's metric (e.g. the validation loss). A NaN or infinite metric is a value_error:
    /// it would otherwise count as "no improvement" and quietly cut the rate.
    void step(double metric) {
        if (!std::isfinite(metric))
            throw value_error(detail::concat(name, ": step: the metric is ", metric, " at epoch ", last_epoch_ + 1));
        ++last_epoch_;
        if (cooldown_counter_ > 0) {
            --cooldown_counter_;
            return;
        }
        if (!best_ || is_better(metric, *best_)) {
            best_ = metric;
            num_bad_epochs_ = 0;
        } else {
            ++num_bad_epochs_;
        }
        if (num_bad_epochs_ > opt_.patience) {
            cooldown_counter_ = opt_.cooldown;
            num_bad_epochs_ = 0;
            const double new_lr = std::max(last_lr_ * opt_.factor, opt_.min_lr);
            if (last_lr_ - new_lr > opt_.epsilon) last_lr_ = new_lr;
        }
    }

    double last_lr() const { return last_lr_; }
    double operator()() const { return last_lr_; }
    std::int64_t last_epoch() const { return last_epoch_; }
    double base_lr() const { return base_lr_; }
    std::optional<double> best() const { return best_; }
    std::int64_t num_bad_epochs() const { return num_bad_epochs_; }
    std::int64_t cooldown_counter() const { return cooldown_counter_; }
    const ReduceOnPlateauOptions& options() const { return opt_; }

    template <Optimizer O>
    void apply(O& optimizer) const {
        optimizer.set_learning_rate(static_cast<float>(last_lr_));
    }

    /// Paddle's keys: cooldown_counter, best ("None" before the first step), num_bad_epochs,
    /// last_epoch, last_lr; plus "scheduler".
    LRState state() const {
        return {{"scheduler", std::string(name)},
                {"cooldown_counter", detail::lr_text(cooldown_counter_)},
                {"best", best_ ? detail::lr_text(*best_) : "None"},
                {"num_bad_epochs", detail::lr_text(num_bad_epochs_)},
                {"last_epoch", detail::lr_text(last_epoch_)},
                {"last_lr", detail::lr_text(last_lr_)}};
    }
    void load_state(const LRState& s) {
        const std::string& kind = detail::lr_find(s, name, "scheduler");
        if (kind != name) throw value_error(detail::concat(name, ": load_state: the state is a ", kind, "'s"));
        const std::int64_t cooldown = detail::lr_read_int(s, name, "cooldown_counter");
        const std::int64_t bad = detail::lr_read_int(s, name, "num_bad_epochs");
        const std::int64_t epoch = detail::lr_read_int(s, name, "last_epoch");
        const double lr = detail::lr_read_double(s, name, "last_lr");
        std::optional<double> best;
        if (detail::lr_find(s, name, "best") != "None") best = detail::lr_read_double(s, name, "best");
        detail::lr_require(cooldown >= 0 && bad >= 0 && epoch >= 0, name,
                           "load_state: cooldown_counter, num_bad_epochs and last_epoch must be >= 0");
        cooldown_counter_ = cooldown;
        num_bad_epochs_ = bad;
        last_epoch_ = epoch;
        last_lr_ = lr;
        best_ = best;
    }

private:
    bool is_better(double current, double best) const {
        const bool rel = opt_.threshold_mode == "rel";
        if (opt_.mode == "min") return rel ? current < best - best * opt_.threshold : current < best - opt_.threshold;
        return rel ? current > best + best * opt_.threshold : current > best + opt_.threshold;
    }

    ReduceOnPlateauOptions opt_;
    double last_lr_;
    double base_lr_;
    std::int64_t last_epoch_ = 0;
    std::int64_t cooldown_counter_ = 0;
    std::int64_t num_bad_epochs_ = 0;
    std::optional<double> best_;
};

}  // namespace oar
