// Network<Sequential<...>, Shape<...>, Backend>: a Sequential bound to an input shape and a
// backend, owning its flat parameter/gradient buffers and an activation arena whose per-sample
// layout is fixed at compile time. One class for every backend (docs/ARCHITECTURE.md): buffers
// come from storage<B>, layers run kernel<Op, B>; on a GPU backend the arena, parameters and
// gradients are device memory and a training step never leaves the device. forward keeps every layer's output for backward; backward
// accumulates parameter gradients until clear_grad(), as Paddle's and PyTorch's loops expect.
// forward/backward take an optional observer (diagnostics, NaN guard, per-layer allreduce in
// nn/hooks.hpp and dist/) called after each layer; without one, no call is compiled in.
// A ReLU right after a layer that can fuse it (forward_relu / backward_relu: Conv2D, Linear,
// BatchNorm and Residual on the CPU; a BatchNorm in a producer's tail, below, excepted) runs in that layer's epilogue, decided at compile time from the layer sequence: forward
// writes the ReLU's output only, backward masks dy inside the layer. A pass with an observer that
// watches it (on_forward / on_backward) runs the layers one by one instead, so every event is the
// unfused one. The results are the same bits either way (tests/nn/test_network.cpp). A Dropout right
// after such a ReLU runs the backward of both in one pass from its own output (backward_after_relu):
// its mask is not drawn again, and the layer before the ReLU runs its plain backward.
// More generally, the elementwise tail after a producer (forward_map: Conv2D and Linear on every
// backend) runs in the producer's epilogue as one expression (kernels/expr.hpp): its bias, then a
// BatchNorm right after it folded into a per-channel scale and shift in evaluation mode, then a run
// of activations as one expr::chain (every one but the last cheap to recompute, as below). The
// forward writes the producer's output z and the tail's output y only; the backward is one
// op::map_backward of the chain from z and y, then the producer's. Activations only: the bits of
// the layers one by one. With a folded BatchNorm: within the bound of its affine form
// (tests/nn/test_network.cpp); in training the BatchNorm runs as itself (batch statistics) and the
// activations after it as one chain; a backward after a folded forward first recomputes the
// BatchNorm's own output. A tail that is one ReLU keeps the ReLU epilogue above where the layer has
// one (the CPU), which needs no z.
// A backward with an observer after a forward without one first writes the values inside chains
// and tails layer by layer (materialize), so that the layers' own backwards read their own values.
// The fourth argument is the precision policy (core/precision.hpp): fp32 (the default) or bf16_mixed
// (Linear's and Conv2D's products on bf16-rounded operands, everything else fp32; the context
// carries the policy's GEMM to the layers, so the layers are compiled once for both policies), on
// the CPU or on a backend with bf16 kernels (Bf16Backend: oar::cuda, whose GEMM is cuBLAS's bf16 one).
// Likewise a run of two or more elementwise layers (activations; a ReLU fused into the layer before
// it not counted; every one but the last cheap to recompute: ReLU, LeakyReLU, Hardswish) is one expr::chain of their functors (kernels/expr.hpp),
// mapped in one pass by the backend's op::map: forward writes the run's output only (the values
// inside the run are recomputed from its input by the backward), backward is one op::map_backward.
#pragma once

#include <algorithm>    // std::copy
#include <array>        // std::array of per-layer entry ranges
#include <concepts>     // std::same_as
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t
#include <string>       // std::string
#include <span>         // std::span in LayerEvent
#include <string_view>  // std::string_view in LayerEvent
#include <tuple>        // std::tuple, std::get
#include <type_traits>  // std::remove_reference_t, std::is_convertible_v
#include <utility>      // std::index_sequence, std::as_const
#include <vector>       // std::vector

#include "../fwd.hpp"                  // Network's declaration with its defaults
#include "../core/aligned.hpp"         // aligned_vector
#include "../core/backend.hpp"         // Backend, cpu
#include "../core/context.hpp"         // Context, Mode
#include "../core/error.hpp"           // shape_error, value_error
#include "../core/layer_concepts.hpp"  // ParametricLayer
#include "../core/precision.hpp"       // fp32, bf16_mixed, precision_gemm
#include "../core/tensor.hpp"          // TensorView, MutableTensorView
#include "../kernels/cpu/gemm.hpp"     // gemm_pack_cache: eval-mode packed weights
#include "../kernels/cpu/storage.hpp"  // storage<cpu>
#include "../kernels/expr.hpp"         // expr::chain, expr::then: runs of elementwise layers
#include "init.hpp"                    // initialize
#include "parameters.hpp"              // ParameterSet, ParamEntry, StateEntry
#include "sequential.hpp"              // Sequential::bind

