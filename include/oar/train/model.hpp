// oar::Model<Net, Loss>: paddle.Model (hapi) over a Network, typed. prepare(optimizer, loss,
// metrics) once, then fit / evaluate / predict; callbacks (train/callbacks/) are plain types with
// optional hooks (on_train_begin, on_epoch_begin, on_train_batch_end, on_epoch_end, on_eval_end,
// on_train_end), passed as a pack and called with the model and a Logs struct. The manual loop
// stays possible: Model only drives the same forward, loss, backward, step, clear_grad the course
// writes by hand.
// The same Model drives a network on the GPU (Network<..., oar::cuda>, oar/cuda.cuh,
// compiled by nvcc) with CrossEntropyLoss<oar::cuda>: its outputs stay in device memory for the
// loss and backward and are copied to the host only for metrics and predict(); layer hooks and
// checkpoints are refused there with a value_error. For a CPU network nothing of that is compiled.
#pragma once

#include <algorithm>    // std::copy: predict's rows
#include <chrono>       // std::chrono::steady_clock: step timings
#include <cmath>        // std::exp: predict's probabilities
#include <concepts>     // std::convertible_to
#include <cstddef>      // std::size_t, std::nullptr_t
#include <iostream>     // std::cerr: fit's note on a batch size of 1 over a large set
#include <cstdint>      // std::int64_t, std::uint64_t
#include <functional>   // std::function: the type-erased optimizer and gradient sync
#include <map>          // std::map: a checkpoint's extra state
#include <span>         // std::span: labels
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <type_traits>  // std::remove_cvref_t
#include <typeinfo>     // typeid: optimizer<O>() checks the type it was prepared with
#include <utility>      // std::move, std::forward
#include <vector>       // std::vector

#include "../core/error.hpp"          // value_error
#include "../core/tensor.hpp"         // Tensor, TensorView
#include "../data/dataloader.hpp"     // DataLoader, LoaderOptions
#include "../data/dataset.hpp"        // Dataset
#include "../loss/cross_entropy.hpp"  // CrossEntropyLoss: the default loss
#include "../metric/metric.hpp"       // Metric: the prepared metrics
#include "../nn/network.hpp"          // LayerEvent: layer hooks for guards and diagnostics
#include "../optim/optimizer.hpp"     // Optimizer concept
#include "callbacks/callback.hpp"     // Logs, NamedValue, Callback, detail::cb_*: what callbacks see
#include "checkpoint.hpp"             // save_checkpoint, load_checkpoint, TrainingState

