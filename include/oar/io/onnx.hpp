// ONNX export: oar::export_onnx(net, "model.onnx") writes a Network as an ONNX model (opset 17,
// IR version 8) that onnxruntime, netron or any ONNX consumer reads: the network in eval mode
// (Dropout is an Identity, BatchNorm uses its running statistics), the parameters and buffers as
// initializers named like the state dict ("0.weight"), the input "input" of shape
// (batch, In...) with a symbolic batch dimension, the output "output".
//
// Each layer says how it maps through the trait oar::onnx_op<Layer>: a specialisation with
//   static std::string emit(onnx_graph& g, const Layer& layer, const onnx_layer& at);
// that adds the layer's nodes and initializers to g and returns the name of its output. A layer
// (or block) without a specialisation stops export_onnx at compile time with an `oar:` message.
//
// Needs Debian's libonnx-dev (the ONNX protobuf classes) and links oar::onnx (the ONNX and
// protobuf libraries); the rest of oar does not include this header.
#pragma once

// Debian's libonnx-dev ships the classes of onnx-ml.proto only (its CMake target defines ONNX_ML).
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#include <onnx/onnx_pb.h>  // onnx::ModelProto, GraphProto, NodeProto, TensorProto

#include <cstddef>           // std::size_t
#include <cstdint>           // std::int64_t
#include <initializer_list>  // std::initializer_list
#include <span>              // std::span
#include <string>            // std::string
#include <string_view>       // std::string_view
#include <tuple>             // std::tuple_element_t
#include <type_traits>       // std::is_same_v
#include <utility>           // std::index_sequence
#include <vector>            // std::vector

#include "../core/dependent_false.hpp"  // dependent_false
#include "../core/error.hpp"            // value_error, io_error, detail::concat
#include "../core/shape.hpp"            // Dims
#include "../layers/activation.hpp"     // ReLU, Sigmoid, Tanh, GELU, Hardswish, LeakyReLU, ELU, Softmax
#include "../layers/batch_norm.hpp"     // BatchNormLayer
#include "../layers/conv2d.hpp"         // Conv2D
#include "../layers/dropout.hpp"        // Dropout
#include "../layers/flatten.hpp"        // Flatten, Identity
#include "../layers/linear.hpp"         // Linear
#include "../layers/pool2d.hpp"         // MaxPool2D, AvgPool2D, AdaptiveAvgPool2D
#include "../nn/blocks.hpp"             // Residual, Concat
#include "../nn/network.hpp"            // Network
#include "atomic_file.hpp"              // write_file_atomically

namespace oar {

/// The opset export_onnx declares (the default domain).
inline constexpr std::int64_t onnx_opset = 17;

/// Where a layer sits while it is exported: its index, input and output dims (one sample, no
/// batch), the name of its input value, and its parameters and buffers by state-dict suffix.
struct onnx_layer {
    std::size_t index = 0;
    Dims in{};
    Dims out{};
    std::string input;
    /// "3." for layer 3: prefix + "weight" is the state-dict key of its weight.
    std::string prefix;
};

/// The graph being built: nodes, initializers and fresh value names.
class onnx_graph {
public:
    explicit onnx_graph(onnx::GraphProto& g) : g_(&g) {}

    /// A value name not used before, from `hint` ("3.conv" -> "3.conv", then "3.conv_1", ...).
    std::string fresh(const std::string& hint) {
        const std::string name = count_ == 0 ? hint : detail::concat(hint, "_", count_);
        ++count_;
        return name;
    }

    /// Adds a node `op` from `inputs` to one output named `output`; returns the node to add attributes.
    onnx::NodeProto& node(std::string_view op, std::initializer_list<std::string> inputs, const std::string& output) {
        return node(op, std::vector<std::string>(inputs), output);
    }
    onnx::NodeProto& node(std::string_view op, const std::vector<std::string>& inputs, const std::string& output) {
        onnx::NodeProto& n = *g_->add_node();
        n.set_op_type(std::string(op));
        n.set_name(output);
        for (const auto& i : inputs) n.add_input(i);
        n.add_output(output);
        return n;
    }