namespace oar {

enum class Pass { forward, backward };

/// What an observer sees after one layer ran (see Network::forward(x, obs) / backward(dy, obs)).
/// Views point into the network's arena and flat buffers: valid during the call only.
template <class T>
struct basic_layer_event {
    Pass pass = Pass::forward;
    std::size_t index = 0;       ///< position of the layer in its Sequential
    std::string_view name;       ///< the layer's name, e.g. "Conv2D"
    std::uint64_t step = 0;      ///< training forward passes before this one (the forward this backward follows)
    Mode mode = Mode::train;
    basic_tensor_view<const T> input;   ///< the layer's input x (batch, in dims)
    basic_tensor_view<const T> output;  ///< the layer's output y (batch, out dims)
    basic_tensor_view<const T> dy;      ///< backward: dL/dy
    basic_tensor_view<const T> dx;      ///< backward: dL/dx; empty for layer 0 unless backward(dy, dx) asked for it
    /// backward: the layer's whole block of the flat gradient buffer (cache-line padding included,
    /// so the blocks of all layers tile the buffer); empty for parameter-free layers. Mutable, so a
    /// data-parallel observer can allreduce it in place while earlier layers still run backward.
    std::span<T> param_grads;
    std::size_t param_offset = 0;       ///< where param_grads starts in the flat buffer, in values
    std::span<const T> param_values;    ///< the same block of the parameter buffer
    std::span<const ParamEntry> params; ///< the layer's named tensors ("3.weight"); offsets are into the flat buffer
};
using LayerEvent = basic_layer_event<float>;

/// The observer that observes nothing: forward(x) and backward(dy) use it, so no call is made.
struct no_observer {};

template <class O, class T>
concept ForwardObserver = requires(O& o, const basic_layer_event<T>& e) { o.on_forward(e); };
template <class O, class T>
concept BackwardObserver = requires(O& o, const basic_layer_event<T>& e) { o.on_backward(e); };
/// What forward(x, obs) / backward(dy, obs) accept: something with on_forward or on_backward (or
/// both), or no_observer. (So a tensor passed where an observer goes is an error, not ignored.)
template <class O, class T>
concept LayerObserver = ForwardObserver<std::remove_reference_t<O>, T> || BackwardObserver<std::remove_reference_t<O>, T> ||
                        std::same_as<std::remove_cvref_t<O>, no_observer>;

/// A producer that runs an elementwise tail in its epilogue on backend B: forward_map(ctx, in, x, z, y,
/// n, f, scale, shift) writes its output z and y = f(z * scale[c] + shift[c]) (f(z) without scale);
/// channels_first(in): whether its output's channels are where a BatchNorm after it reads them.
template <class L, class B>
concept MapEpilogueLayer = requires(const L& l, Context<B>& ctx, Dims in, const typename B::value_type* x,
                                    typename B::value_type* y, std::size_t n) {
    l.forward_map(ctx, in, x, y, y, n, expr::identity{}, x, x);
    { L::channels_first(in) } -> std::convertible_to<bool>;
};

/// A Dropout that runs its backward and that of a ReLU right before it in one pass on backend B
/// (layers/dropout.hpp: backward_after_relu(ctx, in, y, dy, dx, n), from its own output y).
template <class L, class B>
concept DropoutAfterRelu = requires(const L& l, Context<B>& ctx, Dims in, const typename B::value_type* y,
                                    typename B::value_type* dx, std::size_t n) {
    l.backward_after_relu(ctx, in, y, y, dx, n);
};

/// A BatchNorm that a producer before it can fold in evaluation mode (layers/batch_norm.hpp).
template <class L, class B>
concept FoldableBatchNorm = requires(const L& l, Context<B>& ctx, typename B::value_type* p) {
    l.fold(ctx, p, p);
    { L::channels } -> std::convertible_to<std::size_t>;
};

/// A layer that applies an elementwise functor (layers/activation.hpp's): its type `functor` and
/// its value `fn` (with the layer's settings), which a run of such layers chains.
template <class L>
concept ElementwiseLayer = requires(const L& l) {
    typename L::functor;
    requires expr::Elementwise<typename L::functor>;
    { l.fn } -> std::convertible_to<const typename L::functor&>;
};

template <class Seq, class InShape, class B, class P>  // defaults (cpu, fp32) in fwd.hpp
class Network {
    static_assert(dependent_false<Seq>, "oar: Network<Seq, InShape, Backend> needs Seq = Sequential<Layers...>");
};

template <class... Ls, ShapeType In, Backend B, class P>
class Network<Sequential<Ls...>, In, B, P> {
    static_assert(Precision<P>, "oar: Network's fourth argument is a precision policy: oar::fp32 or oar::bf16_mixed");
    static_assert(std::same_as<P, fp32> || std::same_as<B, cpu> || Bf16Backend<B>,
                  "oar: bf16_mixed runs on oar::cpu or oar::cuda (a backend with bf16 kernels: Bf16Backend)");

public:
    using sequential = Sequential<Ls...>;
    using info = typename sequential::template bind<In>;  ///< the compile-time facts (dims, params, FLOPs)
    using input_shape = In;
    using output_shape = typename info::output_shape;
    using backend = B;
    using precision = P;  ///< fp32 or bf16_mixed (core/precision.hpp)
    using value_type = typename B::value_type;
    using view_type = basic_tensor_view<const value_type>;
    using mutable_view_type = basic_tensor_view<value_type>;
    using parameter_set = basic_parameter_set<value_type, B>;
    using state_entry = basic_state_entry<value_type>;
    using layer_event = basic_layer_event<value_type>;
    static constexpr std::size_t num_layers = sizeof...(Ls);

private:
    using store = storage<B>;
    template <class U>
    using buffer = typename store::template buffer<U>;

public:

    /// Whether layer i runs the ReLU at i + 1 in its epilogue (when no observer watches the pass).
    /// After a fused forward, activation(i + 1) is the ReLU's output, as activation(i + 2): the
    /// layer's own output before the ReLU is not kept.
    static constexpr bool fuses_relu(std::size_t i) { return i < num_layers && fused_[i]; }
    /// The number of elementwise layers from layer i on that run as one chain (when no observer
    /// watches the pass), 0 where no chain starts at i. After such a forward, activations i + 1 ..
    /// i + k - 1 (inside the chain) are its output, as activation(i + k).
    static constexpr std::size_t chain_length(std::size_t i) { return i < num_layers ? chain_[i] : 0; }
    /// The number of layers after layer i that run in its epilogue as one expression (when no
    /// observer watches the pass), 0 where none do (or a lone ReLU does: fuses_relu). After such a
    /// forward, activation(i + 1) is layer i's own output and activations i + 2 .. i + k are the
    /// tail's output, as activation(i + k + 1) (in training, with a BatchNorm first in the tail,
    /// activation(i + 2) is the BatchNorm's output).
    static constexpr std::size_t epilogue_length(std::size_t i) { return i < num_layers ? epi_[i] : 0; }
    /// Whether layer i's tail starts with a BatchNorm that it folds into its epilogue in evaluation mode.
    static constexpr bool folds_batch_norm(std::size_t i) { return i < num_layers && epi_bn_[i]; }

