// Sequential<Layers...>: the network as a type. Bound to an input Shape it computes, as constexpr
// values, every layer's output dims, parameter count, FLOPs per sample and activation bytes: a
// constexpr fold over std::array (no recursive templates). The first layer that does not accept
// its input stops compilation with an `oar:` static_assert whose enclosing type carries the layer
// index, the expected and the actual size: sequential_shape_error<7, features, 981, 980>.
#pragma once

#include <array>        // std::array
#include <string>       // std::string: state-dict keys of nested layers
#include <string_view>  // std::string_view
#include <vector>       // std::vector: keys, summary rows
#include <tuple>        // std::tuple (the layers' values), std::tuple_element_t
#include <cstddef>      // std::size_t
#include <type_traits>  // std::conditional_t
#include <utility>      // std::index_sequence, std::move

#include "../core/layer_concepts.hpp"  // Layer, ParametricLayer, LayerCheck
#include "../core/shape.hpp"           // Shape, Dims, shape_of
#include "../core/dependent_false.hpp"  // dependent_false

namespace oar {

/// Instantiated only for the first layer of a Sequential that refuses its input: the failing
/// static_assert's message says what is wrong, the type's arguments say where and by how much.
template <std::size_t LayerIndex, check_kind What, std::size_t Expected, std::size_t Got>
struct sequential_shape_error {
    static_assert(What != check_kind::features,
                  "oar: Sequential: a layer's input features do not match the previous layer's output "
                  "(see sequential_shape_error<layer index, what, expected, got> above)");
    static_assert(What != check_kind::features_unflattened,
                  "oar: Sequential: a Linear gets an input of more than one dimension (e.g. (C,H,W) from a Conv2D or "
                  "pooling) and reads its last dimension as its features: add an oar::Flatten before it "
                  "(see sequential_shape_error<layer index, what, expected features, got last dimension> above)");
    static_assert(What != check_kind::channels,
                  "oar: Sequential: a Conv2D's input channels do not match the previous layer's output "
                  "(see sequential_shape_error<layer index, what, expected, got> above)");
    static_assert(What != check_kind::rank,
                  "oar: Sequential: a layer needs an input of another rank, e.g. Conv2D/pooling need (C,H,W); "
                  "(see sequential_shape_error<layer index, what, expected rank, got rank> above)");
    static_assert(What != check_kind::spatial,
                  "oar: Sequential: the input image is smaller than a layer's window "
                  "(see sequential_shape_error<layer index, what, window, got> above)");
    static_assert(What != check_kind::residual_shape,
                  "oar: Residual: its body changes the shape of its input, so x + body(x) is undefined: keep the "
                  "shape, or give a projection shortcut, Residual<Body, Shortcut> (see sequential_shape_error<layer "
                  "index, what, input dimension, body's dimension> above)");
    static_assert(What != check_kind::residual_shortcut,
                  "oar: Residual: its body and its shortcut give different shapes; make them agree (see "
                  "sequential_shape_error<layer index, what, shortcut's dimension, body's dimension> above)");
    static_assert(What != check_kind::concat_branches,
                  "oar: Concat: its branches' outputs differ outside the concatenation axis; make them agree "
                  "(see sequential_shape_error<layer index, what, first branch's dimension, other's dimension> above)");
    static constexpr bool value = true;
};

/// Instantiated for the first element of a Sequential that is not a Layer.
template <std::size_t Index, class T>
struct sequential_element_is_not_a_layer {
    static_assert(dependent_false<T>,
                  "oar: Sequential: every element must be an oar Layer (Linear, Conv2D, ReLU, ...); "
                  "see the index and the type in sequential_element_is_not_a_layer<index, type> above");
    static constexpr bool value = false;
};

namespace detail {
struct no_error {
    static constexpr bool value = true;
};

/// Where the first non-layer element is (or N).
template <class... Ls>
constexpr std::size_t first_non_layer() {
    constexpr std::array<bool, sizeof...(Ls)> ok{Layer<Ls>...};
    for (std::size_t i = 0; i < ok.size(); ++i)
        if (!ok[i]) return i;
    return sizeof...(Ls);
}

template <std::size_t I, class... Ls>
using nth_type = std::tuple_element_t<I, std::tuple<Ls...>>;

template <class L>
constexpr std::size_t param_count_of(Dims in) {
    if constexpr (ParametricLayer<L>) {
        std::size_t s = 0;
        for (const auto& p : L::params(in)) s += p.dims.size();
        return s;
    } else {
        return 0;
    }
}

template <class L>
constexpr std::size_t param_block_of(Dims in) {
    if constexpr (ParametricLayer<L>) return param_block_size(L::params(in));
    else return 0;
}

template <class L>
constexpr std::size_t buffer_count_of(Dims in) {
    if constexpr (BufferedLayer<L>) {
        std::size_t s = 0;
        for (const auto& p : L::buffers(in)) s += p.dims.size();
        return s;
    } else {
        return 0;
    }
}

template <class L>
constexpr std::size_t buffer_block_of(Dims in) {
    if constexpr (BufferedLayer<L>) return param_block_size(L::buffers(in));
    else return 0;
}

/// Per-sample values of the activation arena a layer keeps from forward to backward (a block's
/// inner activations; core/layer_concepts.hpp).
template <class L>
constexpr std::size_t arena_of(Dims in) {
    if constexpr (requires { L::arena_floats(in); }) return L::arena_floats(in);
    else return 0;
}

/// A layer's parameter keys relative to it, in params(in) order: "weight", or a block's nested
/// "body.0.weight" (L::param_keys).
template <class L>
std::vector<std::string> param_keys_of(Dims in) {
    if constexpr (requires { L::param_keys(in); }) {
        return L::param_keys(in);
    } else if constexpr (ParametricLayer<L>) {
        std::vector<std::string> keys;
        for (const auto& p : L::params(in)) keys.emplace_back(p.name);
        return keys;
    } else {
        return {};
    }
}

/// The same for buffers ("_mean", "body.1._mean").
template <class L>
std::vector<std::string> buffer_keys_of(Dims in) {
    if constexpr (requires { L::buffer_keys(in); }) {
        return L::buffer_keys(in);
    } else if constexpr (BufferedLayer<L>) {
        std::vector<std::string> keys;
        for (const auto& p : L::buffers(in)) keys.emplace_back(p.name);
        return keys;
    } else {
        return {};
    }
}

/// Keys, relative to the layer, of the weights PyTorch stores transposed (torch_transposed_weight).
template <class L>
std::vector<std::string> transposed_keys_of(Dims in) {
    if constexpr (requires { L::transposed_keys(in); }) return L::transposed_keys(in);
    else if constexpr (torch_transposed_weight<L>::value) return {"weight"};
    else return {};
}
}  // namespace detail

/// One row of summary(): a layer, or a layer inside a block (depth > 0, path "3.body.0").
struct LayerRow {
    std::string path;
    std::string_view name;
    std::size_t depth = 0;
    Dims output;
    std::size_t params = 0;  ///< trainable values and buffers, as paddle.summary counts them
    std::size_t flops = 0;
};

namespace detail {
/// Appends the row of layer L at `path` and, for a block, its inner layers' rows (L::inner_rows).
template <class L>
void append_rows(Dims in, const std::string& path, std::size_t depth, std::vector<LayerRow>& rows) {
    rows.push_back({path, L::name, depth, L::output_dims(in), param_count_of<L>(in) + buffer_count_of<L>(in),
                    static_cast<std::size_t>(L::flops(in))});
    if constexpr (requires { L::inner_rows(in, path, depth, rows); }) L::inner_rows(in, path, depth, rows);
}
}  // namespace detail

/// The result of propagating an input shape through layers: dims[0] is the input, dims[i+1] the
/// output of layer i. After a failure, later entries repeat the last good dims.
template <std::size_t N>
struct Propagation {
    std::array<Dims, N + 1> dims{};
    bool failed = false;
    std::size_t failed_layer = 0;
    LayerCheck failure{};
};

/// Propagates `in` through Ls (all Layers).
template <class... Ls>
constexpr Propagation<sizeof...(Ls)> propagate(Dims in) {
    Propagation<sizeof...(Ls)> r;
    r.dims[0] = in;
    std::size_t i = 0;
    auto step = [&](LayerCheck c, auto output_dims) {
        if (!r.failed && !c.ok()) {
            r.failed = true;
            r.failed_layer = i;
            r.failure = c;
            // Features refused on a multi-dimensional input: most likely a forgotten Flatten.
            if (c.kind == check_kind::features && r.dims[i].rank > 1) r.failure.kind = check_kind::features_unflattened;
        }
        r.dims[i + 1] = r.failed ? r.dims[i] : output_dims(r.dims[i]);
        ++i;
    };
    (step(r.failed ? LayerCheck{} : Ls::check(r.dims[i]), [](Dims d) { return Ls::output_dims(d); }), ...);
    return r;
}

/// A chain of layers, each fed the previous one's output. Use it bound to an input shape:
/// `Sequential<...>::bind<Shape<1,28,28>>` (or through Network). A value of it carries the layers'
/// run-time settings into a Network: `Sequential<Flatten, Linear<784, 512>, ReLU, Dropout,
/// Linear<512, 10>>{{}, {}, {}, {0.2f}, {}}`, or by deduction `Sequential{Flatten{}, ..., Dropout{0.2f}, ...}`.
template <class... Ls>
struct Sequential {
    static_assert(sizeof...(Ls) > 0, "oar: Sequential needs at least one layer");
    static constexpr std::size_t num_layers = sizeof...(Ls);
    static constexpr std::size_t first_non_layer = detail::first_non_layer<Ls...>();
    static constexpr bool all_layers = first_non_layer == num_layers;
    static_assert(std::conditional_t<all_layers, detail::no_error,
                                     sequential_element_is_not_a_layer<
                                         first_non_layer, detail::nth_type<first_non_layer % num_layers, Ls...>>>::value);

