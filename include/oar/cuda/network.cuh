// Network<Sequential<...>, Shape<...>, basic_cuda<D>>: the same network type on the GPU. It is a
// partial specialisation (not an edit of nn/network.hpp, which others are changing) so that its
// storage is device memory: parameters, gradients, optimizer state, activations and workspace
// are device_buffers, and a training step never leaves the GPU. Weights are initialised by the
// CPU network of the same seed and copied over, so both start bitwise equal. Most layers run
// their own forward/backward with Context<cuda> (kernel<op::X, cuda> does the work); three are
// run here instead because their CPU code touches memory on the host or works per sample:
// Conv2D (batched: one im2col and one cuBLAS GEMM for the whole batch), Dropout (the CPU's
// counter-based mask drawn on the device) and Flatten (a device copy).
// Also here: DeviceParameterSet, SGD/Momentum/Adagrad/Adam on the device, CrossEntropyLoss on the device, and
// BatchStager (host-to-device batch copies from pinned memory on a copy stream).
#pragma once

#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t, std::uint64_t
#include <cstring>      // std::memcpy into pinned memory
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <tuple>        // std::tuple, std::get
#include <type_traits>  // std::is_same_v, std::integral_constant
#include <utility>      // std::index_sequence, std::pair
#include <vector>       // std::vector

#include "../layers/conv2d.hpp"        // Conv2D
#include "../layers/dropout.hpp"       // Dropout
#include "../layers/flatten.hpp"       // Flatten
#include "../loss/cross_entropy.hpp"   // CrossEntropyLoss (primary template)
#include "../nn/hooks.hpp"             // check_finite_parameters (host parameter sets)
#include "../nn/init.hpp"              // init_scheme
#include "../nn/network.hpp"           // Network (primary template)
#include "../optim/adagrad.hpp"        // Adagrad, AdagradOptions
#include "../optim/adam.hpp"           // Adam, AdamOptions
#include "../optim/momentum.hpp"       // Momentum, MomentumOptions
#include "../optim/sgd.hpp"            // SGD, SGDOptions
#include "../kernels/cuda/conv_plan.hpp"  // conv2d_forward / conv2d_backward over an executor
#include "kernels.cuh"                 // kernel<op::X, cuda>, batched conv, dropout
#include "runtime.cuh"                 // device_buffer, pinned_buffer, Stream, Event

namespace oar {

namespace cuda_detail {
template <class L>
struct conv_traits : std::false_type {};
template <std::size_t InC, std::size_t OutC, std::size_t K, std::size_t S, std::size_t P>
struct conv_traits<Conv2D<InC, OutC, K, S, P>> : std::true_type {
    static constexpr std::size_t out_channels = OutC;
};
template <class L>
inline constexpr bool is_dropout = false;
template <std::size_t P>
inline constexpr bool is_dropout<Dropout<P>> = true;

/// Device workspace per sample that the batched Conv2D needs (cuda_kernels::conv_plan_workspace).
template <class L>
constexpr std::size_t conv_workspace_per_sample(Dims in) {
    if constexpr (conv_traits<L>::value) return cuda_kernels::conv_plan_workspace(L::geometry(in), conv_traits<L>::out_channels, 1);
    else return 0;
}

/// The conv plan's steps as CUDA launches and cuBLAS calls on the compute stream.
template <class B>
struct CudaExec {
    void im2col(const ConvGeometry& g, std::size_t n, const float* x, float* col) { cuda_kernels::im2col_batched(g, n, x, col); }
    void col2im(const ConvGeometry& g, std::size_t n, const float* col, float* dx) { cuda_kernels::col2im_batched(g, n, col, dx); }
    void gemm(Trans ta, Trans tb, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A, std::size_t lda,
              const float* Bm, std::size_t ldb, float beta, float* C, std::size_t ldc) {
        kernel<op::gemm, B>::run(ta, tb, M, N, K, alpha, A, lda, Bm, ldb, beta, C, ldc);
    }
    void ncp_from_cnp(const float* src, float* dst, const float* bias, std::size_t n, std::size_t c, std::size_t p) {
        cuda_kernels::ncp_from_cnp(src, dst, bias, n, c, p);
    }
    void cnp_from_ncp(const float* src, float* dst, std::size_t n, std::size_t c, std::size_t p) {
        cuda_kernels::cnp_from_ncp(src, dst, n, c, p);
    }
    void bias_grad(const float* dy, float* db, std::size_t n, std::size_t c, std::size_t inner) {
        kernel<op::bias_grad, B>::run(dy, db, n, c, inner);
    }
    void zero(float* p, std::size_t count) {
        OAR_CUDA_CHECK(cudaMemsetAsync(p, 0, count * sizeof(float), cuda_runtime::compute_stream()));
    }
};
}  // namespace cuda_detail

/// A network's parameters and gradients in device memory, with the CPU set's table of named
/// tensors (same offsets). state_dict() and load_state_dict() go through a host mirror.
class DeviceParameterSet {
public:
    using value_type = float;
    using state_entry = basic_state_entry<float>;