    /// Builds the network with Paddle's default initialisation (or `scheme`'s) drawn from `seed`.
    /// Moving or copying keeps the parameters (layers hold no pointers; the context does).
    /// The initialisation is drawn on the host, whatever the backend, so networks of one seed start
    /// bitwise equal on every backend.
    explicit Network(std::uint64_t seed = 0, init_scheme scheme = init_scheme::paddle)
        : params_(info::param_buffer_size, make_entries(), info::state_buffer_size, make_buffer_entries()) {
        ctx_.rng = CounterRng{seed};
        if constexpr (std::same_as<P, bf16_mixed> && std::same_as<B, cpu>) {
            static_assert(requires { &precision_gemm<P>::run; },
                          "oar: a bf16_mixed Network needs <oar/kernels/cpu/gemm_bf16.hpp> (its kernels)");
            ctx_.mixed_gemm = &precision_gemm<P>::run;
            ctx_.mixed_gemm_cached = &precision_gemm<P>::run_cached;
            ctx_.mixed_conv_forward = &precision_conv<P>::forward;
            ctx_.mixed_conv_backward = &precision_conv<P>::backward;
            ctx_.mixed_conv_dw_applies = &precision_conv<P>::weight_grad_applies;
            ctx_.mixed_conv_dw = &precision_conv<P>::weight_grad;
        } else if constexpr (std::same_as<P, bf16_mixed>) {
            ctx_.mixed_gemm = &kernel<op::gemm_bf16, B>::run;  // the backend's bf16 GEMM
        }
        aligned_vector<value_type> staged;  // host memory for a backend whose buffers are not
        std::span<value_type> host = params_.values();
        if constexpr (!store::host_memory) {
            staged.assign(params_.values().size(), value_type(0));
            host = staged;
        }
        std::size_t t = 0;
        for_each_layer([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
            using L = std::tuple_element_t<I, std::tuple<Ls...>>;
            entry_begin_[I] = t;
            if constexpr (ParametricLayer<L>) {
                const auto specs = L::params(info::dims[I]);
                for (std::size_t k = 0; k < specs.size(); ++k, ++t) {
                    const ParamEntry& e = params_.entries()[t];
                    initialize(specs[k], host.subspan(e.offset, e.size), ctx_.rng, t, scheme);
                }
            }
        });
        entry_begin_[num_layers] = t;
        if constexpr (!store::host_memory) params_.upload_values(staged);
        if constexpr (info::state_buffer_size > 0) init_buffers();
    }

    /// Builds the network with the layers (and so their settings) of `seq`, e.g.
    /// `Network<Seq, Shape<1, 28, 28>> net{Seq{{}, {}, {}, Dropout{0.2f}, {}}}`, initialised as above.
    explicit Network(const sequential& seq, std::uint64_t seed = 0, init_scheme scheme = init_scheme::paddle)
        : Network(seed, scheme) {
        layers_ = seq.layers;
    }

    /// The Sequential value of this network's layers with their current settings.
    sequential layers() const {
        sequential s;
        s.layers = layers_;
        return s;
    }

    /// The same network on backend B of a network on another backend: its parameters, layer
    /// settings, seed, step count and mode (e.g. a CPU network's copy on the GPU, or back).
    template <Backend B2>
        requires(!std::same_as<B2, B> && std::same_as<typename B2::value_type, value_type>)
    explicit Network(const Network<Sequential<Ls...>, In, B2, P>& other) : Network(other.seed()) {
        params_.upload_values(other.parameters().host_values());
        params_.upload_buffers(other.parameters().host_buffers());
        for_each_layer([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
            std::get<I>(layers_) = other.template layer<I>();
        });
        step_ = other.step();
        mode_ = other.training() ? Mode::train : Mode::eval;
    }

    /// Runs every layer on x (batch, In...) in host memory. The result is a view into the network's
    /// arena (B's memory: to_host() copies it where that is not the host's), valid until the next
    /// forward. x is copied in, so the caller may reuse its buffer.
    view_type forward(view_type x) { return forward(x, no_observer{}); }
    /// The same for an array of another library that has a tensor_source (interop/xtensor.hpp:
    /// `net.forward(xt_images)` with an xtensor container or expression of shape (batch, In...)).
    template <class X>
        requires(TensorSource<X, value_type> && !std::is_convertible_v<const X&, view_type>)
    view_type forward(const X& x) {
        return tensor_source<X, value_type>::with_view(x, [&](view_type v) { return forward(v); });
    }
    /// The same, calling obs.on_forward(layer_event) after each layer when Obs has it.
    template <LayerObserver<value_type> Obs>
    view_type forward(view_type x, Obs&& obs) {
        stage_input(x, false);
        return run_forward(obs);
    }
    view_type operator()(view_type x) { return forward(x); }
    /// forward for x already in B's memory (e.g. a batch uploaded ahead by the loader).
    view_type forward_device(view_type x) {
        stage_input(x, true);
        return run_forward(no_observer{});
    }

    /// A view of B's memory copied to the host (waits for B). Only for backends whose memory is
    /// not the host's (on the CPU a view is already readable): Model tells them apart by it.
    static std::vector<value_type> to_host(view_type v)
        requires(!storage<B>::host_memory)
    {
        std::vector<value_type> out(v.size());
        storage<B>::download(out.data(), v.data(), v.size());
        storage<B>::synchronize();
        return out;
    }

private:
    /// Checks x and copies it to activation 0 (from the host, or within B when on_device).
    void stage_input(view_type x, bool on_device) {
        if (!(x.dims() == In::dims))
            throw shape_error(detail::concat("Network::forward: input has per-sample shape ", to_string(x.dims()),
                                             ", the network was bound to ", to_string(In::dims)));
        if (x.batch() == 0) throw shape_error("Network::forward: the batch is empty");
        if (x.data() == nullptr) throw value_error("Network::forward: the input has no data");
        guard_.activate();
        reserve(x.batch());
        batch_ = x.batch();
        if (on_device) store::copy(activation_ptr(0), x.data(), x.size());
        else store::upload(activation_ptr(0), x.data(), x.size());
    }

