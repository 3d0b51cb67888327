// Conv2D<InC, OutC, K, Stride, Pad, Bias>: 2-D convolution over (C,H,W), as paddle.nn.Conv2D. K,
// Stride and Pad are one number for both axes or Size2{height, width} each (paddle's kernel_size=(3, 5)),
// and Bias::no is bias_attr=False (no bias tensor, no "bias" key in the state dict). Weight
// [OutC, InC, KH, KW] (Paddle's and PyTorch's layout), Normal(0, sqrt(2/(InC*KH*KW))) init.
// Computed by the backend's whole-batch conv2d kernels (on the CPU, samples in parallel: square
// windows of stride 1 as an implicit GEMM on zero-padded copies, everything else by im2col/im2row +
// GEMM); backward recomputes from x instead of storing columns. forward_relu / backward_relu (CPU)
// are the convolution with the ReLU after it fused into the epilogue; Network calls them where the
// layer sequence has Conv2D, ReLU (nn/network.hpp). forward_map (every backend) runs any other
// elementwise tail (activations, an eval-mode BatchNorm2D folded) in the epilogue likewise.
// Under bf16 mixed precision (core/precision.hpp; the context's mixed_gemm set) the CPU kernels get
// the weights rounded to bf16 (a copy in thread-local scratch) and read x and dy rounded to bf16
// as they copy them into their own layouts (ConvGeometry::round_bf16: no batch-sized copy; the
// fused ReLU's backward rounds dy in place, as it overwrites dy anyway) and compute in fp32, the
// bias gradient included (it sums the rounded dy); the bias stays fp32.
// Where the CPU has AVX512-BF16 or AMX and conv_bf16_units() is on (off by default: it is slower so
// far), the products run on those units instead (Context::mixed_conv_*, kernels/cpu/conv_bf16.hpp:
// im2col + gemm_bf16 on operands packed to bf16 once), ReLU and tails applied after the convolution.
// With the switch off, the weight gradient of stride-1 square windows over 8+ input channels still
// runs on AVX512-BF16 where the CPU has it (Context::mixed_conv_dw: conv2d_bf16_dw, pairs of output
// positions on vdpbf16ps), apart from the input gradient, which stays on the fp32 kernels.
// On a Bf16Backend (oar::cuda) the Conv2D kernels' bf16_mixed overloads do the same with bf16
// GEMMs (the operands packed to bf16 inside; dy rounded first, so the bias gradient sums the
// rounded dy there too).
#pragma once

#include <array>        // std::array
#include <concepts>     // std::same_as
#include <cstddef>      // std::size_t
#include <string_view>  // std::string_view

#include "../core/context.hpp"         // Context
#include "../core/cpu_isa.hpp"         // active_cpu_isa: the bf16 route
#include "../core/layer_concepts.hpp"  // LayerCheck, ParamSpec
#include "../core/bf16.hpp"            // round_to_bf16: mixed precision's operands
#include "../core/precision.hpp"       // conv_bf16_units; bf16_mixed, Bf16Backend: the mixed kernels off the CPU
#include "../kernels/cpu/conv.hpp"     // op::conv2d_forward / conv2d_backward on cpu, ConvGeometry
#include "../kernels/cpu/scratch.hpp"  // cpu_detail::scratch: the rounded copies

namespace oar {

/// A size per axis of a 2-D window, (height, width); one number means both: `Size2{3, 5}`, `3`.
struct Size2 {
    std::size_t h = 0, w = 0;
    constexpr Size2(std::size_t both) : h(both), w(both) {}  // NOLINT(google-explicit-constructor)
    constexpr Size2(std::size_t height, std::size_t width) : h(height), w(width) {}
    friend constexpr bool operator==(Size2, Size2) = default;
};

/// Whether a layer has a bias: Bias::no is Paddle's bias_attr=False, PyTorch's bias=False.
enum class Bias : bool { no = false, yes = true };

template <std::size_t InC, std::size_t OutC, Size2 K, Size2 Stride = 1, Size2 Pad = 0, Bias HasBias = Bias::yes>
struct Conv2D {
    static_assert(InC > 0 && OutC > 0 && K.h > 0 && K.w > 0 && Stride.h > 0 && Stride.w > 0,
                  "oar: Conv2D<InC, OutC, K, Stride, Pad> needs positive channels, kernel size and stride");
    static_assert(Pad.h < K.h && Pad.w < K.w, "oar: Conv2D padding must be smaller than the kernel size");