    /// Adds the float tensor `values` with `dims` as the initializer `name`.
    void initializer(const std::string& name, std::span<const std::int64_t> dims, std::span<const float> values) {
        onnx::TensorProto& t = *g_->add_initializer();
        t.set_name(name);
        t.set_data_type(onnx::TensorProto::FLOAT);
        std::int64_t count = 1;
        for (auto d : dims) {
            t.add_dims(d);
            count *= d;
        }
        if (static_cast<std::size_t>(count) != values.size())
            throw value_error(detail::concat("export_onnx: initializer ", name, " has ", values.size(),
                                             " values for dims of ", count));
        t.set_raw_data(values.data(), values.size() * sizeof(float));  // little-endian, as ONNX's raw_data
    }
    void initializer(const std::string& name, std::initializer_list<std::int64_t> dims, std::span<const float> values) {
        initializer(name, std::span<const std::int64_t>(dims.begin(), dims.size()), values);
    }
    /// An int64 initializer (shapes for Reshape).
    void initializer_i64(const std::string& name, std::span<const std::int64_t> values) {
        onnx::TensorProto& t = *g_->add_initializer();
        t.set_name(name);
        t.set_data_type(onnx::TensorProto::INT64);
        t.add_dims(static_cast<std::int64_t>(values.size()));
        for (auto v : values) t.add_int64_data(v);
    }

    /// The values of the state-dict entry `key` (the network's parameters and buffers, host memory).
    std::span<const float> state(const std::string& key) const {
        for (const auto& e : *state_)
            if (e.key == key) return e.values;
        throw value_error(detail::concat("export_onnx: no state-dict entry ", key));
    }
    void set_state(const std::vector<basic_state_entry<float>>* s) { state_ = s; }

