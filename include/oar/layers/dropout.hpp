// Dropout<Percent>: paddle.nn.Dropout(p = Percent / 100) in its default "upscale_in_train" mode:
// training keeps an element with probability 1-p and scales it by 1/(1-p); evaluation is identity.
// The mask is a pure function of (seed, layer index, forward count, element), so backward
// recomputes it instead of storing it, and a resumed run draws the same masks.
#pragma once

#include <cstddef>      // std::size_t
#include <string_view>  // std::string_view

#include "../core/context.hpp"         // Context, Mode
#include "../core/error.hpp"           // value_error
#include "../core/layer_concepts.hpp"  // LayerCheck
#include "../core/rng.hpp"             // rng_stream
#include "../kernels/cpu/dropout.hpp"  // op::dropout on cpu
#include "../kernels/cpu/storage.hpp"  // storage<cpu>::copy (evaluation)

namespace oar {

template <std::size_t Percent = 50>
struct Dropout {
    static_assert(Percent < 100, "oar: Dropout<Percent> needs Percent < 100 (100 would drop everything)");

    static constexpr std::string_view name = "Dropout";
    static constexpr LayerCheck check(Dims) { return {}; }
    static constexpr Dims output_dims(Dims in) { return in; }
    static constexpr std::size_t flops(Dims in) { return in.size(); }
    static constexpr std::size_t workspace(Dims) { return 0; }

    /// The drop probability; may be changed at run time (0 <= p < 1).
    float p = static_cast<float>(Percent) / 100.0f;

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        apply(ctx, x, y, n * in.size());
    }
    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>& ctx, Dims in, const T*, const T*, const T* dy, T* dx, std::size_t n) const {
        if (dx) apply(ctx, dy, dx, n * in.size());  // same mask, same scale: d(x*m*s)/dx = m*s
    }

private:
    template <Backend B, class T = typename B::value_type>
    void apply(const Context<B>& ctx, const T* in, T* out, std::size_t count) const {
        if (!(p >= 0.0f && p < 1.0f)) throw value_error(detail::concat("Dropout: p must be in [0, 1), got ", p));
        if (ctx.mode == Mode::eval || p == 0.0f) return storage<B>::copy(out, in, count);
        const T scale = T(1) / (T(1) - T(p));
        kernel<op::dropout, B>::run(ctx.rng, rng_stream::dropout_of(ctx.layer_index, ctx.step), p, scale, in, out,
                                    count);
    }
};

}  // namespace oar
