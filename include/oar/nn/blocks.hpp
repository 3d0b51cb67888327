// Blocks: layers made of layers. Residual<Body> is y = x + Body(x); Residual<Body, Shortcut> is
// y = Body(x) + Shortcut(x) (a projection shortcut such as a strided 1x1 Conv2D + BatchNorm2D);
// Concat<Axis, Branches...> runs every branch on the same input and concatenates their outputs
// along Axis (paddle.concat's axis, the batch being axis 0: Concat<1, ...> joins channels). Body,
// Shortcut and each branch is a Sequential<...> or a single layer; blocks nest in Sequential and in
// each other. Shapes are checked when the network is bound: a Residual whose body changes the shape,
// or a Concat whose branches disagree, stops compilation with an `oar:` message (nn/sequential.hpp).
//
// A block is a Layer whose facts fold over its inner layers (docs/ARCHITECTURE.md, "Blocks"): its
// parameters and buffers are its inner layers' tensors in order, packed in its block of the
// network's flat buffers, with state-dict keys nested as a torch module with `body` / `shortcut`
// nn.Sequential members (Residual) or an nn.ModuleList of nn.Sequential branches (Concat) nests
// them: "3.body.0.weight", "3.shortcut.1._mean", "5.2.0.bias". Its inner activations (and the
// scratch its backward needs) live in its region of the network's activation arena (ctx.saved,
// arena_floats). Train/eval mode, the random streams and the workspace pass through the context.
// Every pass runs kernel<op::..., B>, so a block works on every backend its inner layers do.
// Inside a block's Sequential, a layer with a ReLU epilogue on B (forward_relu / backward_relu:
// BatchNorm, Conv2D on the CPU) followed by a ReLU runs the pair fused, unless the ReLU ends the
// Sequential; a Residual followed by a ReLU in the network is such a layer itself (the sum and the
// ReLU in one pass, dy masked by the body's last BatchNorm in its backward). The bits of the layers
// one by one.
#pragma once

#include <algorithm>    // std::max
#include <array>        // std::array
#include <cstddef>      // std::size_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <tuple>        // std::tuple, std::get
#include <type_traits>  // std::conditional_t, std::is_void_v
#include <utility>      // std::index_sequence
#include <vector>       // std::vector: keys, summary rows

#include "../core/context.hpp"         // Context
#include "../core/dependent_false.hpp"  // dependent_false
#include "../core/layer_concepts.hpp"  // Layer, ParamSpec, LayerCheck
#include "../kernels/cpu/combine.hpp"  // op::add, op::add_relu, op::copy_rows on cpu
#include "../kernels/cpu/elementwise.hpp"  // relu_fn, op::map_backward on cpu: a ReLU after a chain
#include "sequential.hpp"              // Sequential, propagate, detail::*_of

namespace oar {

namespace detail {

template <class L>
constexpr std::size_t num_params_of() {
    if constexpr (ParametricLayer<L>) return L::num_params;
    else return 0;
}
template <class L>
constexpr std::size_t num_buffers_of() {
    if constexpr (BufferedLayer<L>) return L::num_buffers;
    else return 0;
}

/// Where a chain's inner layers find their parts, for per-sample input dims `in`.
template <std::size_t N>
struct ChainLayout {
    std::array<Dims, N + 1> dims{};           ///< dims[0] = in, dims[k+1] = output of layer k
    std::array<std::size_t, N> param_off{};   ///< layer k's block in the chain's parameter block
    std::array<std::size_t, N> buffer_off{};  ///< ... in its buffer block
    std::array<std::size_t, N> out_off{};     ///< layer k's output in the chain's arena, per sample
    std::array<std::size_t, N> arena_off{};   ///< layer k's own arena, per sample
    std::size_t param_block = 0, buffer_block = 0, arena = 0;
    std::size_t max_inner = 0;  ///< largest inner output but the last (backward's gradient buffers)
};

/// A sequence of layers run one after the other inside a block: the shared part of Residual's body
/// and shortcut and of Concat's branches. Its arena (per sample): every layer's output, then every
/// layer's own arena; its state-dict keys are "k.<key>".
template <class... Ls>
struct chain {
    static constexpr std::size_t size = sizeof...(Ls);
    static_assert(size > 0, "oar: a block's Sequential needs at least one layer");
    using layers = std::tuple<Ls...>;