    static void attr(onnx::NodeProto& n, const char* name, std::int64_t v) {
        auto& a = *n.add_attribute();
        a.set_name(name);
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(v);
    }
    static void attr(onnx::NodeProto& n, const char* name, float v) {
        auto& a = *n.add_attribute();
        a.set_name(name);
        a.set_type(onnx::AttributeProto::FLOAT);
        a.set_f(v);
    }
    static void attr(onnx::NodeProto& n, const char* name, std::initializer_list<std::int64_t> v) {
        auto& a = *n.add_attribute();
        a.set_name(name);
        a.set_type(onnx::AttributeProto::INTS);
        for (auto x : v) a.add_ints(x);
    }

private:
    onnx::GraphProto* g_;
    const std::vector<basic_state_entry<float>>* state_ = nullptr;
    std::size_t count_ = 0;
};

/// The ONNX mapping of layer L: specialise it for a new layer or block (see the file comment).
/// The primary template has no emit: using it is the compile-time error below.
template <class L>
struct onnx_op {};

/// Whether L has an ONNX mapping.
template <class L>
concept OnnxExportable = requires(onnx_graph& g, const L& l, const onnx_layer& at) {
    { onnx_op<L>::emit(g, l, at) } -> std::same_as<std::string>;
};

/// Instantiated for the first layer of a network that has no ONNX mapping.
template <std::size_t LayerIndex, class L>
struct onnx_layer_without_mapping {
    static_assert(dependent_false<L>,
                  "oar: export_onnx: a layer has no ONNX mapping (see onnx_layer_without_mapping<layer index, "
                  "layer> above); specialise oar::onnx_op<Layer> with static std::string emit(onnx_graph&, "
                  "const Layer&, const onnx_layer&)");
    static constexpr bool value = false;
};

namespace detail {
inline std::int64_t i64(std::size_t v) { return static_cast<std::int64_t>(v); }

/// One node `op` on the layer's input, output named after the layer.
inline std::string onnx_unary(onnx_graph& g, std::string_view op, const onnx_layer& at) {
    const std::string y = g.fresh(concat(at.prefix, op));
    g.node(op, {at.input}, y);
    return y;
}
}  // namespace detail

/// Linear (weight (In, Out), Paddle's layout): MatMul then Add of the bias, over the last dimension.
template <std::size_t In, std::size_t Out>
struct onnx_op<Linear<In, Out>> {
    static std::string emit(onnx_graph& g, const Linear<In, Out>&, const onnx_layer& at) {
        const std::string w = at.prefix + "weight", b = at.prefix + "bias";
        g.initializer(w, {detail::i64(In), detail::i64(Out)}, g.state(w));
        g.initializer(b, {detail::i64(Out)}, g.state(b));
        const std::string m = g.fresh(at.prefix + "MatMul");
        g.node("MatMul", {at.input, w}, m);
        const std::string y = g.fresh(at.prefix + "Add");
        g.node("Add", {m, b}, y);
        return y;
    }
};

/// Conv2D (weight (OutC, InC, KH, KW)): Conv with per-axis kernel, stride and padding, and the
/// bias where the layer has one.
template <std::size_t InC, std::size_t OutC, Size2 K, Size2 S, Size2 P, Bias HasBias>
struct onnx_op<Conv2D<InC, OutC, K, S, P, HasBias>> {
    static std::string emit(onnx_graph& g, const Conv2D<InC, OutC, K, S, P, HasBias>&, const onnx_layer& at) {
        using detail::i64;
        const std::string w = at.prefix + "weight", b = at.prefix + "bias";
        g.initializer(w, {i64(OutC), i64(InC), i64(K.h), i64(K.w)}, g.state(w));
        const std::string y = g.fresh(at.prefix + "Conv");
        onnx::NodeProto* n = nullptr;
        if constexpr (HasBias == Bias::yes) {
            g.initializer(b, {i64(OutC)}, g.state(b));
            n = &g.node("Conv", {at.input, w, b}, y);
        } else {
            n = &g.node("Conv", {at.input, w}, y);
        }
        onnx_graph::attr(*n, "kernel_shape", {i64(K.h), i64(K.w)});
        onnx_graph::attr(*n, "strides", {i64(S.h), i64(S.w)});
        onnx_graph::attr(*n, "pads", {i64(P.h), i64(P.w), i64(P.h), i64(P.w)});
        onnx_graph::attr(*n, "dilations", {1, 1});
        onnx_graph::attr(*n, "group", std::int64_t{1});
        return y;
    }
};

namespace detail {
template <class L>
std::string onnx_pool(onnx_graph& g, std::string_view op, std::size_t k, std::size_t s, const onnx_layer& at) {
    const std::string y = g.fresh(concat(at.prefix, op));
    auto& n = g.node(op, {at.input}, y);
    onnx_graph::attr(n, "kernel_shape", {i64(k), i64(k)});
    onnx_graph::attr(n, "strides", {i64(s), i64(s)});
    onnx_graph::attr(n, "pads", {0, 0, 0, 0});
    onnx_graph::attr(n, "ceil_mode", std::int64_t{0});
    return y;
}
}  // namespace detail

/// MaxPool2D: MaxPool, no padding, floor mode.
template <std::size_t K, std::size_t S>
struct onnx_op<MaxPool2D<K, S>> {
    static std::string emit(onnx_graph& g, const MaxPool2D<K, S>&, const onnx_layer& at) {
        return detail::onnx_pool<MaxPool2D<K, S>>(g, "MaxPool", K, S, at);
    }
};

/// AvgPool2D: AveragePool, no padding, floor mode.
template <std::size_t K, std::size_t S>
struct onnx_op<AvgPool2D<K, S>> {
    static std::string emit(onnx_graph& g, const AvgPool2D<K, S>&, const onnx_layer& at) {
        return detail::onnx_pool<AvgPool2D<K, S>>(g, "AveragePool", K, S, at);
    }
};

/// AdaptiveAvgPool2D: GlobalAveragePool for (1, 1); an AveragePool where the input divides into
/// the output (equal windows). Other sizes have overlapping windows of unequal size, which no
/// single ONNX operator computes: export_onnx refuses them with a value_error.
template <std::size_t OH, std::size_t OW>
struct onnx_op<AdaptiveAvgPool2D<OH, OW>> {
    static std::string emit(onnx_graph& g, const AdaptiveAvgPool2D<OH, OW>&, const onnx_layer& at) {
        using detail::i64;
        if (OH == 1 && OW == 1) return detail::onnx_unary(g, "GlobalAveragePool", at);
        const std::size_t h = at.in.d[1], w = at.in.d[2];
        if (h % OH != 0 || w % OW != 0)
            throw value_error(detail::concat("export_onnx: layer ", at.index, " AdaptiveAvgPool2D<", OH, ", ", OW,
                                             "> on ", h, "x", w, ": ONNX has no operator for unequal windows; "
                                             "expected an input size divisible by the output size"));
        const std::string y = g.fresh(at.prefix + "AveragePool");
        auto& n = g.node("AveragePool", {at.input}, y);
        onnx_graph::attr(n, "kernel_shape", {i64(h / OH), i64(w / OW)});
        onnx_graph::attr(n, "strides", {i64(h / OH), i64(w / OW)});
        return y;
    }
};

/// Flatten: ONNX Flatten with axis 1 ((N, C, H, W) -> (N, C*H*W)).
template <>
struct onnx_op<Flatten> {
    static std::string emit(onnx_graph& g, const Flatten&, const onnx_layer& at) {
        const std::string y = g.fresh(at.prefix + "Flatten");
        onnx_graph::attr(g.node("Flatten", {at.input}, y), "axis", std::int64_t{1});
        return y;
    }
};

template <>
struct onnx_op<Identity> {
    static std::string emit(onnx_graph& g, const Identity&, const onnx_layer& at) {
        return detail::onnx_unary(g, "Identity", at);
    }
};

/// Dropout exports as in eval mode: an Identity.
template <>
struct onnx_op<Dropout> {
    static std::string emit(onnx_graph& g, const Dropout&, const onnx_layer& at) {
        return detail::onnx_unary(g, "Identity", at);
    }
};
template <std::size_t Percent>
struct onnx_op<DropoutPercent<Percent>> : onnx_op<Dropout> {};

template <>
struct onnx_op<ReLU> {
    static std::string emit(onnx_graph& g, const ReLU&, const onnx_layer& at) { return detail::onnx_unary(g, "Relu", at); }
};
template <>
struct onnx_op<Sigmoid> {
    static std::string emit(onnx_graph& g, const Sigmoid&, const onnx_layer& at) {
        return detail::onnx_unary(g, "Sigmoid", at);
    }
};
template <>
struct onnx_op<Tanh> {
    static std::string emit(onnx_graph& g, const Tanh&, const onnx_layer& at) { return detail::onnx_unary(g, "Tanh", at); }
};
template <>
struct onnx_op<Hardswish> {
    static std::string emit(onnx_graph& g, const Hardswish&, const onnx_layer& at) {
        return detail::onnx_unary(g, "HardSwish", at);
    }
};
template <>
struct onnx_op<LeakyReLU> {
    static std::string emit(onnx_graph& g, const LeakyReLU& l, const onnx_layer& at) {
        const std::string y = g.fresh(at.prefix + "LeakyRelu");
        onnx_graph::attr(g.node("LeakyRelu", {at.input}, y), "alpha", l.negative_slope());
        return y;
    }
};
template <>
struct onnx_op<ELU> {
    static std::string emit(onnx_graph& g, const ELU& l, const onnx_layer& at) {
        const std::string y = g.fresh(at.prefix + "Elu");
        onnx_graph::attr(g.node("Elu", {at.input}, y), "alpha", l.alpha());
        return y;
    }
};
/// Softmax over the last dimension.
template <>
struct onnx_op<Softmax> {
    static std::string emit(onnx_graph& g, const Softmax&, const onnx_layer& at) {
        const std::string y = g.fresh(at.prefix + "Softmax");
        onnx_graph::attr(g.node("Softmax", {at.input}, y), "axis", std::int64_t{-1});
        return y;
    }
};
/// The exact GELU, x (1 + erf(x / sqrt 2)) / 2: opset 17 has no Gelu operator, so Div, Erf, Add,
/// Mul, Mul with scalar initializers.
template <>
struct onnx_op<GELU> {
    static std::string emit(onnx_graph& g, const GELU&, const onnx_layer& at) {
        const std::string sqrt2 = at.prefix + "sqrt2", one = at.prefix + "one", half = at.prefix + "half";
        const float c[3] = {1.41421356237309504880f, 1.0f, 0.5f};
        g.initializer(sqrt2, std::span<const std::int64_t>{}, std::span<const float>(c, 1));
        g.initializer(one, std::span<const std::int64_t>{}, std::span<const float>(c + 1, 1));
        g.initializer(half, std::span<const std::int64_t>{}, std::span<const float>(c + 2, 1));
        const std::string d = g.fresh(at.prefix + "Div"), e = g.fresh(at.prefix + "Erf"), a = g.fresh(at.prefix + "Add"),
                          m = g.fresh(at.prefix + "Mul"), y = g.fresh(at.prefix + "Gelu");
        g.node("Div", {at.input, sqrt2}, d);
        g.node("Erf", {d}, e);
        g.node("Add", {e, one}, a);
        g.node("Mul", {at.input, a}, m);
        g.node("Mul", {m, half}, y);
        return y;
    }
};

/// BatchNorm1D/2D in eval mode: BatchNormalization with the running mean and variance.
template <std::size_t C, int Dim>
struct onnx_op<BatchNormLayer<C, Dim>> {
    static std::string emit(onnx_graph& g, const BatchNormLayer<C, Dim>& l, const onnx_layer& at) {
        const std::string w = at.prefix + "weight", b = at.prefix + "bias", m = at.prefix + "_mean",
                          v = at.prefix + "_variance";
        for (const auto& k : {w, b, m, v}) g.initializer(k, {detail::i64(C)}, g.state(k));
        const std::string y = g.fresh(at.prefix + "BatchNormalization");
        auto& n = g.node("BatchNormalization", {at.input, w, b, m, v}, y);
        onnx_graph::attr(n, "epsilon", l.epsilon);
        onnx_graph::attr(n, "momentum", l.momentum);
        return y;
    }
};

namespace detail {
/// Whether every layer of a block's part (the std::tuple of its layers) has an ONNX mapping.
template <class Tuple>
inline constexpr bool onnx_tuple_exportable = false;
template <class... Ls>
inline constexpr bool onnx_tuple_exportable<std::tuple<Ls...>> = (OnnxExportable<Ls> && ...);

/// Emits the layers `ls` of a block's part one after the other from the value `input` (per-sample
/// dims `in`), layer k's state-dict keys under prefix + "k."; returns the name of the last output.
/// `index` is the enclosing top-level layer's, for error messages.
template <class... Ls>
std::string onnx_chain(onnx_graph& g, const std::tuple<Ls...>& ls, Dims in, std::string input, const std::string& prefix,
                       std::size_t index) {
    const auto d = propagate<Ls...>(in).dims;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((input = onnx_op<std::tuple_element_t<I, std::tuple<Ls...>>>::emit(
              g, std::get<I>(ls), onnx_layer{index, d[I], d[I + 1], input, concat(prefix, I, ".")})),
         ...);
    }(std::index_sequence_for<Ls...>{});
    return input;
}
}  // namespace detail

