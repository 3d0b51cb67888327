// CPU kernels for batch normalisation over (n, channels, inner) tensors (BatchNorm1D: inner = 1 or
// L; BatchNorm2D: inner = H*W), from the row bodies every backend shares (rows.hpp: the lanes'
// sums, batch_norm_row, batch_norm_grad_sums, batch_norm_dx_row). Per channel, statistics are
// summed in double in a fixed order: rows::batch_norm_lanes partial sums added in a fixed tree, the
// same on every backend, ISA and thread count. The training forward can keep each channel's mean
// and variance (a `stats` array of 2 * channels doubles) for the backward to read instead of summing
// x again (the same values: the same bits); without them the backward recomputes them from x.
// The channel loops are compiled for AVX-512, AVX2 and SSE2 whatever the user's -march
// (isa/batch_norm_body.inc in isa/region.inc) and run on the best ISA the CPU has; large tensors
// are split by channel over the default pool (each channel's arithmetic is the same whichever
// thread runs it: the bits do not depend on the thread count). The CPU loops walk the tensor sample
// by sample over a block of channels (each sample's rows of them one run in memory), the sums of
// each channel in the same order as one channel at a time: the same bits.
#pragma once

#include <algorithm>  // std::min, std::fill
#include <cstddef>  // std::size_t

#include "../../core/thread_pool.hpp"  // default_pool, ThreadPool: channels in parallel
#include "../dispatch.hpp"             // kernel, op::batch_norm_*
#include "../rows.hpp"                 // rows::batch_norm_*: the lanes' sums and the row bodies
#include "isa/dispatch.hpp"            // OAR_ISA_DISPATCH

// The channel loops, once per ISA (isa/region.inc): isa_<name>::batch_norm_forward_channels,
// batch_norm_backward_channels and batch_norm_fold_channels; with OAR_EXTERN_KERNELS (config.hpp) the dispatchers below are only
// declared and the oar::kernels library holds them (kernels/cpu/compiled.hpp).
#if !OAR_EXTERN_KERNELS
#define OAR_ISA_BODY "batch_norm_body.inc"
#include "isa/every_isa.inc"
#endif