    /// The layers with their settings (Paddle's defaults when default-constructed).
    std::tuple<Ls...> layers{};

    constexpr Sequential() = default;
    constexpr Sequential(Ls... ls) : layers(std::move(ls)...) {}  // NOLINT(google-explicit-constructor)

    /// Compile-time facts of this network for per-sample input shape In.
    template <ShapeType In>
    struct bind {
        using input_shape = In;
        static constexpr std::size_t num_layers = sizeof...(Ls);

    private:
        static constexpr auto prop = [] {
            if constexpr (all_layers) return propagate<Ls...>(In::dims);
            else return Propagation<sizeof...(Ls)>{};
        }();
        using error_check =
            std::conditional_t<prop.failed,
                               sequential_shape_error<prop.failed_layer, prop.failure.kind, prop.failure.expected,
                                                      prop.failure.got>,
                               detail::no_error>;
        static_assert(error_check::value);

    public:
        static constexpr bool valid = all_layers && !prop.failed;
        /// dims[0] = In, dims[i+1] = output of layer i
        static constexpr std::array<Dims, num_layers + 1> dims = prop.dims;
        static constexpr Dims output_dims = dims[num_layers];
        using output_shape =
            shape_of<output_dims.rank, output_dims.d[0], output_dims.d[1], output_dims.d[2], output_dims.d[3]>;

