// train_mnist --device gpu[:N]: the main job's training on the GPU, through the same oar::Model
// (fit with validation, evaluate) as the CPU run, with Network<..., oar::cuda> and
// CrossEntropyLoss<oar::cuda>, and the same callbacks (progress bar or the course's lines, the
// epoch lines, CSV / TensorBoard / SVG curves in --log-dir, the LR schedule, a clean stop on
// SIGINT/SIGTERM, the non-finite guard) and the same output lines, the result line last.
// nvcc-compiled (train_mnist.cpp is g++: simdjson); interface app/gpu_mnist_job.hpp.
// The lines and the callbacks that print them come from app/job_lines.hpp, shared with the CPU run
// (train_mnist.cpp itself cannot be compiled by nvcc: simdjson).
#include "app/gpu_mnist_job.hpp"  // the interface implemented here

#include <oar/cuda.cuh>                     // Network<..., cuda>, SGD/Momentum/Adagrad/Adam<cuda>, CrossEntropyLoss<cuda>
#include <oar/kernels/cuda/runtime.cuh>            // use_device, OAR_CUDA_CHECK
#include <oar/data/dataloader.hpp>         // DataLoader
#include <oar/nn/summary.hpp>              // summary
#include <oar/train/callbacks/diagnostics.hpp>  // TerminateOnNonFinite
#include <oar/train/callbacks/loggers.hpp>      // CSVLogger, TensorBoardLogger, CurvesLogger
#include <oar/train/callbacks/progress.hpp>     // ProgBarLogger
#include <oar/train/callbacks/signals.hpp>      // StopOnSignal
#include <oar/train/model.hpp>                  // Model, Logs, top_k_accuracy

#include <cstdio>       // fileno(stdout)
#include <filesystem>   // std::filesystem::path
#include <limits>       // std::numeric_limits: the largest CUDA device index
#include <memory>       // std::unique_ptr: optional callbacks
#include <string>       // std::string

#include <unistd.h>  // isatty: a progress bar on a terminal, the course's lines elsewhere

#include <oar/models/course.hpp>  // oar::course::CNN, oar::course::MLP, oar::course::Image

#include "app/job_lines.hpp"  // say, CourseLog, EpochLine, Maybe, Schedules: the lines the CPU run prints too

