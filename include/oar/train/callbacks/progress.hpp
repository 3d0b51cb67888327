// ProgBarLogger, as paddle.callbacks.ProgBarLogger: on a terminal one bar per epoch redrawn in
// place (step/total, loss, metrics, ms/step, ETA); elsewhere (a pipe, a log file) a plain line
// every log_freq steps, so logs stay readable. After each epoch, a line with the validation.
#pragma once

#include <chrono>    // std::chrono::steady_clock: ETA from wall time
#include <cstddef>   // std::size_t
#include <cstdio>    // std::FILE, std::fprintf, std::snprintf, std::fflush, fileno
#include <optional>  // std::optional: an injected "is a terminal"
#include <string>    // std::string
#include <vector>    // std::vector: the metrics

#include <unistd.h>  // isatty

#include "../../core/error.hpp"  // value_error
#include "callback.hpp"          // Logs

namespace oar {

struct ProgBarOptions {
    std::size_t log_freq = 10;       ///< not a terminal: a line every log_freq steps (and the last)
    int verbose = 2;                 ///< 0: silent; 1: the epoch lines only; 2: progress too
    std::FILE* out = nullptr;        ///< nullptr: stdout
    std::optional<bool> tty{};       ///< empty: isatty(out)
    std::size_t bar_width = 30;
};

class ProgBarLogger {
public:
    explicit ProgBarLogger(ProgBarOptions o = {}) : o_(o) {
        if (!o_.out) o_.out = stdout;
        if (o_.log_freq == 0) throw value_error("ProgBarLogger: log_freq must be at least 1");
        tty_ = o_.tty ? *o_.tty : ::isatty(fileno(o_.out)) != 0;
    }

    bool is_tty() const { return tty_; }

    void on_epoch_begin(const Logs& l) {
        if (o_.verbose <= 0) return;
        start_ = clock::now();
        first_step_ = 0;
        std::fprintf(o_.out, "Epoch %zu/%zu\n", l.epoch + 1, l.epochs);
        std::fflush(o_.out);
    }

    void on_train_batch_end(const Logs& l) {
        if (o_.verbose < 2) return;
        if (first_step_ == 0) first_step_ = l.step;  // a resumed epoch starts late
        if (tty_) {
            std::string line = "\rstep " + pad(l.step, l.steps) + "/" + std::to_string(l.steps) + " " + bar(l) +
                               values(l.loss, l.metrics) + fmt(" - %.0fms/step", l.ms_per_step);
            const double done = static_cast<double>(l.step - first_step_ + 1);
            const double per_step = seconds_since(start_) / done;
            const double left = per_step * static_cast<double>(l.steps - l.step);
            line += l.step < l.steps ? " - ETA: " + duration(left) : std::string();
            line += "\033[K";  // clear what a longer previous line left
            std::fputs(line.c_str(), o_.out);
            std::fflush(o_.out);
            drawn_ = true;
        } else if (l.step % o_.log_freq == 0 || l.step == l.steps) {
            std::fprintf(o_.out, "step %s/%zu%s - %.0fms/step\n", pad(l.step, l.steps).c_str(), l.steps,
                         values(l.loss, l.metrics).c_str(), l.ms_per_step);
            std::fflush(o_.out);
        }
    }

    void on_epoch_end(const Logs& l) {
        if (o_.verbose <= 0) return;
        if (drawn_) std::fputs("\n", o_.out);
        drawn_ = false;
        if (l.has_eval)
            std::fprintf(o_.out, "Eval samples: %zu%s\n", l.eval_samples, values(l.eval_loss, l.eval_metrics).c_str());
        std::fflush(o_.out);
    }

    void on_train_end(const Logs&) {  // a stop inside an epoch leaves the bar's line open
        if (drawn_) std::fputs("\n", o_.out);
        drawn_ = false;
        std::fflush(o_.out);
    }

private:
    using clock = std::chrono::steady_clock;

    static double seconds_since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

    template <class... A>
    static std::string fmt(const char* f, A... a) {
        char buf[128];
        std::snprintf(buf, sizeof buf, f, a...);
        return buf;
    }
    static std::string pad(std::size_t v, std::size_t total) {
        std::string s = std::to_string(v), t = std::to_string(total);
        return s.size() < t.size() ? std::string(t.size() - s.size(), ' ') + s : s;
    }
    static std::string values(double loss, const std::vector<NamedValue>& metrics) {
        std::string s = fmt(" - loss: %.4f", loss);
        for (const auto& [k, v] : metrics) s += " - " + k + fmt(": %.4f", v);
        return s;
    }
    static std::string duration(double s) {
        const long t = static_cast<long>(s + 0.5);
        if (t >= 3600) return fmt("%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
        if (t >= 60) return fmt("%ld:%02ld", t / 60, t % 60);
        return fmt("%lds", t);
    }
    std::string bar(const Logs& l) const {
        const std::size_t w = o_.bar_width;
        const std::size_t filled = l.steps ? l.step * w / l.steps : w;
        std::string b = "[";
        for (std::size_t i = 0; i < w; ++i) b += i < filled ? '=' : (i == filled ? '>' : '.');
        return b + "]";
    }

    ProgBarOptions o_;
    bool tty_ = false;
    bool drawn_ = false;
    std::size_t first_step_ = 0;
    clock::time_point start_ = clock::now();
};

}  // namespace oar