/// Residual: its body's nodes (keys "N.body.k.*"), its shortcut's ("N.shortcut.k.*") or the input
/// itself, then Add. Exportable when every inner layer is.
template <class Body, class Shortcut>
    requires detail::onnx_tuple_exportable<typename Residual<Body, Shortcut>::body_chain::layers> &&
             (!Residual<Body, Shortcut>::has_shortcut ||
              detail::onnx_tuple_exportable<typename Residual<Body, Shortcut>::shortcut_chain::layers>)
struct onnx_op<Residual<Body, Shortcut>> {
    static std::string emit(onnx_graph& g, const Residual<Body, Shortcut>& l, const onnx_layer& at) {
        const std::string b = detail::onnx_chain(g, l.body, at.in, at.input, at.prefix + "body.", at.index);
        std::string s = at.input;
        if constexpr (Residual<Body, Shortcut>::has_shortcut)
            s = detail::onnx_chain(g, l.shortcut, at.in, at.input, at.prefix + "shortcut.", at.index);
        const std::string y = g.fresh(at.prefix + "Add");
        g.node("Add", {b, s}, y);
        return y;
    }
};

/// Concat<Axis, ...>: each branch's nodes (keys "N.b.k.*") on the same input, then Concat along
/// Axis (the batch being axis 0, as in oar). Exportable when every inner layer is.
template <std::size_t Axis, class... Branches>
    requires(detail::onnx_tuple_exportable<typename detail::chain_of<Branches>::type::layers> && ...)
