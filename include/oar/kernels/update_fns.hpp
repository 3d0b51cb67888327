// Per-element optimizer update bodies (Paddle's formulas), shared by every backend: the CPU loop
// in kernels/cpu/update.hpp and a CUDA kernel run the same OAR_HOST_DEVICE functor. L2 decay is
// Paddle's L2Decay: the gradient becomes g + coeff * p before the update.
#pragma once

#include <cmath>  // std::sqrt

#include "../config.hpp"  // OAR_HOST_DEVICE

namespace oar {

/// p -= lr * (g + l2 p)
struct sgd_fn {
    float lr, l2;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T g, T&, T&) const { p -= T(lr) * (g + T(l2) * p); }
};

/// v = mu v + g';  p -= lr * v   (Nesterov: p -= lr * (g' + mu v))
struct momentum_fn {
    float lr, l2, mu;
    bool nesterov;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T g, T& v, T&) const {
        const T gd = g + T(l2) * p;
        v = T(mu) * v + gd;
        p -= T(lr) * (nesterov ? gd + T(mu) * v : v);
    }
};

/// m += g'^2;  p -= lr * g' / (sqrt(m) + eps)
struct adagrad_fn {
    float lr, l2, eps;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T g, T& m, T&) const {
        const T gd = g + T(l2) * p;
        m += gd * gd;
        p -= T(lr) * gd / (std::sqrt(m) + T(eps));
    }
};

/// m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;  p -= lr_t m / (sqrt(v) + eps_t)
/// with lr_t = lr sqrt(1-b2^t) / (1-b1^t) and eps_t = eps sqrt(1-b2^t), Paddle's adam kernel
/// (the same value as PyTorch's bias-corrected form).
struct adam_fn {
    float lr_t, eps_t, b1, b2, l2;
    template <class T>
    OAR_HOST_DEVICE void operator()(T& p, T g, T& m, T& v) const {
        const T gd = g + T(l2) * p;
        m = T(b1) * m + (T(1) - T(b1)) * gd;
        v = T(b2) * v + (T(1) - T(b2)) * gd * gd;
        p -= T(lr_t) * m / (std::sqrt(v) + T(eps_t));
    }
};

}  // namespace oar
