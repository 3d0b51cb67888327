// Flatten: (C,H,W) -> (C*H*W), as paddle.nn.Flatten() with its default start_axis=1, and Identity
// (paddle.nn.Identity). Copies, so the network's activations stay one buffer per layer.
#pragma once

#include <cstddef>      // std::size_t
#include <string_view>  // std::string_view

#include "../core/context.hpp"         // Context
#include "../core/layer_concepts.hpp"  // LayerCheck
#include "../kernels/cpu/storage.hpp"  // storage<cpu>::copy

namespace oar {

namespace detail {
/// A parameter-free layer whose passes are copies (the values are unchanged, only the shape may be).
struct copy_layer {
    static constexpr LayerCheck check(Dims) { return {}; }
    static constexpr std::size_t flops(Dims) { return 0; }
    static constexpr std::size_t workspace(Dims) { return 0; }

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>&, Dims in, const T* x, T* y, std::size_t n) const {
        storage<B>::copy(y, x, n * in.size());
    }
    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>&, Dims in, const T*, const T*, const T* dy, T* dx, std::size_t n) const {
        if (dx) storage<B>::copy(dx, dy, n * in.size());
    }
};
}  // namespace detail

struct Flatten : detail::copy_layer {
    static constexpr std::string_view name = "Flatten";
    static constexpr Dims output_dims(Dims in) { return make_dims(in.size()); }
};

/// paddle.nn.Identity: y = x (a placeholder, e.g. a residual block's shortcut).
struct Identity : detail::copy_layer {
    static constexpr std::string_view name = "Identity";
    static constexpr Dims output_dims(Dims in) { return in; }
};

}  // namespace oar
