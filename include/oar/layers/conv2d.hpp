// Conv2D<InC, OutC, K, Stride, Pad>: square-kernel 2-D convolution over (C,H,W), as paddle.nn.Conv2D,
// weight [OutC, InC, K, K] (Paddle's and PyTorch's layout), Normal(0, sqrt(2/(InC*K*K))) init.
// Computed by the backend's whole-batch conv2d kernels (on the CPU, samples in parallel: stride 1 as
// an implicit GEMM on zero-padded copies, other strides by im2col/im2row + GEMM); backward recomputes
// from x instead of storing columns. forward_relu / backward_relu (CPU) are the convolution with
// the ReLU after it fused into the epilogue; Network calls them where the layer sequence has
// Conv2D, ReLU (nn/network.hpp).
#pragma once

#include <array>        // std::array
#include <cstddef>      // std::size_t
#include <string_view>  // std::string_view

#include "../core/context.hpp"         // Context
#include "../core/layer_concepts.hpp"  // LayerCheck, ParamSpec
#include "../kernels/cpu/conv.hpp"     // op::conv2d_forward / conv2d_backward on cpu, ConvGeometry

namespace oar {

template <std::size_t InC, std::size_t OutC, std::size_t K, std::size_t Stride = 1, std::size_t Pad = 0>
struct Conv2D {
    static_assert(InC > 0 && OutC > 0 && K > 0 && Stride > 0,
                  "oar: Conv2D<InC, OutC, K, Stride, Pad> needs positive channels, kernel size and stride");
    static_assert(Pad < K, "oar: Conv2D padding must be smaller than the kernel size");

    static constexpr std::string_view name = "Conv2D";
    static constexpr std::size_t num_params = 2;
    static constexpr std::size_t ckk = InC * K * K;

    static constexpr ConvGeometry geometry(Dims in) { return {InC, in.d[1], in.d[2], K, Stride, Pad}; }

    static constexpr LayerCheck check(Dims in) {
        if (in.rank != 3) return {check_kind::rank, 3, in.rank};
        if (in.d[0] != InC) return {check_kind::channels, InC, in.d[0]};
        if (in.d[1] + 2 * Pad < K) return {check_kind::spatial, K, in.d[1] + 2 * Pad};
        if (in.d[2] + 2 * Pad < K) return {check_kind::spatial, K, in.d[2] + 2 * Pad};
        return {};
    }
    static constexpr Dims output_dims(Dims in) {
        const auto g = geometry(in);
        return make_dims(OutC, g.out_height(), g.out_width());
    }
    static constexpr std::size_t flops(Dims in) {
        const auto g = geometry(in);
        return OutC * g.col_cols() * (2 * ckk + 1);
    }
    static constexpr std::size_t workspace(Dims in) { return 2 * geometry(in).col_rows() * geometry(in).col_cols(); }
    static constexpr std::array<ParamSpec, 2> params(Dims) {
        return {ParamSpec{"weight", make_dims(OutC, InC, K, K), init_kind::kaiming_normal, ckk, OutC * K * K},
                ParamSpec{"bias", make_dims(OutC), init_kind::zeros, ckk, OutC * K * K}};
    }
    static constexpr std::size_t bias_offset = param_offset(params(make_dims(InC, K, K)), 1);

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        kernel<op::conv2d_forward, B>::run(geometry(in), OutC, n, x, ctx.params, ctx.params + bias_offset, y);
    }

    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>& ctx, Dims in, const T* x, const T*, const T* dy, T* dx, std::size_t n) const {
        kernel<op::conv2d_backward, B>::run(geometry(in), OutC, n, x, ctx.params, dy, ctx.grads,
                                            ctx.grads + bias_offset, dx);
    }

    /// y = ReLU(forward(x)): the bits of forward followed by the ReLU layer.
    template <class T>
    void forward_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        kernel<op::conv2d_forward_relu, basic_cpu<T>>::run(geometry(in), OutC, n, x, ctx.params,
                                                           ctx.params + bias_offset, y);
    }
    /// The backward of this layer and the ReLU after it: y is the ReLU's output, dy the gradient of
    /// y, overwritten with the gradient of this layer's output; as backward from there.
    template <class T>
    void backward_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* x, const T* y, T* dy, T* dx,
                       std::size_t n) const {
        kernel<op::conv2d_backward_relu, basic_cpu<T>>::run(geometry(in), OutC, n, x, ctx.params, y, dy, ctx.grads,
                                                            ctx.grads + bias_offset, dx);
    }
};

}  // namespace oar