struct onnx_op<Concat<Axis, Branches...>> {
    static std::string emit(onnx_graph& g, const Concat<Axis, Branches...>& l, const onnx_layer& at) {
        std::vector<std::string> outs;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (outs.push_back(detail::onnx_chain(g, std::get<I>(l.branches), at.in, at.input,
                                               detail::concat(at.prefix, I, "."), at.index)),
             ...);
        }(std::index_sequence_for<Branches...>{});
        const std::string y = g.fresh(at.prefix + "Concat");
        onnx_graph::attr(g.node("Concat", outs, y), "axis", detail::i64(Axis));
        return y;
    }
};

namespace detail {
inline void onnx_value_info(onnx::ValueInfoProto& vi, const std::string& name, Dims d) {
    vi.set_name(name);
    auto& t = *vi.mutable_type()->mutable_tensor_type();
    t.set_elem_type(onnx::TensorProto::FLOAT);
    auto& s = *t.mutable_shape();
    s.add_dim()->set_dim_param("batch");
    for (std::size_t i = 0; i < d.rank; ++i) s.add_dim()->set_dim_value(static_cast<std::int64_t>(d.d[i]));
}

template <class... Ls>
constexpr std::size_t first_unexportable() {
    constexpr bool ok[] = {OnnxExportable<Ls>...};
    for (std::size_t i = 0; i < sizeof...(Ls); ++i)
        if (!ok[i]) return i;
    return sizeof...(Ls);
}
}  // namespace detail

