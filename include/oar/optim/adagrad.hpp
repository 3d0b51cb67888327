// Adagrad, as paddle.optimizer.Adagrad(learning_rate, epsilon=1e-6, initial_accumulator_value=0):
// m += g'^2;  p -= lr g' / (sqrt(m) + eps),  g' = g + l2 p.
#pragma once

#include "../core/backend.hpp"         // Backend, cpu
#include "../kernels/cpu/update.hpp"   // op::fused_update on cpu, adagrad_fn
#include "optimizer.hpp"               // OptimizerBase, L2Decay

namespace oar {

struct AdagradOptions {
    float learning_rate = 0.001f;
    float epsilon = 1e-6f;
    float initial_accumulator_value = 0.0f;
    L2Decay weight_decay{};
};

template <Backend B = cpu>
class Adagrad : public OptimizerBase<B> {
    using base = OptimizerBase<B>;
    using base::lr_, base::l2_, base::size, base::values, base::grads, base::zeros, base::view;

public:
    using typename base::value_type;
    using typename base::parameter_set;

    explicit Adagrad(parameter_set& params, AdagradOptions o = {})
        : base("Adagrad", params, o.learning_rate, o.weight_decay),
          eps_(detail::checked_rate("Adagrad", "epsilon", o.epsilon)),
          init_(detail::checked_rate("Adagrad", "initial_accumulator_value", o.initial_accumulator_value)),
          moment_(zeros()) {
        storage<B>::fill(moment_.data(), moment_.size(), static_cast<value_type>(init_));
    }

    void step() {
        this->for_each_decay_run([&](float l2, std::size_t at, std::size_t n) {
            kernel<op::fused_update, B>::run(adagrad_fn{lr_, l2, eps_}, n, values() + at, grads() + at,
                                             moment_.data() + at, nullptr);
        });
    }
    std::vector<typename base::state_view> state() { return {{"moment", view(moment_)}}; }
    /// The options this optimizer runs with (the current learning rate), as SGD::options().
    AdagradOptions options() const {
        return {.learning_rate = lr_, .epsilon = eps_, .initial_accumulator_value = init_, .weight_decay = L2Decay(l2_)};
    }

private:
    float eps_;
    float init_;
    typename base::state_buffer moment_;
};

}  // namespace oar