    static constexpr ChainLayout<size> layout(Dims in) {
        ChainLayout<size> c;
        const auto p = propagate<Ls...>(in);
        c.dims = p.dims;
        std::size_t k = 0;
        auto step = [&](std::size_t pb, std::size_t bb) {
            c.param_off[k] = c.param_block;
            c.buffer_off[k] = c.buffer_block;
            c.param_block += pb;
            c.buffer_block += bb;
            c.out_off[k] = c.arena;
            c.arena += c.dims[k + 1].size();
            if (k + 1 < size) c.max_inner = std::max(c.max_inner, c.dims[k + 1].size());
            ++k;
        };
        (step(param_block_of<Ls>(c.dims[k]), buffer_block_of<Ls>(c.dims[k])), ...);
        k = 0;
        auto own = [&](std::size_t a) {
            c.arena_off[k++] = c.arena;
            c.arena += a;
        };
        (own(arena_of<Ls>(c.dims[k])), ...);
        return c;
    }
    static constexpr LayerCheck check(Dims in) {
        const auto p = propagate<Ls...>(in);
        return p.failed ? p.failure : LayerCheck{};
    }
    static constexpr Dims output_dims(Dims in) { return propagate<Ls...>(in).dims[size]; }
    static constexpr std::size_t flops(Dims in) {
        const auto d = propagate<Ls...>(in).dims;
        std::size_t k = 0, s = 0;
        ((s += static_cast<std::size_t>(Ls::flops(d[k++]))), ...);
        return s;
    }
    static constexpr std::size_t workspace(Dims in) {
        const auto d = propagate<Ls...>(in).dims;
        std::size_t k = 0, m = 0;
        ((m = std::max(m, static_cast<std::size_t>(Ls::workspace(d[k++])))), ...);
        return m;
    }

    static constexpr std::size_t num_params = (num_params_of<Ls>() + ... + 0);
    static constexpr std::size_t num_buffers = (num_buffers_of<Ls>() + ... + 0);
    static constexpr std::array<ParamSpec, num_params> params(Dims in) {
        std::array<ParamSpec, num_params> out{};
        const auto d = propagate<Ls...>(in).dims;
        std::size_t k = 0, t = 0;
        auto add = [&]<class L>() {
            if constexpr (ParametricLayer<L>)
                for (const auto& p : L::params(d[k])) out[t++] = p;
            ++k;
        };
        (add.template operator()<Ls>(), ...);
        return out;
    }
    static constexpr std::array<ParamSpec, num_buffers> buffers(Dims in) {
        std::array<ParamSpec, num_buffers> out{};
        const auto d = propagate<Ls...>(in).dims;
        std::size_t k = 0, t = 0;
        auto add = [&]<class L>() {
            if constexpr (BufferedLayer<L>)
                for (const auto& p : L::buffers(d[k])) out[t++] = p;
            ++k;
        };
        (add.template operator()<Ls>(), ...);
        return out;
    }

    /// "k.<key of layer k>" for every key of every layer, as `keys_of<L>(dims)` gives them.
    template <class KeysOf>
    static std::vector<std::string> nested_keys(Dims in, const std::string& prefix, KeysOf keys_of) {
        std::vector<std::string> out;
        const auto d = propagate<Ls...>(in).dims;
        std::size_t k = 0;
        auto add = [&]<class L>() {
            for (const auto& key : keys_of.template operator()<L>(d[k])) out.push_back(prefix + std::to_string(k) + "." + key);
            ++k;
        };
        (add.template operator()<Ls>(), ...);
        return out;
    }
    static std::vector<std::string> param_keys(Dims in, const std::string& prefix) {
        return nested_keys(in, prefix, []<class L>(Dims d) { return param_keys_of<L>(d); });
    }
    static std::vector<std::string> buffer_keys(Dims in, const std::string& prefix) {
        return nested_keys(in, prefix, []<class L>(Dims d) { return buffer_keys_of<L>(d); });
    }
    static std::vector<std::string> transposed_keys(Dims in, const std::string& prefix) {
        return nested_keys(in, prefix, []<class L>(Dims d) { return transposed_keys_of<L>(d); });
    }
    static void inner_rows(Dims in, const std::string& prefix, std::size_t depth, std::vector<LayerRow>& rows) {
        const auto d = propagate<Ls...>(in).dims;
        std::size_t k = 0;
        ((append_rows<Ls>(d[k], prefix + std::to_string(k), depth, rows), ++k), ...);
    }

    /// Where the chain's parts start: the block's context pointers plus the chain's offsets.
    template <class T>
    struct Frame {
        const T* params;
        T* grads;
        T* buffers;
        T* arena;  ///< n * layout.arena values
        std::size_t index;  ///< the enclosing layer's index (dropout streams of the inner layers)
    };

    /// Points ctx at inner layer k's parts.
    template <class B, class T>
    static void enter(Context<B>& ctx, const Frame<T>& f, const ChainLayout<size>& c, std::size_t k, std::size_t n) {
        ctx.params = f.params ? f.params + c.param_off[k] : nullptr;
        ctx.grads = f.grads ? f.grads + c.param_off[k] : nullptr;
        ctx.buffers = f.buffers ? f.buffers + c.buffer_off[k] : nullptr;
        ctx.saved = f.arena + n * c.arena_off[k];
        // A distinct index per inner layer, so a Dropout inside a block draws its own mask.
        ctx.layer_index = (f.index + 1) * 0x9E37u + k;
    }

