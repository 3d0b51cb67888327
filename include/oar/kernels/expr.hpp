// Elementwise expressions: a composition of elementwise functors (kernels/cpu/elementwise.hpp's
// relu_fn, sigmoid_fn, ..., or any type with the same members) as one functor type,
// expr::chain<F1, F2, ...>, y = Fn(...F2(F1(x))). A chain has the members of the functors it is
// made of (scalar operator() / backward, OAR_HOST_DEVICE, and xsimd simd_apply / simd_backward
// when every part has them), so every backend's op::map / op::map_backward kernel runs a whole
// run of activation layers in one pass over memory, forward and backward.
// Its backward takes the chain's input x and output y only: it recomputes the intermediate
// values from x (the same operations on the same values as the forward, so the same bits) and
// applies the parts' backward from the last to the first. Nothing here reads memory: evaluation
// is the loop of the kernel that runs it.
// A producer (Linear, Conv2D) runs the elementwise tail after it (its bias, a BatchNorm in evaluation
// mode folded into a per-channel scale and shift, then a chain of activations) as one such chain in
// its epilogue: op::bias_map / op::conv2d_forward_map (nn/network.hpp).
// Every value passed from one part to the next goes through expr::settle, an empty asm statement
// that the optimiser cannot see through: without it, g++ (-ffp-contract=fast, its default) may fuse
// a multiply of one part with an add of the next into one FMA, a rounding the layer-by-layer path
// (which stores each value) does not have; with it, a chain gives the bits of its parts mapped one
// after the other (tests/kernels/test_expr.cpp).
#pragma once

#include <cstddef>      // std::size_t
#include <type_traits>  // std::decay_t, std::is_same_v
#include <utility>      // std::move

#include "../config.hpp"  // OAR_HOST_DEVICE, OAR_ALWAYS_INLINE

namespace oar::expr {

/// v unchanged, but opaque to the optimiser (an empty asm with v in a vector register, on x86 with
/// g++ or clang, host code): no floating-point contraction across it. Elsewhere v as it is.
template <class V>
OAR_HOST_DEVICE OAR_ALWAYS_INLINE V settle(V v) {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__)) && !defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<V, float> || std::is_same_v<V, double>) {
        asm("" : "+v"(v));
    } else if constexpr (requires { typename V::register_type; }) {  // an xsimd batch
        typename V::register_type r = v;
        asm("" : "+v"(r));
        v = V(r);
    }
#endif
    return v;
}

/// An elementwise functor: T operator()(T x) and T backward(T x, T y, T dy), y being operator()(x).
template <class F>
concept Elementwise = requires(const F f, float x) {
    { f(x) };
    { f.backward(x, x, x) };
};

/// A functor with the SIMD members as well (simd_apply(b), simd_backward(x, y, dy)) for batch B.
template <class F, class B>
concept SimdElementwise = requires(const F f, B b) {
    { f.simd_apply(b) };
    { f.simd_backward(b, b, b) };
};

/// Whether F's forward is cheap to recompute (no exp, erf or tanh: F says so with a member
/// `static constexpr bool cheap_forward = true`). A chain's backward recomputes every part's
/// forward but the last's, so a chain pays only where those parts are cheap.
template <class F>
inline constexpr bool cheap_forward = requires { requires F::cheap_forward; };

/// x unchanged: the expression of a producer's tail that is a folded BatchNorm only
/// (nn/network.hpp), so every tail is one functor type.
struct identity {
    static constexpr bool cheap_forward = true;
    template <class T>
    OAR_HOST_DEVICE T operator()(T x) const { return x; }
    template <class T>
    OAR_HOST_DEVICE T backward(T, T, T dy) const { return dy; }
    template <class B>
    B simd_apply(B x) const { return x; }
    template <class B>
    B simd_backward(B, B, B dy) const { return dy; }
};

template <Elementwise... Fs>
    requires(sizeof...(Fs) > 0)
struct chain;

/// One functor: its members as they are (a chain of one is the functor).
template <Elementwise F>
struct chain<F> {
    static constexpr std::size_t length = 1;
    F head{};

    template <class T>
    OAR_HOST_DEVICE T operator()(T x) const { return head(x); }
    template <class T>
    OAR_HOST_DEVICE T backward(T x, T y, T dy) const { return head.backward(x, y, dy); }
    template <class B>
        requires SimdElementwise<F, B>
    B simd_apply(B x) const { return head.simd_apply(x); }
    template <class B>
        requires SimdElementwise<F, B>
    B simd_backward(B x, B y, B dy) const { return head.simd_backward(x, y, dy); }
};

/// F first, then the rest: y = rest(F(x)); the gradient of x is F's backward of the rest's.
template <Elementwise F, Elementwise G, Elementwise... Rest>
struct chain<F, G, Rest...> {
    static constexpr std::size_t length = 2 + sizeof...(Rest);
    F head{};
    chain<G, Rest...> tail{};

    template <class T>
    OAR_HOST_DEVICE T operator()(T x) const { return tail(settle(head(x))); }
    /// x: the chain's input, y: its output (tail's output), dy: the gradient of y.
    template <class T>
    OAR_HOST_DEVICE T backward(T x, T y, T dy) const {
        const T z = settle(head(x));  // F's output, the tail's input
        return head.backward(x, z, settle(tail.backward(z, y, dy)));
    }
    template <class B>
        requires(SimdElementwise<F, B> && SimdElementwise<chain<G, Rest...>, B>)
    B simd_apply(B x) const { return tail.simd_apply(settle(head.simd_apply(x))); }
    template <class B>
        requires(SimdElementwise<F, B> && SimdElementwise<chain<G, Rest...>, B>)
    B simd_backward(B x, B y, B dy) const {
        const B z = settle(head.simd_apply(x));
        return head.simd_backward(x, z, settle(tail.simd_backward(z, y, dy)));
    }
};

/// The chain of the given functors (their settings kept): `expr::then(leaky_relu_fn{0.2f}, tanh_fn{})`.
template <Elementwise... Fs>
constexpr chain<std::decay_t<Fs>...> then(Fs&&... fs);

namespace detail {
template <class F>
constexpr chain<F> make(F f) {
    chain<F> c;
    c.head = std::move(f);
    return c;
}
template <class F, class G, class... Rest>
constexpr chain<F, G, Rest...> make(F f, G g, Rest... rest) {
    chain<F, G, Rest...> c;
    c.head = std::move(f);
    c.tail = make(std::move(g), std::move(rest)...);
    return c;
}
}  // namespace detail

template <Elementwise... Fs>
constexpr chain<std::decay_t<Fs>...> then(Fs&&... fs) {
    return detail::make(std::decay_t<Fs>(fs)...);
}

}  // namespace oar::expr
