// A run's logs in files, as callbacks: CSVLogger (one row per epoch), TensorBoardLogger and
// VisualDLLogger (scalars as paddle.callbacks.VisualDL writes them: train/* every log_freq steps,
// eval/* per epoch; in TensorBoard's event files and in VisualDL's own record files) and
// CurvesLogger (the loss and accuracy SVG, rewritten after every epoch). A resumed run (its
// model's progress past epoch 0) appends to its CSV instead of starting a new one.
#pragma once

#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t
#include <filesystem>  // std::filesystem::path
#include <memory>      // std::unique_ptr: writers opened when training begins
#include <string>      // std::string
#include <utility>     // std::move
#include <vector>      // std::vector

#include "../../core/error.hpp"      // value_error
#include "../../io/csv.hpp"          // io::CsvWriter
#include "../../io/svg_plot.hpp"     // io::write_training_curves
#include "../../io/tensorboard.hpp"  // io::TensorBoardWriter
#include "../../io/visualdl.hpp"     // io::VisualDLWriter
#include "callback.hpp"              // Logs

namespace oar {

/// One CSV row per epoch: epoch (from 1), global_step, loss, each metric, eval_loss, each
/// eval_ metric (empty when validation did not run), lr, train_seconds (training steps only).
class CSVLogger {
public:
    explicit CSVLogger(std::filesystem::path path) : path_(std::move(path)) {}

    template <class M>
    void on_train_begin(M& model, const Logs&) {
        std::vector<std::string> cols{"epoch", "global_step", "loss"};
        for (const auto& m : model.metrics()) cols.push_back(m.name());
        cols.push_back("eval_loss");
        for (const auto& m : model.metrics()) cols.push_back("eval_" + m.name());
        cols.push_back("lr");
        cols.push_back("train_seconds");
        const bool resumed = model.progress().epoch > 0 || model.progress().step_in_epoch > 0;
        csv_ = std::make_unique<io::CsvWriter>(path_, std::move(cols), resumed ? io::CsvMode::append : io::CsvMode::truncate);
    }

    void on_epoch_end(const Logs& l) {
        if (!csv_) throw value_error("CSVLogger: on_epoch_end before on_train_begin");
        std::vector<io::CsvField> row;
        row.emplace_back(static_cast<std::uint64_t>(l.epoch + 1));
        row.emplace_back(static_cast<std::uint64_t>(l.global_step));
        row.emplace_back(l.loss);
        for (const auto& m : l.metrics) row.emplace_back(m.second);
        if (l.has_eval) row.emplace_back(l.eval_loss);
        else row.emplace_back(std::string_view());
        for (std::size_t i = 0; i < l.metrics.size(); ++i) {
            if (l.has_eval && i < l.eval_metrics.size()) row.emplace_back(l.eval_metrics[i].second);
            else row.emplace_back(std::string_view());
        }
        row.emplace_back(l.lr);
        row.emplace_back(l.step_seconds);
        csv_->row_fields(row);
    }

    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
    std::unique_ptr<io::CsvWriter> csv_;
};

namespace detail {

/// The scalars of TensorBoardLogger and VisualDLLogger, over a writer W with add_scalar and flush.
template <class W>
class ScalarLogger {
public:
    ScalarLogger(std::filesystem::path dir, std::size_t log_freq, const char* name)
        : dir_(std::move(dir)), log_freq_(log_freq) {
        if (log_freq_ == 0) throw value_error(detail::concat(name, ": log_freq must be at least 1"));
    }

    void on_train_begin(const Logs&) {
        if (!w_) w_ = std::make_unique<W>(dir_);
    }
    void on_train_batch_end(const Logs& l) {
        if (!w_ || l.global_step % log_freq_ != 0) return;
        const auto step = static_cast<std::int64_t>(l.global_step);
        w_->add_scalar("train/loss", l.loss, step);
        for (const auto& [k, v] : l.metrics) w_->add_scalar("train/" + k, v, step);
        w_->add_scalar("train/lr", l.lr, step);
    }
    void on_epoch_end(const Logs& l) {
        if (!w_) return;
        if (l.has_eval) {
            const auto step = static_cast<std::int64_t>(l.epoch + 1);
            w_->add_scalar("eval/loss", l.eval_loss, step);
            for (const auto& [k, v] : l.eval_metrics) w_->add_scalar("eval/" + k, v, step);
        }
        w_->flush();
    }
    void on_train_end(const Logs&) {
        if (w_) w_->flush();
    }

    /// The log file (empty before training began).
    std::filesystem::path path() const { return w_ ? w_->path() : std::filesystem::path(); }

private:
    std::filesystem::path dir_;
    std::size_t log_freq_;
    std::unique_ptr<W> w_;
};

}  // namespace detail

/// TensorBoard scalars: train/loss, train/<metric> and train/lr at every log_freq-th global step;
/// eval/loss and eval/<metric> at each validated epoch (step = epoch from 1). Flushed at every
/// epoch's end, so a running TensorBoard sees each epoch.
class TensorBoardLogger : public detail::ScalarLogger<io::TensorBoardWriter> {
public:
    explicit TensorBoardLogger(std::filesystem::path dir, std::size_t log_freq = 10)
        : ScalarLogger(std::move(dir), log_freq, "TensorBoardLogger") {}
};

/// The same scalars as TensorBoardLogger, in VisualDL's record format (`visualdl --logdir DIR`).
class VisualDLLogger : public detail::ScalarLogger<io::VisualDLWriter> {
public:
    explicit VisualDLLogger(std::filesystem::path dir, std::size_t log_freq = 10)
        : ScalarLogger(std::move(dir), log_freq, "VisualDLLogger") {}
};

/// The loss and accuracy curves (train and valid per epoch) as an SVG, rewritten atomically after
/// every epoch. `accuracy` names the metric plotted as accuracy.
class CurvesLogger {
public:
    explicit CurvesLogger(std::filesystem::path path, std::string accuracy = "acc", std::string title = "Training curves")
        : path_(std::move(path)), acc_(std::move(accuracy)), title_(std::move(title)) {}

    void on_epoch_end(const Logs& l) {
        if (c_.train_loss.empty()) c_.first_epoch = l.epoch + 1;
        c_.train_loss.push_back(l.loss);
        if (auto a = l.get(acc_)) c_.train_accuracy.push_back(*a);
        if (l.has_eval) {
            c_.valid_loss.push_back(l.eval_loss);
            if (auto a = l.get("eval_" + acc_)) c_.valid_accuracy.push_back(*a);
        }
        io::write_training_curves(path_, c_, title_);
    }

    const io::TrainingCurves& curves() const { return c_; }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
    std::string acc_, title_;
    io::TrainingCurves c_;
};

}  // namespace oar