    /// The chain's output after forward (n * output_dims(in) values in its arena).
    template <class T>
    static T* output(const ChainLayout<size>& c, T* arena, std::size_t n) {
        return arena + n * c.out_off[size - 1];
    }

    template <std::size_t K>
    using layer_t = std::tuple_element_t<K, layers>;
    /// Layer K runs the ReLU after it in its epilogue on B (forward_relu / backward_relu: a
    /// BatchNorm or a Conv2D on the CPU), the bits of the two one after the other. Not when that
    /// ReLU ends the chain: its output gradient is the block's dy, which the fused backward would
    /// mask in place.
    template <std::size_t K, class B>
    static constexpr bool fuses_relu = [] {
        if constexpr (K + 2 < size) return ReluEpilogueLayer<layer_t<K>, B> && FusableRelu<layer_t<K + 1>>;
        else return false;
    }();
    /// Layer K is a ReLU that layer K-1 runs (fuses_relu).
    template <std::size_t K, class B>
    static constexpr bool fused_relu_at = [] {
        if constexpr (K > 0) return fuses_relu<K - 1, B>;
        else return false;
    }();

    /// grad_buf<B>[k]: which of g0, g1 holds the gradient of layer k's output in backward (-1: the
    /// chain's dy); a layer writes its input gradient to the other one (layer 0 to dx). A ReLU fused
    /// into the layer before it takes no buffer: that layer reads the ReLU's output gradient.
    template <class B>
    static constexpr std::array<int, size> grad_buf = [] {
        const std::array<bool, size> relu_at = []<std::size_t... K>(std::index_sequence<K...>) {
            return std::array<bool, size>{fused_relu_at<K, B>...};
        }(std::make_index_sequence<size>{});
        std::array<int, size> r{};
        int cur = -1;
        for (std::size_t k = size; k-- > 0;) {
            r[k] = cur;
            if (!relu_at[k]) cur = cur == 0 ? 1 : 0;
        }
        return r;
    }();

    /// Runs every layer on x (n samples); the outputs stay in the arena for backward (a ReLU fused
    /// into the layer before it writes only the ReLU's output).
    template <class B, class T>
    static void forward(const layers& ls, Context<B>& ctx, const ChainLayout<size>& c, const Frame<T>& f, const T* x,
                        std::size_t n) {
        const T* cur = x;
        [&]<std::size_t... K>(std::index_sequence<K...>) {
            auto run = [&]<std::size_t k>() {
                if constexpr (fused_relu_at<k, B>) {
                    return;  // ran in layer k-1's epilogue
                } else if constexpr (fuses_relu<k, B>) {
                    enter(ctx, f, c, k, n);
                    T* out = f.arena + n * c.out_off[k + 1];
                    std::get<k>(ls).forward_relu(ctx, c.dims[k], cur, out, n);
                    cur = out;
                } else {
                    enter(ctx, f, c, k, n);
                    T* out = f.arena + n * c.out_off[k];
                    std::get<k>(ls).forward(ctx, c.dims[k], cur, out, n);
                    cur = out;
                }
            };
            (run.template operator()<K>(), ...);
        }(std::make_index_sequence<size>{});
    }

    /// Back-propagates dy (the chain output's gradient) to dx (skipped when null), adding the
    /// parameter gradients; g0 and g1 hold n * layout.max_inner values each.
    template <class B, class T>
    static void backward(const layers& ls, Context<B>& ctx, const ChainLayout<size>& c, const Frame<T>& f, const T* x,
                         const T* dy, T* dx, std::size_t n, T* g0, T* g1) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (backward_one<size - 1 - I>(ls, ctx, c, f, x, dy, dx, n, g0, g1), ...);
        }(std::make_index_sequence<size>{});
    }