        static constexpr std::array<std::string_view, num_layers> names{Ls::name...};
        static constexpr std::array<std::size_t, num_layers> param_counts = [] {
            std::size_t i = 0;
            return std::array<std::size_t, num_layers>{detail::param_count_of<Ls>(dims[i++])...};
        }();
        /// floats each layer's block takes in the flat parameter buffer (cache-line padded)
        static constexpr std::array<std::size_t, num_layers> param_blocks = [] {
            std::size_t i = 0;
            return std::array<std::size_t, num_layers>{detail::param_block_of<Ls>(dims[i++])...};
        }();
        static constexpr std::array<std::size_t, num_layers> param_offsets = [] {
            std::array<std::size_t, num_layers> o{};
            for (std::size_t i = 1; i < num_layers; ++i) o[i] = o[i - 1] + param_blocks[i - 1];
            return o;
        }();
        static constexpr std::size_t param_buffer_size = param_offsets[num_layers - 1] + param_blocks[num_layers - 1];
        /// non-trainable state per layer (BufferedLayer): values, padded blocks, offsets, total
        static constexpr std::array<std::size_t, num_layers> buffer_counts = [] {
            std::size_t i = 0;
            return std::array<std::size_t, num_layers>{detail::buffer_count_of<Ls>(dims[i++])...};
        }();
        static constexpr std::array<std::size_t, num_layers> buffer_blocks = [] {
            std::size_t i = 0;
            return std::array<std::size_t, num_layers>{detail::buffer_block_of<Ls>(dims[i++])...};
        }();
        static constexpr std::array<std::size_t, num_layers> buffer_offsets = [] {
            std::array<std::size_t, num_layers> o{};
            for (std::size_t i = 1; i < num_layers; ++i) o[i] = o[i - 1] + buffer_blocks[i - 1];
            return o;
        }();
        static constexpr std::size_t state_buffer_size = buffer_offsets[num_layers - 1] + buffer_blocks[num_layers - 1];
        static constexpr std::size_t total_buffers = [] {
            std::size_t s = 0;
            for (auto c : buffer_counts) s += c;
            return s;
        }();
        static constexpr std::array<std::size_t, num_layers> flops = [] {
            std::size_t i = 0;
            return std::array<std::size_t, num_layers>{static_cast<std::size_t>(Ls::flops(dims[i++]))...};
        }();
        static constexpr std::array<std::size_t, num_layers> workspaces = [] {
            std::size_t i = 0;
            return std::array<std::size_t, num_layers>{static_cast<std::size_t>(Ls::workspace(dims[i++]))...};
        }();

