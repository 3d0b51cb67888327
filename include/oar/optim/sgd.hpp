// SGD, as paddle.optimizer.SGD(learning_rate=0.001, weight_decay=None): p -= lr * (g + l2 p).
#pragma once

#include "../core/backend.hpp"         // Backend, cpu
#include "../kernels/cpu/update.hpp"   // op::fused_update on cpu, sgd_fn
#include "optimizer.hpp"               // OptimizerBase, L2Decay

namespace oar {

struct SGDOptions {
    float learning_rate = 0.001f;
    L2Decay weight_decay{};
};

template <Backend B = cpu>
class SGD : public OptimizerBase<B> {
    using base = OptimizerBase<B>;
    using base::lr_, base::l2_, base::size, base::values, base::grads;

public:
    using typename base::value_type;
    using typename base::parameter_set;

    explicit SGD(parameter_set& params, SGDOptions o = {}) : base("SGD", params, o.learning_rate, o.weight_decay) {}

    void step() {
        this->for_each_decay_run([&](float l2, std::size_t at, std::size_t n) {
            kernel<op::fused_update, B>::run(sgd_fn{lr_, l2}, n, values() + at, grads() + at, nullptr, nullptr);
        });
    }
    std::vector<typename base::state_view> state() { return {}; }
    /// The options this optimizer runs with (the current learning rate): an equal optimizer over
    /// other parameters (a parameter server's slice) is SGD(other, opt.options()).
    SGDOptions options() const { return {.learning_rate = lr_, .weight_decay = L2Decay(l2_)}; }
};

}  // namespace oar