    /// The chain followed by a ReLU whose output is y (the chain's output was not kept): dy is that
    /// ReLU's output gradient, masked in place (then the chain's output gradient, for a shortcut or
    /// an identity path to read) by the chain's last layer where its ReLU epilogue leaves exactly
    /// that in dy (relu_dy_exact: a BatchNorm; Conv2D's rounds dy to bf16 under mixed precision),
    /// else by relu_fn's backward first; then the chain's backward.
    template <class B, class T>
    static void backward_after_relu(const layers& ls, Context<B>& ctx, const ChainLayout<size>& c, const Frame<T>& f,
                                    const T* x, const T* y, T* dy, T* dx, std::size_t n, T* g0, T* g1) {
        constexpr std::size_t last = size - 1;
        if constexpr (ReluEpilogueLayer<layer_t<last>, B> && requires { requires layer_t<last>::relu_dy_exact; } &&
                      !fused_relu_at<last, B>) {
            T* const g[2] = {g0, g1};
            const T* in = last == 0 ? x : f.arena + n * c.out_off[last == 0 ? 0 : last - 1];
            enter(ctx, f, c, last, n);
            std::get<last>(ls).backward_relu(ctx, c.dims[last], in, y, dy, last == 0 ? dx : g[0], n);
            [&]<std::size_t... I>(std::index_sequence<I...>) {
                (backward_one<last - 1 - I>(ls, ctx, c, f, x, dy, dx, n, g0, g1), ...);
            }(std::make_index_sequence<last>{});
        } else {
            kernel<op::map_backward, B>::run(relu_fn{}, y, y, dy, dy, n * c.dims[size].size());
            backward(ls, ctx, c, f, x, dy, dx, n, g0, g1);
        }
    }

private:
    template <std::size_t K, class B, class T>
    static void backward_one(const layers& ls, Context<B>& ctx, const ChainLayout<size>& c, const Frame<T>& f,
                             const T* x, const T* dy, T* dx, std::size_t n, T* g0, T* g1) {
        // Layer K reads its output's gradient from g[grad_buf[K]] (dy for the last layer) and
        // writes its input gradient to the other buffer. A ReLU fused into layer K-1 runs nothing:
        // layer K-1 reads the ReLU's output gradient (a buffer, never dy: fuses_relu) and masks it
        // in place.
        if constexpr (fused_relu_at<K, B>) {
            return;
        } else {
            constexpr int buf = grad_buf<B>[K];
            T* const g[2] = {g0, g1};
            const T* in = K == 0 ? x : f.arena + n * c.out_off[K == 0 ? 0 : K - 1];
            T* grad_in = K == 0 ? dx : g[buf == 0 ? 1 : 0];
            enter(ctx, f, c, K, n);
            if constexpr (fuses_relu<K, B>) {
                static_assert(buf >= 0);
                const T* relu_out = f.arena + n * c.out_off[K + 1];
                std::get<K>(ls).backward_relu(ctx, c.dims[K], in, relu_out, g[buf < 0 ? 0 : buf], grad_in, n);
            } else {
                const T* out = f.arena + n * c.out_off[K];
                const T* grad_out = buf < 0 ? dy : g[buf < 0 ? 0 : buf];
                std::get<K>(ls).backward(ctx, c.dims[K], in, out, grad_out, grad_in, n);
            }
        }
    }
};

/// The chain of a block's part: Sequential<Ls...> or a single layer.
template <class S>
struct chain_of {
    using type = chain<S>;
};
template <class... Ls>
struct chain_of<Sequential<Ls...>> {
    using type = chain<Ls...>;
};

template <class S>
inline constexpr bool is_sequential = false;
template <class... Ls>
inline constexpr bool is_sequential<Sequential<Ls...>> = true;

/// A block's part must be a Sequential or a Layer.
template <class S>
concept BlockPart = is_sequential<S> || Layer<S>;

/// The first dimension where a and b differ (or their ranks), as a LayerCheck of kind `what`.
constexpr LayerCheck dims_differ(check_kind what, Dims a, Dims b, std::size_t skip_axis = ~std::size_t{0}) {
    if (a.rank != b.rank) return {what, a.rank, b.rank};
    for (std::size_t j = 0; j < a.rank; ++j)
        if (j != skip_axis && a.d[j] != b.d[j]) return {what, a.d[j], b.d[j]};
    return {};
}

template <std::size_t A, std::size_t B>
constexpr std::array<ParamSpec, A + B> join(const std::array<ParamSpec, A>& a, const std::array<ParamSpec, B>& b) {
    std::array<ParamSpec, A + B> out{};
    for (std::size_t i = 0; i < A; ++i) out[i] = a[i];
    for (std::size_t i = 0; i < B; ++i) out[A + i] = b[i];
    return out;
}

template <class T>
std::vector<T> operator_plus_vectors(std::vector<T> a, const std::vector<T>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

/// Puts back what a block's inner layers changed in the context.
template <class B>
void restore_context(Context<B>& ctx, const Context<B>& saved) {
    ctx.params = saved.params;
    ctx.grads = saved.grads;
    ctx.buffers = saved.buffers;
    ctx.saved = saved.saved;
    ctx.layer_index = saved.layer_index;
}

/// Instantiated for a block part that is neither a Sequential nor a Layer.
template <class S>
struct block_part_is_not_a_layer {
    static_assert(dependent_false<S>,
                  "oar: Residual / Concat: a body, shortcut or branch must be an oar Sequential<...> or a single Layer");
    static constexpr bool value = false;
};
template <class S>
constexpr bool check_block_part() {
    if constexpr (BlockPart<S>) return true;
    else return block_part_is_not_a_layer<S>::value;
}

}  // namespace detail

