// CPU kernels for batch normalisation over (n, channels, inner) tensors (BatchNorm1D: inner = 1 or
// L; BatchNorm2D: inner = H*W): one channel at a time by the bodies every backend shares
// (rows.hpp: batch_norm_forward_channel / batch_norm_backward_channel). Per channel, statistics are
// summed in double in a fixed order. The backward recomputes the batch statistics from x instead
// of keeping them from the forward.
#pragma once

#include <cstddef>  // std::size_t

#include "../dispatch.hpp"  // kernel, op::batch_norm_*
#include "../rows.hpp"      // rows::batch_norm_forward_channel / batch_norm_backward_channel

namespace oar {

/// kernel<op::batch_norm_forward, cpu>::run(n, channels, inner, x, gamma, beta, running_mean,
/// running_var, train, momentum, eps, y): y = (x - mean) / sqrt(var + eps) * gamma + beta per channel,
/// with the batch's mean and biased variance in training (then running = momentum * running +
/// (1 - momentum) * batch, the variance unbiased, as PyTorch keeps it) and the running ones in
/// evaluation.
template <class T>
struct kernel<op::batch_norm_forward, basic_cpu<T>> {
    static void run(std::size_t n, std::size_t channels, std::size_t inner, const T* x, const T* gamma, const T* beta,
                    T* running_mean, T* running_var, bool train, float momentum, float eps, T* y) {
        for (std::size_t c = 0; c < channels; ++c)
            rows::batch_norm_forward_channel(n, channels, inner, c, x, gamma, beta, running_mean, running_var, train,
                                             momentum, eps, y);
    }
};

/// kernel<op::batch_norm_backward, cpu>::run(n, channels, inner, x, gamma, running_mean, running_var,
/// train, eps, dy, dgamma, dbeta, dx): dgamma += sum(dy * xhat), dbeta += sum(dy); dx (may be null)
/// overwritten: in training gamma / std * (dy - mean(dy) - xhat mean(dy * xhat)) through the batch
/// statistics, in evaluation dy * gamma / std of the running variance.
template <class T>
struct kernel<op::batch_norm_backward, basic_cpu<T>> {
    static void run(std::size_t n, std::size_t channels, std::size_t inner, const T* x, const T* gamma,
                    const T* running_mean, const T* running_var, bool train, float eps, const T* dy, T* dgamma,
                    T* dbeta, T* dx) {
        for (std::size_t c = 0; c < channels; ++c)
            rows::batch_norm_backward_channel(n, channels, inner, c, x, gamma, running_mean, running_var, train, eps,
                                              dy, dgamma, dbeta, dx);
    }
};

/// kernel<op::batch_norm_fold, cpu>::run(channels, gamma, beta, running_mean, running_var, eps, scale,
/// shift): the evaluation-mode BatchNorm as y = x * scale[c] + shift[c], the scale and shift its
/// forward computes (rows::batch_norm_affine), for a producer's epilogue to apply (op::bias_map).
template <class T>
struct kernel<op::batch_norm_fold, basic_cpu<T>> {
    static void run(std::size_t channels, const T* gamma, const T* beta, const T* running_mean, const T* running_var,
                    float eps, T* scale, T* shift) {
        for (std::size_t c = 0; c < channels; ++c)
            rows::batch_norm_fold_channel(c, gamma, beta, running_mean, running_var, eps, scale, shift);
    }
};

}  // namespace oar