/// The ONNX model of `net` (its current parameters and buffers, eval mode).
template <class... Ls, ShapeType In, Backend B, class P>
onnx::ModelProto to_onnx(const Network<Sequential<Ls...>, In, B, P>& net, const std::string& graph_name = "oar") {
    static_assert(std::is_same_v<typename B::value_type, float>, "oar: export_onnx: only float networks export to ONNX");
    constexpr std::size_t bad = detail::first_unexportable<Ls...>();
    if constexpr (bad < sizeof...(Ls)) {
        static_assert(onnx_layer_without_mapping<bad, std::tuple_element_t<bad, std::tuple<Ls...>>>::value);
        return {};
    } else {
        using info = typename Network<Sequential<Ls...>, In, B, P>::info;
        onnx::ModelProto model;
        model.set_ir_version(8);
        model.set_producer_name("oar");
        model.set_model_version(1);
        auto& opset = *model.add_opset_import();
        opset.set_domain("");
        opset.set_version(onnx_opset);
        onnx::GraphProto& graph = *model.mutable_graph();
        graph.set_name(graph_name);
        onnx_graph g(graph);
        const auto state = net.state_dict();
        g.set_state(&state);
        detail::onnx_value_info(*graph.add_input(), "input", info::dims[0]);
        std::string cur = "input";
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            ((cur = onnx_op<std::tuple_element_t<I, std::tuple<Ls...>>>::emit(
                  g, net.template layer<I>(),
                  onnx_layer{I, info::dims[I], info::dims[I + 1], cur, detail::concat(I, ".")})),
             ...);
        }(std::index_sequence_for<Ls...>{});
        g.node("Identity", {cur}, "output");
        detail::onnx_value_info(*graph.add_output(), "output", info::dims[sizeof...(Ls)]);
        return model;
    }
}

/// Writes `net` as an ONNX model to `path` (replaced atomically); io_error naming the path on failure.
template <class... Ls, ShapeType In, Backend B, class P>
void export_onnx(const Network<Sequential<Ls...>, In, B, P>& net, const std::string& path) {
    const onnx::ModelProto model = to_onnx(net);
    std::string bytes;
    if (!model.SerializeToString(&bytes))
        throw io_error(detail::concat(path, ": export_onnx could not serialise the model"));
    io::write_file_atomically(path, bytes.data(), bytes.size());
}

}  // namespace oar