namespace oar {

namespace cpu_detail {
#if OAR_EXTERN_KERNELS
template <class T>
void batch_norm_forward_channels(std::size_t c0, std::size_t c1, std::size_t n, std::size_t channels,
                                 std::size_t inner, const T* x, const T* gamma, const T* beta, T* running_mean,
                                 T* running_var, bool train, float momentum, float eps, T* y, bool relu,
                                 double* stats);
template <class T>
void batch_norm_backward_channels(std::size_t c0, std::size_t c1, std::size_t n, std::size_t channels,
                                  std::size_t inner, const T* x, const T* gamma, const T* running_mean,
                                  const T* running_var, bool train, float eps, const T* dy, T* dgamma, T* dbeta,
                                  T* dx, const T* relu_y, T* dy_masked, const double* stats);
template <class T>
void batch_norm_fold_channels(std::size_t channels, const T* gamma, const T* beta, const T* running_mean,
                              const T* running_var, float eps, T* scale, T* shift);
#else
/// Call isa_<active ISA>::batch_norm_forward_channels / batch_norm_backward_channels /
/// batch_norm_fold_channels.
template <class T>
void batch_norm_forward_channels(std::size_t c0, std::size_t c1, std::size_t n, std::size_t channels,
                                 std::size_t inner, const T* x, const T* gamma, const T* beta, T* running_mean,
                                 T* running_var, bool train, float momentum, float eps, T* y, bool relu,
                                 double* stats) {
    OAR_ISA_DISPATCH(batch_norm_forward_channels, c0, c1, n, channels, inner, x, gamma, beta, running_mean,
                     running_var, train, momentum, eps, y, relu, stats)
}
template <class T>
void batch_norm_backward_channels(std::size_t c0, std::size_t c1, std::size_t n, std::size_t channels,
                                  std::size_t inner, const T* x, const T* gamma, const T* running_mean,
                                  const T* running_var, bool train, float eps, const T* dy, T* dgamma, T* dbeta,
                                  T* dx, const T* relu_y, T* dy_masked, const double* stats) {
    OAR_ISA_DISPATCH(batch_norm_backward_channels, c0, c1, n, channels, inner, x, gamma, running_mean, running_var,
                     train, eps, dy, dgamma, dbeta, dx, relu_y, dy_masked, stats)
}
template <class T>
void batch_norm_fold_channels(std::size_t channels, const T* gamma, const T* beta, const T* running_mean,
                              const T* running_var, float eps, T* scale, T* shift) {
    OAR_ISA_DISPATCH(batch_norm_fold_channels, channels, gamma, beta, running_mean, running_var, eps, scale, shift)
}
#endif  // OAR_EXTERN_KERNELS

/// f(c0, c1) over the channels: split into one contiguous range per pool thread when the tensor
/// has at least batch_norm_parallel_min values (below, the tasks' hand-off costs more than they
/// save) and this is not already a pool task; else f(0, channels) here. Contiguous ranges keep
/// each sample's rows of a task's channels one run in memory (batch_norm_body.inc).
inline constexpr std::size_t batch_norm_parallel_min = std::size_t{1} << 14;
template <class F>
void batch_norm_channels(std::size_t n, std::size_t channels, std::size_t inner, F&& f) {
    ThreadPool& pool = default_pool();
    const std::size_t parts = std::min(channels, pool.size());
    if (parts > 1 && n * channels * inner >= batch_norm_parallel_min && !ThreadPool::in_task())
        pool.parallel_for(parts, [&](std::size_t p) { f(channels * p / parts, channels * (p + 1) / parts); });
    else
        f(std::size_t{0}, channels);
}

/// The run of op::batch_norm_forward (Relu false) and op::batch_norm_forward_relu (Relu true):
/// channels split over the pool, each normalised (and clamped at 0) in one pass; in training the
/// batch statistics kept in stats (2 * channels doubles: the means, then the biased variances) where
/// it is not null.
template <class T, bool Relu>
struct batch_norm_forward_kernel {
    static void run(std::size_t n, std::size_t channels, std::size_t inner, const T* x, const T* gamma, const T* beta,
                    T* running_mean, T* running_var, bool train, float momentum, float eps, T* y,
                    double* stats = nullptr) {
        batch_norm_channels(n, channels, inner, [&](std::size_t c0, std::size_t c1) {
            batch_norm_forward_channels(c0, c1, n, channels, inner, x, gamma, beta, running_mean, running_var, train,
                                        momentum, eps, y, Relu, stats);
        });
    }
};
}  // namespace cpu_detail

/// kernel<op::batch_norm_forward, cpu>::run(n, channels, inner, x, gamma, beta, running_mean,
/// running_var, train, momentum, eps, y[, stats]): y = (x - mean) / sqrt(var + eps) * gamma + beta per
/// channel, with the batch's mean and biased variance in training (then running = momentum * running +
/// (1 - momentum) * batch, the variance unbiased, as PyTorch keeps it; and kept in stats, 2 * channels
/// doubles, where given) and the running ones in evaluation.
template <class T>
struct kernel<op::batch_norm_forward, basic_cpu<T>> : cpu_detail::batch_norm_forward_kernel<T, false> {};

/// kernel<op::batch_norm_backward, cpu>::run(n, channels, inner, x, gamma, running_mean, running_var,
/// train, eps, dy, dgamma, dbeta, dx[, stats]): dgamma += sum(dy * xhat), dbeta += sum(dy); dx (may be
/// null) overwritten: in training gamma / std * (dy - mean(dy) - xhat mean(dy * xhat)) through the
/// batch statistics (read from stats where given: what the training forward of the same x kept,
/// the same bits), in evaluation dy * gamma / std of the running variance.
template <class T>
struct kernel<op::batch_norm_backward, basic_cpu<T>> {
    static void run(std::size_t n, std::size_t channels, std::size_t inner, const T* x, const T* gamma,
                    const T* running_mean, const T* running_var, bool train, float eps, const T* dy, T* dgamma,
                    T* dbeta, T* dx, const double* stats = nullptr) {
        cpu_detail::batch_norm_channels(n, channels, inner, [&](std::size_t c0, std::size_t c1) {
            cpu_detail::batch_norm_backward_channels(c0, c1, n, channels, inner, x, gamma, running_mean, running_var,
                                                     train, eps, dy, dgamma, dbeta, dx, static_cast<const T*>(nullptr),
                                                     static_cast<T*>(nullptr), stats);
        });
    }
};

/// kernel<op::batch_norm_forward_relu, cpu>::run(same arguments as op::batch_norm_forward): the
/// BatchNorm's forward and a ReLU after it in one pass, y = max(BatchNorm(x), 0), the bits of the
/// two one after the other.
template <class T>
struct kernel<op::batch_norm_forward_relu, basic_cpu<T>> : cpu_detail::batch_norm_forward_kernel<T, true> {};

/// kernel<op::batch_norm_backward_relu, cpu>::run(n, channels, inner, x, gamma, running_mean,
/// running_var, train, eps, y, dy, dgamma, dbeta, dx[, stats]): the backward of a BatchNorm followed by a
/// ReLU whose output is y and output gradient dy: dy is masked in place (where y > 0, else 0, the
/// ReLU's backward) in the pass that sums it, then op::batch_norm_backward's with the masked dy. The
/// bits of the two backwards one after the other; dy afterwards holds the BatchNorm's output
/// gradient (for a Residual's shortcut, which reads the same gradient).
template <class T>
struct kernel<op::batch_norm_backward_relu, basic_cpu<T>> {
    static void run(std::size_t n, std::size_t channels, std::size_t inner, const T* x, const T* gamma,
                    const T* running_mean, const T* running_var, bool train, float eps, const T* y, T* dy, T* dgamma,
                    T* dbeta, T* dx, const double* stats = nullptr) {
        cpu_detail::batch_norm_channels(n, channels, inner, [&](std::size_t c0, std::size_t c1) {
            cpu_detail::batch_norm_backward_channels(c0, c1, n, channels, inner, x, gamma, running_mean, running_var,
                                                     train, eps, dy, dgamma, dbeta, dx, y, dy, stats);
        });
    }
};

/// kernel<op::batch_norm_fold, cpu>::run(channels, gamma, beta, running_mean, running_var, eps, scale,
/// shift): the evaluation-mode BatchNorm as y = x * scale[c] + shift[c], the scale and shift its
/// forward computes (rows::batch_norm_affine), for a producer's epilogue to apply (op::bias_map).
template <class T>
struct kernel<op::batch_norm_fold, basic_cpu<T>> {
    static void run(std::size_t channels, const T* gamma, const T* beta, const T* running_mean, const T* running_var,
                    float eps, T* scale, T* shift) {
        cpu_detail::batch_norm_fold_channels(channels, gamma, beta, running_mean, running_var, eps, scale, shift);
    }
};

}  // namespace oar