    DeviceParameterSet() = default;
    explicit DeviceParameterSet(const basic_parameter_set<float>& host)
        : values_(host.values().size()), grads_(host.values().size()), host_(host) {
        values_.copy_from_host(host.values().data(), host.values().size());
        grads_.zero();
        OAR_CUDA_CHECK(cudaStreamSynchronize(cuda_runtime::compute_stream()));
    }

    /// Device memory: pass to kernels, never dereference on the host.
    std::span<float> values() { return {values_.data(), values_.size()}; }
    std::span<const float> values() const { return {values_.data(), values_.size()}; }
    std::span<float> grads() { return {grads_.data(), grads_.size()}; }
    std::span<const float> grads() const { return {grads_.data(), grads_.size()}; }

    const std::vector<ParamEntry>& entries() const { return host_.entries(); }
    std::size_t count() const { return host_.count(); }
    const ParamEntry& entry(const std::string& key) const { return host_.entry(key); }
    void clear_grad() { grads_.zero(); }

    /// Values and gradients copied to a host parameter set (waits for the GPU).
    const basic_parameter_set<float>& to_host() const {
        OAR_CUDA_CHECK(cudaStreamSynchronize(cuda_runtime::compute_stream()));
        values_.copy_to_host(host_.values().data(), values_.size());
        grads_.copy_to_host(host_.grads().data(), grads_.size());
        return host_;
    }
    std::vector<state_entry> state_dict() const { return to_host().state_dict(); }
    /// As the CPU set: all entries checked before anything changes, then copied to the device.
    void load_state_dict(const std::vector<state_entry>& state) {
        (void)to_host();
        host_.load_state_dict(state);
        values_.copy_from_host(host_.values().data(), host_.values().size());
    }

private:
    cuda_runtime::device_buffer<float> values_, grads_;
    mutable basic_parameter_set<float> host_;
};

/// nn/hooks.hpp's check on the weights after an optimizer step (TerminateOnNonFinite), on a host
/// copy of the device parameters (one download of the flat buffer per call).
inline void check_finite_parameters(const DeviceParameterSet& p, std::uint64_t step,
                                    std::string_view when = "after the optimizer step of") {
    check_finite_parameters(p.to_host(), step, when);
}

template <class... Ls, ShapeType In, int D>
class Network<Sequential<Ls...>, In, basic_cuda<D>> {
public:
    using sequential = Sequential<Ls...>;
    using info = typename sequential::template bind<In>;
    using input_shape = In;
    using output_shape = typename info::output_shape;
    using backend = basic_cuda<D>;
    using value_type = float;
    using view_type = basic_tensor_view<const float>;
    using mutable_view_type = basic_tensor_view<float>;
    using parameter_set = DeviceParameterSet;
    using state_entry = basic_state_entry<float>;
    using host_network = Network<Sequential<Ls...>, In, cpu>;
    static constexpr std::size_t num_layers = sizeof...(Ls);