    template <class Obs>
    view_type run_forward(Obs&& obs) {
        ctx_.mode = mode_;
        ctx_.step = step_;
        ctx_.workspace = workspace_.data();  // (re)pointed here: a copied network must not use the original's
        ctx_.workspace_size = workspace_.size();
        last_step_ = step_;
        constexpr bool observed = ForwardObserver<std::remove_reference_t<Obs>, value_type>;
        fused_forward_ = !observed;
        materialized_ = false;
        folded_ = !observed && has_fold_ && mode_ == Mode::eval;
        if constexpr (host_cpu) {  // eval mode: weights packed once, until the parameters change
            ctx_.packed_weights = mode_ == Mode::eval ? &packed_ : nullptr;
            ctx_.param_version = params_.version();
        }
        for_each_layer([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
            enter_layer(I);
            if constexpr (!observed && fused_relu_at<I>) {
                return;  // ran in layer I-1's epilogue
            } else if constexpr (!observed && in_chain<I>) {
                return;  // ran in the chain that starts before it
            } else if constexpr (!observed && in_tail<I>) {
                return;  // ran in the epilogue of the producer before it
            } else if constexpr (!observed && epi_[I] > 0) {
                forward_epilogue<I>();
                return;
            } else if constexpr (!observed && chain_[I] > 0) {
                kernel<op::map, B>::run(chain_at<I>(), activation_ptr(I), activation_ptr(I + chain_[I]),
                                        batch_ * info::dims[I].size());
                return;
            } else if constexpr (!observed && fused_[I]) {
                std::get<I>(layers_).forward_relu(ctx_, info::dims[I], activation_ptr(I), activation_ptr(I + 2), batch_);
                return;
            } else {
                std::get<I>(layers_).forward(ctx_, info::dims[I], activation_ptr(I), activation_ptr(I + 1), batch_);
            }
            if constexpr (observed) {
                layer_event e = make_event(Pass::forward, I);
                e.input = activation(I);
                e.output = activation(I + 1);
                obs.on_forward(std::as_const(e));
            }
        });
        if (mode_ == Mode::train) ++step_;
        return activation(num_layers);
    }

public:

    /// Back-propagates dL/d(output) (B's memory) through the last forward's activations, adding to
    /// the parameter gradients. With `dx` (B's memory), also writes dL/d(input) there.
    void backward(view_type dy) { backward(dy, no_observer{}); }
    void backward(view_type dy, mutable_view_type dx) { backward(dy, dx, no_observer{}); }
    /// The same, calling obs.on_backward(layer_event) after each layer (last layer first) when
    /// Obs has it; the event carries that layer's finished parameter gradients.
    template <LayerObserver<value_type> Obs>
    void backward(view_type dy, Obs&& obs) {
        backward_impl(dy, nullptr, obs);
    }
    template <LayerObserver<value_type> Obs>
    void backward(view_type dy, mutable_view_type dx, Obs&& obs) {
        if (!(dx.dims() == In::dims) || dx.batch() != batch_)
            throw shape_error(detail::concat("Network::backward: dx has shape ", dx.shape_string(), ", expected ",
                                             view_type(nullptr, batch_, In::dims).shape_string()));
        backward_impl(dy, dx.data(), obs);
    }

    void train() { mode_ = Mode::train; }
    void eval() { mode_ = Mode::eval; }
    bool training() const { return mode_ == Mode::train; }

    parameter_set& parameters() { return params_; }
    const parameter_set& parameters() const { return params_; }
    void clear_grad() { params_.clear_grad(); }
    std::vector<state_entry> state_dict() const { return params_.state_dict(); }
    void load_state_dict(const std::vector<state_entry>& s) { params_.load_state_dict(s); }

    template <std::size_t I>
    auto& layer() { return std::get<I>(layers_); }
    template <std::size_t I>
    const auto& layer() const { return std::get<I>(layers_); }

    /// Activation i of the last forward: 0 is the input, i > 0 the output of layer i-1.
    view_type activation(std::size_t i) const { return {activation_ptr(i), batch_, info::dims[i]}; }
    std::size_t batch() const { return batch_; }

    std::uint64_t seed() const { return ctx_.rng.seed; }
    /// Training forward passes so far (dropout masks are a function of it); settable for resume.
    std::uint64_t step() const { return step_; }
    void set_step(std::uint64_t s) { step_ = s; }

private:
    /// Makes the backend's device current where the backend pins one (basic_cuda<N>): first, before
    /// any member allocates, and again at each forward/backward in case the caller switched.
    struct backend_guard {
        backend_guard() { activate(); }
        static void activate() {
            if constexpr (requires { storage<B>::activate(); }) storage<B>::activate();
        }
    };

    /// Buffers start as their specs say: ones (a variance) or zeros (a mean, a counter).
    void init_buffers() {
        aligned_vector<value_type> host(info::state_buffer_size, value_type(0));
        for_each_layer([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
            using L = std::tuple_element_t<I, std::tuple<Ls...>>;
            if constexpr (BufferedLayer<L>) {
                const auto specs = L::buffers(info::dims[I]);
                for (std::size_t k = 0; k < specs.size(); ++k)
                    if (specs[k].init == init_kind::ones)
                        std::fill_n(host.begin() + static_cast<std::ptrdiff_t>(info::buffer_offsets[I] + param_offset(specs, k)),
                                    specs[k].dims.size(), value_type(1));
            }
        });
        params_.upload_buffers(host);
    }

    static std::vector<ParamEntry> make_buffer_entries() {
        std::vector<ParamEntry> entries;
        for_each_layer([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
            using L = std::tuple_element_t<I, std::tuple<Ls...>>;
            if constexpr (BufferedLayer<L>) {
                const auto specs = L::buffers(info::dims[I]);
                const auto keys = detail::buffer_keys_of<L>(info::dims[I]);  // nested in a block: "body.1._mean"
                for (std::size_t k = 0; k < specs.size(); ++k)
                    entries.push_back({std::to_string(I) + "." + keys[k], specs[k].dims,
                                       info::buffer_offsets[I] + param_offset(specs, k), specs[k].dims.size()});
            }
        });
        return entries;
    }