/// y = x + Body(x) (Shortcut = void), or y = Body(x) + Shortcut(x): a residual block. Body and
/// Shortcut are Sequential<...> or single layers; the layers are the block's data members `body`
/// and `shortcut` (std::tuples), carrying their settings. State-dict keys: "body.k.<key>",
/// "shortcut.k.<key>".
template <class Body, class Shortcut = void>
struct Residual {
    static_assert(detail::check_block_part<Body>());
    static_assert([] {
        if constexpr (std::is_void_v<Shortcut>) return true;
        else return detail::check_block_part<Shortcut>();
    }());

    using body_chain = typename detail::chain_of<Body>::type;
    static constexpr bool has_shortcut = !std::is_void_v<Shortcut>;
    /// The identity shortcut has no layers; a stand-in chain keeps the code below uniform.
    using shortcut_chain = typename detail::chain_of<std::conditional_t<has_shortcut, Shortcut, Body>>::type;

    static constexpr std::string_view name = "Residual";
    typename body_chain::layers body{};
    [[no_unique_address]] std::conditional_t<has_shortcut, typename shortcut_chain::layers, std::tuple<>> shortcut{};

    static constexpr LayerCheck check(Dims in) {
        const LayerCheck b = body_chain::check(in);
        if (!b.ok()) return b;
        if constexpr (has_shortcut) {
            const LayerCheck s = shortcut_chain::check(in);
            if (!s.ok()) return s;
            return detail::dims_differ(check_kind::residual_shortcut, shortcut_chain::output_dims(in),
                                       body_chain::output_dims(in));
        } else {
            return detail::dims_differ(check_kind::residual_shape, in, body_chain::output_dims(in));
        }
    }
    static constexpr Dims output_dims(Dims in) { return body_chain::output_dims(in); }
    static constexpr std::size_t flops(Dims in) {
        std::size_t f = body_chain::flops(in) + output_dims(in).size();  // the sum
        if constexpr (has_shortcut) f += shortcut_chain::flops(in);
        return f;
    }
    static constexpr std::size_t workspace(Dims in) {
        if constexpr (has_shortcut) return std::max(body_chain::workspace(in), shortcut_chain::workspace(in));
        else return body_chain::workspace(in);
    }

    static constexpr std::size_t num_params = body_chain::num_params + (has_shortcut ? shortcut_chain::num_params : 0);
    static constexpr std::size_t num_buffers =
        body_chain::num_buffers + (has_shortcut ? shortcut_chain::num_buffers : 0);
    static constexpr std::array<ParamSpec, num_params> params(Dims in) {
        if constexpr (has_shortcut) return detail::join(body_chain::params(in), shortcut_chain::params(in));
        else return body_chain::params(in);
    }
    static constexpr std::array<ParamSpec, num_buffers> buffers(Dims in) {
        if constexpr (has_shortcut) return detail::join(body_chain::buffers(in), shortcut_chain::buffers(in));
        else return body_chain::buffers(in);
    }
    static std::vector<std::string> param_keys(Dims in) {
        auto k = body_chain::param_keys(in, "body.");
        if constexpr (has_shortcut) k = detail::operator_plus_vectors(std::move(k), shortcut_chain::param_keys(in, "shortcut."));
        return k;
    }
    static std::vector<std::string> buffer_keys(Dims in) {
        auto k = body_chain::buffer_keys(in, "body.");
        if constexpr (has_shortcut)
            k = detail::operator_plus_vectors(std::move(k), shortcut_chain::buffer_keys(in, "shortcut."));
        return k;
    }
    static std::vector<std::string> transposed_keys(Dims in) {
        auto k = body_chain::transposed_keys(in, "body.");
        if constexpr (has_shortcut)
            k = detail::operator_plus_vectors(std::move(k), shortcut_chain::transposed_keys(in, "shortcut."));
        return k;
    }
    static void inner_rows(Dims in, const std::string& path, std::size_t depth, std::vector<LayerRow>& rows) {
        body_chain::inner_rows(in, path + ".body.", depth + 1, rows);
        if constexpr (has_shortcut) shortcut_chain::inner_rows(in, path + ".shortcut.", depth + 1, rows);
    }