    /// The initialisation `scheme` (Paddle's by default) from `seed`, drawn exactly as the CPU
    /// network draws it.
    explicit Network(std::uint64_t seed = 0, init_scheme scheme = init_scheme::paddle)
        : Network(host_network(seed, scheme)) {}

    /// The GPU copy of a CPU network: its parameters, layer settings, seed and step count.
    explicit Network(const host_network& h)
        : pin_(), params_(h.parameters()), step_(h.step()) {
        ctx_.rng = CounterRng{h.seed()};
        for_each_layer([&]<std::size_t I>(std::integral_constant<std::size_t, I>) { std::get<I>(layers_) = h.template layer<I>(); });
        mode_ = h.training() ? Mode::train : Mode::eval;
    }

    /// x in host memory (the CPU network's contract); the result is a view of DEVICE memory
    /// (to_host() copies it back), valid until the next forward.
    view_type forward(view_type x) {
        pin_device{};
        check_input(x);
        reserve(x.batch());
        batch_ = x.batch();
        OAR_CUDA_CHECK(cudaMemcpyAsync(activation_ptr(0), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice,
                                       cuda_runtime::compute_stream()));
        return run_forward();
    }
    view_type operator()(view_type x) { return forward(x); }

    /// x already in device memory (e.g. from BatchStager).
    view_type forward_device(view_type x) {
        pin_device{};
        check_input(x);
        reserve(x.batch());
        batch_ = x.batch();
        OAR_CUDA_CHECK(cudaMemcpyAsync(activation_ptr(0), x.data(), x.size() * sizeof(float),
                                       cudaMemcpyDeviceToDevice, cuda_runtime::compute_stream()));
        return run_forward();
    }

    /// dy in DEVICE memory (e.g. CrossEntropyLoss<cuda>::backward()); gradients accumulate.
    void backward(view_type dy) { backward_impl(dy, nullptr); }
    /// dx in device memory too.
    void backward(view_type dy, mutable_view_type dx) {
        if (!(dx.dims() == In::dims) || dx.batch() != batch_)
            throw shape_error(detail::concat("Network<cuda>::backward: dx has shape ", dx.shape_string(), ", expected ",
                                             view_type(nullptr, batch_, In::dims).shape_string()));
        backward_impl(dy, dx.data());
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

    /// Activation i of the last forward, in device memory.
    view_type activation(std::size_t i) const { return {activation_ptr(i), batch_, info::dims[i]}; }
    std::size_t batch() const { return batch_; }
    std::uint64_t seed() const { return ctx_.rng.seed; }
    std::uint64_t step() const { return step_; }
    void set_step(std::uint64_t s) { step_ = s; }

    /// A device view copied to the host (waits for the GPU).
    static std::vector<float> to_host(view_type v) {
        std::vector<float> out(v.size());
        OAR_CUDA_CHECK(cudaMemcpyAsync(out.data(), v.data(), v.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                       cuda_runtime::compute_stream()));
        OAR_CUDA_CHECK(cudaStreamSynchronize(cuda_runtime::compute_stream()));
        return out;
    }

private:
    template <class F>
    static void for_each_layer(F&& f) {
        [&]<std::size_t... I>(std::index_sequence<I...>) { (f(std::integral_constant<std::size_t, I>{}), ...); }
        (std::index_sequence_for<Ls...>{});
    }

    static constexpr std::size_t conv_workspace_per_sample = [] {
        std::size_t m = 0;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            ((m = std::max(m, cuda_detail::conv_workspace_per_sample<std::tuple_element_t<I, std::tuple<Ls...>>>(
                                  info::dims[I]))),
             ...);
        }(std::index_sequence_for<Ls...>{});
        return m;
    }();