    static std::vector<ParamEntry> make_entries() {
        std::vector<ParamEntry> entries;
        for_each_layer([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
            using L = std::tuple_element_t<I, std::tuple<Ls...>>;
            if constexpr (ParametricLayer<L>) {
                const auto specs = L::params(info::dims[I]);
                const auto keys = detail::param_keys_of<L>(info::dims[I]);  // nested in a block: "body.0.weight"
                for (std::size_t k = 0; k < specs.size(); ++k)
                    entries.push_back({std::to_string(I) + "." + keys[k], specs[k].dims,
                                       info::param_offsets[I] + param_offset(specs, k), specs[k].dims.size()});
            }
        });
        return entries;
    }

    /// Points the context at layer I's blocks of the flat buffers (the layer's views).
    void enter_layer(std::size_t i) {
        ctx_.layer_index = i;
        ctx_.params = std::as_const(params_).values().data() + info::param_offsets[i];  // a read: no version bump
        ctx_.grads = params_.grads().data() + info::param_offsets[i];
        ctx_.buffers = params_.buffers().data() + info::buffer_offsets[i];
        ctx_.saved = acts_.data() + (info::output_floats + info::arena_offsets[i]) * capacity_;
    }

    template <std::size_t I>
    using layer_t = std::tuple_element_t<I, std::tuple<Ls...>>;
    /// Layer I is a BatchNorm that the producer before it takes into its tail (tails_ below: folded
    /// in evaluation), so it does not fuse the ReLU after it itself.
    template <std::size_t I>
    static constexpr bool tail_batch_norm_ = [] {
        if constexpr (I > 0) {
            if constexpr (MapEpilogueLayer<layer_t<I - 1>, B> && FoldableBatchNorm<layer_t<I>, B>)
                return static_cast<bool>(layer_t<I - 1>::channels_first(info::dims[I - 1]));
        }
        return false;
    }();
    /// fused_[i]: layer i is followed by a ReLU it runs in its epilogue.
    static constexpr std::array<bool, num_layers> fused_ = []<std::size_t... I>(std::index_sequence<I...>) {
        return std::array<bool, num_layers>{[] {
            if constexpr (tail_batch_norm_<I>) return false;
            else if constexpr (I + 2 < num_layers)  // a lone ReLU: one with activations after it is a longer tail
                return ReluEpilogueLayer<layer_t<I>, B> && FusableRelu<layer_t<I + 1>> && !ElementwiseLayer<layer_t<I + 2>>;
            else if constexpr (I + 1 < num_layers) return ReluEpilogueLayer<layer_t<I>, B> && FusableRelu<layer_t<I + 1>>;
            else return false;
        }()...};
    }(std::index_sequence_for<Ls...>{});
    /// Layer I is a ReLU fused into layer I-1.
    template <std::size_t I>
    static constexpr bool fused_relu_at = I > 0 && fused_[I > 0 ? I - 1 : 0];
    /// Layer I is a Dropout right after a ReLU that layer I-2 runs in its epilogue: in a backward
    /// without an observer, I applies the ReLU's mask with its own (backward_after_relu) and I-2
    /// runs its plain backward.
    template <std::size_t I>
    static constexpr bool drop_after_relu_ = [] {
        if constexpr (I >= 2 && I < num_layers) return fused_[I - 2] && DropoutAfterRelu<layer_t<I>, B>;
        else return false;
    }();

    template <class L>
    static constexpr bool cheap_layer = [] {
        if constexpr (ElementwiseLayer<L>) return expr::cheap_forward<typename L::functor>;
        else return false;
    }();
    /// The producer tails: epi_[i] = k >= 1 layers after producer i run in its epilogue (a
    /// BatchNorm first where epi_bn_[i]; then elementwise layers, every one but the last cheap to
    /// recompute), taken greedily; a tail that is one ReLU which the producer fuses (fused_) is not one.
    struct tail_tables {
        std::array<std::size_t, num_layers> len{};
        std::array<bool, num_layers> bn{};
    };
    static constexpr tail_tables tails_ = [] {
        constexpr std::array<bool, num_layers> ew{ElementwiseLayer<Ls>...};
        constexpr std::array<bool, num_layers> cheap{cheap_layer<Ls>...};
        constexpr std::array<bool, num_layers> producer{MapEpilogueLayer<Ls, B>...};
        constexpr std::array<bool, num_layers> foldable{FoldableBatchNorm<Ls, B>...};
        constexpr std::array<bool, num_layers> first = []<std::size_t... I>(std::index_sequence<I...>) {
            return std::array<bool, num_layers>{[] {
                if constexpr (MapEpilogueLayer<layer_t<I>, B>) return static_cast<bool>(layer_t<I>::channels_first(info::dims[I]));
                else return false;
            }()...};
        }(std::index_sequence_for<Ls...>{});
        tail_tables t;
        for (std::size_t i = 0; i < num_layers; ++i) {
            if (!producer[i] || fused_[i]) continue;
            std::size_t j = i + 1;
            const bool bn = j < num_layers && foldable[j] && first[i];
            if (bn) ++j;
            const std::size_t start = j;
            while (j < num_layers && ew[j] && (j == start || cheap[j - 1])) ++j;
            if (j == i + 1) continue;
            t.len[i] = j - i - 1;
            t.bn[i] = bn;
            i = j - 1;
        }
        return t;
    }();
    static constexpr std::array<std::size_t, num_layers> epi_ = tails_.len;
    static constexpr std::array<bool, num_layers> epi_bn_ = tails_.bn;
    static constexpr bool has_fold_ = [] {
        for (std::size_t i = 0; i < num_layers; ++i)
            if (epi_bn_[i] && epi_[i] >= 2) return true;
        return false;
    }();
    /// claimed_[i]: layer i runs in the epilogue of a producer before it.
    static constexpr std::array<bool, num_layers> claimed_ = [] {
        std::array<bool, num_layers> c{};
        for (std::size_t i = 0; i < num_layers; ++i)
            for (std::size_t j = 1; j <= epi_[i]; ++j) c[i + j] = true;
        return c;
    }();
    /// Layer I runs in the epilogue of a producer before it.
    template <std::size_t I>
    static constexpr bool in_tail = [] {
        for (std::size_t j = 0; j < I; ++j)
            if (epi_[j] > 0 && j + epi_[j] >= I) return true;
        return false;
    }();
    /// The most channels of a folded BatchNorm: the fold buffer holds a scale and a shift per channel.
    static constexpr std::size_t fold_channels_ = []<std::size_t... I>(std::index_sequence<I...>) {
        std::size_t m = 0;
        ((m = std::max(m, [] {
              if constexpr (I + 1 < num_layers) {
                  if constexpr (FoldableBatchNorm<layer_t<I + 1>, B>)
                      if (epi_bn_[I]) return std::size_t{layer_t<I + 1>::channels};
              }
              return std::size_t{0};
          }())),
         ...);
        return m;
    }(std::index_sequence_for<Ls...>{});

