// Per-element optimizer updates (Paddle's formulas) as expression functors, shared by every
// backend: the CPU loop in kernels/cpu/update.hpp and a CUDA kernel run the same OAR_HOST_DEVICE
// functor. Each is an update rule (sgd_rule, momentum_rule, adagrad_rule, adam_rule: how p and its
// state move for a gradient) fed by a gradient transform, Paddle's L2Decay (g' = g + coeff * p),
// composed by expr::decayed; sgd_fn, momentum_fn, adagrad_fn and adam_fn are those compositions
// with the optimizers' settings in one aggregate each.
#pragma once

#include <cmath>  // std::sqrt

#include "../config.hpp"  // OAR_HOST_DEVICE

namespace oar {

namespace expr {
/// Paddle's L2Decay as a gradient transform: g + coeff * p.
struct l2_decay {
    float coeff = 0.0f;
    template <class T>
    OAR_HOST_DEVICE T operator()(T p, T g) const { return g + T(coeff) * p; }
};

/// An update rule R fed the gradient that G makes of (p, g): rule(p, grad(p, g), s1, s2).
template <class G, class R>
struct decayed {
    G grad{};
    R rule{};
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T g, T& s1, T& s2) const { rule(p, grad(p, g), s1, s2); }
};
}  // namespace expr

/// p -= lr * g'
struct sgd_rule {
    float lr;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T gd, T&, T&) const { p -= T(lr) * gd; }
};

/// v = mu v + g';  p -= lr * v   (Nesterov: p -= lr * (g' + mu v))
struct momentum_rule {
    float lr, mu;
    bool nesterov;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T gd, T& v, T&) const {
        v = T(mu) * v + gd;
        p -= T(lr) * (nesterov ? gd + T(mu) * v : v);
    }
};

/// m += g'^2;  p -= lr * g' / (sqrt(m) + eps)
struct adagrad_rule {
    float lr, eps;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T gd, T& m, T&) const {
        m += gd * gd;
        p -= T(lr) * gd / (std::sqrt(m) + T(eps));
    }
};

/// m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;  p -= lr_t m / (sqrt(v) + eps_t)
/// with lr_t = lr sqrt(1-b2^t) / (1-b1^t) and eps_t = eps sqrt(1-b2^t), Paddle's adam kernel
/// (the same value as PyTorch's bias-corrected form).
struct adam_rule {
    float lr_t, eps_t, b1, b2;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T gd, T& m, T& v) const {
        m = T(b1) * m + (T(1) - T(b1)) * gd;
        v = T(b2) * v + (T(1) - T(b2)) * gd * gd;
        p -= T(lr_t) * m / (std::sqrt(v) + T(eps_t));
    }
};

/// SGD with L2 decay: p -= lr * (g + l2 p)
struct sgd_fn {
    float lr, l2;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T g, T& s1, T& s2) const {
        expr::decayed<expr::l2_decay, sgd_rule>{{l2}, {lr}}(p, g, s1, s2);
    }
};

/// Momentum with L2 decay (momentum_rule on g + l2 p).
struct momentum_fn {
    float lr, l2, mu;
    bool nesterov;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T g, T& s1, T& s2) const {
        expr::decayed<expr::l2_decay, momentum_rule>{{l2}, {lr, mu, nesterov}}(p, g, s1, s2);
    }
};

/// Adagrad with L2 decay (adagrad_rule on g + l2 p).
struct adagrad_fn {
    float lr, l2, eps;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T g, T& s1, T& s2) const {
        expr::decayed<expr::l2_decay, adagrad_rule>{{l2}, {lr, eps}}(p, g, s1, s2);
    }
};

/// Adam with L2 decay (adam_rule on g + l2 p).
struct adam_fn {
    float lr_t, eps_t, b1, b2, l2;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T g, T& s1, T& s2) const {
        expr::decayed<expr::l2_decay, adam_rule>{{l2}, {lr_t, eps_t, b1, b2}}(p, g, s1, s2);
    }
};

}  // namespace oar