    void check_input(view_type x) const {
        if (!(x.dims() == In::dims))
            throw shape_error(detail::concat("Network<cuda>::forward: input has per-sample shape ", to_string(x.dims()),
                                             ", the network was bound to ", to_string(In::dims)));
        if (x.batch() == 0) throw shape_error("Network<cuda>::forward: the batch is empty");
        if (x.data() == nullptr) throw value_error("Network<cuda>::forward: the input has no data");
    }

    void reserve(std::size_t batch) {
        if (batch <= capacity_) return;
        acts_ = cuda_runtime::device_buffer<float>(batch * info::activation_floats);
        grad_a_ = cuda_runtime::device_buffer<float>(batch * info::max_activation_floats);
        grad_b_ = cuda_runtime::device_buffer<float>(batch * info::max_activation_floats);
        workspace_ = cuda_runtime::device_buffer<float>(
            std::max(batch * conv_workspace_per_sample, static_cast<std::size_t>(info::max_workspace)));
        capacity_ = batch;
    }

    float* activation_ptr(std::size_t i) const {
        std::size_t off = 0;
        for (std::size_t k = 0; k < i; ++k) off += info::dims[k].size();
        return const_cast<float*>(acts_.data()) + off * capacity_;
    }

    void enter_layer(std::size_t i) {
        ctx_.layer_index = i;
        ctx_.params = params_.values().data() + info::param_offsets[i];
        ctx_.grads = params_.grads().data() + info::param_offsets[i];
        ctx_.workspace = workspace_.data();
        ctx_.workspace_size = workspace_.size();
    }

    view_type run_forward() {
        ctx_.mode = mode_;
        ctx_.step = step_;
        last_step_ = step_;
        for_each_layer([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
            enter_layer(I);
            forward_layer<I>(activation_ptr(I), activation_ptr(I + 1));
        });
        if (mode_ == Mode::train) ++step_;
        return activation(num_layers);
    }

    template <std::size_t I>
    void forward_layer(const float* x, float* y) {
        using L = std::tuple_element_t<I, std::tuple<Ls...>>;
        constexpr Dims in = info::dims[I];
        const std::size_t n = batch_;
        auto& layer = std::get<I>(layers_);
        if constexpr (cuda_detail::conv_traits<L>::value) {
            cuda_detail::CudaExec<backend> ex;
            cuda_kernels::conv2d_forward(ex, L::geometry(in), cuda_detail::conv_traits<L>::out_channels, n, ctx_.params,
                                         ctx_.params + L::bias_offset, x, y, ctx_.workspace);
        } else if constexpr (cuda_detail::is_dropout<L>) {
            dropout(layer.p, I, ctx_.step, x, y, n * in.size());
        } else if constexpr (std::is_same_v<L, Flatten>) {
            copy(x, y, n * in.size());
        } else {
            layer.forward(ctx_, in, x, y, n);
        }
    }

    void backward_impl(view_type dy, float* dx_out) {
        pin_device{};
        if (batch_ == 0) throw value_error("Network<cuda>::backward: call forward first");
        if (!(dy.dims() == info::dims[num_layers]) || dy.batch() != batch_)
            throw shape_error(detail::concat("Network<cuda>::backward: dy has shape ", dy.shape_string(), ", expected ",
                                             view_type(nullptr, batch_, info::dims[num_layers]).shape_string()));
        float* cur = grad_a_.data();
        float* next = grad_b_.data();
        copy(dy.data(), cur, dy.size());
        ctx_.mode = mode_;
        ctx_.step = last_step_;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (backward_layer<num_layers - 1 - I>(cur, next, dx_out), ...);
        }(std::index_sequence_for<Ls...>{});
    }