    /// chain_[i] = k >= 2: layers i .. i+k-1 are elementwise and run as one chain, every one but the
    /// last cheap to recompute (expr::cheap_forward: its backward recomputes them); runs taken
    /// greedily from the left, a ReLU that runs in the epilogue of the layer before it not counted.
    static constexpr std::array<std::size_t, num_layers> chain_ = [] {
        constexpr std::array<bool, num_layers> ew{ElementwiseLayer<Ls>...};
        constexpr std::array<bool, num_layers> cheap{cheap_layer<Ls>...};
        std::array<std::size_t, num_layers> c{};
        for (std::size_t i = 0; i < num_layers;) {
            if (!ew[i] || (i > 0 && fused_[i - 1]) || claimed_[i]) {
                ++i;
                continue;
            }
            std::size_t k = 1;
            while (i + k < num_layers && ew[i + k] && cheap[i + k - 1]) ++k;
            if (k >= 2) c[i] = k;
            i += k;
        }
        return c;
    }();
    /// Layer I is inside a chain that starts before it.
    template <std::size_t I>
    static constexpr bool in_chain = [] {
        for (std::size_t j = 0; j < I; ++j)
            if (chain_[j] > 0 && j + chain_[j] > I) return true;
        return false;
    }();
    /// The chain that starts at layer I, of the layers' functors with their settings.
    template <std::size_t I>
    auto chain_at() const {
        return [&]<std::size_t... J>(std::index_sequence<J...>) {
            return expr::then(std::get<I + J>(layers_).fn...);
        }(std::make_index_sequence<chain_[I]>{});
    }
    /// slot_[i]: the activation slot that holds activation i after a fused forward (i itself, or
    /// the slot of the fused ReLU's or the chain's output for values that forward does not write).
    static constexpr std::array<std::size_t, num_layers + 1> slot_ = [] {
        std::array<std::size_t, num_layers + 1> s{};
        for (std::size_t i = 0; i <= num_layers; ++i) s[i] = i;
        for (std::size_t i = 0; i < num_layers; ++i) {
            if (fused_[i]) s[i + 1] = i + 2;
            for (std::size_t j = 1; j < chain_[i]; ++j) s[i + j] = i + chain_[i];
            // a tail's activations inside it are its output (a BatchNorm's own output aside)
            for (std::size_t j = epi_bn_[i] ? 3 : 2; j <= epi_[i]; ++j) s[i + j] = i + epi_[i] + 1;
        }
        return s;
    }();

    /// The expression of layers J .. J+M-1 (elementwise, with their settings); the identity for none.
    template <std::size_t J, std::size_t M>
    auto tail_fn() const {
        if constexpr (M == 0) return expr::chain<expr::identity>{};
        else
            return [&]<std::size_t... K>(std::index_sequence<K...>) {
                return expr::then(std::get<J + K>(layers_).fn...);
            }(std::make_index_sequence<M>{});
    }

    /// Producer I and its tail of k layers: z into activation I+1, the tail's output into I+k+1.
    template <std::size_t I>
    void forward_epilogue() {
        constexpr std::size_t k = epi_[I];
        const auto& layer = std::get<I>(layers_);
        if constexpr (epi_bn_[I]) {
            const auto& bn = std::get<I + 1>(layers_);
            constexpr std::size_t C = layer_t<I + 1>::channels;
            if (mode_ == Mode::eval) {  // folded: one pass after the producer
                enter_layer(I + 1);
                bn.fold(ctx_, fold_.data(), fold_.data() + C);
                enter_layer(I);
                layer.forward_map(ctx_, info::dims[I], activation_ptr(I), activation_ptr(I + 1),
                                  activation_ptr(I + k + 1), batch_, tail_fn<I + 2, k - 1>(),
                                  static_cast<const value_type*>(fold_.data()),
                                  static_cast<const value_type*>(fold_.data() + C));
            } else {  // batch statistics: the BatchNorm as itself, the activations after it one chain
                layer.forward(ctx_, info::dims[I], activation_ptr(I), activation_ptr(I + 1), batch_);
                enter_layer(I + 1);
                bn.forward(ctx_, info::dims[I + 1], activation_ptr(I + 1), activation_ptr(I + 2), batch_);
                if constexpr (k >= 2)
                    kernel<op::map, B>::run(tail_fn<I + 2, k - 1>(), activation_ptr(I + 2), activation_ptr(I + k + 1),
                                            batch_ * info::dims[I + 2].size());
            }
        } else {
            layer.forward_map(ctx_, info::dims[I], activation_ptr(I), activation_ptr(I + 1), activation_ptr(I + k + 1),
                              batch_, tail_fn<I + 1, k>(), static_cast<const value_type*>(nullptr),
                              static_cast<const value_type*>(nullptr));
        }
    }

