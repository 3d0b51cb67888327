// Scalar kernel bodies that every backend runs: one row of softmax and of its backward, one row of
// the fused softmax + cross-entropy, the argmax of one pooling window, adaptive pooling, and one
// channel of BatchNorm's forward and backward. Written once, as
// OAR_HOST_DEVICE functions: the CPU kernels loop over rows with them, the CUDA kernels run one
// row per thread (docs/ARCHITECTURE.md). Plain C++: g++ and nvcc compile it.
#pragma once

#include <cmath>    // std::exp, std::log, std::sqrt
#include <cstddef>  // std::size_t
#include <type_traits>  // std::true_type, std::false_type: BatchNorm backward with or without the variance sums

#include "../config.hpp"  // OAR_HOST_DEVICE
#include "types.hpp"      // ConvGeometry

namespace oar::rows {

/// out = softmax(in), one row of `cols`: the maximum subtracted first, the sum in double.
template <class T>
OAR_HOST_DEVICE void softmax(const T* in, T* out, std::size_t cols) {
    T m = in[0];
    for (std::size_t j = 1; j < cols; ++j) m = in[j] > m ? in[j] : m;
    double s = 0.0;
    for (std::size_t j = 0; j < cols; ++j) {
        out[j] = std::exp(in[j] - m);
        s += out[j];
    }
    const T inv = static_cast<T>(1.0 / s);
    for (std::size_t j = 0; j < cols; ++j) out[j] *= inv;
}

/// dx = y * (dy - sum(dy * y)), one row (the dot product in double).
template <class T>
OAR_HOST_DEVICE void softmax_backward(const T* y, const T* dy, T* dx, std::size_t cols) {
    double dot = 0.0;
    for (std::size_t j = 0; j < cols; ++j) dot += static_cast<double>(dy[j]) * y[j];
    for (std::size_t j = 0; j < cols; ++j) dx[j] = y[j] * (dy[j] - static_cast<T>(dot));
}

/// Returns logsumexp(in) - in[label] (double); when dz is not null, dz = scale * (softmax(in) -
/// onehot(label)). The label is checked by the caller.
template <class T>
OAR_HOST_DEVICE double softmax_cross_entropy(const T* in, std::size_t label, std::size_t cols, T scale, T* dz) {
    T m = in[0];
    for (std::size_t j = 1; j < cols; ++j) m = in[j] > m ? in[j] : m;
    double s = 0.0;
    for (std::size_t j = 0; j < cols; ++j) s += std::exp(static_cast<double>(in[j]) - static_cast<double>(m));
    const double lse = std::log(s) + static_cast<double>(m);
    if (dz) {
        for (std::size_t j = 0; j < cols; ++j) dz[j] = scale * static_cast<T>(std::exp(static_cast<double>(in[j]) - lse));
        dz[label] -= scale;
    }
    return lse - static_cast<double>(in[label]);
}

/// Flat index in `plane` of the maximum of window (oy, ox); NaN wins, the first maximum on ties
/// (PyTorch's rule).
template <class T>
OAR_HOST_DEVICE std::size_t window_argmax(const ConvGeometry& g, const T* plane, std::size_t oy, std::size_t ox) {
    std::size_t best = (oy * g.stride) * g.width + ox * g.stride;
    T bv = plane[best];
    for (std::size_t ky = 0; ky < g.kernel; ++ky)
        for (std::size_t kx = 0; kx < g.kernel; ++kx) {
            const std::size_t idx = (oy * g.stride + ky) * g.width + ox * g.stride + kx;
            const T v = plane[idx];
            if (v > bv || (v != v && bv == bv)) {
                bv = v;
                best = idx;
            }
        }
    return best;
}

/// The input range [lo, hi) that output i of `out` averages along an axis of size `in` (adaptive
/// pooling): lo = floor(i in / out), hi = ceil((i + 1) in / out).
OAR_HOST_DEVICE inline void adaptive_window(std::size_t i, std::size_t in, std::size_t out, std::size_t& lo,
                                            std::size_t& hi) {
    lo = i * in / out;
    hi = ((i + 1) * in + out - 1) / out;
}

/// The mean of window (oy, ox) of one (H, W) plane under adaptive pooling to (OH, OW).
template <class T>
OAR_HOST_DEVICE T adaptive_window_mean(const AdaptiveGeometry& g, const T* plane, std::size_t oy, std::size_t ox) {
    std::size_t y0, y1, x0, x1;
    adaptive_window(oy, g.height, g.out_height, y0, y1);
    adaptive_window(ox, g.width, g.out_width, x0, x1);
    T s = T(0);
    for (std::size_t y = y0; y < y1; ++y)
        for (std::size_t x = x0; x < x1; ++x) s += plane[y * g.width + x];
    return s / static_cast<T>((y1 - y0) * (x1 - x0));
}

/// dx of input pixel (y, x) of one plane: the sum of dy / area over the adaptive windows that
/// contain it (a gather, so every backend sums in the same order).
template <class T>
OAR_HOST_DEVICE T adaptive_pixel_grad(const AdaptiveGeometry& g, const T* dy_plane, std::size_t y, std::size_t x) {
    T s = T(0);
    for (std::size_t oy = 0; oy < g.out_height; ++oy) {
        std::size_t y0, y1;
        adaptive_window(oy, g.height, g.out_height, y0, y1);
        if (y < y0 || y >= y1) continue;
        for (std::size_t ox = 0; ox < g.out_width; ++ox) {
            std::size_t x0, x1;
            adaptive_window(ox, g.width, g.out_width, x0, x1);
            if (x < x0 || x >= x1) continue;
            s += dy_plane[oy * g.out_width + ox] / static_cast<T>((y1 - y0) * (x1 - x0));
        }
    }
    return s;
}

/// Output element i of adaptive average pooling over (n, C, OH, OW), from x (n, C, H, W).
template <class T>
OAR_HOST_DEVICE T adaptive_output(const AdaptiveGeometry& g, const T* x, std::size_t i) {
    const std::size_t ohw = g.out_height * g.out_width, plane = i / ohw;
    return adaptive_window_mean(g, x + plane * g.height * g.width, (i % ohw) / g.out_width, i % g.out_width);
}

/// Input-gradient element i of adaptive average pooling over (n, C, H, W), from dy (n, C, OH, OW).
template <class T>
OAR_HOST_DEVICE T adaptive_input_grad(const AdaptiveGeometry& g, const T* dy, std::size_t i) {
    const std::size_t hw = g.height * g.width, plane = i / hw;
    return adaptive_pixel_grad(g, dy + plane * g.out_height * g.out_width, (i % hw) / g.width, i % g.width);
}

// BatchNorm's channel bodies are always inlined: the CPU kernels call them inside each ISA's region
// (kernels/cpu/isa/batch_norm_body.inc), which then compiles them for that ISA.

/// BatchNorm's sums over a channel run in this many partial sums (lanes): value i of each sample's
/// block of `inner` values goes to lane i % batch_norm_lanes, and the lanes are added in a fixed
/// pairwise tree at the end (batch_norm_lane_total). The order is the same on every backend, ISA
/// and thread count, and its independent chains let a CPU keep them in vector registers instead of
/// waiting on one serial chain of double additions.
inline constexpr std::size_t batch_norm_lanes = 16;

/// The lanes' sum in a fixed pairwise tree: ((s0 + s1) + (s2 + s3)) + ... (s is overwritten).
OAR_HOST_DEVICE OAR_ALWAYS_INLINE double batch_norm_lane_total(double* s) {
    for (std::size_t w = batch_norm_lanes / 2; w >= 1; w /= 2)
        for (std::size_t j = 0; j < w; ++j) s[j] = s[2 * j] + s[2 * j + 1];
    return s[0];
}

/// f(i, i % batch_norm_lanes) for i in [0, inner): whole blocks of batch_norm_lanes first, then the
/// tail with the same lane for each index. f adds value i to its lane's partial sums.
template <class F>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE void batch_norm_lane_each(std::size_t inner, F&& f) {
    constexpr std::size_t L = batch_norm_lanes;
    std::size_t i = 0;
    for (; i + L <= inner; i += L)
        for (std::size_t j = 0; j < L; ++j) f(i + j, j);
    for (std::size_t j = 0; j < L; ++j)
        if (i + j < inner) f(i + j, j);
}

/// s[i % lanes] += p[i], or (Deviations) its squared deviation from mean, for the `inner` values of p.
template <bool Deviations, class T>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE void batch_norm_lane_sums(const T* p, std::size_t inner, double mean, double* s) {
    batch_norm_lane_each(inner, [&](std::size_t i, std::size_t j) {
        if constexpr (Deviations) {
            const double d = static_cast<double>(p[i]) - mean;
            s[j] += d * d;
        } else {
            s[j] += static_cast<double>(p[i]);
        }
    });
}

/// Mean and biased variance (in double, in the lanes' fixed order) of channel c of x (n, channels,
/// inner): the mean first, then the squared deviations from it.
template <class T>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE void batch_norm_stats(const T* x, std::size_t n, std::size_t channels, std::size_t inner,
                                      std::size_t c, double& mean, double& var) {
    double s[batch_norm_lanes] = {};
    for (std::size_t b = 0; b < n; ++b)
        batch_norm_lane_sums<false>(x + (b * channels + c) * inner, inner, 0.0, s);
    const double m = static_cast<double>(n * inner);
    mean = batch_norm_lane_total(s) / m;
    double q[batch_norm_lanes] = {};
    for (std::size_t b = 0; b < n; ++b) batch_norm_lane_sums<true>(x + (b * channels + c) * inner, inner, mean, q);
    var = batch_norm_lane_total(q) / m;
}

/// BatchNorm's affine form of channel c, y = x * scale + shift, for a mean and variance (both the
/// forward and op::batch_norm_fold use it: a folded eval-mode BatchNorm has the layer's scale and
/// shift, bit for bit).
template <class T>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE void batch_norm_affine(double mean, double var, T gamma, T beta, float eps, T& scale, T& shift) {
    const double invstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
    scale = static_cast<T>(static_cast<double>(gamma) * invstd);
    shift = static_cast<T>(static_cast<double>(beta) - mean * static_cast<double>(gamma) * invstd);
}

/// The eval-mode BatchNorm of channel c as scale[c], shift[c] from the running statistics.
template <class T>
OAR_HOST_DEVICE void batch_norm_fold_channel(std::size_t c, const T* gamma, const T* beta, const T* running_mean,
                                             const T* running_var, float eps, T* scale, T* shift) {
    batch_norm_affine(static_cast<double>(running_mean[c]), static_cast<double>(running_var[c]), gamma[c], beta[c], eps,
                      scale[c], shift[c]);
}

/// The training forward's bookkeeping for channel c's batch mean and biased variance over m values:
/// kept as stats[c] and stats[channels + c] where stats is given (for the backward), and folded into
/// the running statistics (running = momentum * running + (1 - momentum) * batch, the variance
/// unbiased, as PyTorch keeps it).
template <class T>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE void batch_norm_keep(std::size_t channels, std::size_t c, double m, double mean,
                                                       double var, float momentum, T* running_mean, T* running_var,
                                                       double* stats) {
    if (stats) {
        stats[c] = mean;
        stats[channels + c] = var;
    }
    const double mu = static_cast<double>(momentum);
    running_mean[c] = static_cast<T>(mu * static_cast<double>(running_mean[c]) + (1.0 - mu) * mean);
    const double unbiased = m > 1.0 ? var * m / (m - 1.0) : var;
    running_var[c] = static_cast<T>(mu * static_cast<double>(running_var[c]) + (1.0 - mu) * unbiased);
}

/// One row of BatchNorm's output: q[i] = p[i] * scale + shift, with `relu` clamped at 0 (relu_fn's
/// max(value, 0) of the same value).
template <class T>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE void batch_norm_row(const T* p, T* q, std::size_t inner, T scale, T shift, bool relu) {
    if (relu) {
        for (std::size_t i = 0; i < inner; ++i) {
            const T v = p[i] * scale + shift;
            q[i] = v < T(0) ? T(0) : v;
        }
    } else {
        for (std::size_t i = 0; i < inner; ++i) q[i] = p[i] * scale + shift;
    }
}

/// BatchNorm's forward of channel c of x (n, channels, inner) into y: (x - mean) / sqrt(var + eps)
/// * gamma + beta, with the batch's statistics in training (then batch_norm_keep) and the running
/// ones in evaluation. With `relu`, a ReLU after it in the same pass: the bits of the two layers
/// one after the other. With `stats` in training: the batch's mean and biased variance kept as
/// stats[c] and stats[channels + c], for the backward to read (batch_norm_backward_channel).
template <class T>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE void batch_norm_forward_channel(std::size_t n, std::size_t channels, std::size_t inner, std::size_t c,
                                                const T* x, const T* gamma, const T* beta, T* running_mean,
                                                T* running_var, bool train, float momentum, float eps, T* y,
                                                bool relu = false, double* stats = nullptr) {
    double mean = 0.0, var = 0.0;
    if (train) {
        batch_norm_stats(x, n, channels, inner, c, mean, var);
        batch_norm_keep(channels, c, static_cast<double>(n * inner), mean, var, momentum, running_mean, running_var,
                        stats);
    } else {
        mean = static_cast<double>(running_mean[c]);
        var = static_cast<double>(running_var[c]);
    }
    T scale, shift;
    batch_norm_affine(mean, var, gamma[c], beta[c], eps, scale, shift);
    for (std::size_t b = 0; b < n; ++b)
        batch_norm_row(x + (b * channels + c) * inner, y + (b * channels + c) * inner, inner, scale, shift, relu);
}

/// A ReLU's backward on one row of its output gradient, in place: g[i] = r[i] > 0 ? g[i] : 0 (r:
/// the ReLU's output, > 0 exactly where its input was).
template <class T>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE void batch_norm_mask_row(const T* r, T* g, std::size_t inner) {
    for (std::size_t i = 0; i < inner; ++i) g[i] = r[i] > T(0) ? g[i] : T(0);
}

/// The backward's sums over one row of x (p) and dy (g), into the lanes: sg += dy, sgd += dy * (x -
/// mean), and (WithVar) q += (x - mean)^2, the training variance's squared deviations.
template <bool WithVar, class T>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE void batch_norm_grad_sums(const T* p, const T* g, std::size_t inner, double mean,
                                                            double* q, double* sg, double* sgd) {
    batch_norm_lane_each(inner, [&](std::size_t i, std::size_t j) {
        const double d = static_cast<double>(p[i]) - mean, gd = static_cast<double>(g[i]);
        if constexpr (WithVar) q[j] += d * d;
        sg[j] += gd;
        sgd[j] += gd * d;
    });
}

/// What the backward's input gradient needs of channel c once its sums are in: dx = k * (dy - mdy -
/// (x - mean) * invstd * mdyx) in training, k * dy in evaluation (k = gamma / std).
struct batch_norm_grad_terms {
    double mean, invstd, k, mdy, mdyx;
};

/// Channel c's parameter gradients from its lanes (sg: dy, sgd: dy * (x - mean)) over m values with
/// variance var: dgamma[c] += sum(dy * xhat), dbeta[c] += sum(dy); returns the input gradient's terms.
template <class T>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE batch_norm_grad_terms batch_norm_grad_finish(std::size_t c, double m, double mean,
                                                                              double var, float eps, const T* gamma,
                                                                              double* sg, double* sgd, T* dgamma,
                                                                              T* dbeta) {
    const double invstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
    const double sdy = batch_norm_lane_total(sg), sdyx = batch_norm_lane_total(sgd) * invstd;
    dgamma[c] += static_cast<T>(sdyx);
    dbeta[c] += static_cast<T>(sdy);
    return {mean, invstd, static_cast<double>(gamma[c]) * invstd, sdy / m, sdyx / m};
}

/// One row of the input gradient from x (p) and dy (g) (batch_norm_grad_terms).
template <class T>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE void batch_norm_dx_row(const T* p, const T* g, T* d, std::size_t inner, bool train,
                                                         const batch_norm_grad_terms& t) {
    if (train) {
        for (std::size_t i = 0; i < inner; ++i) {
            const double xhat = (static_cast<double>(p[i]) - t.mean) * t.invstd;
            d[i] = static_cast<T>(t.k * (static_cast<double>(g[i]) - t.mdy - xhat * t.mdyx));
        }
    } else {
        for (std::size_t i = 0; i < inner; ++i) d[i] = static_cast<T>(t.k * static_cast<double>(g[i]));
    }
}

/// BatchNorm's backward of channel c: dgamma[c] += sum(dy * xhat), dbeta[c] += sum(dy); dx (may be
/// null) overwritten: in training gamma / std * (dy - mean(dy) - xhat mean(dy * xhat)) through the
/// batch statistics, in evaluation dy * gamma / std of the running variance. The batch statistics
/// are recomputed from x (the variance, sum(dy) and sum(dy * (x - mean)) in one pass after the
/// mean), all in the lanes' order of batch_norm_stats: the variance is summed as the forward sums it.
/// With `stats` (what the training forward kept of the same x: batch_norm_forward_channel) the mean
/// and variance are read from it instead: the same values, so the same bits, without the pass
/// over x for the mean and the squared deviations' sums.
/// With relu_y (the output of a ReLU right after the BatchNorm), dy is that ReLU's output gradient:
/// dy_masked must be dy itself (writable): each sample's row of it is masked in place (relu_fn's
/// backward, y > 0 exactly where its input was) just before the sums read it, and the masked values
/// are the BatchNorm's dy: the bits of the ReLU's backward and then the BatchNorm's.
template <class T>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE void batch_norm_backward_channel(std::size_t n, std::size_t channels, std::size_t inner,
                                                 std::size_t c, const T* x, const T* gamma, const T* running_mean,
                                                 const T* running_var, bool train, float eps, const T* dy, T* dgamma,
                                                 T* dbeta, T* dx, const T* relu_y = nullptr,
                                                 T* dy_masked = nullptr, const double* stats = nullptr) {
    constexpr std::size_t L = batch_norm_lanes;
    const double m = static_cast<double>(n * inner);
    const bool kept = train && stats;
    double mean = static_cast<double>(running_mean[c]);
    if (kept) {
        mean = stats[c];
    } else if (train) {
        double s[L] = {};
        for (std::size_t b = 0; b < n; ++b)
            batch_norm_lane_sums<false>(x + (b * channels + c) * inner, inner, 0.0, s);
        mean = batch_norm_lane_total(s) / m;
    }
    // q: squared deviations (training's variance, unless kept); sg: dy; sgd: dy * (x - mean).
    double q[L] = {}, sg[L] = {}, sgd[L] = {};
    for (std::size_t b = 0; b < n; ++b) {
        const std::size_t row = (b * channels + c) * inner;
        const T* g = dy + row;
        if (relu_y) {  // the sample's row masked in place just before the sums read it (still in cache)
            batch_norm_mask_row(relu_y + row, dy_masked + row, inner);
            g = dy_masked + row;
        }
        if (kept)
            batch_norm_grad_sums<false>(x + row, g, inner, mean, q, sg, sgd);
        else
            batch_norm_grad_sums<true>(x + row, g, inner, mean, q, sg, sgd);
    }
    if (relu_y) dy = dy_masked;
    const double var = kept ? stats[channels + c] : train ? batch_norm_lane_total(q) / m : static_cast<double>(running_var[c]);
    const batch_norm_grad_terms t = batch_norm_grad_finish(c, m, mean, var, eps, gamma, sg, sgd, dgamma, dbeta);
    if (!dx) return;
    for (std::size_t b = 0; b < n; ++b) {
        const std::size_t row = (b * channels + c) * inner;
        batch_norm_dx_row(x + row, dy + row, dx + row, inner, train, t);
    }
}

}  // namespace oar::rows
