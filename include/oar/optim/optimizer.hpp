// What every optimizer shares: the parameters it updates (a network's flat buffers), the
// learning rate, Paddle's L2Decay regulariser (for every parameter, or a parameter's own as
// Paddle's ParamAttr(regularizer=...)), clear_grad(), and the Optimizer concept.
#pragma once

#include <algorithm>    // std::find_if: a parameter by its key
#include <cmath>        // std::isfinite
#include <concepts>     // std::same_as
#include <cstddef>      // std::size_t
#include <map>          // std::map: the parameters with their own regularizer, by offset
#include <span>         // std::span
#include <string>       // std::string
#include <utility>      // std::pair
#include <vector>       // std::vector

#include "../core/backend.hpp"     // Backend
#include "../core/error.hpp"       // value_error
#include "../kernels/dispatch.hpp"  // storage<B>: the state buffers
#include "../nn/parameters.hpp"    // basic_parameter_set

namespace oar {

/// paddle.regularizer.L2Decay(coeff): adds coeff * param to every gradient before the update.
struct L2Decay {
    float coeff = 0.0f;
    constexpr L2Decay() = default;
    constexpr explicit L2Decay(float c) : coeff(c) {}
};

/// Optimizer: step() applies one update from the accumulated gradients; clear_grad() zeroes them;
/// the learning rate can be read and set (LR schedules); state() names the buffers a checkpoint saves.
template <class O>
concept Optimizer = requires(O& o, const O& co, float lr) {
    o.step();
    o.clear_grad();
    { co.learning_rate() } -> std::same_as<float>;
    o.set_learning_rate(lr);
    o.state();
};

namespace detail {
inline float checked_rate(const char* who, const char* what, float v) {
    if (!(v >= 0.0f) || !std::isfinite(v))
        throw value_error(concat(who, ": ", what, " must be finite and >= 0, got ", v));
    return v;
}
}  // namespace detail

/// Shared state of the optimizers: the parameter set, learning rate and decay. Written once for
/// every backend: the update is kernel<op::fused_update, B>, the state lives in storage<B> buffers.
template <Backend B>
class OptimizerBase {
public:
    using value_type = typename B::value_type;
    using backend = B;
    using parameter_set = basic_parameter_set<value_type, B>;
    /// A named state buffer (B's memory), as state() lists them for checkpoints.
    using state_view = std::pair<std::string, std::span<value_type>>;

    OptimizerBase(const char* name, parameter_set& params, float lr, L2Decay decay)
        : name_(name), params_(&params), lr_(detail::checked_rate(name, "learning_rate", lr)),
          l2_(detail::checked_rate(name, "L2Decay coefficient", decay.coeff)) {}

    void clear_grad() { params_->clear_grad(); }
    float learning_rate() const { return lr_; }
    void set_learning_rate(float lr) { lr_ = detail::checked_rate(name_, "learning_rate", lr); }
    float l2_decay() const { return l2_; }

    /// Paddle's `ParamAttr(regularizer=L2Decay(c))` on one parameter: the parameter whose state-dict
    /// key is `key` ("7.weight") has c * param added to its gradient instead of the optimizer's
    /// weight_decay (a parameter's own regularizer wins, as in Paddle); L2Decay(0) exempts it. Set
    /// again, the last coefficient counts. Throws value_error naming the key when no parameter has
    /// it, or the coefficient when it is negative or not finite.
    void set_regularizer(const std::string& key, L2Decay decay) {
        const std::string what = detail::concat("L2Decay coefficient of '", key, "'");
        const float c = detail::checked_rate(name_, what.c_str(), decay.coeff);
        const auto& entries = params_->entries();
        const auto it = std::find_if(entries.begin(), entries.end(), [&](const ParamEntry& e) { return e.key == key; });
        if (it == entries.end()) {
            std::string keys;
            for (const ParamEntry& e : entries) keys += (keys.empty() ? "" : ", ") + e.key;
            throw value_error(detail::concat(name_, ": set_regularizer: no parameter '", key, "' (the parameters: ", keys, ")"));
        }
        own_decay_[it->offset] = {it->size, c};
    }
    /// The L2Decay coefficient the parameter `key` is decayed with: its own, else the optimizer's.
    float l2_decay(const std::string& key) const {
        for (const ParamEntry& e : params_->entries())
            if (e.key == key) {
                const auto own = own_decay_.find(e.offset);
                return own == own_decay_.end() ? l2_ : own->second.coeff;
            }
        throw value_error(detail::concat(name_, ": l2_decay: no parameter '", key, "'"));
    }

protected:
    /// Calls run(l2, offset, n) over the flat buffer in runs of one L2Decay coefficient, in order:
    /// one run over everything at the optimizer's coefficient when no parameter has its own.
    /// The updates are elementwise, so a run updates its elements exactly as one call would.
    template <class F>
    void for_each_decay_run(F&& run) const {
        std::size_t at = 0;
        for (const auto& [offset, own] : own_decay_) {
            if (offset > at) run(l2_, at, offset - at);
            run(own.coeff, offset, own.size);
            at = offset + own.size;
        }
        if (at < size()) run(l2_, at, size() - at);
    }

    std::size_t size() const { return params_->values().size(); }
    value_type* values() { return params_->values().data(); }
    const value_type* grads() const { return params_->grads().data(); }
    using state_buffer = typename storage<B>::template buffer<value_type>;
    /// A zeroed state buffer of the parameters' size (B's memory).
    state_buffer zeros() const { return storage<B>::template make<value_type>(params_->values().size()); }
    static std::span<value_type> view(state_buffer& b) { return {b.data(), b.size()}; }

    const char* name_;
    parameter_set* params_;
    float lr_;
    float l2_;
    /// The parameters with their own regularizer: offset -> (size, coefficient).
    struct OwnDecay {
        std::size_t size = 0;
        float coeff = 0;
    };
    std::map<std::size_t, OwnDecay> own_decay_;
};

}  // namespace oar