namespace oar {

// ---------------------------------------------------------------------------------------------
// Losses over (output, labels)

namespace detail {
/// A network whose forward returns a view of device memory (Network<..., oar::cuda>) offers a
/// static to_host(view) that copies one back; Model copies outputs only where the host reads them.
template <class Net>
concept device_network = requires(typename Net::view_type v) { Net::to_host(v); };
/// A loss whose forward reads outputs in device memory says so (CrossEntropyLoss<oar::cuda>).
template <class L>
concept device_loss = requires { requires L::device_outputs; };
}  // namespace detail

/// LabelLoss: forward(output, labels) returns the batch loss and keeps d(loss)/d(output) for
/// backward(). CrossEntropyLoss is one; LabelMSELoss (loss/label_mse.hpp) adapts MSELoss to integer labels.
template <class L>
concept LabelLoss = requires(L& l, TensorView out, std::span<const std::int64_t> labels) {
    { l.forward(out, labels) } -> std::convertible_to<float>;
    { l.backward() } -> std::convertible_to<TensorView>;
};

// ---------------------------------------------------------------------------------------------
// What fit takes and returns

/// fit's settings, as paddle.Model.fit's arguments. epochs counts from 0 to epochs - 1 (a resumed
/// model starts at its progress().epoch); eval_freq: validate after every eval_freq-th epoch and
/// after the last; log_freq and verbose are for the loggers.
/// batch_size, shuffle, drop_last and num_workers make the loader of fit(dataset, ...); fit over a
/// ready DataLoader has the loader's own and refuses them (value_error naming the option) when
/// they are not the defaults here, rather than ignoring them. batch_size defaults to 1 as Paddle's
/// Model.fit and PyTorch's DataLoader do; fit(dataset) with batch size 1 over more than
/// `large_set_note` samples and verbose > 0 prints a note on stderr saying so (one step a sample
/// is seldom what was meant).
struct FitOptions {
    static constexpr std::size_t large_set_note = 10000;
    std::size_t epochs = 1;
    std::size_t batch_size = 1;
    bool shuffle = true;
    bool drop_last = false;
    std::size_t num_workers = 0;
    std::size_t log_freq = 10;
    std::size_t eval_freq = 1;
    int verbose = 2;
    std::uint64_t seed = 0;            ///< the shuffle's seed (the order is a function of (seed, epoch))
    std::size_t eval_batch_size = 0;   ///< 0: batch_size with a dataset, 256 (evaluate's) with a loader
};

/// predict(images)'s answer: per sample, the most probable class and every class's probability
/// (the softmax of the network's outputs, as paddle's / torch's argmax(softmax(logits))).
struct Prediction {
    std::vector<std::int64_t> classes;  ///< [N]
    Tensor probabilities;               ///< [N, classes], each row sums to 1
};

/// evaluate()'s answer: the mean loss and each metric over the whole dataset.
struct EvalResult {
    double loss = 0.0;
    std::vector<NamedValue> metrics;
    std::size_t samples = 0;
    double metric(std::string_view name) const {
        for (const auto& [k, v] : metrics)
            if (k == name) return v;
        throw value_error(detail::concat("EvalResult: no metric named '", name, "'"));
    }
};

/// fit's answer: the epoch-end Logs of every epoch fit ran, and whether it stopped early.
struct History {
    std::vector<Logs> epochs;
    bool stopped_early = false;
};

/// Where training stands: the next step is batch `step_in_epoch` of epoch `epoch`;
/// `global_step` training steps were taken in all. Saved in checkpoints, restored for resume.
struct Progress {
    std::uint64_t epoch = 0;
    std::uint64_t step_in_epoch = 0;
    std::uint64_t global_step = 0;
    friend bool operator==(const Progress&, const Progress&) = default;
};

// ---------------------------------------------------------------------------------------------
// The model

/// paddle.Model over a Network. The network is borrowed (it must outlive the model), so the
/// manual loop and the model can take turns on it. prepare() borrows the optimizer too.
namespace detail {
/// prepare's loss argument: `{}` is the default loss (the losses' constructors are explicit, so a
/// plain Loss parameter would turn `prepare(opt, {}, metrics)` into a copy-list-initialisation
/// through an explicit constructor); a Loss converts implicitly.
template <class L>
struct loss_arg {
    L value{};
    loss_arg() = default;
    loss_arg(L l) : value(std::move(l)) {}  // NOLINT(google-explicit-constructor): implicit on purpose
};
/// A dataset seen without its set_epoch: evaluate and predict read a set as it is, without moving
/// its epoch (a dataset whose set_epoch is not const may then be given as const).
template <data::Dataset D>
struct epochless : data::dataset_base<epochless<D>> {
    const D* d;
    explicit epochless(const D& set) : d(&set) {}
    std::size_t size() const { return d->size(); }
    Dims dims() const { return d->dims(); }
    std::int64_t load(std::size_t i, std::span<float> out) const { return d->load(i, out); }
};
}  // namespace detail

template <class Net, LabelLoss Loss = CrossEntropyLoss<typename backend_of<Net>::type>>
class Model {
public:
    using network_type = Net;
    using loss_type = Loss;
    /// A named optimizer state buffer (in the network's backend's memory), as checkpoints save it.
    using state_view = std::pair<std::string, std::span<typename Net::value_type>>;

    static_assert(detail::device_network<Net> == detail::device_loss<Loss>,
                  "oar: Model's network and loss must work on the same side: a GPU network "
                  "(Network<..., oar::cuda>) needs a GPU loss (Model<Net, CrossEntropyLoss<oar::cuda>>), a CPU network a "
                  "CPU loss");

    explicit Model(Net& net) : net_(&net) {}

