// Dropout: paddle.nn.Dropout(p=0.5) in its default "upscale_in_train" mode: training keeps an
// element with probability 1-p and scales it by 1/(1-p); evaluation is identity. The probability is
// a run-time setting (`Dropout{0.2f}`, plain `Dropout` is p = 0.5); DropoutPercent<20> is the same
// layer with p = 0.2 as its default, for a Sequential type that must carry the setting by itself.
// The mask is a pure function of (seed, layer index, forward count, element), so backward
// recomputes it instead of storing it, and a resumed run draws the same masks. Right after a ReLU
// that the layer before it runs in its epilogue (nn/network.hpp, CPU), the backward of both is
// one pass over this layer's output (backward_after_relu): the mask is not drawn again.
#pragma once

#include <cstddef>      // std::size_t
#include <string_view>  // std::string_view

#include "../core/context.hpp"         // Context, Mode
#include "../core/error.hpp"           // value_error
#include "../core/layer_concepts.hpp"  // LayerCheck
#include "../core/rng.hpp"             // rng_stream
#include "../kernels/cpu/dropout.hpp"  // op::dropout on cpu, cpu_detail::dropout_relu_backward
#include "../kernels/cpu/storage.hpp"  // storage<cpu>::copy (evaluation)

namespace oar {

struct Dropout {
    static constexpr std::string_view name = "Dropout";
    static constexpr LayerCheck check(Dims) { return {}; }
    static constexpr Dims output_dims(Dims in) { return in; }
    static constexpr std::size_t flops(Dims in) { return in.size(); }
    static constexpr std::size_t workspace(Dims) { return 0; }

    /// The drop probability, 0 <= p < 1 (checked when the layer runs); may be changed at run time.
    float p = 0.5f;

    constexpr Dropout() = default;
    /// `Dropout{0.2f}`: paddle.nn.Dropout(p=0.2). Implicit, so `{0.2f}` sets it inside a
    /// Sequential's braced list.
    constexpr Dropout(float drop_probability) : p(drop_probability) {}  // NOLINT(google-explicit-constructor)

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        apply(ctx, x, y, n * in.size());
    }
    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>& ctx, Dims in, const T*, const T*, const T* dy, T* dx, std::size_t n) const {
        if (dx) apply(ctx, dy, dx, n * in.size());  // same mask, same scale: d(x*m*s)/dx = m*s
    }

    /// The backward of this layer and of a ReLU right before it, from this layer's output y: dx is
    /// the gradient of the ReLU's input, the bits of backward then the ReLU's (relu_mask).
    template <class T>
    void backward_after_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* y, const T* dy, T* dx,
                             std::size_t n) const {
        check_p();
        const T scale = ctx.mode == Mode::eval || p == 0.0f ? T(1) : T(1) / (T(1) - T(p));
        cpu_detail::dropout_relu_backward(y, dy, dx, n * in.size(), scale);
    }

private:
    void check_p() const {
        if (!(p >= 0.0f && p < 1.0f)) throw value_error(detail::concat("Dropout: p must be in [0, 1), got ", p));
    }

    template <Backend B, class T = typename B::value_type>
    void apply(const Context<B>& ctx, const T* in, T* out, std::size_t count) const {
        check_p();
        if (ctx.mode == Mode::eval || p == 0.0f) return storage<B>::copy(out, in, count);
        const T scale = T(1) / (T(1) - T(p));
        kernel<op::dropout, B>::run(ctx.rng, rng_stream::dropout_of(ctx.layer_index, ctx.step), p, scale, in, out,
                                    count);
    }
};

/// Dropout whose default probability is Percent / 100, fixed in the type: `DropoutPercent<20>` is
/// `Dropout{0.2f}` default-constructed (course::MLP names it so the type alone builds the model).
template <std::size_t Percent>
struct DropoutPercent : Dropout {
    static_assert(Percent < 100, "oar: DropoutPercent<Percent> needs Percent < 100 (100 would drop everything)");
    constexpr DropoutPercent() : Dropout(static_cast<float>(Percent) / 100.0f) {}
    constexpr DropoutPercent(float drop_probability) : Dropout(drop_probability) {}  // NOLINT(google-explicit-constructor)
};

}  // namespace oar
