// MaxPool2D<K, Stride> and AvgPool2D<K, Stride> over (C,H,W), no padding, floor mode: as
// paddle.nn.MaxPool2D / AvgPool2D with their defaults (stride defaults to the kernel size); and
// AdaptiveAvgPool2D<OH, OW> (global average pooling as <1, 1>).
#pragma once

#include <cstddef>      // std::size_t
#include <string_view>  // std::string_view

#include "../core/context.hpp"         // Context
#include "../core/layer_concepts.hpp"  // LayerCheck
#include "../kernels/cpu/pool.hpp"     // op::*_pool_* on cpu, ConvGeometry

namespace oar {

namespace detail {
template <std::size_t K, std::size_t Stride>
struct pool_shape {
    static_assert(K > 0 && Stride > 0, "oar: pooling needs a positive kernel size and stride");
    static constexpr ConvGeometry geometry(Dims in) { return {in.d[0], in.d[1], in.d[2], K, Stride, 0}; }
    static constexpr LayerCheck check(Dims in) {
        if (in.rank != 3) return {check_kind::rank, 3, in.rank};
        if (in.d[1] < K) return {check_kind::spatial, K, in.d[1]};
        if (in.d[2] < K) return {check_kind::spatial, K, in.d[2]};
        return {};
    }
    static constexpr Dims output_dims(Dims in) {
        const auto g = geometry(in);
        return make_dims(in.d[0], g.out_height(), g.out_width());
    }
    static constexpr std::size_t flops(Dims in) { return output_dims(in).size() * K * K; }
    static constexpr std::size_t workspace(Dims) { return 0; }
};
}  // namespace detail

template <std::size_t K, std::size_t Stride = K>
struct MaxPool2D : detail::pool_shape<K, Stride> {
    static constexpr std::string_view name = "MaxPool2D";

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>&, Dims in, const T* x, T* y, std::size_t n) const {
        kernel<op::max_pool_forward, B>::run(this->geometry(in), n, x, y);
    }
    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>&, Dims in, const T* x, const T*, const T* dy, T* dx, std::size_t n) const {
        if (dx) kernel<op::max_pool_backward, B>::run(this->geometry(in), n, x, dy, dx);
    }
};

template <std::size_t K, std::size_t Stride = K>
struct AvgPool2D : detail::pool_shape<K, Stride> {
    static constexpr std::string_view name = "AvgPool2D";

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>&, Dims in, const T* x, T* y, std::size_t n) const {
        kernel<op::avg_pool_forward, B>::run(this->geometry(in), n, x, y);
    }
    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>&, Dims in, const T*, const T*, const T* dy, T* dx, std::size_t n) const {
        if (dx) kernel<op::avg_pool_backward, B>::run(this->geometry(in), n, dy, dx);
    }
};

/// AdaptiveAvgPool2D<OH, OW> over (C,H,W) -> (C, OH, OW), as paddle.nn.AdaptiveAvgPool2D: output
/// (i, j) averages rows [floor(i H / OH), ceil((i + 1) H / OH)) and the same for columns.
/// `AdaptiveAvgPool2D<1, 1>` is global average pooling.
template <std::size_t OH, std::size_t OW = OH>
struct AdaptiveAvgPool2D {
    static_assert(OH > 0 && OW > 0, "oar: AdaptiveAvgPool2D<OH, OW> needs a positive output size");
    static constexpr std::string_view name = "AdaptiveAvgPool2D";
    static constexpr AdaptiveGeometry geometry(Dims in) { return {in.d[0], in.d[1], in.d[2], OH, OW}; }
    static constexpr LayerCheck check(Dims in) {
        if (in.rank != 3) return {check_kind::rank, 3, in.rank};
        return {};
    }
    static constexpr Dims output_dims(Dims in) { return make_dims(in.d[0], OH, OW); }
    static constexpr std::size_t flops(Dims in) { return in.size() + in.d[0] * OH * OW; }
    static constexpr std::size_t workspace(Dims) { return 0; }

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>&, Dims in, const T* x, T* y, std::size_t n) const {
        kernel<op::adaptive_avg_pool_forward, B>::run(geometry(in), n, x, y);
    }
    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>&, Dims in, const T*, const T*, const T* dy, T* dx, std::size_t n) const {
        if (dx) kernel<op::adaptive_avg_pool_backward, B>::run(geometry(in), n, dy, dx);
    }
};

}  // namespace oar