    /// The optimizer (borrowed: it must outlive the model), the loss and the metrics.
    /// `prepare(opt)`, `prepare(opt, {}, {Accuracy{}})` (the default loss) or `prepare(opt, loss, metrics)`.
    template <Optimizer O>
    void prepare(O& optimizer, detail::loss_arg<Loss> loss = {}, std::vector<Metric> metrics = {}) {
        opt_step_ = [&optimizer] { optimizer.step(); };
        opt_clear_ = [&optimizer] { optimizer.clear_grad(); };
        opt_lr_ = [&optimizer] { return optimizer.learning_rate(); };
        opt_set_lr_ = [&optimizer](float lr) { optimizer.set_learning_rate(lr); };
        optimizer_ = &optimizer;
        // What the checkpoint code needs of the optimizer, type-erased: save_checkpoint and
        // load_checkpoint are then compiled only in a program that saves or loads one.
        opt_state_ = [&optimizer] {
            std::vector<state_view> views;
            for (auto&& [name, buf] : optimizer.state())
                views.emplace_back(std::string(name), std::span<typename Net::value_type>(buf.data(), buf.size()));
            return views;
        };
        if constexpr (requires { optimizer.step_count(); }) {
            opt_steps_ = [&optimizer] { return static_cast<std::uint64_t>(optimizer.step_count()); };
            opt_set_steps_ = [&optimizer](std::uint64_t t) { optimizer.set_step_count(t); };
        } else {
            opt_steps_ = nullptr;
            opt_set_steps_ = nullptr;
        }
        optimizer_type_ = &typeid(O);
        loss_ = std::move(loss.value);
        metrics_ = std::move(metrics);
        for (std::size_t i = 0; i < metrics_.size(); ++i)
            for (std::size_t j = 0; j < i; ++j)
                if (metrics_[i].name() == metrics_[j].name())
                    throw value_error(detail::concat("Model::prepare: two metrics are named '", metrics_[i].name(), "'"));
        prepared_ = true;
    }

    Net& network() { return *net_; }
    const Net& network() const { return *net_; }
    Loss& loss() { return loss_; }
    const std::vector<Metric>& metrics() const { return metrics_; }
    /// The prepared optimizer as its own type (the caller names it, as it built it).
    template <Optimizer O>
    O& optimizer() {
        check_prepared("optimizer");
        if (*optimizer_type_ != typeid(O))
            throw value_error(detail::concat("Model::optimizer<", typeid(O).name(), ">: the model was prepared with a ",
                                             optimizer_type_->name()));
        return *static_cast<O*>(optimizer_);
    }
    float learning_rate() const {
        check_prepared("learning_rate");
        return opt_lr_();
    }
    void set_learning_rate(float lr) {
        check_prepared("set_learning_rate");
        opt_set_lr_(lr);
    }

    void train() { net_->train(); }
    void eval() { net_->eval(); }

    /// Called after each backward, before the optimizer's step: e.g. DataParallel::sync_gradients.
    void set_gradient_sync(std::function<void()> sync) { sync_ = std::move(sync); }
    /// Called instead of the network's backward(dy) in a training step without layer hooks: e.g.
    /// DataParallel::backward, which overlaps the gradients' allreduce with backward itself.
    void set_backward(std::function<void(typename Net::view_type)> backward) { backward_ = std::move(backward); }

    /// Layer hooks: called after each layer of every training forward / backward (either may be
    /// empty), for guards and diagnostics. Hooks added while fit runs are removed when it ends
    /// (they usually point into a callback). Without hooks, train_batch calls the plain passes.
    void add_layer_hook(std::function<void(const LayerEvent&)> on_forward,
                        std::function<void(const LayerEvent&)> on_backward = {}) {
        hooks_.push_back({std::move(on_forward), std::move(on_backward)});
    }
    std::size_t num_layer_hooks() const { return hooks_.size(); }

    /// A callback (or a signal handler's poll) asks fit to end after the current step.
    void stop_training(bool stop = true) { stop_ = stop; }
    bool stop_requested() const { return stop_; }
    /// The last fit ended before its last epoch (a callback or a signal stopped it).
    bool interrupted() const { return interrupted_; }