        static constexpr std::size_t total_params = [] {
            std::size_t s = 0;
            for (auto c : param_counts) s += c;
            return s;
        }();
        /// forward FLOPs per sample (a multiply-add counts 2)
        static constexpr std::size_t total_flops = [] {
            std::size_t s = 0;
            for (auto f : flops) s += f;
            return s;
        }();
        /// per-sample arena values each layer keeps besides its output (a block's inner activations)
        static constexpr std::array<std::size_t, num_layers> arena_floats = [] {
            std::size_t i = 0;
            return std::array<std::size_t, num_layers>{detail::arena_of<Ls>(dims[i++])...};
        }();
        static constexpr std::array<std::size_t, num_layers> arena_offsets = [] {
            std::array<std::size_t, num_layers> o{};
            for (std::size_t i = 1; i < num_layers; ++i) o[i] = o[i - 1] + arena_floats[i - 1];
            return o;
        }();
        /// floats of the input and every layer output, per sample
        static constexpr std::size_t output_floats = [] {
            std::size_t s = 0;
            for (const auto& d : dims) s += d.size();
            return s;
        }();
        /// per sample, what training keeps for backward: the input, every layer output and the
        /// blocks' arenas (their inner activations and backward scratch)
        static constexpr std::size_t activation_floats =
            output_floats + arena_offsets[num_layers - 1] + arena_floats[num_layers - 1];
        static constexpr std::size_t activation_bytes = activation_floats * sizeof(float);  ///< float32 networks
        static constexpr std::size_t max_activation_floats = [] {
            std::size_t m = 0;
            for (const auto& d : dims) m = d.size() > m ? d.size() : m;
            return m;
        }();
        static constexpr std::size_t max_workspace = [] {
            std::size_t m = 0;
            for (auto w : workspaces) m = w > m ? w : m;
            return m;
        }();

        /// summary()'s rows: each layer, followed by its inner layers when it is a block.
        static std::vector<LayerRow> layer_rows() {
            std::vector<LayerRow> rows;
            std::size_t i = 0;
            ((detail::append_rows<Ls>(dims[i], std::to_string(i), 0, rows), ++i), ...);
            return rows;
        }
    };
};

}  // namespace oar