    static constexpr std::string_view name = "Conv2D";
    static constexpr bool has_bias = HasBias == Bias::yes;
    static constexpr std::size_t num_params = has_bias ? 2 : 1;
    static constexpr std::size_t ckk = InC * K.h * K.w;

    static constexpr ConvGeometry geometry(Dims in) {
        return {InC, in.d[1], in.d[2], K.h, Stride.h, Pad.h, K.w, Stride.w, Pad.w};
    }
    /// geometry(in) for the fp32 kernels under bf16_mixed: they read x and dy rounded to bf16.
    static constexpr ConvGeometry rounding_geometry(Dims in) {
        ConvGeometry g = geometry(in);
        g.round_bf16 = true;
        return g;
    }

    static constexpr LayerCheck check(Dims in) {
        if (in.rank != 3) return {check_kind::rank, 3, in.rank};
        if (in.d[0] != InC) return {check_kind::channels, InC, in.d[0]};
        if (in.d[1] + 2 * Pad.h < K.h) return {check_kind::spatial, K.h, in.d[1] + 2 * Pad.h};
        if (in.d[2] + 2 * Pad.w < K.w) return {check_kind::spatial, K.w, in.d[2] + 2 * Pad.w};
        return {};
    }
    static constexpr Dims output_dims(Dims in) {
        const auto g = geometry(in);
        return make_dims(OutC, g.out_height(), g.out_width());
    }
    static constexpr std::size_t flops(Dims in) {
        const auto g = geometry(in);
        return OutC * g.col_cols() * (2 * ckk + (has_bias ? 1 : 0));
    }
    static constexpr std::size_t workspace(Dims in) { return 2 * geometry(in).col_rows() * geometry(in).col_cols(); }
    static constexpr std::array<ParamSpec, num_params> params(Dims) {
        const ParamSpec weight{"weight", make_dims(OutC, InC, K.h, K.w), init_kind::kaiming_normal, ckk,
                               OutC * K.h * K.w};
        if constexpr (has_bias)
            return {weight, ParamSpec{"bias", make_dims(OutC), init_kind::zeros, ckk, OutC * K.h * K.w}};
        else
            return {weight};
    }
    static constexpr std::size_t bias_offset = has_bias ? param_offset(params(make_dims(InC, K.h, K.w)), 1) : 0;

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        if constexpr (std::same_as<B, cpu>)
            if (ctx.mixed_gemm) {
                if (bf16_units(ctx)) {
                    ctx.mixed_conv_forward(geometry(in), OutC, n, x, ctx.params, bias(ctx.params), y);
                    return;
                }
                kernel<op::conv2d_forward, B>::run(rounding_geometry(in), OutC, n, x,
                                                   rounded<slot::mixed_w>(ctx.params, weight_size), bias(ctx.params), y);
                return;
            }
        if constexpr (Bf16Backend<B>)
            if (ctx.mixed_gemm) {
                kernel<op::conv2d_forward, B>::run(geometry(in), OutC, n, x, ctx.params, bias(ctx.params), y, bf16_mixed{});
                return;
            }
        kernel<op::conv2d_forward, B>::run(geometry(in), OutC, n, x, ctx.params, bias(ctx.params), y);
    }

    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>& ctx, Dims in, const T* x, const T*, const T* dy, T* dx, std::size_t n) const {
        if constexpr (std::same_as<B, cpu>)
            if (ctx.mixed_gemm) {
                if (bf16_units(ctx)) {
                    ctx.mixed_conv_backward(geometry(in), OutC, n, x, ctx.params, dy, ctx.grads, bias(ctx.grads), dx);
                    return;
                }
                const float* w = rounded<slot::mixed_w>(ctx.params, weight_size);
                if (dw_on_units(ctx, in)) {  // dx and db by the fp32 kernels (x not read there), dw on the units
                    kernel<op::conv2d_backward, B>::run(rounding_geometry(in), OutC, n, x, w, dy, nullptr,
                                                        bias(ctx.grads), dx);
                    ctx.mixed_conv_dw(geometry(in), OutC, n, x, dy, ctx.grads, nullptr);
                    return;
                }
                kernel<op::conv2d_backward, B>::run(rounding_geometry(in), OutC, n, x, w, dy, ctx.grads, bias(ctx.grads),
                                                    dx);
                return;
            }
        if constexpr (Bf16Backend<B>)
            if (ctx.mixed_gemm) {
                kernel<op::conv2d_backward, B>::run(geometry(in), OutC, n, x, ctx.params, dy, ctx.grads, bias(ctx.grads),
                                                    dx, bf16_mixed{});
                return;
            }
        kernel<op::conv2d_backward, B>::run(geometry(in), OutC, n, x, ctx.params, dy, ctx.grads, bias(ctx.grads), dx);
    }

    /// The producer's epilogue (nn/network.hpp): z = forward(x) and y = f(z * scale[c] + shift[c])
    /// (f(z) when scale is null: no folded BatchNorm), each sample's tail run as soon as its output is
    /// written; f is the elementwise tail's expr::chain. The backward is backward(x, z, dz).
    template <Backend B, class F, class T = typename B::value_type>
    void forward_map(Context<B>& ctx, Dims in, const T* x, T* z, T* y, std::size_t n, const F& f, const T* scale,
                     const T* shift) const {
        if constexpr (std::same_as<B, cpu>)
            if (ctx.mixed_gemm) {
                if (bf16_units(ctx)) {  // the convolution into z, then each sample's tail
                    ctx.mixed_conv_forward(geometry(in), OutC, n, x, ctx.params, bias(ctx.params), z);
                    const std::size_t per = out_size(in), hw = per / OutC;
                    for (std::size_t s = 0; s < n; ++s)
                        kernel<op::bias_map, B>::run(f, static_cast<const T*>(nullptr), scale, shift, z + s * per,
                                                     y + s * per, 1, OutC, hw);
                    return;
                }
                kernel<op::conv2d_forward_map, B>::run(rounding_geometry(in), OutC, n, x,
                                                       rounded<slot::mixed_w>(ctx.params, weight_size),
                                                       bias(ctx.params), f, scale, shift, z, y);
                return;
            }
        if constexpr (Bf16Backend<B>)
            if (ctx.mixed_gemm) {
                kernel<op::conv2d_forward_map, B>::run(geometry(in), OutC, n, x, ctx.params, bias(ctx.params), f, scale,
                                                       shift, z, y, bf16_mixed{});
                return;
            }
        kernel<op::conv2d_forward_map, B>::run(geometry(in), OutC, n, x, ctx.params, bias(ctx.params), f, scale, shift,
                                               z, y);
    }
    /// The output's channels come first, as a BatchNorm2D reads them.
    static constexpr bool channels_first(Dims) { return true; }

    /// y = ReLU(forward(x)): the bits of forward followed by the ReLU layer.
    template <class T>
    void forward_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        if constexpr (std::same_as<T, float>)
            if (ctx.mixed_gemm) {
                if (bf16_units(ctx)) {
                    ctx.mixed_conv_forward(geometry(in), OutC, n, x, ctx.params, bias(ctx.params), y);
                    for (std::size_t i = 0, e = n * out_size(in); i < e; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
                    return;
                }
                kernel<op::conv2d_forward_relu, cpu>::run(rounding_geometry(in), OutC, n, x,
                                                          rounded<slot::mixed_w>(ctx.params, weight_size),
                                                          bias(ctx.params), y);
                return;
            }
        kernel<op::conv2d_forward_relu, basic_cpu<T>>::run(geometry(in), OutC, n, x, ctx.params, bias(ctx.params), y);
    }
    /// The backward of this layer and the ReLU after it: y is the ReLU's output, dy the gradient of
    /// y, overwritten with the gradient of this layer's output; as backward from there.
    template <class T>
    void backward_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* x, const T* y, T* dy, T* dx,
                       std::size_t n) const {
        if constexpr (std::same_as<T, float>)
            if (ctx.mixed_gemm) {
                if (bf16_units(ctx)) {  // dy rounded and masked in place (it is overwritten anyway), then the bf16 backward
                    round_to_bf16(dy, dy, n * out_size(in));
                    for (std::size_t i = 0, e = n * out_size(in); i < e; ++i) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
                    ctx.mixed_conv_backward(geometry(in), OutC, n, x, ctx.params, dy, ctx.grads, bias(ctx.grads), dx);
                    return;
                }
                // The fp32 kernels mask dy in place and round it there, group by group.
                const float* w = rounded<slot::mixed_w>(ctx.params, weight_size);
                if (dw_on_units(ctx, in)) {  // the mask, dx and db by the fp32 kernels, then dw on the units
                    kernel<op::conv2d_backward_relu, cpu>::run(rounding_geometry(in), OutC, n, x, w, y, dy, nullptr,
                                                               bias(ctx.grads), dx);
                    ctx.mixed_conv_dw(geometry(in), OutC, n, x, dy, ctx.grads, nullptr);
                    return;
                }
                kernel<op::conv2d_backward_relu, cpu>::run(rounding_geometry(in), OutC, n, x, w, y, dy, ctx.grads,
                                                           bias(ctx.grads), dx);
                return;
            }
        kernel<op::conv2d_backward_relu, basic_cpu<T>>::run(geometry(in), OutC, n, x, ctx.params, y, dy, ctx.grads,
                                                            bias(ctx.grads), dx);
    }