    template <std::size_t I>
    void backward_layer(float*& cur, float*& next, float* dx_out) {
        using L = std::tuple_element_t<I, std::tuple<Ls...>>;
        constexpr Dims in = info::dims[I];
        enter_layer(I);
        float* dx = I == 0 ? dx_out : next;
        const float* x = activation_ptr(I);
        const float* dyp = cur;
        const std::size_t n = batch_;
        auto& layer = std::get<I>(layers_);
        if constexpr (cuda_detail::conv_traits<L>::value) {
            cuda_detail::CudaExec<backend> ex;
            cuda_kernels::conv2d_backward(ex, L::geometry(in), cuda_detail::conv_traits<L>::out_channels, n, ctx_.params,
                                          x, dyp, ctx_.grads, ctx_.grads + L::bias_offset, dx, ctx_.workspace);
        } else if constexpr (cuda_detail::is_dropout<L>) {
            if (dx) dropout(layer.p, I, ctx_.step, dyp, dx, n * in.size());
        } else if constexpr (std::is_same_v<L, Flatten>) {
            if (dx) copy(dyp, dx, n * in.size());
        } else {
            layer.backward(ctx_, in, x, activation_ptr(I + 1), dyp, dx, n);
        }
        std::swap(cur, next);
    }

    /// The CPU Dropout's rule on the device: same checks, same mask stream, same scale.
    void dropout(float p, std::size_t layer_index, std::uint64_t step, const float* in, float* out, std::size_t count) {
        if (!(p >= 0.0f && p < 1.0f)) throw value_error(detail::concat("Dropout: p must be in [0, 1), got ", p));
        if (ctx_.mode == Mode::eval || p == 0.0f) return copy(in, out, count);
        const float scale = 1.0f / (1.0f - p);
        cuda_kernels::dropout(ctx_.rng, rng_stream::dropout_of(layer_index, step), p, scale, in, out, count);
    }

    static void copy(const float* from, float* to, std::size_t count) {
        OAR_CUDA_CHECK(cudaMemcpyAsync(to, from, count * sizeof(float), cudaMemcpyDeviceToDevice,
                                       cuda_runtime::compute_stream()));
    }

    /// For basic_cuda<N>: makes device N current (first, before any member allocates; again at
    /// each forward/backward, in case the caller switched devices). Nothing for oar::cuda.
    struct pin_device {
        pin_device() {
            if constexpr (backend::device >= 0) cuda_runtime::use_device(backend::device);
        }
    };
    pin_device pin_;
    std::tuple<Ls...> layers_{};
    DeviceParameterSet params_;
    Context<backend> ctx_{};
    Mode mode_ = Mode::train;
    std::uint64_t step_ = 0;
    std::uint64_t last_step_ = 0;
    std::size_t batch_ = 0;
    std::size_t capacity_ = 0;
    cuda_runtime::device_buffer<float> acts_, grad_a_, grad_b_, workspace_;
};

/// Adam on the device: the CPU Adam's formula (adam_fn), one fused launch over the flat buffers.
template <int D>
class Adam<basic_cuda<D>> {
public:
    using value_type = float;
    using parameter_set = DeviceParameterSet;

    explicit Adam(parameter_set& params, AdamOptions o = {})
        : params_(&params), lr_(detail::checked_rate("Adam", "learning_rate", o.learning_rate)),
          l2_(detail::checked_rate("Adam", "L2Decay coefficient", o.weight_decay.coeff)), b1_(o.beta1), b2_(o.beta2),
          eps_(detail::checked_rate("Adam", "epsilon", o.epsilon)), m_(params.values().size()),
          v_(params.values().size()) {
        if (!(b1_ >= 0.0f && b1_ < 1.0f) || !(b2_ >= 0.0f && b2_ < 1.0f))
            throw value_error(detail::concat("Adam: beta1 and beta2 must be in [0, 1), got ", b1_, " and ", b2_));
        m_.zero();
        v_.zero();
    }
    void step() {
        ++t_;
        const double bc1 = 1.0 - std::pow(static_cast<double>(b1_), static_cast<double>(t_));
        const double bc2 = std::sqrt(1.0 - std::pow(static_cast<double>(b2_), static_cast<double>(t_)));
        const adam_fn f{static_cast<float>(lr_ * bc2 / bc1), static_cast<float>(eps_ * bc2), b1_, b2_, l2_};
        kernel<op::fused_update, basic_cuda<D>>::run(f, params_->values().size(), params_->values().data(),
                                                     params_->grads().data(), m_.data(), v_.data());
    }
    void clear_grad() { params_->clear_grad(); }
    float learning_rate() const { return lr_; }
    void set_learning_rate(float lr) { lr_ = detail::checked_rate("Adam", "learning_rate", lr); }
    /// Device spans (for a checkpoint, copy them to the host first).
    std::vector<std::pair<std::string, std::span<float>>> state() {
        return {{"moment1", {m_.data(), m_.size()}}, {"moment2", {v_.data(), v_.size()}}};
    }
    std::uint64_t step_count() const { return t_; }
    void set_step_count(std::uint64_t t) { t_ = t; }

private:
    parameter_set* params_;
    float lr_, l2_, b1_, b2_, eps_;
    cuda_runtime::device_buffer<float> m_, v_;
    std::uint64_t t_ = 0;
};