    /// Arena per sample: the body's, the shortcut's, two gradient buffers for the inner layers and
    /// the shortcut's input gradient.
    struct Layout {
        detail::ChainLayout<body_chain::size> body;
        detail::ChainLayout<shortcut_chain::size> shortcut;
        std::size_t shortcut_arena = 0, grad0 = 0, grad1 = 0, shortcut_dx = 0, total = 0;
    };
    static constexpr Layout layout(Dims in) {
        Layout l;
        l.body = body_chain::layout(in);
        std::size_t g = l.body.max_inner;
        l.shortcut_arena = l.body.arena;
        l.total = l.body.arena;
        if constexpr (has_shortcut) {
            l.shortcut = shortcut_chain::layout(in);
            l.total += l.shortcut.arena;
            g = std::max(g, l.shortcut.max_inner);
        }
        l.grad0 = l.total;
        l.grad1 = l.grad0 + g;
        l.shortcut_dx = l.grad1 + g;
        l.total = l.shortcut_dx + (has_shortcut ? in.size() : 0);
        return l;
    }
    static constexpr std::size_t arena_floats(Dims in) { return layout(in).total; }

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        forward_with<op::add>(ctx, in, x, y, n);
    }

    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>& ctx, Dims in, const T* x, const T*, const T* dy, T* dx, std::size_t n) const {
        const Layout l = layout(in);
        const Context<B> saved = ctx;
        // From `saved`: the inner layers repoint ctx as they run.
        T* g0 = saved.saved + n * l.grad0;
        T* g1 = saved.saved + n * l.grad1;
        body_chain::backward(body, ctx, l.body, body_frame<T>(saved), x, dy, dx, n, g0, g1);
        if constexpr (has_shortcut) {
            T* sdx = dx ? saved.saved + n * l.shortcut_dx : nullptr;
            shortcut_chain::backward(shortcut, ctx, l.shortcut, shortcut_frame<T>(saved, l, n), x, dy, sdx, n, g0, g1);
            if (dx) kernel<op::add, B>::run(dx, sdx, dx, n * in.size());
        } else {
            if (dx) kernel<op::add, B>::run(dx, dy, dx, n * in.size());
        }
        detail::restore_context(ctx, saved);
    }

    /// The block and a ReLU after it (CPU; nn/network.hpp fuses such a pair): the sum and the ReLU
    /// in one pass (op::add_relu), the bits of the two layers one after the other.
    template <class T>
    void forward_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        forward_with<op::add_relu>(ctx, in, x, y, n);
    }
    /// The backward of the pair: y is the ReLU's output, dy its gradient, masked in place by the
    /// body's last layer (a BatchNorm: in the pass that sums it), then read by the shortcut and the
    /// identity path as the block's output gradient.
    template <class T>
    void backward_relu(Context<basic_cpu<T>>& ctx, Dims in, const T* x, const T* y, T* dy, T* dx, std::size_t n) const {
        using B = basic_cpu<T>;
        const Layout l = layout(in);
        const Context<B> saved = ctx;
        T* g0 = saved.saved + n * l.grad0;
        T* g1 = saved.saved + n * l.grad1;
        body_chain::backward_after_relu(body, ctx, l.body, body_frame<T>(saved), x, y, dy, dx, n, g0, g1);
        if constexpr (has_shortcut) {
            T* sdx = dx ? saved.saved + n * l.shortcut_dx : nullptr;
            shortcut_chain::backward(shortcut, ctx, l.shortcut, shortcut_frame<T>(saved, l, n), x, dy, sdx, n, g0, g1);
            if (dx) kernel<op::add, B>::run(dx, sdx, dx, n * in.size());
        } else {
            if (dx) kernel<op::add, B>::run(dx, dy, dx, n * in.size());
        }
        detail::restore_context(ctx, saved);
    }

private:
    /// The body, the shortcut (or identity) and their sum by kernel<Sum, B> (op::add, or op::add_relu
    /// for a fused ReLU after the block).
    template <class Sum, class B, class T>
    void forward_with(Context<B>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        const Layout l = layout(in);
        const Context<B> saved = ctx;
        const auto fb = body_frame<T>(saved);
        body_chain::forward(body, ctx, l.body, fb, x, n);
        const T* b = body_chain::output(l.body, fb.arena, n);
        if constexpr (has_shortcut) {
            const auto fs = shortcut_frame<T>(saved, l, n);
            shortcut_chain::forward(shortcut, ctx, l.shortcut, fs, x, n);
            kernel<Sum, B>::run(b, shortcut_chain::output(l.shortcut, fs.arena, n), y, n * l.body.dims.back().size());
        } else {
            kernel<Sum, B>::run(b, x, y, n * in.size());
        }
        detail::restore_context(ctx, saved);
    }
    template <class T, class B>
    static typename body_chain::template Frame<T> body_frame(const Context<B>& ctx) {
        return {ctx.params, ctx.grads, ctx.buffers, ctx.saved, ctx.layer_index};
    }
    template <class T, class B>
    static typename shortcut_chain::template Frame<T> shortcut_frame(const Context<B>& ctx, const Layout& l,
                                                                      std::size_t n) {
        return {ctx.params ? ctx.params + l.body.param_block : nullptr, ctx.grads ? ctx.grads + l.body.param_block : nullptr,
                ctx.buffers ? ctx.buffers + l.body.buffer_block : nullptr, ctx.saved + n * l.shortcut_arena,
                ctx.layer_index + 0x4000u};
    }
};