    /// The backward of producer I's tail and of I: cur holds the gradient of the tail's output (the
    /// chain's backward overwrites it in place); dx: where I's input gradient goes (null: none).
    template <std::size_t I>
    void backward_epilogue(value_type*& cur, value_type*& next, value_type* dx) {
        constexpr std::size_t k = epi_[I];
        if constexpr (epi_bn_[I]) {
            if constexpr (k >= 2)
                kernel<op::map_backward, B>::run(tail_fn<I + 2, k - 1>(), activation_ptr(I + 2),
                                                 activation_ptr(I + k + 1), cur, cur, batch_ * info::dims[I + 2].size());
            enter_layer(I + 1);
            std::get<I + 1>(layers_).backward(ctx_, info::dims[I + 1], activation_ptr(I + 1), activation_ptr(I + 2),
                                              cur, next, batch_);
            std::swap(cur, next);  // cur: the gradient of the producer's output
            if (dx == cur) dx = next;
            enter_layer(I);
        } else {
            kernel<op::map_backward, B>::run(tail_fn<I + 1, k>(), activation_ptr(I + 1), activation_ptr(I + k + 1), cur,
                                             cur, batch_ * info::dims[I + 1].size());
        }
        std::get<I>(layers_).backward(ctx_, info::dims[I], activation_ptr(I), activation_ptr(I + 1), cur, dx, batch_);
    }

    /// After a folded forward: the folded BatchNorms' own outputs (which it did not write), so that
    /// the backward (and activation()) see the layers' values.
    void unfold() {
        folded_ = false;
        for_each_layer([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
            if constexpr (epi_bn_[I] && epi_[I] >= 2) {
                enter_layer(I + 1);
                const Mode m = ctx_.mode;
                ctx_.mode = Mode::eval;
                std::get<I + 1>(layers_).forward(ctx_, info::dims[I + 1], activation_ptr(I + 1), activation_ptr(I + 2),
                                                 batch_);
                ctx_.mode = m;
            }
        });
    }

    /// fold_slot_[i]: where activation i is after a folded forward (a folded BatchNorm's output, in a
    /// tail with activations after it, is the tail's output until unfold writes it).
    static constexpr std::array<std::size_t, num_layers + 1> fold_slot_ = [] {
        std::array<std::size_t, num_layers + 1> s{};
        for (std::size_t i = 0; i <= num_layers; ++i) s[i] = i;
        for (std::size_t i = 0; i < num_layers; ++i)
            if (epi_bn_[i] && epi_[i] >= 2) s[i + 2] = i + epi_[i] + 1;
        return s;
    }();

    /// relu_slot_: slot_ with the fused ReLUs' redirections only (after materialize).
    static constexpr std::array<std::size_t, num_layers + 1> relu_slot_ = [] {
        std::array<std::size_t, num_layers + 1> s{};
        for (std::size_t i = 0; i <= num_layers; ++i) s[i] = i;
        for (std::size_t i = 0; i < num_layers; ++i)
            if (fused_[i]) s[i + 1] = i + 2;
        return s;
    }();

    /// Before an observed backward after a fused forward (DataParallel's per-layer allreduce): the
    /// values inside chains and tails, which that forward did not write, computed layer by layer
    /// into their own slots (the bits the chain computed inside), so that each layer's backward
    /// reads its own input and output. A fused ReLU's backward needs none (its output decides).
    void materialize() {
        materialized_ = true;
        for_each_layer([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
            // The run's layers whose outputs are inside it: [first, last).
            constexpr std::size_t first = chain_[I] > 0 ? I : (epi_[I] > 0 ? I + (epi_bn_[I] ? 2 : 1) : 0);
            constexpr std::size_t last = chain_[I] > 0 ? I + chain_[I] - 1 : (epi_[I] > 0 ? I + epi_[I] : 0);
            if constexpr (first < last)
                [&]<std::size_t... J>(std::index_sequence<J...>) {
                    ((enter_layer(first + J), std::get<first + J>(layers_).forward(ctx_, info::dims[first + J],
                                                                                   activation_ptr(first + J),
                                                                                   activation_ptr(first + J + 1), batch_)),
                     ...);
                }(std::make_index_sequence<last - first>{});
        });
    }

    template <class F>
    static void for_each_layer(F&& f) {
        [&]<std::size_t... I>(std::index_sequence<I...>) { (f(std::integral_constant<std::size_t, I>{}), ...); }
        (std::index_sequence_for<Ls...>{});
    }

    /// Grows the arena for `batch` samples; never shrinks, so a steady loop allocates nothing.
    void reserve(std::size_t batch) {
        if (batch <= capacity_) return;
        acts_ = store::template make<value_type>(batch * info::activation_floats);
        grad_a_ = store::template make<value_type>(batch * info::max_activation_floats);
        grad_b_ = store::template make<value_type>(batch * info::max_activation_floats);
        if (workspace_.size() < info::max_workspace) workspace_ = store::template make<value_type>(info::max_workspace);
        capacity_ = batch;
    }

    value_type* activation_ptr(std::size_t i) const {
        if (fused_forward_) i = materialized_ ? relu_slot_[i] : slot_[i];  // only a fused ReLU's, chain's or tail's output was written
        if (folded_) i = fold_slot_[i];    // a folded BatchNorm's output was not written
        std::size_t off = 0;
        for (std::size_t k = 0; k < i; ++k) off += info::dims[k].size();
        return const_cast<value_type*>(acts_.data()) + off * capacity_;
    }