    /// Where the next fit starts; a resumed model sets it from its checkpoint.
    const Progress& progress() const { return progress_; }
    void set_progress(const Progress& p) { progress_ = p; }

    /// Key/value state that callbacks keep in checkpoints (an LR schedule's, "lr_schedule.*");
    /// load_checkpoint fills it back for them to read when training begins.
    std::map<std::string, std::string>& checkpoint_extra() { return extra_; }
    const std::map<std::string, std::string>& checkpoint_extra() const { return extra_; }

    /// Saves weights, optimizer state, progress, the shuffle seed of the last fit and
    /// checkpoint_extra() as <dir>/<stem>.safetensors + <dir>/<stem>.state.safetensors.
    void save_checkpoint(const std::string& dir, const std::string& stem) const {
        check_prepared("save_checkpoint");
        TrainingState st;
        st.epoch = progress_.epoch;
        st.global_step = progress_.global_step;
        st.rng_seed = seed_;
        st.sampler_epoch = progress_.epoch;
        st.extra = extra_;
        st.extra["train.step_in_epoch"] = std::to_string(progress_.step_in_epoch);
        checkpoint_optimizer opt{this};
        oar::save_checkpoint(dir, stem, *net_, opt, st);
    }
    /// Loads what save_checkpoint wrote (all or nothing) into the network and the optimizer, sets
    /// progress() and checkpoint_extra(), and returns the state (the caller checks the seeds).
    TrainingState load_checkpoint(const std::string& dir, const std::string& stem) {
        check_prepared("load_checkpoint");
        checkpoint_optimizer opt{this};
        TrainingState st = oar::load_checkpoint(dir, stem, *net_, opt);
        Progress p{st.epoch, 0, st.global_step};
        if (auto it = st.extra.find("train.step_in_epoch"); it != st.extra.end()) {
            std::size_t pos = 0;
            try {
                p.step_in_epoch = std::stoull(it->second, &pos);
            } catch (const std::exception&) {
                pos = 0;
            }
            if (pos == 0 || pos != it->second.size())
                throw format_error(detail::concat(checkpoint_state_path(dir, stem), ": train.step_in_epoch is '",
                                                  it->second, "', not a number"));
            st.extra.erase(it);
        }
        progress_ = p;
        extra_ = st.extra;
        return st;
    }

    /// One training step on a batch: forward, loss, backward, gradient sync, step, clear_grad.
    /// Returns the loss; updates the running metrics.
    float train_batch(TensorView images, std::span<const std::int64_t> labels) {
        check_prepared("train_batch");
        if constexpr (detail::device_network<Net>) {  // no observer passes on the GPU network
            if (!hooks_.empty())
                throw value_error(detail::concat("Model::train_batch: ", hooks_.size(),
                                                 " layer hook(s) (TerminateOnNonFinite with layers on, Diagnostics, "
                                                 "add_layer_hook) but the network is on the GPU, which has no layer "
                                                 "hooks yet"));
            auto out = net_->forward(images);
            const float l = static_cast<float>(loss_.forward(out, labels));
            update_metrics(metrics_, out, labels);
            backward(loss_.backward());
            return finish_step(l);
        } else {
            auto out = hooks_.empty() ? net_->forward(images) : net_->forward(images, HookCaller{&hooks_});
            const float l = static_cast<float>(loss_.forward(out, labels));
            update_metrics(metrics_, out, labels);
            if (hooks_.empty()) backward(loss_.backward());
            else net_->backward(loss_.backward(), HookCaller{&hooks_});
            return finish_step(l);
        }
    }

