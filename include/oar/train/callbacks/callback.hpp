// What every callback of oar::Model::fit builds on (paddle.callbacks.Callback): Logs, what a hook
// is told (with NamedValue, a metric's name and value); MonitorMode for callbacks that watch a
// value; the Callback concept (a type with at least one hook) and detail::cb_*, which call a hook
// in whichever form the callback has it. The callbacks themselves are the other headers here.
#pragma once

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t
#include <optional>     // std::optional: Logs::get
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::pair
#include <vector>       // std::vector

#include "../../core/error.hpp"  // value_error, detail::concat

namespace oar {

/// A metric's name and value.
using NamedValue = std::pair<std::string, double>;

/// What a callback is told. In on_train_batch_end: step is the number of batches done in this
/// epoch, loss the batch's loss, metrics the running values over the epoch so far. In
/// on_epoch_end: the epoch's means and, when validation ran, eval_loss / eval_metrics.
struct Logs {
    std::string_view mode = "train";   ///< "train" or "eval"
    std::size_t epoch = 0;             ///< from 0
    std::size_t epochs = 0;            ///< fit's total
    std::size_t step = 0;              ///< batches done in this epoch (or evaluation)
    std::size_t steps = 0;             ///< batches per epoch (or evaluation)
    std::uint64_t global_step = 0;     ///< training steps since the very start (a resumed run continues)
    std::size_t samples = 0;           ///< samples seen in this epoch (or evaluation)
    std::size_t batch_size = 0;        ///< samples in the last batch
    double loss = 0.0;                 ///< the batch's loss; at an epoch's end the epoch's mean
    std::vector<NamedValue> metrics;   ///< running values over this epoch
    double lr = 0.0;                   ///< the optimizer's learning rate
    double ms_per_step = 0.0;          ///< mean milliseconds per step so far (training steps only)
    double step_seconds = 0.0;         ///< seconds spent in training steps this epoch
    bool has_eval = false;             ///< on_epoch_end: validation ran this epoch
    double eval_loss = 0.0;
    std::vector<NamedValue> eval_metrics;
    std::size_t eval_samples = 0;
    /// on_train_begin in fit: the name of every value the epochs will log ("loss", "lr", each
    /// metric, and with validation data "eval_loss" and "eval_<metric>"); empty elsewhere.
    std::vector<std::string> will_log;

    /// At fit's on_train_begin: value_error unless `monitor` is a value fit will log, so a typo or
    /// an eval_ value without validation data is reported before anything trains. `who` names
    /// the callback. Does nothing where will_log is empty (Logs not from fit).
    void check_monitor(std::string_view who, std::string_view monitor) const {
        if (will_log.empty()) return;
        for (const auto& n : will_log)
            if (n == monitor) return;
        std::string known;
        bool validates = false;
        for (const auto& n : will_log) {
            known += (known.empty() ? "" : ", ") + n;
            validates = validates || n.rfind("eval_", 0) == 0;
        }
        if (monitor.rfind("eval_", 0) == 0 && !validates)
            throw value_error(detail::concat(who, ": monitor '", monitor,
                                             "' is a validation value, but fit has no validation data: pass "
                                             "fit(train, &valid, ...) or monitor one of: ", known));
        throw value_error(detail::concat(who, ": monitor '", monitor, "' is not a value fit logs (there are: ",
                                         known, ")"));
    }

