// Linear<In, Out>: y = x W + b over the last dimension, as paddle.nn.Linear. The weight is stored
// in Paddle's layout [In, Out] (PyTorch's is its transpose, [Out, In]); XavierUniform init.
// forward_relu / backward_relu (CPU) fuse a following ReLU (the bias and max(., 0) in one pass; dy
// masked in place); Network calls them where the layer sequence has Linear, ReLU. forward_map (every
// backend) runs any other elementwise tail after the bias in the same pass (nn/network.hpp).
// Under bf16 mixed precision (core/precision.hpp) the three products run on the context's
// mixed_gemm (operands rounded to bf16, fp32 sums; on oar::cuda kernel<op::gemm_bf16>); the bias and
// its gradient stay fp32.
#pragma once

#include <array>        // std::array
#include <concepts>     // std::same_as
#include <cstddef>      // std::size_t
#include <string_view>  // std::string_view
#include <type_traits>  // std::true_type: torch_transposed_weight

#include "../core/context.hpp"         // Context
#include "../core/layer_concepts.hpp"  // LayerCheck, ParamSpec, torch_transposed_weight
#include "../core/precision.hpp"       // Bf16Backend: the mixed GEMM off the CPU
#include "../kernels/cpu/bias.hpp"     // op::bias_add / bias_relu / bias_map / bias_grad on cpu
#include "../kernels/cpu/elementwise.hpp"  // op::relu_mask on cpu
#include "../kernels/cpu/gemm.hpp"     // op::gemm on cpu

namespace oar {

template <std::size_t In, std::size_t Out>
struct Linear {
    static_assert(In > 0 && Out > 0, "oar: Linear<In, Out> needs positive sizes (a zero dimension holds no data)");

    static constexpr std::string_view name = "Linear";
    static constexpr std::size_t in_features = In, out_features = Out;
    static constexpr std::size_t num_params = 2;

    static constexpr LayerCheck check(Dims in) {
        if (in.d[in.rank - 1] != In) return {check_kind::features, In, in.d[in.rank - 1]};
        return {};
    }
    static constexpr Dims output_dims(Dims in) {
        in.d[in.rank - 1] = Out;
        return in;
    }
    static constexpr std::size_t flops(Dims in) { return in.size() / In * (2 * In * Out + Out); }
    static constexpr std::size_t workspace(Dims) { return 0; }
    static constexpr std::array<ParamSpec, 2> params(Dims) {
        return {ParamSpec{"weight", make_dims(In, Out), init_kind::xavier_uniform, In, Out},
                ParamSpec{"bias", make_dims(Out), init_kind::zeros, In, Out}};
    }
    static constexpr std::size_t bias_offset = param_offset(params(make_dims(In)), 1);

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        const std::size_t rows = n * (in.size() / In);
        forward_product(ctx, rows, x, y);
        kernel<op::bias_add, B>::run(y, ctx.params + bias_offset, rows, Out, 1);
    }

    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>& ctx, Dims in, const T* x, const T*, const T* dy, T* dx, std::size_t n) const {
        const std::size_t rows = n * (in.size() / In);
        matmul(ctx, Trans::yes, Trans::no, In, Out, rows, T(1), x, In, dy, Out, T(1), ctx.grads,
                                 Out);  // dW += x^T dy
        kernel<op::bias_grad, B>::run(dy, ctx.grads + bias_offset, rows, Out, 1);
        if (dx)
            matmul(ctx, Trans::no, Trans::yes, rows, In, Out, T(1), dy, Out, ctx.params, Out, T(0), dx,
                                     In);  // dx = dy W^T
    }

    /// The producer's epilogue (nn/network.hpp): z = forward(x) and y = f(z * scale[c] + shift[c])
    /// (f(z) when scale is null: no folded BatchNorm) in one pass after the GEMM, f being the
    /// elementwise tail's expr::chain; the backward is backward(x, z, dz) with dz from f's backward.
    template <Backend B, class F, class T = typename B::value_type>
    void forward_map(Context<B>& ctx, Dims in, const T* x, T* z, T* y, std::size_t n, const F& f, const T* scale,
                     const T* shift) const {
        const std::size_t rows = n * (in.size() / In);
        forward_product(ctx, rows, x, z);
        kernel<op::bias_map, B>::run(f, static_cast<const T*>(ctx.params + bias_offset), scale, shift, z, y, rows, Out,
                                     1);
    }
    /// Whether an output of input `in` has the channels a BatchNorm reads first: (Out), not (L, Out).
    static constexpr bool channels_first(Dims in) { return in.rank == 1; }

    /// y = ReLU(forward(x)): the bits of forward followed by the ReLU layer.
    template <class T>
    void forward_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        using B = basic_cpu<T>;
        const std::size_t rows = n * (in.size() / In);
        forward_product(ctx, rows, x, y);
        kernel<op::bias_relu, B>::run(y, ctx.params + bias_offset, rows, Out, 1);
    }
    /// The backward of this layer and the ReLU after it: y is the ReLU's output, dy the gradient of
    /// y, overwritten with the gradient of this layer's output; as backward from there.
    template <class T>
    void backward_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* x, const T* y, T* dy, T* dx,
                       std::size_t n) const {
        kernel<op::relu_mask, basic_cpu<T>>::run(y, dy, n * (in.size() / In) * Out);
        backward(ctx, in, x, y, static_cast<const T*>(dy), dx, n);
    }

private:
    /// y = x W, (rows, In) x (In, Out): on the CPU in evaluation mode with W packed once and kept in
    /// the context's cache until the parameters change (the same bits as packing it every call), for
    /// the fp32 kernels or, under bf16_mixed, for the bf16 units.
    template <Backend B, class T>
    static void forward_product(Context<B>& ctx, std::size_t rows, const T* x, T* y) {
        if constexpr (std::same_as<B, basic_cpu<T>>) {
            if constexpr (std::same_as<B, cpu>)
                if (ctx.packed_weights && ctx.mixed_gemm_cached)
                    return ctx.mixed_gemm_cached(*ctx.packed_weights, ctx.param_version, Trans::no, Trans::no, rows,
                                                 Out, In, 1.0f, x, In, ctx.params, Out, 0.0f, y, Out);
            if (ctx.packed_weights && !ctx.mixed_gemm)
                return ctx.packed_weights->gemm(Trans::no, Trans::no, rows, Out, In, T(1), x, In, ctx.params, Out,
                                                T(0), y, Out, ctx.param_version);
        }
        matmul(ctx, Trans::no, Trans::no, rows, Out, In, T(1), x, In, ctx.params, Out, T(0), y, Out);
    }
    /// kernel<op::gemm, B>, or the precision policy's GEMM where the network set one.
    template <Backend B, class T>
    static void matmul(const Context<B>& ctx, Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K,
                       T alpha, const T* A, std::size_t lda, const T* Bm, std::size_t ldb, T beta, T* C,
                       std::size_t ldc) {
        if constexpr (std::same_as<B, cpu> || Bf16Backend<B>)
            if (ctx.mixed_gemm) return ctx.mixed_gemm(ta, tb, M, N, K, alpha, A, lda, Bm, ldb, beta, C, ldc);
        kernel<op::gemm, B>::run(ta, tb, M, N, K, alpha, A, lda, Bm, ldb, beta, C, ldc);
    }
};

/// PyTorch's nn.Linear stores the weight as [Out, In], the transpose of oar's [In, Out].
template <std::size_t In, std::size_t Out>
struct torch_transposed_weight<Linear<In, Out>> : std::true_type {};

}  // namespace oar