namespace {

using lines::flush_output;
using lines::Maybe;
using lines::say;
using lines::seconds_since;

template <class Net, class D>
int train(const oar::gpu::MnistJob& job, const D& train_set, const D& valid, const D& test, Net& net, auto& opt) {
    const oar::TrainOptions& c = *job.options;
    oar::Model<Net, oar::CrossEntropyLoss<oar::cuda>> model(net);
    model.prepare(opt, oar::CrossEntropyLoss<oar::cuda>{}, {oar::top_k_accuracy()});

    // The CPU run's reader: shuffled every epoch from (seed, epoch), the remainder a last, smaller batch.
    oar::data::DataLoader<D> loader(train_set, {.batch_size = c.batch_size, .shuffle = true, .drop_last = false,
                                                .num_workers = c.workers, .seed = c.seed});
    const oar::FitOptions fit{.epochs = c.epochs, .batch_size = c.batch_size,
                              .log_freq = std::max<std::size_t>(c.log_every, 1), .seed = c.seed,
                              .eval_batch_size = 1000};

    const bool tty = ::isatty(fileno(stdout)) != 0;
    Maybe<oar::ProgBarLogger> bar;
    if (tty) bar.c = std::make_unique<oar::ProgBarLogger>(oar::ProgBarOptions{.log_freq = fit.log_freq});
    lines::CourseLog course{tty ? 0 : c.log_every};
    lines::EpochLine epochs;
    oar::TerminateOnNonFinite guard({.layers = false});  // the loss and the weights (a host copy) after each step
    oar::StopOnSignal stop;

    Maybe<oar::CSVLogger> csv;
    Maybe<oar::TensorBoardLogger> tb;
    Maybe<oar::CurvesLogger> curves;
    if (!c.log_dir.empty()) {
        const std::filesystem::path dir(c.log_dir);
        csv.c = std::make_unique<oar::CSVLogger>(dir / "train.csv");
        tb.c = std::make_unique<oar::TensorBoardLogger>(dir, fit.log_freq);
        curves.c = std::make_unique<oar::CurvesLogger>(dir / "curves.svg", "acc",
                                                       "train_mnist: " + c.model + " on " + job.dataset);
    }

    lines::Schedules sched(c, loader.num_batches());

    model.fit(loader, &valid, fit, guard, bar, course, epochs, sched.step, sched.multi, sched.cosine, sched.plateau, csv, tb, curves,
              stop);
    flush_output();

    if (model.interrupted() && oar::StopOnSignal::received()) {
        const auto& p = model.progress();
        say("stopped by %s after training step %llu (epoch %llu, batch %llu); checkpoints are not supported on the "
            "GPU, nothing saved\n",
            oar::StopOnSignal::name(oar::StopOnSignal::received()), static_cast<unsigned long long>(p.global_step),
            static_cast<unsigned long long>(p.epoch), static_cast<unsigned long long>(p.step_in_epoch));
        flush_output();
        return 0;
    }
    const oar::EvalResult t = model.evaluate(test, 1000);
    say("test: loss %.4f accuracy %.4f (%zu images)\n", t.loss, t.metrics[0].second, test.size());
    say("result: dataset=%s model=%s epochs=%zu test_accuracy=%.4f train_images_per_sec=%.0f seconds=%.1f\n",
        job.dataset.c_str(), c.model.c_str(), c.epochs, t.metrics[0].second,
        epochs.images_per_sec(), seconds_since(job.start));
    flush_output();
    return 0;
}

template <class Seq, class D>
int run_model(const oar::gpu::MnistJob& job, const D& train_set, const D& valid, const D& test) {
    const oar::TrainOptions& c = *job.options;
    using Net = oar::Network<Seq, oar::course::Image, oar::cuda>;
    // The CPU network of the same seed and scheme, copied to the device: both start bitwise equal.
    Net net(c.seed, c.init == "torch" ? oar::init_scheme::torch : oar::init_scheme::paddle);
    say("%s", oar::summary(net).c_str());
    const oar::L2Decay l2(c.l2);
    auto& p = net.parameters();
    if (c.optimizer == "sgd") {
        oar::SGD<oar::cuda> opt(p, {.learning_rate = c.lr, .weight_decay = l2});
        return train(job, train_set, valid, test, net, opt);
    }
    if (c.optimizer == "momentum") {
        oar::Momentum<oar::cuda> opt(p, {.learning_rate = c.lr, .weight_decay = l2});
        return train(job, train_set, valid, test, net, opt);
    }
    if (c.optimizer == "adagrad") {
        oar::Adagrad<oar::cuda> opt(p, {.learning_rate = c.lr, .weight_decay = l2});
        return train(job, train_set, valid, test, net, opt);
    }
    oar::Adam<oar::cuda> opt(p, {.learning_rate = c.lr, .weight_decay = l2});
    return train(job, train_set, valid, test, net, opt);
}

template <class D>
int run(const oar::gpu::MnistJob& job, const D& train_set, const D& valid, const D& test) {
    if (!job.options) throw oar::value_error("train_mnist on the GPU: no options");
    const oar::TrainOptions& c = *job.options;
    if (c.model != "cnn" && c.model != "mlp")
        throw oar::usage_error(oar::detail::concat("--model ", c.model, " --device gpu: the regressors' MSE loss has no "
                                                   "GPU version yet; use --model cnn or mlp on the GPU, or --device cpu"));
    if (!c.checkpoint_dir.empty() || !c.resume.empty())
        throw oar::usage_error("--checkpoint-dir / --resume with --device gpu: checkpoints of a network on the GPU are "
                               "not supported yet; use --device cpu to checkpoint");
    const std::string name = oar::gpu::use_gpu(c.device.index);
    lines::out.log = job.log;
    say("device: gpu:%zu (%s)\n", c.device.index, name.c_str());
    if (c.model == "mlp") return run_model<oar::course::MLP>(job, train_set, valid, test);
    return run_model<oar::course::CNN>(job, train_set, valid, test);
}

}  // namespace

namespace oar::gpu {

std::string use_gpu(std::size_t index) {
    if (index > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw no_device_error(detail::concat("no CUDA device gpu:", index, " (not a CUDA device index)"));
    cuda_runtime::use_device(static_cast<int>(index));
    cudaDeviceProp prop{};
    OAR_CUDA_CHECK(cudaGetDeviceProperties(&prop, static_cast<int>(index)));
    return prop.name;
}

int train_mnist(const MnistJob& job, const data::ByteImageDataset& train, const data::ByteImageDataset& valid,
                const data::ByteImageDataset& test) {
    return run(job, train, valid, test);
}

int train_mnist(const MnistJob& job, const data::InMemoryDataset& train, const data::InMemoryDataset& valid,
                const data::InMemoryDataset& test) {
    return run(job, train, valid, test);
}

}  // namespace oar::gpu
