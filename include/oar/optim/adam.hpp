// Adam, as paddle.optimizer.Adam(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8):
// Paddle's update p -= lr_t m / (sqrt(v) + eps sqrt(1-b2^t)), lr_t = lr sqrt(1-b2^t) / (1-b1^t),
// which equals PyTorch's bias-corrected Adam. L2Decay adds coeff * p to the gradient first.
#pragma once

#include <cmath>    // std::pow, std::sqrt
#include <cstdint>  // std::uint64_t

#include "../core/backend.hpp"         // Backend, cpu
#include "../kernels/cpu/update.hpp"   // op::fused_update on cpu, adam_fn
#include "optimizer.hpp"               // OptimizerBase, L2Decay

namespace oar {

struct AdamOptions {
    float learning_rate = 0.001f;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float epsilon = 1e-8f;
    L2Decay weight_decay{};
};

template <Backend B = cpu>
class Adam : public OptimizerBase<B> {
    using base = OptimizerBase<B>;
    using base::lr_, base::l2_, base::size, base::values, base::grads, base::zeros, base::view;

public:
    using typename base::value_type;
    using typename base::parameter_set;

    explicit Adam(parameter_set& params, AdamOptions o = {})
        : base("Adam", params, o.learning_rate, o.weight_decay), b1_(o.beta1), b2_(o.beta2),
          eps_(detail::checked_rate("Adam", "epsilon", o.epsilon)), m_(zeros()), v_(zeros()) {
        if (!(b1_ >= 0.0f && b1_ < 1.0f) || !(b2_ >= 0.0f && b2_ < 1.0f))
            throw value_error(detail::concat("Adam: beta1 and beta2 must be in [0, 1), got ", b1_, " and ", b2_));
    }

    void step() {
        ++t_;
        const double bc1 = 1.0 - std::pow(static_cast<double>(b1_), static_cast<double>(t_));
        const double bc2 = std::sqrt(1.0 - std::pow(static_cast<double>(b2_), static_cast<double>(t_)));
        this->for_each_decay_run([&](float l2, std::size_t at, std::size_t n) {
            const adam_fn f{static_cast<float>(lr_ * bc2 / bc1), static_cast<float>(eps_ * bc2), b1_, b2_, l2};
            kernel<op::fused_update, B>::run(f, n, values() + at, grads() + at, m_.data() + at, v_.data() + at);
        });
    }
    std::vector<typename base::state_view> state() { return {{"moment1", view(m_)}, {"moment2", view(v_)}}; }
    /// The options this optimizer runs with (the current learning rate), as SGD::options().
    AdamOptions options() const {
        return {.learning_rate = lr_, .beta1 = b1_, .beta2 = b2_, .epsilon = eps_, .weight_decay = L2Decay(l2_)};
    }

    /// Updates taken so far (t in the bias corrections); settable for resume.
    std::uint64_t step_count() const { return t_; }
    void set_step_count(std::uint64_t t) { t_ = t; }

private:
    float b1_, b2_, eps_;
    typename base::state_buffer m_, v_;
    std::uint64_t t_ = 0;
};

}  // namespace oar
