// EarlyStopping, as paddle.callbacks.EarlyStopping: watch a value at every epoch's end (by
// default the validation loss), stop fit when it has not improved by min_delta for `patience`
// epochs, optionally never before it beats a baseline, and put the best epoch's weights back.
#pragma once

#include <algorithm>    // std::copy: the best weights back
#include <cstddef>      // std::size_t
#include <optional>     // std::optional: the baseline
#include <string>       // std::string
#include <utility>      // std::move
#include <vector>       // std::vector: the best weights

#include "../../core/error.hpp"  // value_error
#include "callback.hpp"          // Logs, MonitorMode

namespace oar {

struct EarlyStoppingOptions {
    std::string monitor = "eval_loss";  ///< a Logs name: "eval_loss", "eval_acc", "loss", ...
    MonitorMode mode = MonitorMode::auto_;  ///< auto: max for names with "acc", else min
    std::size_t patience = 0;           ///< epochs without improvement tolerated
    double min_delta = 0.0;             ///< an improvement must be larger than this
    std::optional<double> baseline{};   ///< the value to beat first (epochs that don't count as not improving)
    bool restore_best_weights = true;   ///< when stopping, load the best epoch's weights back
};

class EarlyStopping {
public:
    explicit EarlyStopping(EarlyStoppingOptions o = {}) : o_(std::move(o)) {
        if (o_.monitor.empty()) throw value_error("EarlyStopping: monitor is empty");
        if (!(o_.min_delta >= 0.0)) throw value_error(detail::concat("EarlyStopping: min_delta must be >= 0, got ", o_.min_delta));
        maximize_ = monitor_maximizes(o_.monitor, o_.mode);
    }

    /// A monitor that names no value fit will log (a typo; the default eval_loss without
    /// validation data) is a value_error here, before the first epoch trains.
    void on_train_begin(const Logs& l) {
        l.check_monitor("EarlyStopping", o_.monitor);
        wait_ = 0;
        best_.reset();
        stopped_epoch_.reset();
        best_weights_.clear();
    }

    template <class M>
    void on_epoch_end(M& model, const Logs& l) {
        // A validation value is there only on validated epochs (eval_freq); others are skipped.
        if (o_.monitor.rfind("eval_", 0) == 0 && !l.has_eval) return;
        const double v = l.at(o_.monitor);
        const double ref = best_ ? *best_ : (o_.baseline ? *o_.baseline : (maximize_ ? -1e300 : 1e300));
        const bool better = maximize_ ? v - o_.min_delta > ref : v + o_.min_delta < ref;
        if (better) {
            best_ = v;
            best_epoch_ = l.epoch;
            wait_ = 0;
            if (o_.restore_best_weights) {
                auto w = model.network().parameters().values();
                best_weights_.assign(w.begin(), w.end());
            }
            return;
        }
        if (++wait_ > o_.patience) {
            stopped_epoch_ = l.epoch;
            model.stop_training();
            if (o_.restore_best_weights && !best_weights_.empty()) {
                auto w = model.network().parameters().values();
                std::copy(best_weights_.begin(), best_weights_.end(), w.begin());
            }
        }
    }

    /// The best value seen and its epoch (empty before one beat the baseline).
    std::optional<double> best() const { return best_; }
    std::size_t best_epoch() const { return best_epoch_; }
    /// The epoch after which it stopped training, if it did.
    std::optional<std::size_t> stopped_epoch() const { return stopped_epoch_; }

private:
    EarlyStoppingOptions o_;
    bool maximize_ = false;
    std::size_t wait_ = 0;
    std::optional<double> best_;
    std::size_t best_epoch_ = 0;
    std::optional<std::size_t> stopped_epoch_;
    std::vector<float> best_weights_;
};

}  // namespace oar