/// SGD on the device (sgd_fn, one launch).
template <int D>
class SGD<basic_cuda<D>> {
public:
    using value_type = float;
    using parameter_set = DeviceParameterSet;
    explicit SGD(parameter_set& params, SGDOptions o = {})
        : params_(&params), lr_(detail::checked_rate("SGD", "learning_rate", o.learning_rate)),
          l2_(detail::checked_rate("SGD", "L2Decay coefficient", o.weight_decay.coeff)) {}
    void step() {
        kernel<op::fused_update, basic_cuda<D>>::run(sgd_fn{lr_, l2_}, params_->values().size(),
                                                     params_->values().data(), params_->grads().data(), nullptr, nullptr);
    }
    void clear_grad() { params_->clear_grad(); }
    float learning_rate() const { return lr_; }
    void set_learning_rate(float lr) { lr_ = detail::checked_rate("SGD", "learning_rate", lr); }
    std::vector<std::pair<std::string, std::span<float>>> state() { return {}; }

private:
    parameter_set* params_;
    float lr_, l2_;
};

/// Momentum on the device (momentum_fn, one launch), velocity in device memory.
template <int D>
class Momentum<basic_cuda<D>> {
public:
    using value_type = float;
    using parameter_set = DeviceParameterSet;
    explicit Momentum(parameter_set& params, MomentumOptions o = {})
        : params_(&params), lr_(detail::checked_rate("Momentum", "learning_rate", o.learning_rate)),
          l2_(detail::checked_rate("Momentum", "L2Decay coefficient", o.weight_decay.coeff)),
          mu_(detail::checked_rate("Momentum", "momentum", o.momentum)), nesterov_(o.use_nesterov),
          velocity_(params.values().size()) {
        velocity_.zero();
    }
    void step() {
        kernel<op::fused_update, basic_cuda<D>>::run(momentum_fn{lr_, l2_, mu_, nesterov_}, params_->values().size(),
                                                     params_->values().data(), params_->grads().data(),
                                                     velocity_.data(), nullptr);
    }
    void clear_grad() { params_->clear_grad(); }
    float learning_rate() const { return lr_; }
    void set_learning_rate(float lr) { lr_ = detail::checked_rate("Momentum", "learning_rate", lr); }
    std::vector<std::pair<std::string, std::span<float>>> state() { return {{"velocity", {velocity_.data(), velocity_.size()}}}; }

private:
    parameter_set* params_;
    float lr_, l2_, mu_;
    bool nesterov_;
    cuda_runtime::device_buffer<float> velocity_;
};

