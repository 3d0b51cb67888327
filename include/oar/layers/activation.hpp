// Activation layers: ReLU, Sigmoid, Tanh, GELU, Hardswish, LeakyReLU, ELU (elementwise functors from
// kernels/cpu/elementwise.hpp, run by every backend's map kernel; settings such as LeakyReLU's slope
// are the layer's values, Paddle's defaults when default-constructed) and Softmax over the last
// dimension, as paddle.nn.Softmax(axis=-1).
#pragma once

#include <cstddef>      // std::size_t
#include <string_view>  // std::string_view

#include "../core/context.hpp"            // Context
#include "../core/layer_concepts.hpp"     // LayerCheck
#include "../kernels/cpu/elementwise.hpp" // relu_fn, sigmoid_fn, tanh_fn, op::map on cpu
#include "../kernels/cpu/softmax.hpp"     // op::softmax_* on cpu

namespace oar {

namespace detail {
/// Shape-preserving elementwise layer running functor F, whose settings (a slope, an alpha) are the
/// layer's: `LeakyReLU{0.2f}`. A run of two or more of them in a network is one expr::chain of their
/// functors, run in one pass (nn/network.hpp).
template <class F>
struct elementwise_layer {
    using functor = F;
    F fn{};

    static constexpr LayerCheck check(Dims) { return {}; }
    static constexpr Dims output_dims(Dims in) { return in; }
    static constexpr std::size_t flops(Dims in) { return in.size(); }
    static constexpr std::size_t workspace(Dims) { return 0; }

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>&, Dims in, const T* x, T* y, std::size_t n) const {
        kernel<op::map, B>::run(fn, x, y, n * in.size());
    }
    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>&, Dims in, const T* x, const T* y, const T* dy, T* dx, std::size_t n) const {
        if (dx) kernel<op::map_backward, B>::run(fn, x, y, dy, dx, n * in.size());
    }
};
}  // namespace detail

struct ReLU : detail::elementwise_layer<relu_fn> {
    static constexpr std::string_view name = "ReLU";
    /// A layer before it with forward_relu / backward_relu (Conv2D, Linear on the CPU) runs it fused
    /// into its epilogue (nn/network.hpp), unless an observer watches the pass.
    static constexpr bool fusable_relu = true;
};
struct Sigmoid : detail::elementwise_layer<sigmoid_fn> {
    static constexpr std::string_view name = "Sigmoid";
};
struct Tanh : detail::elementwise_layer<tanh_fn> {
    static constexpr std::string_view name = "Tanh";
};
struct GELU : detail::elementwise_layer<gelu_fn> {
    static constexpr std::string_view name = "GELU";
};
struct Hardswish : detail::elementwise_layer<hardswish_fn> {
    static constexpr std::string_view name = "Hardswish";
};
/// paddle.nn.LeakyReLU(negative_slope=0.01): `LeakyReLU{}` or `LeakyReLU{0.2f}`.
struct LeakyReLU : detail::elementwise_layer<leaky_relu_fn> {
    static constexpr std::string_view name = "LeakyReLU";
    constexpr LeakyReLU() = default;
    constexpr explicit LeakyReLU(float negative_slope) { fn.slope = negative_slope; }
    constexpr float negative_slope() const { return fn.slope; }
};
/// paddle.nn.ELU(alpha=1.0): `ELU{}` or `ELU{0.5f}`.
struct ELU : detail::elementwise_layer<elu_fn> {
    static constexpr std::string_view name = "ELU";
    constexpr ELU() = default;
    constexpr explicit ELU(float alpha) { fn.alpha = alpha; }
    constexpr float alpha() const { return fn.alpha; }
};

/// Softmax over the last dimension.
struct Softmax {
    static constexpr std::string_view name = "Softmax";
    static constexpr LayerCheck check(Dims) { return {}; }
    static constexpr Dims output_dims(Dims in) { return in; }
    static constexpr std::size_t flops(Dims in) { return 4 * in.size(); }
    static constexpr std::size_t workspace(Dims) { return 0; }

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>&, Dims in, const T* x, T* y, std::size_t n) const {
        const std::size_t cols = in.d[in.rank - 1];
        kernel<op::softmax_forward, B>::run(x, y, n * in.size() / cols, cols);
    }
    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>&, Dims in, const T*, const T* y, const T* dy, T* dx, std::size_t n) const {
        const std::size_t cols = in.d[in.rank - 1];
        if (dx) kernel<op::softmax_backward, B>::run(y, dy, dx, n * in.size() / cols, cols);
    }
};

}  // namespace oar
