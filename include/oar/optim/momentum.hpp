// Momentum, as paddle.optimizer.Momentum(learning_rate=0.001, momentum=0.9, use_nesterov=False):
// v = mu v + g';  p -= lr v  (Nesterov: p -= lr (g' + mu v)),  g' = g + l2 p.
#pragma once

#include "../core/backend.hpp"         // Backend, cpu
#include "../kernels/cpu/update.hpp"   // op::fused_update on cpu, momentum_fn
#include "optimizer.hpp"               // OptimizerBase, L2Decay

namespace oar {

struct MomentumOptions {
    float learning_rate = 0.001f;
    float momentum = 0.9f;
    bool use_nesterov = false;
    L2Decay weight_decay{};
};

template <Backend B = cpu>
class Momentum : public OptimizerBase<B> {
    using base = OptimizerBase<B>;
    using base::lr_, base::l2_, base::size, base::values, base::grads, base::zeros, base::view;

public:
    using typename base::value_type;
    using typename base::parameter_set;

    explicit Momentum(parameter_set& params, MomentumOptions o = {})
        : base("Momentum", params, o.learning_rate, o.weight_decay),
          mu_(detail::checked_rate("Momentum", "momentum", o.momentum)), nesterov_(o.use_nesterov), velocity_(zeros()) {}

    void step() {
        this->for_each_decay_run([&](float l2, std::size_t at, std::size_t n) {
            kernel<op::fused_update, B>::run(momentum_fn{lr_, l2, mu_, nesterov_}, n, values() + at, grads() + at,
                                             velocity_.data() + at, nullptr);
        });
    }
    std::vector<typename base::state_view> state() { return {{"velocity", view(velocity_)}}; }
    /// The options this optimizer runs with (the current learning rate), as SGD::options().
    MomentumOptions options() const {
        return {.learning_rate = lr_, .momentum = mu_, .use_nesterov = nesterov_, .weight_decay = L2Decay(l2_)};
    }

private:
    float mu_;
    bool nesterov_;
    typename base::state_buffer velocity_;
};

}  // namespace oar