    /// Trains from progress().epoch to opts.epochs - 1 on `train`, validating on `valid` (if not
    /// null) every eval_freq epochs; each callback sees every event. Returns the History.
    /// `fit(train)`, `fit(train, opts, callbacks...)` and `fit(train, nullptr, opts, ...)` train
    /// without validation. The epoch reaches a dataset with set_epoch (random transforms).
    template <class DS, data::Dataset V, class... Cbs>
        requires data::Dataset<std::remove_cvref_t<DS>>
    History fit(DS&& train, const V* valid, FitOptions opts, Cbs&&... cbs) {
        using D = std::remove_cvref_t<DS>;
        // Borrowed for fit's duration; non-const when given so, so a non-const set_epoch is reached.
        data::DataLoader<D> loader(train, {.batch_size = opts.batch_size,
                                           .shuffle = opts.shuffle,
                                           .drop_last = opts.drop_last,
                                           .num_workers = opts.num_workers,
                                           .seed = opts.seed});
        if (opts.batch_size == 1 && opts.verbose > 0 && loader.dataset().size() > FitOptions::large_set_note)
            std::cerr << "oar: Model::fit: batch_size is 1 (the default, as Paddle's): " << loader.dataset().size()
                      << " steps an epoch; set FitOptions::batch_size (e.g. 64) for batches\n";
        return fit_impl(loader, valid, opts, opts.eval_batch_size ? opts.eval_batch_size : opts.batch_size,
                        std::forward<Cbs>(cbs)...);
    }
    template <class DS, class... Cbs>
        requires data::Dataset<std::remove_cvref_t<DS>>
    History fit(DS&& train, std::nullptr_t, FitOptions opts = {}, Cbs&&... cbs) {
        return fit(std::forward<DS>(train), static_cast<const std::remove_cvref_t<DS>*>(nullptr), opts,
                   std::forward<Cbs>(cbs)...);
    }
    template <class DS, class... Cbs>
        requires data::Dataset<std::remove_cvref_t<DS>>
    History fit(DS&& train, FitOptions opts = {}, Cbs&&... cbs) {
        return fit(std::forward<DS>(train), static_cast<const std::remove_cvref_t<DS>*>(nullptr), opts,
                   std::forward<Cbs>(cbs)...);
    }
    /// The same over a ready loader (e.g. with a DistributedBatchSampler): its batches, order and
    /// workers are the loader's own, so opts' batch_size, shuffle, drop_last and num_workers must
    /// stay at their defaults (value_error naming the first that does not). Validation batches
    /// are eval_batch_size, else 256.
    template <data::Dataset D, data::Dataset V, class... Cbs>
    History fit(data::DataLoader<D>& loader, const V* valid, FitOptions opts, Cbs&&... cbs) {
        check_loader_options(opts);
        return fit_impl(loader, valid, opts, opts.eval_batch_size ? opts.eval_batch_size : 256,
                        std::forward<Cbs>(cbs)...);
    }
    template <data::Dataset D, class... Cbs>
    History fit(data::DataLoader<D>& loader, std::nullptr_t, FitOptions opts = {}, Cbs&&... cbs) {
        return fit(loader, static_cast<const D*>(nullptr), opts, std::forward<Cbs>(cbs)...);
    }
    template <data::Dataset D, class... Cbs>
    History fit(data::DataLoader<D>& loader, FitOptions opts = {}, Cbs&&... cbs) {
        return fit(loader, static_cast<const D*>(nullptr), opts, std::forward<Cbs>(cbs)...);
    }

private:
    /// FitOptions a ready loader would make fit ignore: refused unless at their defaults.
    static void check_loader_options(const FitOptions& o) {
        const FitOptions d{};
        const char* bad = o.batch_size != d.batch_size     ? "batch_size"
                          : o.shuffle != d.shuffle         ? "shuffle"
                          : o.drop_last != d.drop_last     ? "drop_last"
                          : o.num_workers != d.num_workers ? "num_workers"
                                                           : nullptr;
        if (bad)
            throw value_error(detail::concat("Model::fit: FitOptions::", bad,
                                             " is set, but fit over a DataLoader uses the loader's batches, order "
                                             "and workers; give it in the loader's options (LoaderOptions) and leave "
                                             "FitOptions::", bad, " at its default"));
    }

