// train_mnist's training run, written once for both backends: the CPU run (train_mnist.cpp, g++)
// and the GPU run (train_mnist_gpu.cu, nvcc) instantiate the same Model, DataParallel, callbacks,
// checkpoints and lines with Network<..., oar::cpu> and an MPI communicator, or Network<..., oar::cuda>
// and NCCL. Program code (examples/app/, not installed); nvcc-clean (no simdjson).
#pragma once

#include <cstddef>      // std::size_t
#include <filesystem>   // std::filesystem: --resume's paths
#include <memory>       // std::unique_ptr: optional callbacks
#include <optional>     // std::optional: the signal stop
#include <string>       // std::string
#include <type_traits>  // std::conditional_t
#include <utility>      // std::pair

#include <unistd.h>  // isatty: a progress bar on a terminal, the course's lines elsewhere

#include <oar/data/dataloader.hpp>                   // DataLoader, DistributedBatchSampler
#include <oar/dist/data_parallel.hpp>                // DataParallel: gradients averaged across ranks
#include <oar/dist/env.hpp>                          // ParallelEnv
#include <oar/loss/cross_entropy.hpp>                // CrossEntropyLoss
#include <oar/loss/label_mse.hpp>                    // LabelMSELoss: the regressors' loss
#include <oar/metric/rounded_accuracy.hpp>           // RoundedAccuracy: the regressors' accuracy
#include <oar/models/course.hpp>                     // oar::course::Image
#include <oar/nn/network.hpp>                        // Network
#include <oar/nn/summary.hpp>                        // summary
#include <oar/optim/adagrad.hpp>                     // Adagrad
#include <oar/optim/adam.hpp>                        // Adam
#include <oar/optim/momentum.hpp>                    // Momentum
#include <oar/optim/sgd.hpp>                         // SGD
#include <oar/train/callbacks/diagnostics.hpp>       // TerminateOnNonFinite
#include <oar/train/callbacks/loggers.hpp>           // CSVLogger, TensorBoardLogger, VisualDLLogger, CurvesLogger
#include <oar/train/callbacks/model_checkpoint.hpp>  // ModelCheckpoint
#include <oar/train/callbacks/progress.hpp>          // ProgBarLogger
#include <oar/train/callbacks/signals.hpp>           // StopOnSignal
#include <oar/train/checkpoint.hpp>                  // checkpoint_exists
#include <oar/train/model.hpp>                       // Model, Logs

#if OAR_HAS_ONNX
#include <oar/io/onnx.hpp>  // export_onnx: --export-onnx (builds linking oar::onnx)
#endif

#include "job_lines.hpp"      // say, CourseLog, EpochLine, Maybe, Schedules
#include "mnist_splits.hpp"   // Splits
#include "train_options.hpp"  // TrainOptions

