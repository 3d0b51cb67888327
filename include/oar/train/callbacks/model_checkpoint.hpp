// ModelCheckpoint, as paddle.callbacks.ModelCheckpoint: saves the model's checkpoint (weights,
// optimizer state, progress, callbacks' extra state) as "latest" after every epoch and when fit
// is interrupted (a signal, a stop inside an epoch), as "epoch_<n>" every save_freq epochs, and as
// "best" when a monitored value improves. Only the writer (rank 0) saves.
// Pass it after the callbacks whose state it saves (an LRScheduler), so it saves their new state.
#pragma once

#include <cstddef>   // std::size_t
#include <optional>  // std::optional: the best value
#include <string>    // std::string
#include <utility>   // std::move
#include <vector>    // std::vector: what was saved

#include "../../core/error.hpp"  // value_error
#include "callback.hpp"          // Logs, MonitorMode

namespace oar {

struct ModelCheckpointOptions {
    std::string dir;                    ///< where the files go (created if missing)
    std::size_t save_freq = 1;          ///< "epoch_<n>" (n from 1) every save_freq epochs; 0: never
    bool save_latest = true;            ///< "latest" after each epoch and when fit is interrupted
    std::string monitor{};              ///< non-empty: "best" when this Logs value improves
    MonitorMode mode = MonitorMode::auto_;
    bool is_writer = true;              ///< false on every rank but 0 of a data-parallel job
};

class ModelCheckpoint {
public:
    explicit ModelCheckpoint(ModelCheckpointOptions o) : o_(std::move(o)) {
        if (o_.dir.empty()) throw value_error("ModelCheckpoint: dir is empty");
        maximize_ = monitor_maximizes(o_.monitor, o_.mode);
    }

    /// A monitor that names no value fit will log (a typo, an eval_ value without validation
    /// data) is a value_error here, before the first epoch trains.
    void on_train_begin(const Logs& l) const {
        if (o_.is_writer && !o_.monitor.empty()) l.check_monitor("ModelCheckpoint", o_.monitor);
    }

    template <class M>
    void on_epoch_end(M& model, const Logs& l) {
        if (!o_.is_writer) return;
        if (o_.save_freq && (l.epoch + 1) % o_.save_freq == 0) save(model, "epoch_" + std::to_string(l.epoch + 1));
        if (!o_.monitor.empty() && (o_.monitor.rfind("eval_", 0) != 0 || l.has_eval)) {
            const double v = l.at(o_.monitor);
            if (!best_ || (maximize_ ? v > *best_ : v < *best_)) {
                best_ = v;
                save(model, "best");
            }
        }
        if (o_.save_latest) save(model, "latest");
    }

    template <class M>
    void on_train_end(M& model, const Logs&) {
        if (o_.is_writer && o_.save_latest && model.interrupted()) save(model, "latest");
    }

    /// Stems saved so far, in order (a stem saved twice appears twice).
    const std::vector<std::string>& saved() const { return saved_; }
    std::optional<double> best() const { return best_; }
    const std::string& dir() const { return o_.dir; }

private:
    template <class M>
    void save(M& model, const std::string& stem) {
        model.save_checkpoint(o_.dir, stem);
        saved_.push_back(stem);
    }

    ModelCheckpointOptions o_;
    bool maximize_ = false;
    std::optional<double> best_;
    std::vector<std::string> saved_;
};

}  // namespace oar