/// Runs every branch on the same input and concatenates their outputs along Axis (paddle.concat's
/// axis: 1 is the channels of (N, C, H, W)). Each branch is a Sequential<...> or a single layer;
/// their outputs must agree in every dimension but Axis. The branches' layers are the member
/// `branches` (a std::tuple of tuples). State-dict keys: "b.k.<key>" (branch b, layer k), as an
/// nn.ModuleList of nn.Sequential branches.
template <std::size_t Axis, class... Branches>
struct Concat {
    static_assert(Axis >= 1, "oar: Concat<Axis, ...>: Axis counts the batch as 0, so it is at least 1 (1: channels)");
    static_assert(sizeof...(Branches) >= 1, "oar: Concat needs at least one branch");
    static_assert((detail::check_block_part<Branches>() && ...));

    static constexpr std::string_view name = "Concat";
    static constexpr std::size_t num_branches = sizeof...(Branches);
    static constexpr std::size_t axis = Axis - 1;  ///< in the per-sample dims
    template <std::size_t I>
    using branch_chain = typename detail::chain_of<std::tuple_element_t<I, std::tuple<Branches...>>>::type;

    std::tuple<typename detail::chain_of<Branches>::type::layers...> branches{};

    static constexpr LayerCheck check(Dims in) {
        LayerCheck r{};
        std::array<Dims, num_branches> outs{};
        std::size_t b = 0;
        auto one = [&]<class C>() {
            if (r.ok()) {
                r = C::check(in);
                if (r.ok()) outs[b] = C::output_dims(in);
            }
            ++b;
        };
        (one.template operator()<typename detail::chain_of<Branches>::type>(), ...);
        if (!r.ok()) return r;
        if (outs[0].rank <= axis) return {check_kind::rank, axis + 1, outs[0].rank};
        for (std::size_t k = 1; k < num_branches; ++k) {
            r = detail::dims_differ(check_kind::concat_branches, outs[0], outs[k], axis);
            if (!r.ok()) return r;
        }
        return {};
    }
    static constexpr Dims output_dims(Dims in) {
        Dims out = detail::chain_of<std::tuple_element_t<0, std::tuple<Branches...>>>::type::output_dims(in);
        out.d[axis] = (detail::chain_of<Branches>::type::output_dims(in).d[axis] + ...);
        return out;
    }
    static constexpr std::size_t flops(Dims in) { return (detail::chain_of<Branches>::type::flops(in) + ...); }
    static constexpr std::size_t workspace(Dims in) {
        std::size_t m = 0;
        ((m = std::max(m, detail::chain_of<Branches>::type::workspace(in))), ...);
        return m;
    }

    static constexpr std::size_t num_params = (detail::chain_of<Branches>::type::num_params + ...);
    static constexpr std::size_t num_buffers = (detail::chain_of<Branches>::type::num_buffers + ...);
    static constexpr std::array<ParamSpec, num_params> params(Dims in) {
        std::array<ParamSpec, num_params> out{};
        std::size_t t = 0;
        auto add = [&](const auto& specs) {
            for (const auto& p : specs) out[t++] = p;
        };
        (add(detail::chain_of<Branches>::type::params(in)), ...);
        return out;
    }
    static constexpr std::array<ParamSpec, num_buffers> buffers(Dims in) {
        std::array<ParamSpec, num_buffers> out{};
        std::size_t t = 0;
        auto add = [&](const auto& specs) {
            for (const auto& p : specs) out[t++] = p;
        };
        (add(detail::chain_of<Branches>::type::buffers(in)), ...);
        return out;
    }
    static std::vector<std::string> param_keys(Dims in) {
        return gather([&]<class C>(const std::string& p) { return C::param_keys(in, p); });
    }
    static std::vector<std::string> buffer_keys(Dims in) {
        return gather([&]<class C>(const std::string& p) { return C::buffer_keys(in, p); });
    }
    static std::vector<std::string> transposed_keys(Dims in) {
        return gather([&]<class C>(const std::string& p) { return C::transposed_keys(in, p); });
    }
    static void inner_rows(Dims in, const std::string& path, std::size_t depth, std::vector<LayerRow>& rows) {
        std::size_t b = 0;
        ((detail::chain_of<Branches>::type::inner_rows(in, path + "." + std::to_string(b) + ".", depth + 1, rows), ++b),
         ...);
    }

