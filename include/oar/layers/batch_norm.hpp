// BatchNorm1D<F> and BatchNorm2D<C>, as paddle.nn.BatchNorm1D / BatchNorm2D (momentum 0.9,
// epsilon 1e-5, weight ones, bias zeros): per channel, training normalises with the batch's mean and
// variance and updates the running statistics (running = momentum * running + (1 - momentum) *
// batch, Paddle's convention; the variance kept unbiased, as PyTorch keeps it), evaluation uses the
// running ones. The running mean and variance are the layer's buffers (state-dict keys `N._mean`,
// `N._variance`), saved with the weights and never stepped by an optimizer. Settings are values:
// `BatchNorm2D<16>{.momentum = 0.99f, .epsilon = 1e-3f}`.
// On the CPU, BatchNorm2D's training forward keeps the batch's mean and variance in its region of
// the activation arena (arena_floats), and its backward reads them instead of summing x again: the
// same values, so the same bits, one pass over x less.
#pragma once

#include <array>        // std::array
#include <concepts>     // std::same_as
#include <cstddef>      // std::size_t
#include <cstring>      // std::memcpy: the kept statistics in the arena
#include <string_view>  // std::string_view

#include "../core/context.hpp"            // Context, Mode
#include "../core/layer_concepts.hpp"     // LayerCheck, ParamSpec, BufferedLayer
#include "../kernels/cpu/batch_norm.hpp"  // op::batch_norm_* on cpu

namespace oar {

/// Batch normalisation over the first dimension's C channels: Dim 1 takes (C) or (C, L)
/// (BatchNorm1D), Dim 2 takes (C, H, W) (BatchNorm2D). An aggregate, so settings can be designated.
template <std::size_t C, int Dim>
struct BatchNormLayer {
    static_assert(C > 0, "oar: BatchNorm needs a positive number of channels");
    static_assert(Dim == 1 || Dim == 2, "oar: BatchNormLayer<C, Dim> is BatchNorm1D (Dim 1) or BatchNorm2D (Dim 2)");
    static constexpr std::string_view name = Dim == 1 ? "BatchNorm1D" : "BatchNorm2D";
    float momentum = 0.9f;  ///< running = momentum * running + (1 - momentum) * batch
    float epsilon = 1e-5f;  ///< added to the variance

    static constexpr std::size_t num_params = 2;
    static constexpr std::size_t num_buffers = 2;
    static constexpr LayerCheck check(Dims in) {
        const std::size_t lo = Dim == 1 ? 1 : 3, hi = Dim == 1 ? 2 : 3;
        if (in.rank < lo || in.rank > hi) return {check_kind::rank, lo, in.rank};
        if (in.d[0] != C) return {check_kind::channels, C, in.d[0]};
        return {};
    }
    static constexpr Dims output_dims(Dims in) { return in; }
    static constexpr std::size_t flops(Dims in) { return 2 * in.size(); }
    static constexpr std::size_t workspace(Dims) { return 0; }
    static constexpr std::array<ParamSpec, 2> params(Dims) {
        return {ParamSpec{"weight", make_dims(C), init_kind::ones, 0, 0}, ParamSpec{"bias", make_dims(C), init_kind::zeros, 0, 0}};
    }
    static constexpr std::array<ParamSpec, 2> buffers(Dims) {
        return {ParamSpec{"_mean", make_dims(C), init_kind::zeros, 0, 0},
                ParamSpec{"_variance", make_dims(C), init_kind::ones, 0, 0}};
    }
    static constexpr std::size_t bias_offset = param_offset(params(make_dims(C)), 1);
    static constexpr std::size_t variance_offset = param_offset(buffers(make_dims(C)), 1);

    /// The kept statistics, as doubles: a mark (1: the last forward was a training one and kept
    /// them), the C means, the C biased variances (op::batch_norm_forward's stats).
    static constexpr std::size_t kept_doubles = 2 * C + 1;
    /// Arena values per sample (BatchNorm2D): n samples' share holds kept_doubles doubles for a float
    /// or double network (a small part of the C * H * W values of a sample's activations).
    static constexpr std::size_t arena_floats(Dims)
        requires(Dim == 2)
    {
        return 2 * kept_doubles;
    }

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        if constexpr (keeps_stats<B>) {
            forward_keeping<op::batch_norm_forward>(ctx, in, x, y, n);
        } else {
            kernel<op::batch_norm_forward, B>::run(n, C, in.size() / C, x, ctx.params, ctx.params + bias_offset,
                                                   ctx.buffers, ctx.buffers + variance_offset, ctx.mode == Mode::train,
                                                   momentum, epsilon, y);
        }
    }
    /// The evaluation-mode forward as y = x * scale[c] + shift[c] (the scale and shift forward uses,
    /// bit for bit): what a producer before it applies in its epilogue (nn/network.hpp).
    template <Backend B, class T = typename B::value_type>
    void fold(Context<B>& ctx, T* scale, T* shift) const {
        kernel<op::batch_norm_fold, B>::run(C, ctx.params, ctx.params + bias_offset, ctx.buffers,
                                            ctx.buffers + variance_offset, epsilon, scale, shift);
    }
    static constexpr std::size_t channels = C;