namespace mnist_job {

using Config = oar::TrainOptions;
using lines::clock_type;
using lines::flush_output;
using lines::Maybe;
using lines::say;
using lines::seconds_since;

/// What a run needs besides the flags and the data: the dataset's name for the result line, this
/// process's place in the job, and when the program started.
struct Run {
    std::string dataset;
    oar::dist::ParallelEnv env{};
    clock_type::time_point start = clock_type::now();
};

/// The optimizer of a parameter-server trainer (oar::dist::ps::Trainer): its step() pushes the
/// gradients and pulls the parameters, so no allreduce; upload() after a resume, stop() at the end.
template <class O>
concept ParameterServerTrainer = requires(O& o) {
    o.upload();
    o.stop();
};

/// Classifiers score 10 logits with cross-entropy; regressors predict the digit with MSE and count
/// as correct when the rounded prediction equals the label.
template <class Net>
constexpr bool is_classifier = Net::output_shape::size == 10;


/// StopOnSignal's hooks when one is installed (not under MPI).
struct StopHook {
    std::optional<oar::StopOnSignal>* s;
    template <class M>
    void on_train_batch_end(M& m, const oar::Logs& l) {
        if (*s) (*s)->on_train_batch_end(m, l);
    }
    template <class M>
    void on_epoch_begin(M& m, const oar::Logs& l) {
        if (*s) (*s)->on_epoch_begin(m, l);
    }
};

/// --resume: "latest" in --checkpoint-dir, DIR/STEM, or DIR (its latest). Returns (dir, stem).
inline std::pair<std::string, std::string> locate_checkpoint(const Config& c) {
    namespace fs = std::filesystem;
    if (c.resume == "latest") {
        if (!oar::checkpoint_exists(c.checkpoint_dir, "latest"))
            throw oar::io_error(oar::detail::concat("--resume latest: no checkpoint 'latest' in ", c.checkpoint_dir));
        return {c.checkpoint_dir, "latest"};
    }
    const fs::path p(c.resume);
    if (fs::is_directory(p) && oar::checkpoint_exists(p.string(), "latest")) return {p.string(), "latest"};
    std::string stem = p.filename().string();
    for (const std::string suffix : {".state.safetensors", ".safetensors"})
        if (stem.size() > suffix.size() && stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0)
            stem = stem.substr(0, stem.size() - suffix.size());
    const std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
    if (!oar::checkpoint_exists(dir, stem))
        throw oar::io_error(oar::detail::concat("--resume ", c.resume, ": no checkpoint there (expected ", dir, "/",
                                                stem, ".safetensors and ", stem, ".state.safetensors, or a folder "
                                                "with latest.*)"));
    return {dir, stem};
}

template <class Net, class Comm, class D>
int train(const Config& c, const Run& run, const Splits<D>& data, Net& net, auto& opt, Comm& comm) {
    const oar::dist::ParallelEnv& par = run.env;
    const std::string& dataset = run.dataset;
    using Loss = std::conditional_t<is_classifier<Net>, oar::CrossEntropyLoss<typename Net::backend>, oar::LabelMSELoss>;
    oar::Model<Net, Loss> model(net);
    model.prepare(opt, Loss{},
                  {is_classifier<Net> ? oar::top_k_accuracy() : oar::Metric("acc", oar::RoundedAccuracy(0, 9))});
    // Checks that every rank built the same model and starts all from rank 0's weights.
    oar::dist::DataParallel dp(net, comm);
    // Data parallel: each bucket's allreduce starts as soon as backward has finished its layers.
    // (A parameter-server trainer's optimizer exchanges the gradients itself.)
    constexpr bool ps = ParameterServerTrainer<std::remove_cvref_t<decltype(opt)>>;
    if (par.distributed() && !ps) model.set_backward([&dp](typename Net::view_type dy) { dp.backward(dy); });
    const bool writer = dp.is_writer();

    std::string resumed_from;  // "DIR/STEM" when resuming: said once the schedule has its rate
    if (!c.resume.empty()) {
        const auto [dir, stem] = locate_checkpoint(c);
        const oar::TrainingState st = model.load_checkpoint(dir, stem);
        if (st.network_seed != c.seed || st.rng_seed != c.seed)
            throw oar::usage_error(oar::detail::concat("--seed ", c.seed, " differs from the checkpoint's seed ",
                                                       st.network_seed, " (", dir, "/", stem, "): pass --seed ",
                                                       st.network_seed, " to resume it"));
        if constexpr (ps) opt.upload();  // trainer 0's weights and optimizer state to the servers
        else if (par.distributed()) dp.broadcast_parameters();
        resumed_from = dir + "/" + stem;
    }

    // The course's reader: shuffled every epoch (a new order from (seed, epoch)), the remainder
    // kept as a last, smaller batch. Data-parallel: this rank's share of each global batch.
    const auto w = static_cast<std::size_t>(par.world_size);
    oar::data::DataLoader<D> loader =
        par.distributed()
            ? oar::data::DataLoader<D>(data.train,
                                       oar::data::DistributedBatchSampler(data.train.size(), c.batch_size / w, w,
                                                                          static_cast<std::size_t>(par.rank),
                                                                          /*shuffle=*/true, /*drop_last=*/false, c.seed),
                                       oar::data::WorkerOptions{.num_workers = c.workers})
            : oar::data::DataLoader<D>(data.train, {.batch_size = c.batch_size, .shuffle = true, .drop_last = false,
                                                    .num_workers = c.workers, .seed = c.seed});
    // The loader has the batch size, order and workers (fit over a loader refuses them in FitOptions).
    const oar::FitOptions fit{.epochs = c.epochs, .log_freq = std::max<std::size_t>(c.log_every, 1),
                              .seed = c.seed, .eval_batch_size = 1000};

    // Under mpirun a rank's stdout is often a pseudo-terminal of Open MPI's even when mpirun's own
    // output goes to a pipe or a file: data-parallel runs print the course's lines. --log-style
    // course prints them on a terminal too.
    const bool tty = writer && !par.distributed() && c.log_style != "course" && ::isatty(fileno(stdout)) != 0;
    Maybe<oar::ProgBarLogger> bar;
    if (tty) bar.c = std::make_unique<oar::ProgBarLogger>(oar::ProgBarOptions{.log_freq = fit.log_freq});
    lines::CourseLog course{tty ? 0 : c.log_every};
    lines::EpochLine epochs{static_cast<double>(w)};
    // The loss and the weights after every update (cheap); a NaN names the step and the weight's layer.
    oar::TerminateOnNonFinite guard({.layers = false});
    // Under MPI a signal reaches the ranks at different steps, and a rank that stops alone would
    // leave the others waiting in an allreduce: there the default action (the job ends) is kept.
    std::optional<oar::StopOnSignal> stop;
    if (!par.distributed()) stop.emplace();
    StopHook stop_hook{&stop};

    Maybe<oar::CSVLogger> csv;
    Maybe<oar::TensorBoardLogger> tb;
    Maybe<oar::VisualDLLogger> vdl;
    Maybe<oar::CurvesLogger> curves;
    if (writer && !c.log_dir.empty()) {
        const std::filesystem::path dir(c.log_dir);
        csv.c = std::make_unique<oar::CSVLogger>(dir / "train.csv");
        tb.c = std::make_unique<oar::TensorBoardLogger>(dir, fit.log_freq);
        vdl.c = std::make_unique<oar::VisualDLLogger>(dir, fit.log_freq);
        curves.c = std::make_unique<oar::CurvesLogger>(dir / "curves.svg", "acc",
                                                       "train_mnist: " + c.model + " on " + dataset);
    }
    Maybe<oar::ModelCheckpoint> ckpt;
    if (!c.checkpoint_dir.empty())
        ckpt.c = std::make_unique<oar::ModelCheckpoint>(oar::ModelCheckpointOptions{
            .dir = c.checkpoint_dir, .save_freq = 1, .monitor = "eval_acc", .is_writer = writer});

    lines::Schedules sched(c, loader.num_batches());
    if (!resumed_from.empty()) {
        sched.resume(model);  // the rate the next step trains at (fit does the same again: idempotent)
        say("resumed from %s: epoch %zu, step %zu of it, %llu steps in all, lr %g\n", resumed_from.c_str(),
            static_cast<std::size_t>(model.progress().epoch), static_cast<std::size_t>(model.progress().step_in_epoch),
            static_cast<unsigned long long>(model.progress().global_step), static_cast<double>(model.learning_rate()));
    }

    // Every rank validates (the models are the same, only rank 0 prints): a schedule that watches
    // eval_loss (plateau) then steps alike on every rank, and the learning rates never drift apart.
    const D* valid = &data.valid;
    // The schedules step before the checkpoint saves their state; the checkpoint comes last.
    model.fit(loader, valid, fit, guard, bar, course, epochs, sched.step, sched.multi, sched.cosine, sched.plateau, csv, tb, vdl, curves,
              stop_hook, ckpt);
    if constexpr (ps) opt.stop();  // fleet.stop_worker(): every trainer takes the final parameters
    flush_output();

    if (model.interrupted() && stop && oar::StopOnSignal::received()) {
        const auto& p = model.progress();
        say("stopped by %s after training step %llu (epoch %llu, batch %llu); %s\n",
            oar::StopOnSignal::name(oar::StopOnSignal::received()), static_cast<unsigned long long>(p.global_step),
            static_cast<unsigned long long>(p.epoch), static_cast<unsigned long long>(p.step_in_epoch),
            c.checkpoint_dir.empty() ? "no --checkpoint-dir, nothing saved"
                                     : ("checkpoint saved: " + c.checkpoint_dir + "/latest (resume with --resume latest)").c_str());
        flush_output();
        return 0;
    }
    if (!writer) return 0;
    if (!c.export_onnx.empty()) {
#if OAR_HAS_ONNX
        net.eval();
        oar::export_onnx(net, c.export_onnx);
        say("onnx: wrote %s (opset %lld, input (batch, 1, 28, 28))\n", c.export_onnx.c_str(),
            static_cast<long long>(oar::onnx_opset));
#else
        throw oar::usage_error("--export-onnx: this program was built without ONNX export (libonnx-dev)");
#endif
    }
    const oar::EvalResult t = model.evaluate(data.test, 1000);
    say("test: loss %.4f accuracy %.4f (%zu images)\n", t.loss, t.metrics[0].second, data.test.size());
    say("result: dataset=%s model=%s epochs=%zu test_accuracy=%.4f train_images_per_sec=%.0f seconds=%.1f\n",
        dataset.c_str(), c.model.c_str(), c.epochs, t.metrics[0].second,
        epochs.images_per_sec(), seconds_since(run.start));
    flush_output();
    return 0;
}

/// Calls f(opt) with the optimizer --optimizer names over `net` (--lr, --l2), returning f's result.
template <oar::Backend B, class Net, class F>
int with_optimizer(const Config& c, Net& net, F&& f) {
    const oar::L2Decay l2(c.l2);
    auto& p = net.parameters();
    if (c.optimizer == "sgd") {
        oar::SGD<B> opt(p, {.learning_rate = c.lr, .weight_decay = l2});
        return f(opt);
    }
    if (c.optimizer == "momentum") {
        oar::Momentum<B> opt(p, {.learning_rate = c.lr, .weight_decay = l2});
        return f(opt);
    }
    if (c.optimizer == "adagrad") {
        oar::Adagrad<B> opt(p, {.learning_rate = c.lr, .weight_decay = l2});
        return f(opt);
    }
    oar::Adam<B> opt(p, {.learning_rate = c.lr, .weight_decay = l2});
    return f(opt);
}

/// Builds the network of `Seq` on backend B with precision policy P from --seed and --init, prints its summary, and trains
/// it with the optimizer --optimizer names.
template <class Seq, oar::Backend B, class P = oar::fp32, class Comm, class D>
int run_model(const Config& c, const Run& run, const Splits<D>& data, Comm& comm) {
    using Net = oar::Network<Seq, oar::course::Image, B, P>;
    Net net(c.seed, c.init == "torch" ? oar::init_scheme::torch : oar::init_scheme::paddle);
    say("%s", oar::summary(net).c_str());
    return with_optimizer<B>(c, net, [&](auto& opt) { return train(c, run, data, net, opt, comm); });
}

}  // namespace mnist_job