    template <data::Dataset D, data::Dataset V, class... Cbs>
    History fit_impl(data::DataLoader<D>& loader, const V* valid, FitOptions opts, std::size_t eval_batch,
                     Cbs&&... cbs) {
        static_assert((Callback<std::remove_cvref_t<Cbs>, Model> && ...),
                      "oar: each of fit's callbacks needs at least one hook: on_train_begin, on_epoch_begin, "
                      "on_train_batch_end, on_epoch_end, on_eval_end or on_train_end, taking (model, logs) or (logs)");
        check_prepared("fit");
        seed_ = opts.seed;
        if (opts.eval_freq == 0) throw value_error("Model::fit: eval_freq must be at least 1");
        struct HookScope {  // hooks added during fit end with it, also when it throws
            std::vector<Hook>* hooks;
            std::size_t before;
            ~HookScope() { hooks->resize(before); }
        } hook_scope{&hooks_, hooks_.size()};
        using clock = std::chrono::steady_clock;
        History history;
        stop_ = false;
        interrupted_ = false;
        Logs logs;
        logs.epochs = opts.epochs;
        logs.steps = loader.num_batches();
        logs.global_step = progress_.global_step;
        logs.epoch = progress_.epoch;
        logs.lr = opt_lr_();
        // What the epochs will log, so callbacks check their monitors before anything trains.
        logs.will_log = {"loss", "lr"};
        for (const auto& m : metrics_) logs.will_log.push_back(m.name());
        if (valid) {
            logs.will_log.push_back("eval_loss");
            for (const auto& m : metrics_) logs.will_log.push_back("eval_" + m.name());
        }
        (detail::cb_train_begin(cbs, *this, logs), ...);
        for (std::size_t epoch = progress_.epoch; epoch < opts.epochs && !stop_; ++epoch) {
            logs = Logs{};
            logs.epoch = epoch;
            logs.epochs = opts.epochs;
            logs.steps = loader.num_batches();
            logs.global_step = progress_.global_step;
            logs.lr = opt_lr_();
            for (auto& m : metrics_) m.reset();
            net_->train();
            (detail::cb_epoch_begin(cbs, *this, logs), ...);
            double loss_sum = 0.0;
            const std::size_t skip = progress_.step_in_epoch;  // batches a resumed epoch already did
            for (auto&& b : loader.epoch(epoch)) {
                if (b.index < skip) continue;  // the same order, (seed, epoch): those were trained
                const auto t0 = clock::now();
                const float l = train_batch(b.images, b.labels);
                logs.step_seconds += std::chrono::duration<double>(clock::now() - t0).count();
                const std::size_t n = b.labels.size();
                loss_sum += static_cast<double>(l) * static_cast<double>(n);
                logs.step = b.index + 1;
                logs.samples += n;
                logs.batch_size = n;
                logs.loss = l;
                logs.global_step = ++progress_.global_step;
                progress_.step_in_epoch = b.index + 1;
                logs.ms_per_step = 1000.0 * logs.step_seconds / static_cast<double>(logs.step - skip);
                logs.lr = opt_lr_();
                fill_metrics(logs.metrics);
                (detail::cb_batch_end(cbs, *this, logs), ...);
                if (stop_) break;
            }
            const bool finished = progress_.step_in_epoch >= loader.num_batches();
            if (!finished) {  // stopped inside the epoch: progress says where to go on
                interrupted_ = true;
                break;
            }
            progress_.epoch = epoch + 1;
            progress_.step_in_epoch = 0;
            logs.loss = logs.samples ? loss_sum / static_cast<double>(logs.samples) : 0.0;
            if (valid && ((epoch + 1) % opts.eval_freq == 0 || epoch + 1 == opts.epochs)) {
                const EvalResult r = evaluate_impl(*valid, eval_batch, epoch, cbs...);
                logs.has_eval = true;
                logs.eval_loss = r.loss;
                logs.eval_metrics = r.metrics;
                logs.eval_samples = r.samples;
                net_->train();
            }
            logs.lr = opt_lr_();
            (detail::cb_epoch_end(cbs, *this, logs), ...);
            history.epochs.push_back(logs);
            if (stop_ && epoch + 1 < opts.epochs) interrupted_ = true;
        }
        history.stopped_early = interrupted_;
        (detail::cb_train_end(cbs, *this, logs), ...);
        return history;
    }

public:
    /// Mean loss and metrics over `set` in eval mode (dropout off), batches of batch_size. The
    /// set's epoch (a TransformDataset's) is left as it is.
    template <data::Dataset D>
    EvalResult evaluate(const D& set, std::size_t batch_size = 256) {
        check_prepared("evaluate");
        const bool was_training = net_->training();
        EvalResult r = evaluate_impl(set, batch_size, progress_.epoch);
        if (was_training) net_->train();
        return r;
    }