    /// A value by name: "loss", "lr", a metric ("acc"), or "eval_loss" / "eval_<metric>";
    /// empty when there is no such value here.
    std::optional<double> get(std::string_view name) const {
        if (name == "loss") return loss;
        if (name == "lr") return lr;
        for (const auto& [k, v] : metrics)
            if (k == name) return v;
        if (name.rfind("eval_", 0) == 0 && has_eval) {
            const std::string_view rest = name.substr(5);
            if (rest == "loss") return eval_loss;
            for (const auto& [k, v] : eval_metrics)
                if (k == rest) return v;
        }
        return std::nullopt;
    }
    /// get(name), or a value_error listing what there is.
    double at(std::string_view name) const {
        if (auto v = get(name)) return *v;
        std::string known = "loss, lr";
        for (const auto& m : metrics) known += ", " + m.first;
        if (has_eval) {
            known += ", eval_loss";
            for (const auto& m : eval_metrics) known += ", eval_" + m.first;
        }
        throw value_error(detail::concat("Logs: no value named '", name, "' at epoch ", epoch, " (there are: ",
                                         known, ")"));
    }
};

/// Whether a monitored value improves by going down (min) or up (max); auto: up for names with
/// "acc" in them, else down (Paddle's mode='auto').
enum class MonitorMode { auto_, min, max };
inline bool monitor_maximizes(std::string_view monitor, MonitorMode mode) {
    return mode == MonitorMode::max || (mode == MonitorMode::auto_ && monitor.find("acc") != std::string_view::npos);
}

// ---------------------------------------------------------------------------------------------
// Callbacks

namespace detail {
// Each hook may take (model, logs) or (logs) or, for train begin/end, (model) or nothing.
template <class C, class M>
void cb_train_begin(C& c, M& m, const Logs& l) {
    if constexpr (requires { c.on_train_begin(m, l); }) c.on_train_begin(m, l);
    else if constexpr (requires { c.on_train_begin(l); }) c.on_train_begin(l);
}
template <class C, class M>
void cb_train_end(C& c, M& m, const Logs& l) {
    if constexpr (requires { c.on_train_end(m, l); }) c.on_train_end(m, l);
    else if constexpr (requires { c.on_train_end(l); }) c.on_train_end(l);
}
template <class C, class M>
void cb_epoch_begin(C& c, M& m, const Logs& l) {
    if constexpr (requires { c.on_epoch_begin(m, l); }) c.on_epoch_begin(m, l);
    else if constexpr (requires { c.on_epoch_begin(l); }) c.on_epoch_begin(l);
}
template <class C, class M>
void cb_epoch_end(C& c, M& m, const Logs& l) {
    if constexpr (requires { c.on_epoch_end(m, l); }) c.on_epoch_end(m, l);
    else if constexpr (requires { c.on_epoch_end(l); }) c.on_epoch_end(l);
}
template <class C, class M>
void cb_batch_end(C& c, M& m, const Logs& l) {
    if constexpr (requires { c.on_train_batch_end(m, l); }) c.on_train_batch_end(m, l);
    else if constexpr (requires { c.on_train_batch_end(l); }) c.on_train_batch_end(l);
}
template <class C, class M>
void cb_eval_end(C& c, M& m, const Logs& l) {
    if constexpr (requires { c.on_eval_end(m, l); }) c.on_eval_end(m, l);
    else if constexpr (requires { c.on_eval_end(l); }) c.on_eval_end(l);
}
}  // namespace detail

/// Callback<C, M>: a type with at least one of on_train_begin, on_epoch_begin, on_train_batch_end,
/// on_epoch_end, on_eval_end, on_train_end, each taking (M& model, const Logs&) or (const Logs&)
/// (paddle.callbacks.Callback). A hook that is absent costs nothing.
template <class C, class M>
concept Callback = requires(C& c, M& m, const Logs& l) { c.on_train_begin(m, l); } ||
                   requires(C& c, const Logs& l) { c.on_train_begin(l); } ||
                   requires(C& c, M& m, const Logs& l) { c.on_epoch_begin(m, l); } ||
                   requires(C& c, const Logs& l) { c.on_epoch_begin(l); } ||
                   requires(C& c, M& m, const Logs& l) { c.on_train_batch_end(m, l); } ||
                   requires(C& c, const Logs& l) { c.on_train_batch_end(l); } ||
                   requires(C& c, M& m, const Logs& l) { c.on_epoch_end(m, l); } ||
                   requires(C& c, const Logs& l) { c.on_epoch_end(l); } ||
                   requires(C& c, M& m, const Logs& l) { c.on_eval_end(m, l); } ||
                   requires(C& c, const Logs& l) { c.on_eval_end(l); } ||
                   requires(C& c, M& m, const Logs& l) { c.on_train_end(m, l); } ||
                   requires(C& c, const Logs& l) { c.on_train_end(l); };

}  // namespace oar