private:
    using slot = cpu_detail::scratch_slot;
    static constexpr std::size_t weight_size = OutC * InC * K.h * K.w;
    static constexpr std::size_t out_size(Dims in) { return output_dims(in).size(); }
    /// Whether the bf16 route runs: the policy set it (Context::mixed_conv_forward), the switch is on
    /// (conv_bf16_units, core/precision.hpp) and the active ISA has bf16 product units (AVX512-BF16 or
    /// AMX); otherwise the fp32 kernels reading rounded operands (rounding_geometry).
    template <class C>
    static bool bf16_units(const C& ctx) {
        const cpu_isa isa = active_cpu_isa();
        return ctx.mixed_conv_forward && conv_bf16_units() && (isa == cpu_isa::avx512_bf16 || isa == cpu_isa::amx);
    }
    /// Whether, off the bf16 route, the weight gradient runs on the bf16 units apart from the input
    /// gradient (Context::mixed_conv_dw_applies: conv_bf16_dw_applies, kernels/cpu/conv_bf16.hpp).
    template <class C>
    static bool dw_on_units(const C& ctx, Dims in) {
        return ctx.mixed_conv_dw_applies && ctx.mixed_conv_dw_applies(geometry(in), OutC);
    }
    /// v[0, size) rounded to bf16, in this thread's scratch for Slot (mixed precision's operands).
    template <slot Slot>
    static float* rounded(const float* v, std::size_t size) {
        float* out = cpu_detail::scratch<float, Slot>(size);
        round_to_bf16(v, out, size);
        return out;
    }

    /// The bias (or its gradient) in the layer's block, or null without one: kernels skip it.
    template <class T>
    static T* bias(T* block) {
        if constexpr (has_bias) return block + bias_offset;
        else return nullptr;
    }
};

}  // namespace oar