    /// Arena per sample: each branch's, two gradient buffers for inner layers, the slice of dy of
    /// one branch and one branch's input gradient.
    struct Layout {
        std::array<std::size_t, num_branches> arena{};        ///< branch b's arena
        std::array<std::size_t, num_branches> param_off{};    ///< branch b's parameter block
        std::array<std::size_t, num_branches> buffer_off{};
        std::array<std::size_t, num_branches> chunk{};        ///< per outer row: branch b's values
        std::size_t outer = 1, grad0 = 0, grad1 = 0, slice = 0, branch_dx = 0, total = 0;
    };
    static constexpr Layout layout(Dims in) {
        Layout l;
        std::size_t b = 0, g = 0, pb = 0, bb = 0, out_max = 0;
        const Dims out = output_dims(in);
        for (std::size_t j = 0; j < axis; ++j) l.outer *= out.d[j];
        auto one = [&]<class C>() {
            const auto c = C::layout(in);
            l.arena[b] = l.total;
            l.param_off[b] = pb;
            l.buffer_off[b] = bb;
            l.total += c.arena;
            pb += c.param_block;
            bb += c.buffer_block;
            g = std::max(g, c.max_inner);
            const std::size_t size = c.dims.back().size();
            out_max = std::max(out_max, size);
            l.chunk[b] = size / l.outer;
            ++b;
        };
        (one.template operator()<typename detail::chain_of<Branches>::type>(), ...);
        l.grad0 = l.total;
        l.grad1 = l.grad0 + g;
        l.slice = l.grad1 + g;
        l.branch_dx = l.slice + out_max;
        l.total = l.branch_dx + in.size();
        return l;
    }
    static constexpr std::size_t arena_floats(Dims in) { return layout(in).total; }

    template <Backend B, class T = typename B::value_type>
    void forward(Context<B>& ctx, Dims in, const T* x, T* y, std::size_t n) const {
        const Layout l = layout(in);
        const Context<B> saved = ctx;
        const std::size_t row = row_length(l);
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            std::size_t at = 0;  // branch I's first value in an outer row of y
            auto one = [&]<std::size_t b>() {
                using C = branch_chain<b>;
                const auto c = C::layout(in);
                const auto f = frame<C, T>(saved, l, b, n);
                C::forward(std::get<b>(branches), ctx, c, f, x, n);
                kernel<op::copy_rows, B>::run(n * l.outer, l.chunk[b], C::output(c, f.arena, n), l.chunk[b], y + at, row);
                at += l.chunk[b];
            };
            (one.template operator()<I>(), ...);
        }(std::make_index_sequence<num_branches>{});
        detail::restore_context(ctx, saved);
    }

    template <Backend B, class T = typename B::value_type>
    void backward(Context<B>& ctx, Dims in, const T* x, const T*, const T* dy, T* dx, std::size_t n) const {
        const Layout l = layout(in);
        const Context<B> saved = ctx;
        const std::size_t row = row_length(l);
        T* g0 = saved.saved + n * l.grad0;
        T* g1 = saved.saved + n * l.grad1;
        T* slice = saved.saved + n * l.slice;
        T* bdx = saved.saved + n * l.branch_dx;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            std::size_t at = 0;
            auto one = [&]<std::size_t b>() {
                using C = branch_chain<b>;
                const auto c = C::layout(in);
                kernel<op::copy_rows, B>::run(n * l.outer, l.chunk[b], dy + at, row, slice, l.chunk[b]);
                at += l.chunk[b];
                // The first branch writes dx, the others add theirs: x feeds every branch.
                T* target = dx == nullptr ? nullptr : b == 0 ? dx : bdx;
                C::backward(std::get<b>(branches), ctx, c, frame<C, T>(saved, l, b, n), x, slice, target, n, g0, g1);
                if (dx != nullptr && b > 0) kernel<op::add, B>::run(dx, bdx, dx, n * in.size());
            };
            (one.template operator()<I>(), ...);
        }(std::make_index_sequence<num_branches>{});
        detail::restore_context(ctx, saved);
    }

private:
    static constexpr std::size_t row_length(const Layout& l) {
        std::size_t s = 0;
        for (auto c : l.chunk) s += c;
        return s;
    }
    template <class C, class T, class B>
    static typename C::template Frame<T> frame(const Context<B>& ctx, const Layout& l, std::size_t b, std::size_t n) {
        return {ctx.params ? ctx.params + l.param_off[b] : nullptr, ctx.grads ? ctx.grads + l.param_off[b] : nullptr,
                ctx.buffers ? ctx.buffers + l.buffer_off[b] : nullptr, ctx.saved + n * l.arena[b],
                ctx.layer_index + 0x1000u * (b + 1)};
    }
    template <class F>
    static std::vector<std::string> gather(F keys) {
        std::vector<std::string> out;
        std::size_t b = 0;
        auto one = [&]<class C>() {
            for (auto& k : keys.template operator()<C>(std::to_string(b) + ".")) out.push_back(std::move(k));
            ++b;
        };
        (one.template operator()<typename detail::chain_of<Branches>::type>(), ...);
        return out;
    }
};

}  // namespace oar