    /// The forward and a ReLU after it in one pass (CPU): y = ReLU(BatchNorm(x)), the bits of the
    /// two layers one after the other (nn/network.hpp and nn/blocks.hpp fuse such a pair).
    template <class T>
    void forward_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        forward_keeping<op::batch_norm_forward_relu>(ctx, in, x, y, n);
    }
    /// The backward of the pair (CPU): y is the ReLU's output, dy its gradient, masked in place (it
    /// then holds this layer's output gradient exactly: relu_dy_exact) in the pass that sums it.
    static constexpr bool relu_dy_exact = true;
    template <class T>
    void backward_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* x, const T* y, T* dy, T* dx, std::size_t n) const {
        std::array<double, kept_doubles> kept;
        kernel<op::batch_norm_backward_relu, basic_cpu<T>>::run(n, C, in.size() / C, x, ctx.params, ctx.buffers,
                                                                ctx.buffers + variance_offset, ctx.mode == Mode::train,
                                                                epsilon, y, dy, ctx.grads, ctx.grads + bias_offset, dx,
                                                                kept_stats(ctx, kept));
    }

    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>& ctx, Dims in, const T* x, const T*, const T* dy, T* dx, std::size_t n) const {
        if constexpr (keeps_stats<B>) {
            std::array<double, kept_doubles> kept;
            kernel<op::batch_norm_backward, B>::run(n, C, in.size() / C, x, ctx.params, ctx.buffers,
                                                    ctx.buffers + variance_offset, ctx.mode == Mode::train, epsilon, dy,
                                                    ctx.grads, ctx.grads + bias_offset, dx, kept_stats(ctx, kept));
        } else {
            kernel<op::batch_norm_backward, B>::run(n, C, in.size() / C, x, ctx.params, ctx.buffers,
                                                    ctx.buffers + variance_offset, ctx.mode == Mode::train, epsilon, dy,
                                                    ctx.grads, ctx.grads + bias_offset, dx);
        }
    }

private:
    /// BatchNorm2D on the CPU keeps the training forward's statistics in its arena region.
    template <Backend B>
    static constexpr bool keeps_stats = Dim == 2 && std::same_as<B, basic_cpu<typename B::value_type>>;

    /// The forward by kernel<Op> (op::batch_norm_forward or _relu); with an arena region
    /// (BatchNorm2D, ctx.saved set), the statistics of a training forward kept there and the mark
    /// set, or the mark cleared in evaluation.
    template <class Op, class T>
    void forward_keeping(Context<basic_cpu<T>>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        const bool train = ctx.mode == Mode::train;
        const bool keep = Dim == 2 && ctx.saved != nullptr;
        std::array<double, kept_doubles> kept;
        kernel<Op, basic_cpu<T>>::run(n, C, in.size() / C, x, ctx.params, ctx.params + bias_offset, ctx.buffers,
                                      ctx.buffers + variance_offset, train, momentum, epsilon, y,
                                      keep && train ? kept.data() + 1 : nullptr);
        if (!keep) return;
        kept[0] = train ? 1.0 : 0.0;
        std::memcpy(ctx.saved, kept.data(), (train ? kept_doubles : 1) * sizeof(double));
    }
    /// The statistics the last forward kept (a training one, BatchNorm2D with an arena region),
    /// copied into `kept`; null (the backward sums them again) otherwise.
    template <class T>
    static const double* kept_stats(const Context<basic_cpu<T>>& ctx, std::array<double, kept_doubles>& kept) {
        if (Dim != 2 || ctx.saved == nullptr || ctx.mode != Mode::train) return nullptr;
        std::memcpy(kept.data(), ctx.saved, sizeof(double));
        if (kept[0] != 1.0) return nullptr;
        std::memcpy(kept.data(), ctx.saved, kept_doubles * sizeof(double));
        return kept.data() + 1;
    }
};

/// paddle.nn.BatchNorm1D(num_features): inputs (F) or (F, L).
template <std::size_t F>
using BatchNorm1D = BatchNormLayer<F, 1>;

/// paddle.nn.BatchNorm2D(num_features): inputs (C, H, W).
template <std::size_t C>
using BatchNorm2D = BatchNormLayer<C, 2>;

}  // namespace oar