/// Adagrad on the device (adagrad_fn, one launch), the accumulator in device memory.
template <int D>
class Adagrad<basic_cuda<D>> {
public:
    using value_type = float;
    using parameter_set = DeviceParameterSet;
    explicit Adagrad(parameter_set& params, AdagradOptions o = {})
        : params_(&params), lr_(detail::checked_rate("Adagrad", "learning_rate", o.learning_rate)),
          l2_(detail::checked_rate("Adagrad", "L2Decay coefficient", o.weight_decay.coeff)),
          eps_(detail::checked_rate("Adagrad", "epsilon", o.epsilon)), moment_(params.values().size()) {
        const std::vector<float> init(moment_.size(), detail::checked_rate("Adagrad", "initial_accumulator_value",
                                                                           o.initial_accumulator_value));
        moment_.copy_from_host(init.data(), init.size());
    }
    void step() {
        kernel<op::fused_update, basic_cuda<D>>::run(adagrad_fn{lr_, l2_, eps_}, params_->values().size(),
                                                     params_->values().data(), params_->grads().data(), moment_.data(),
                                                     nullptr);
    }
    void clear_grad() { params_->clear_grad(); }
    float learning_rate() const { return lr_; }
    void set_learning_rate(float lr) { lr_ = detail::checked_rate("Adagrad", "learning_rate", lr); }
    std::vector<std::pair<std::string, std::span<float>>> state() { return {{"moment", {moment_.data(), moment_.size()}}}; }

private:
    parameter_set* params_;
    float lr_, l2_, eps_;
    cuda_runtime::device_buffer<float> moment_;
};

/// paddle.nn.CrossEntropyLoss on the device: logits in device memory, labels from the host
/// (checked there, then copied) or already on the device (forward_device, checked by the caller).
template <int D>
class CrossEntropyLoss<basic_cuda<D>> {
public:
    using value_type = float;
    using view_type = basic_tensor_view<const float>;
    /// forward() reads logits in device memory (oar::Model pairs it with a GPU network).
    static constexpr bool device_outputs = true;

    explicit CrossEntropyLoss(Reduction reduction = Reduction::mean) : reduction_(reduction) {}

    /// Waits for the GPU and returns the reduced loss.
    float forward(view_type logits, std::span<const std::int64_t> labels) {
        const std::size_t classes = logits.dims().d[logits.dims().rank - 1], rows = logits.size() / classes;
        if (labels.size() != rows)
            throw shape_error(detail::concat("CrossEntropyLoss: ", rows, " rows of logits ", logits.shape_string(),
                                             " but ", labels.size(), " labels"));
        for (std::size_t i = 0; i < rows; ++i)
            if (labels[i] < 0 || static_cast<std::size_t>(labels[i]) >= classes)
                throw value_error(detail::concat("CrossEntropyLoss: label ", labels[i], " at index ", i,
                                                 " is outside [0, ", classes, ")"));
        labels_.reserve_discard(rows);
        OAR_CUDA_CHECK(cudaMemcpyAsync(labels_.data(), labels.data(), rows * sizeof(std::int64_t),
                                       cudaMemcpyHostToDevice, cuda_runtime::compute_stream()));
        forward_device(logits, labels_.data());
        return loss();
    }
    float operator()(view_type logits, std::span<const std::int64_t> labels) { return forward(logits, labels); }

    /// Queues the loss and its gradient without waiting; labels (device) must be in [0, classes).
    void forward_device(view_type logits, const std::int64_t* labels) {
        const std::size_t classes = logits.dims().d[logits.dims().rank - 1];
        rows_ = logits.size() / classes;
        grad_.reserve_discard(logits.size());
        row_losses_.reserve_discard(rows_);
        batch_ = logits.batch();
        dims_ = logits.dims();
        const float scale = reduction_ == Reduction::mean ? 1.0f / static_cast<float>(rows_) : 1.0f;
        kernel<op::softmax_cross_entropy, basic_cuda<D>>::run_async(logits.data(), labels, rows_, classes, scale,
                                                                    row_losses_.data(), grad_.data());
    }
    /// The reduced loss of the last forward (waits for it).
    float loss() const {
        std::vector<double> host(rows_);
        OAR_CUDA_CHECK(cudaMemcpyAsync(host.data(), row_losses_.data(), rows_ * sizeof(double), cudaMemcpyDeviceToHost,
                                       cuda_runtime::compute_stream()));
        OAR_CUDA_CHECK(cudaStreamSynchronize(cuda_runtime::compute_stream()));
        double total = 0.0;
        for (double v : host) total += v;
        return static_cast<float>(reduction_ == Reduction::mean ? total / static_cast<double>(rows_) : total);
    }
    /// d(loss)/d(logits) of the last forward, in device memory.
    view_type backward() const { return {grad_.data(), batch_, dims_}; }

private:
    Reduction reduction_;
    cuda_runtime::device_buffer<float> grad_;
    cuda_runtime::device_buffer<double> row_losses_;
    cuda_runtime::device_buffer<std::int64_t> labels_;
    std::size_t rows_ = 0, batch_ = 0;
    Dims dims_{};
};