    layer_event make_event(Pass pass, std::size_t i) {
        layer_event e;
        e.pass = pass;
        e.index = i;
        e.name = info::names[i];
        e.step = ctx_.step;
        e.mode = ctx_.mode;
        e.param_offset = info::param_offsets[i];
        e.param_grads = params_.grads().subspan(info::param_offsets[i], info::param_blocks[i]);
        e.param_values = std::span<const value_type>(params_.values()).subspan(info::param_offsets[i], info::param_blocks[i]);
        e.params = std::span<const ParamEntry>(params_.entries()).subspan(entry_begin_[i], entry_begin_[i + 1] - entry_begin_[i]);
        return e;
    }

    template <class Obs>
    void backward_impl(view_type dy, value_type* dx_out, Obs& obs) {
        if (batch_ == 0) throw value_error("Network::backward: call forward first");
        if (!(dy.dims() == info::dims[num_layers]) || dy.batch() != batch_)
            throw shape_error(detail::concat("Network::backward: dy has shape ", dy.shape_string(), ", expected ",
                                             view_type(nullptr, batch_, info::dims[num_layers]).shape_string()));
        guard_.activate();
        value_type* cur = grad_a_.data();
        value_type* next = grad_b_.data();
        store::copy(cur, dy.data(), dy.size());
        ctx_.mode = mode_;
        ctx_.step = last_step_;
        ctx_.workspace = workspace_.data();
        ctx_.workspace_size = workspace_.size();
        if (folded_) unfold();
        if constexpr (BackwardObserver<Obs, value_type>)
            if (fused_forward_ && !materialized_) materialize();  // each layer's backward sees its own values
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (backward_layer<num_layers - 1 - I>(cur, next, dx_out, obs), ...);
        }(std::index_sequence_for<Ls...>{});
    }

    /// Whether any of layers 0 .. I-1 has parameters.
    template <std::size_t I>
    static constexpr bool parametric_before = []<std::size_t... J>(std::index_sequence<J...>) {
        return (false || ... || ParametricLayer<std::tuple_element_t<J, std::tuple<Ls...>>>);
    }(std::make_index_sequence<I>{});

    template <std::size_t I, class Obs>
    void backward_layer(value_type*& cur, value_type*& next, value_type* dx_out, Obs& obs) {
        constexpr bool observed = BackwardObserver<Obs, value_type>;
        if constexpr (!observed && fused_relu_at<I>) return;  // layer I-1 masks dy itself
        if constexpr (!observed && in_chain<I>) return;       // the chain's first layer runs its backward
        if constexpr (!observed && in_tail<I>) return;        // the producer runs its tail's backward
        enter_layer(I);
        value_type* dx = I == 0 ? dx_out : next;
        // No layer before I has parameters, no observer looks and no input gradient was asked for:
        // I's input gradient would be discarded (the MLP's first Linear after Flatten), so skip it.
        if constexpr (!parametric_before<I> && !observed)
            if (dx_out == nullptr) dx = nullptr;
        if constexpr (!observed && epi_[I] > 0) {
            backward_epilogue<I>(cur, next, dx);
        } else if constexpr (!observed && chain_[I] > 0) {  // the whole chain, from its input and output
            if (dx)
                kernel<op::map_backward, B>::run(chain_at<I>(), activation_ptr(I), activation_ptr(I + chain_[I]), cur,
                                                 dx, batch_ * info::dims[I].size());
        } else if constexpr (!observed && drop_after_relu_<I>) {  // this Dropout's mask and the ReLU's at once
            std::get<I>(layers_).backward_after_relu(ctx_, info::dims[I], static_cast<const value_type*>(activation_ptr(I + 1)),
                                                     static_cast<const value_type*>(cur), dx, batch_);
        } else if constexpr (!observed && fused_[I] && drop_after_relu_<I + 2>) {  // cur: already masked
            std::get<I>(layers_).backward(ctx_, info::dims[I], activation_ptr(I), activation_ptr(I + 2), cur, dx,
                                          batch_);
        } else if constexpr (!observed && fused_[I])  // cur: the gradient of the ReLU's output, masked in place
            std::get<I>(layers_).backward_relu(ctx_, info::dims[I], activation_ptr(I), activation_ptr(I + 2), cur, dx,
                                               batch_);
        else
            std::get<I>(layers_).backward(ctx_, info::dims[I], activation_ptr(I), activation_ptr(I + 1), cur, dx,
                                          batch_);
        if constexpr (observed) {
            layer_event e = make_event(Pass::backward, I);
            e.input = activation(I);
            e.output = activation(I + 1);
            e.dy = view_type(cur, batch_, info::dims[I + 1]);
            if (dx) e.dx = view_type(dx, batch_, info::dims[I]);
            obs.on_backward(std::as_const(e));
        }
        std::swap(cur, next);
    }

    backend_guard guard_;  ///< first: the device is current before any buffer is allocated
    std::array<std::size_t, num_layers + 1> entry_begin_{};  ///< layer i's tensors: entries()[entry_begin_[i], entry_begin_[i+1])
    std::tuple<Ls...> layers_{};
    parameter_set params_;
    Context<B> ctx_{};
    static constexpr bool host_cpu = std::same_as<B, basic_cpu<value_type>>;
    struct no_pack_cache {};
    /// The packed weights of eval-mode forwards on the CPU (ctx_.packed_weights); empty in a copy.
    [[no_unique_address]] std::conditional_t<host_cpu, gemm_pack_cache<value_type>, no_pack_cache> packed_;
    Mode mode_ = Mode::train;
    std::uint64_t step_ = 0;
    std::uint64_t last_step_ = 0;
    std::size_t batch_ = 0;
    std::size_t capacity_ = 0;
    bool fused_forward_ = false;  ///< the last forward ran fused layers (activation_ptr then redirects)
    bool materialized_ = false;  ///< the values inside chains and tails were written since (materialize)
    bool folded_ = false;  ///< the last forward folded BatchNorms (their outputs are unwritten until unfold)
    buffer<value_type> acts_, grad_a_, grad_b_, workspace_;
    buffer<value_type> fold_ = store::template make<value_type>(2 * fold_channels_);  ///< folded scales, then shifts
};

}  // namespace oar