    /// The network's outputs (logits) for every sample of `set`, in order, in eval mode: [N, out
    /// dims], as paddle.Model.predict. predict(images) gives classes and probabilities.
    template <data::Dataset D>
    Tensor predict(const D& set, std::size_t batch_size = 256) {
        const bool was_training = net_->training();
        net_->eval();
        const detail::epochless<D> view(set);
        data::DataLoader<detail::epochless<D>> loader(view, {.batch_size = batch_size});
        const Dims od = Net::output_shape::dims;
        Tensor out(set.size(), od);
        std::size_t row = 0;
        for (auto&& b : loader.epoch(0)) {
            auto y = net_->forward(b.images);
            if constexpr (detail::device_network<Net>) {
                const auto host = Net::to_host(y);
                std::copy(host.begin(), host.end(), out.data() + row * od.size());
            } else {
                std::copy(y.data(), y.data() + y.size(), out.data() + row * od.size());
            }
            row += b.labels.size();
        }
        if (was_training) net_->train();
        return out;
    }

    /// The classes and probabilities of a batch of images [N, input dims] (no labels needed), in
    /// eval mode, `batch_size` samples per forward: e.g. predict(test_images).classes.
    Prediction predict(TensorView images, std::size_t batch_size = 256) {
        const Dims in = Net::input_shape::dims;
        if (images.dims() != in)
            throw shape_error(detail::concat("Model::predict: images are ", to_string(images.dims()),
                                             " per sample, the network takes ", to_string(in)));
        if (batch_size == 0) throw value_error("Model::predict: batch_size must be positive, got 0");
        const bool was_training = net_->training();
        net_->eval();
        const std::size_t n = images.batch(), classes = Net::output_shape::dims.size();
        Prediction p;
        p.classes.resize(n);
        p.probabilities.resize(n, make_dims(classes));
        for (std::size_t first = 0; first < n; first += batch_size) {
            const std::size_t count = std::min(batch_size, n - first);
            const TensorView chunk(images.data() + first * in.size(), count, in);
            auto y = net_->forward(chunk);
            std::vector<float> host;
            const float* out = nullptr;
            if constexpr (detail::device_network<Net>) {
                const auto h = Net::to_host(y);
                host.assign(h.begin(), h.end());
                out = host.data();
            } else {
                out = y.data();
            }
            for (std::size_t r = 0; r < count; ++r) softmax_row(out + r * classes, classes, first + r, p);
        }
        if (was_training) net_->train();
        return p;
    }

private:
    /// Row `row` of predict's answer from one sample's logits: softmax in double, argmax (the
    /// first of equal maxima, as argmax does).
    static void softmax_row(const float* logits, std::size_t classes, std::size_t row, Prediction& p) {
        std::size_t best = 0;
        for (std::size_t c = 1; c < classes; ++c)
            if (logits[c] > logits[best]) best = c;
        double sum = 0.0;
        float* prob = p.probabilities.data() + row * classes;
        for (std::size_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(logits[c]) - logits[best]);
        for (std::size_t c = 0; c < classes; ++c)
            prob[c] = static_cast<float>(std::exp(static_cast<double>(logits[c]) - logits[best]) / sum);
        p.classes[row] = static_cast<std::int64_t>(best);
    }

    struct Hook {
        std::function<void(const LayerEvent&)> forward, backward;
    };
    struct HookCaller {
        std::vector<Hook>* hooks;
        void on_forward(const LayerEvent& e) {
            for (auto& h : *hooks)
                if (h.forward) h.forward(e);
        }
        void on_backward(const LayerEvent& e) {
            for (auto& h : *hooks)
                if (h.backward) h.backward(e);
        }
    };

    /// The network's backward, or the one set_backward installed.
    void backward(typename Net::view_type dy) {
        if (backward_) backward_(dy);
        else net_->backward(dy);
    }

    /// The end of a training step: gradient sync, the optimizer's step, clear_grad.
    float finish_step(float l) {
        if (sync_) sync_();
        opt_step_();
        opt_clear_();
        return l;
    }

