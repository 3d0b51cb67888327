// BatchNorm1D<F> and BatchNorm2D<C>, as paddle.nn.BatchNorm1D / BatchNorm2D (momentum 0.9,
// epsilon 1e-5, weight ones, bias zeros): per channel, training normalises with the batch's mean and
// variance and updates the running statistics (running = momentum * running + (1 - momentum) *
// batch, Paddle's convention; the variance kept unbiased, as PyTorch keeps it), evaluation uses the
// running ones. The running mean and variance are the layer's buffers (state-dict keys `N._mean`,
// `N._variance`), saved with the weights and never stepped by an optimizer. Settings are values:
// `BatchNorm2D<16>{.momentum = 0.99f, .epsilon = 1e-3f}`.
#pragma once

#include <array>        // std::array
#include <cstddef>      // std::size_t
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

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        kernel<op::batch_norm_forward, B>::run(n, C, in.size() / C, x, ctx.params, ctx.params + bias_offset, ctx.buffers,
                                               ctx.buffers + variance_offset, ctx.mode == Mode::train, momentum,
                                               epsilon, y);
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
        kernel<op::batch_norm_forward_relu, basic_cpu<T>>::run(n, C, in.size() / C, x, ctx.params, ctx.params + bias_offset,
                                                               ctx.buffers, ctx.buffers + variance_offset,
                                                               ctx.mode == Mode::train, momentum, epsilon, y);
    }
    /// The backward of the pair (CPU): y is the ReLU's output, dy its gradient, masked in place (it
    /// then holds this layer's output gradient exactly: relu_dy_exact) in the pass that sums it.
    static constexpr bool relu_dy_exact = true;
    template <class T>
    void backward_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* x, const T* y, T* dy, T* dx, std::size_t n) const {
        kernel<op::batch_norm_backward_relu, basic_cpu<T>>::run(n, C, in.size() / C, x, ctx.params, ctx.buffers,
                                                                ctx.buffers + variance_offset, ctx.mode == Mode::train,
                                                                epsilon, y, dy, ctx.grads, ctx.grads + bias_offset, dx);
    }

    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>& ctx, Dims in, const T* x, const T*, const T* dy, T* dx, std::size_t n) const {
        kernel<op::batch_norm_backward, B>::run(n, C, in.size() / C, x, ctx.params, ctx.buffers,
                                                ctx.buffers + variance_offset, ctx.mode == Mode::train, epsilon, dy,
                                                ctx.grads, ctx.grads + bias_offset, dx);
    }
};

/// paddle.nn.BatchNorm1D(num_features): inputs (F) or (F, L).
template <std::size_t F>
using BatchNorm1D = BatchNormLayer<F, 1>;

/// paddle.nn.BatchNorm2D(num_features): inputs (C, H, W).
template <std::size_t C>
using BatchNorm2D = BatchNormLayer<C, 2>;

}  // namespace oar
