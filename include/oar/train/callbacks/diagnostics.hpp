// Callbacks that watch the numbers inside fit through the model's layer hooks (nn/hooks.hpp):
// TerminateOnNonFinite stops fit with non_finite_error naming the step, the layer and the tensor
// where a NaN/Inf first appears (or the loss, or a weight after the update); Diagnostics prints
// LayerStats (per layer: shapes, mean, std, min, max, non-finite count) for the first batch and
// every N-th after it. Neither is on unless passed to fit: without them a step makes no hook call.
#pragma once

#include <cmath>    // std::isfinite
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t
#include <cstdio>   // std::FILE, std::fprintf
#include <memory>   // std::shared_ptr: the observer outlives a moved callback

#include "../../core/error.hpp"  // non_finite_error
#include "../../nn/hooks.hpp"    // NonFiniteGuard, LayerStats, check_finite_parameters
#include "callback.hpp"          // Logs

namespace oar {

struct TerminateOnNonFiniteOptions {
    /// Watch every layer's output and gradients (NonFiniteGuard: names the layer and tensor where
    /// a NaN first appears; a scan of every activation, a few percent of a CNN step). Off: only the
    /// loss and the weights after each update are checked (the weight's key names its layer).
    bool layers = true;
    NonFiniteGuardOptions guard{};
};

/// Stops fit at the first non-finite value: in a layer's forward or backward (NonFiniteGuard),
/// in the loss, or in the weights after the optimizer's step. The non_finite_error leaves fit.
class TerminateOnNonFinite {
public:
    explicit TerminateOnNonFinite(TerminateOnNonFiniteOptions o = {})
        : layers_(o.layers), guard_(std::make_shared<NonFiniteGuard>(o.guard)) {}

    template <class M>
    void on_train_begin(M& model, const Logs&) {
        if (!layers_) return;
        auto g = guard_;
        model.add_layer_hook([g](const LayerEvent& e) { g->on_forward(e); },
                             [g](const LayerEvent& e) { g->on_backward(e); });
    }
    template <class M>
    void on_train_batch_end(M& model, const Logs& l) {
        if (!std::isfinite(l.loss))
            throw non_finite_error(detail::concat("non-finite value at training step ", l.global_step - 1, " (epoch ",
                                                  l.epoch, ", batch ", l.step - 1, "): the loss is ", l.loss));
        check_finite_parameters(model.network().parameters(), l.global_step - 1);
    }

private:
    bool layers_;
    std::shared_ptr<NonFiniteGuard> guard_;
};

/// Prints LayerStats of training steps 0, every, 2*every, ... (every = 0: step 0 only) to `out`.
class Diagnostics {
public:
    explicit Diagnostics(std::size_t every = 0, std::FILE* out = nullptr)
        : every_(every), out_(out ? out : stdout), stats_(std::make_shared<LayerStats>()) {}

    template <class M>
    void on_train_begin(M& model, const Logs&) {
        auto s = stats_;
        const std::size_t every = every_;
        auto chosen = [every](std::uint64_t step) { return every == 0 ? step == 0 : step % every == 0; };
        model.add_layer_hook([s, chosen](const LayerEvent& e) { if (chosen(e.step)) s->on_forward(e); },
                             [s, chosen](const LayerEvent& e) { if (chosen(e.step)) s->on_backward(e); });
    }
    void on_train_batch_end(const Logs& l) {
        if (stats_->rows().empty()) return;
        std::fprintf(out_, "layer statistics of training step %llu (epoch %zu, batch %zu):\n",
                     static_cast<unsigned long long>(l.global_step - 1), l.epoch, l.step - 1);
        stats_->print(out_);
        std::fflush(out_);
        printed_ += stats_->rows().size();
        stats_->clear();
    }
    /// Rows printed so far.
    std::size_t printed() const { return printed_; }

private:
    std::size_t every_;
    std::FILE* out_;
    std::shared_ptr<LayerStats> stats_;
    std::size_t printed_ = 0;
};

}  // namespace oar