/// Host-to-device batch copies overlapped with compute: two pinned host slots and two device
/// slots; stage() copies a batch into pinned memory and queues its upload on a non-blocking copy
/// stream while the compute stream is still busy with the previous batch; take() makes the
/// compute stream wait for that upload and returns the device pointers.
class BatchStager {
public:
    BatchStager(std::size_t max_batch, std::size_t sample_floats)
        : max_batch_(max_batch), sample_(sample_floats) {
        for (int s = 0; s < 2; ++s) {
            host_x_[s] = cuda_runtime::pinned_buffer<float>(max_batch * sample_floats);
            host_y_[s] = cuda_runtime::pinned_buffer<std::int64_t>(max_batch);
            dev_x_[s] = cuda_runtime::device_buffer<float>(max_batch * sample_floats);
            dev_y_[s] = cuda_runtime::device_buffer<std::int64_t>(max_batch);
        }
    }

    /// Queues the upload of n samples into the next slot. The slot's previous batch must have been
    /// used: its upload is waited for, and the copy stream waits for the compute work queued so far.
    void stage(const float* images, const std::int64_t* labels, std::size_t n) {
        if (n == 0 || n > max_batch_)
            throw value_error(detail::concat("BatchStager::stage: batch of ", n, " samples, expected 1..", max_batch_));
        const int s = next_;
        uploaded_[s].synchronize();  // the pinned slot is free again
        std::memcpy(host_x_[s].data(), images, n * sample_ * sizeof(float));
        std::memcpy(host_y_[s].data(), labels, n * sizeof(std::int64_t));
        consumed_[s].record(cuda_runtime::compute_stream());
        consumed_[s].make_wait(copy_.get());  // the device slot is no longer read by earlier steps
        OAR_CUDA_CHECK(cudaMemcpyAsync(dev_x_[s].data(), host_x_[s].data(), n * sample_ * sizeof(float),
                                       cudaMemcpyHostToDevice, copy_.get()));
        OAR_CUDA_CHECK(cudaMemcpyAsync(dev_y_[s].data(), host_y_[s].data(), n * sizeof(std::int64_t),
                                       cudaMemcpyHostToDevice, copy_.get()));
        uploaded_[s].record(copy_.get());
        count_[s] = n;
        next_ = 1 - s;
    }

    struct Batch {
        const float* images;
        const std::int64_t* labels;
        std::size_t count;
    };
    /// The oldest staged batch; compute work queued after this call sees its data.
    Batch take() {
        const int s = take_;
        uploaded_[s].make_wait(cuda_runtime::compute_stream());
        take_ = 1 - s;
        return {dev_x_[s].data(), dev_y_[s].data(), count_[s]};
    }

private:
    std::size_t max_batch_, sample_;
    cuda_runtime::pinned_buffer<float> host_x_[2];
    cuda_runtime::pinned_buffer<std::int64_t> host_y_[2];
    cuda_runtime::device_buffer<float> dev_x_[2];
    cuda_runtime::device_buffer<std::int64_t> dev_y_[2];
    cuda_runtime::Stream copy_;
    cuda_runtime::Event uploaded_[2], consumed_[2];
    std::size_t count_[2] = {0, 0};
    int next_ = 0, take_ = 0;
};

}  // namespace oar
