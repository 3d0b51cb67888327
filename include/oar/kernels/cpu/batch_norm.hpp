// CPU kernels for batch normalisation over (n, channels, inner) tensors (BatchNorm1D: inner = 1 or
// L; BatchNorm2D: inner = H*W). Per channel, statistics are summed in double in a fixed order. The
// backward recomputes the batch statistics from x instead of keeping them from the forward.
#pragma once

#include <cmath>    // std::sqrt
#include <cstddef>  // std::size_t

#include "../dispatch.hpp"  // kernel, op::batch_norm_*

namespace oar {

namespace cpu_detail {
/// Mean and biased variance of channel c over n samples of `inner` values each.
template <class T>
void channel_stats(const T* x, std::size_t n, std::size_t channels, std::size_t inner, std::size_t c, double& mean,
                   double& var) {
    double s = 0.0;
    for (std::size_t b = 0; b < n; ++b) {
        const T* p = x + (b * channels + c) * inner;
        for (std::size_t i = 0; i < inner; ++i) s += p[i];
    }
    const double m = static_cast<double>(n * inner);
    mean = s / m;
    double q = 0.0;
    for (std::size_t b = 0; b < n; ++b) {
        const T* p = x + (b * channels + c) * inner;
        for (std::size_t i = 0; i < inner; ++i) {
            const double d = static_cast<double>(p[i]) - mean;
            q += d * d;
        }
    }
    var = q / m;
}
}  // namespace cpu_detail

/// kernel<op::batch_norm_forward, cpu>::run(n, channels, inner, x, gamma, beta, running_mean,
/// running_var, train, momentum, eps, y): y = (x - mean) / sqrt(var + eps) * gamma + beta per channel,
/// with the batch's mean and biased variance in training (then running = momentum * running +
/// (1 - momentum) * batch, the variance unbiased, as PyTorch keeps it) and the running ones in
/// evaluation.
template <class T>
struct kernel<op::batch_norm_forward, basic_cpu<T>> {
    static void run(std::size_t n, std::size_t channels, std::size_t inner, const T* x, const T* gamma, const T* beta,
                    T* running_mean, T* running_var, bool train, float momentum, float eps, T* y) {
        const double m = static_cast<double>(n * inner);
        for (std::size_t c = 0; c < channels; ++c) {
            double mean = 0.0, var = 0.0;
            if (train) {
                cpu_detail::channel_stats(x, n, channels, inner, c, mean, var);
                const double mu = static_cast<double>(momentum);
                running_mean[c] = static_cast<T>(mu * static_cast<double>(running_mean[c]) + (1.0 - mu) * mean);
                const double unbiased = m > 1.0 ? var * m / (m - 1.0) : var;
                running_var[c] = static_cast<T>(mu * static_cast<double>(running_var[c]) + (1.0 - mu) * unbiased);
            } else {
                mean = static_cast<double>(running_mean[c]);
                var = static_cast<double>(running_var[c]);
            }
            const double invstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
            const T scale = static_cast<T>(static_cast<double>(gamma[c]) * invstd);
            const T shift = static_cast<T>(static_cast<double>(beta[c]) - mean * static_cast<double>(gamma[c]) * invstd);
            for (std::size_t b = 0; b < n; ++b) {
                const T* p = x + (b * channels + c) * inner;
                T* q = y + (b * channels + c) * inner;
                for (std::size_t i = 0; i < inner; ++i) q[i] = p[i] * scale + shift;
            }
        }
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
        const double m = static_cast<double>(n * inner);
        for (std::size_t c = 0; c < channels; ++c) {
            double mean = 0.0, var = 0.0;
            if (train) {
                cpu_detail::channel_stats(x, n, channels, inner, c, mean, var);
            } else {
                mean = static_cast<double>(running_mean[c]);
                var = static_cast<double>(running_var[c]);
            }
            const double invstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
            double sdy = 0.0, sdyx = 0.0;
            for (std::size_t b = 0; b < n; ++b) {
                const T* p = x + (b * channels + c) * inner;
                const T* g = dy + (b * channels + c) * inner;
                for (std::size_t i = 0; i < inner; ++i) {
                    sdy += g[i];
                    sdyx += static_cast<double>(g[i]) * (static_cast<double>(p[i]) - mean) * invstd;
                }
            }
            dgamma[c] += static_cast<T>(sdyx);
            dbeta[c] += static_cast<T>(sdy);
            if (!dx) continue;
            const double k = static_cast<double>(gamma[c]) * invstd;
            for (std::size_t b = 0; b < n; ++b) {
                const T* p = x + (b * channels + c) * inner;
                const T* g = dy + (b * channels + c) * inner;
                T* d = dx + (b * channels + c) * inner;
                for (std::size_t i = 0; i < inner; ++i) {
                    if (train) {
                        const double xhat = (static_cast<double>(p[i]) - mean) * invstd;
                        d[i] = static_cast<T>(k * (static_cast<double>(g[i]) - sdy / m - xhat * sdyx / m));
                    } else {
                        d[i] = static_cast<T>(k * static_cast<double>(g[i]));
                    }
                }
            }
        }
    }
};

}  // namespace oar