    void check_prepared(const char* what) const {
        if (!prepared_)
            throw value_error(detail::concat("Model::", what, ": call prepare(optimizer, loss, metrics) first"));
    }

    /// Adds a batch to the metrics; a GPU network's outputs are copied to the host first (only
    /// when there is a metric to read them).
    static void update_metrics(std::vector<Metric>& ms, TensorView out, std::span<const std::int64_t> labels) {
        if constexpr (detail::device_network<Net>) {
            if (ms.empty()) return;
            const auto host = Net::to_host(out);
            const TensorView h(host.data(), out.batch(), out.dims());
            for (auto& m : ms) m.update(h, labels);
        } else {
            for (auto& m : ms) m.update(out, labels);
        }
    }

    void fill_metrics(std::vector<NamedValue>& out) const {
        out.clear();
        for (const auto& m : metrics_) out.emplace_back(m.name(), m.accumulate());
    }

    template <data::Dataset D, class... Cbs>
    EvalResult evaluate_impl(const D& set, std::size_t batch_size, std::size_t epoch, Cbs&... cbs) {
        net_->eval();
        std::vector<Metric> ms = metrics_;  // the training epoch's running metrics stay as they are
        for (auto& m : ms) m.reset();
        const detail::epochless<D> view(set);
        data::DataLoader<detail::epochless<D>> loader(view, {.batch_size = batch_size});
        double loss_sum = 0.0;
        std::size_t n = 0;
        for (auto&& b : loader.epoch(0)) {
            auto out = net_->forward(b.images);
            loss_sum += static_cast<double>(loss_.forward(out, b.labels)) * static_cast<double>(b.labels.size());
            update_metrics(ms, out, b.labels);
            n += b.labels.size();
        }
        EvalResult r;
        r.loss = n ? loss_sum / static_cast<double>(n) : 0.0;
        r.samples = n;
        for (const auto& m : ms) r.metrics.emplace_back(m.name(), m.accumulate());
        Logs logs;
        logs.mode = "eval";
        logs.epoch = epoch;
        logs.step = logs.steps = loader.num_batches();
        logs.samples = n;
        logs.loss = r.loss;
        logs.metrics = r.metrics;
        logs.global_step = progress_.global_step;
        (detail::cb_eval_end(cbs, *this, logs), ...);
        return r;
    }

    /// The prepared optimizer as save_checkpoint / load_checkpoint see it (through the functions
    /// prepare stored): its state buffers, rate and, when it counts them, steps.
    struct checkpoint_optimizer {
        using backend = typename backend_of<Net>::type;
        using value_type = typename Net::value_type;
        const Model* m;  // (its std::function members are callable through a const model)
        void step() { m->opt_step_(); }
        void clear_grad() { m->opt_clear_(); }
        float learning_rate() const { return m->opt_lr_(); }
        void set_learning_rate(float lr) { m->opt_set_lr_(lr); }
        std::vector<state_view> state() { return m->opt_state_(); }
        bool counts_steps() const { return static_cast<bool>(m->opt_steps_); }
        std::uint64_t step_count() const { return m->opt_steps_(); }
        void set_step_count(std::uint64_t t) { m->opt_set_steps_(t); }
    };

    Net* net_;
    Loss loss_{};
    std::vector<Metric> metrics_;
    void* optimizer_ = nullptr;
    const std::type_info* optimizer_type_ = nullptr;
    std::function<void()> opt_step_, opt_clear_;
    std::function<float()> opt_lr_;
    std::function<void(float)> opt_set_lr_;
    std::function<void()> sync_;
    std::function<void(typename Net::view_type)> backward_;
    std::vector<Hook> hooks_;
    std::function<std::vector<state_view>()> opt_state_;
    std::function<std::uint64_t()> opt_steps_;           // empty: the optimizer counts no steps
    std::function<void(std::uint64_t)> opt_set_steps_;
    std::map<std::string, std::string> extra_;
    std::uint64_t seed_ = 0;
    Progress progress_{};
    bool prepared_ = false;
    bool stop_ = false;
    bool interrupted_ = false;
};

}  // namespace oar
