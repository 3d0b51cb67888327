// What every optimizer shares: the parameters it updates (a network's flat buffers), the
// learning rate, Paddle's L2Decay regulariser, clear_grad(), and the Optimizer concept.
#pragma once

#include <cmath>        // std::isfinite
#include <concepts>     // std::same_as
#include <cstddef>      // std::size_t
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

protected:
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
};

}  // namespace oar
