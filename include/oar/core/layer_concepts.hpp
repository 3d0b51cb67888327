// The Layer contract, written once (as dlib's layers_abstract.h does) and checked as concepts.
#pragma once

#include <array>        // std::array
#include <concepts>     // std::same_as, std::convertible_to
#include <cstddef>      // std::size_t
#include <string_view>  // std::string_view
#include <type_traits>  // std::false_type: torch_transposed_weight

#include "context.hpp"  // Context
#include "shape.hpp"    // Dims

namespace oar {

/// Why a layer refuses an input shape (see LayerCheck). features_unflattened is never a layer's
/// answer: Sequential reports a features refusal of an input with more than one dimension (an
/// image where a Linear wants a vector: a forgotten Flatten) as it, so that its message says to
/// add a Flatten.
/// residual_shape: a Residual's body changes the shape (expected/got: the first dimension that
/// differs, or the ranks); residual_shortcut: its body and shortcut disagree; concat_branches: a
/// Concat's branches disagree outside its axis.
enum class check_kind {
    ok,
    rank,
    features,
    channels,
    spatial,
    features_unflattened,
    residual_shape,
    residual_shortcut,
    concat_branches
};

/// A layer's verdict on an input shape: ok, or what is wrong with the expected and actual value.
struct LayerCheck {
    check_kind kind = check_kind::ok;
    std::size_t expected = 0;
    std::size_t got = 0;
    constexpr bool ok() const { return kind == check_kind::ok; }
};

/// How a parameter is initialised (Paddle's defaults): bias zeros, Linear XavierUniform,
/// Conv2D Normal(0, sqrt(2 / fan_in)).
enum class init_kind { zeros, ones, xavier_uniform, kaiming_normal };

/// One parameter tensor of a layer: its state-dict name ("weight"), shape and initialiser.
struct ParamSpec {
    std::string_view name;
    Dims dims;
    init_kind init = init_kind::zeros;
    std::size_t fan_in = 0;
    std::size_t fan_out = 0;
};

/// Layer: a type describing one stage of a Sequential network, for per-sample input dims `in`:
///   static constexpr std::string_view name;                    // "Conv2D"
///   static constexpr LayerCheck check(Dims in);                // does `in` fit? else kind/expected/got
///   static constexpr Dims output_dims(Dims in);                // per-sample output dims (in passed check)
///   static constexpr std::size_t flops(Dims in);               // forward FLOPs per sample, multiply-add = 2
///   static constexpr std::size_t workspace(Dims in);           // scratch floats forward/backward need
///   template <Backend B> using T = typename B::value_type:
///   void forward(Context<B>&, Dims in, const T* x, T* y, std::size_t n);
///        // x: (n, in...) -> y: (n, out...); x and y never alias
///   void backward(Context<B>&, Dims in, const T* x, const T* y, const T* dy, T* dx, std::size_t n);
///        // dx = dL/dx (overwritten; skipped when dx is null); parameter gradients are ADDED to
///        // ctx.grads (they accumulate until clear_grad, as in Paddle and PyTorch)
/// A layer keeps no per-batch state between forward and backward other than x and y, and holds no
/// parameters itself: the network hands it views of its block of the flat buffers in the context.
/// A layer that must keep more (a block's inner activations, nn/blocks.hpp) declares
///   static constexpr std::size_t arena_floats(Dims in);      // per-sample values kept for backward
/// and finds n * arena_floats(in) values at ctx.saved, the same region in forward and backward.
template <class L>
concept Layer = requires(L& layer, Context<cpu>& ctx, Dims in, const float* cx, float* x, std::size_t n) {
    { L::name } -> std::convertible_to<std::string_view>;
    { L::check(in) } -> std::same_as<LayerCheck>;
    { L::output_dims(in) } -> std::same_as<Dims>;
    { L::flops(in) } -> std::convertible_to<std::size_t>;
    { L::workspace(in) } -> std::convertible_to<std::size_t>;
    layer.forward(ctx, in, cx, x, n);
    layer.backward(ctx, in, cx, cx, cx, x, n);
};

/// ParametricLayer: a Layer with parameters, which live in the network's flat buffers:
///   static constexpr std::size_t num_params;                   // number of parameter tensors
///   static constexpr std::array<ParamSpec, num_params> params(Dims in);  // in state-dict order
/// In forward/backward, ctx.params / ctx.grads point at the layer's block: the tensors of
/// params(in) packed in order, each starting at param_offset(params(in), t) (cache-line aligned).
template <class L>
concept ParametricLayer = Layer<L> && requires(Dims in) {
    { L::num_params } -> std::convertible_to<std::size_t>;
    { L::params(in) } -> std::same_as<std::array<ParamSpec, L::num_params>>;
};

/// BufferedLayer: a Layer with non-trainable state (BatchNorm's running mean and variance): tensors
/// that live in the network's flat buffer storage beside the parameters, are saved and loaded in
/// the state dict, counted as non-trainable by summary(), kept equal across ranks by DataParallel,
/// and never touched by an optimizer or L2Decay:
///   static constexpr std::size_t num_buffers;
///   static constexpr std::array<ParamSpec, num_buffers> buffers(Dims in);  // state-dict names ("_mean")
/// In forward/backward, ctx.buffers points at the layer's block (laid out as params: each tensor
/// at param_offset(buffers(in), t)); forward may update it in training mode.
template <class L>
concept BufferedLayer = Layer<L> && requires(Dims in) {
    { L::num_buffers } -> std::convertible_to<std::size_t>;
    { L::buffers(in) } -> std::same_as<std::array<ParamSpec, L::num_buffers>>;
};

/// A ReLU layer that a layer before it may fuse (layers/activation.hpp's ReLU).
template <class L>
concept FusableRelu = requires { requires L::fusable_relu; };

/// A layer that runs a following ReLU in its epilogue on backend B: forward_relu(ctx, in, x, y, n)
/// writes ReLU(layer(x)); backward_relu(ctx, in, x, y, dy, dx, n) takes the ReLU's output y and
/// its gradient dy (overwritten) and does the layer's backward with dy masked. Network (nn/network.hpp) and the blocks'
/// sequences (nn/blocks.hpp) run such a pair fused.
template <class L, class B>
concept ReluEpilogueLayer = requires(const L& l, Context<B>& ctx, Dims in, const typename B::value_type* x,
                                     typename B::value_type* y, std::size_t n) {
    l.forward_relu(ctx, in, x, y, n);
    l.backward_relu(ctx, in, x, x, y, y, n);
};

/// True for layer types whose "weight" PyTorch stores as the transpose of oar's 2-D layout (a
/// layer says so next to its definition: Linear, oar/layers/linear.hpp); read by the checkpoint
/// code for WeightLayout::torch.
template <class L>
struct torch_transposed_weight : std::false_type {};

}  // namespace oar

namespace oar {

/// Offset (in floats) of parameter tensor `t` inside its layer's block: tensors are packed in
/// params() order, each rounded up to a whole cache line so every tensor starts aligned.
template <std::size_t P>
constexpr std::size_t param_offset(const std::array<ParamSpec, P>& specs, std::size_t t) {
    std::size_t off = 0;
    for (std::size_t i = 0; i < t; ++i) off += (specs[i].dims.size() + 15) / 16 * 16;
    return off;
}

/// Floats a layer's parameter block takes in the flat buffer (with alignment padding).
template <std::size_t P>
constexpr std::size_t param_block_size(const std::array<ParamSpec, P>& specs) {
    return param_offset(specs, P);
}

}  // namespace oar
