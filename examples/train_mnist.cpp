// train_mnist: oar's main job and front door. Trains one of the course's models on MNIST-layout
// IDX data (or the course's mnist.json.gz) with oar::Model: validation every epoch, a progress bar
// on a terminal (the course's log line every --log-every steps otherwise), CSV + TensorBoard +
// SVG curves in --log-dir, checkpoints in --checkpoint-dir, --resume, an LR schedule, and a clean
// stop on SIGINT/SIGTERM (checkpoint saved). Tests at the end and prints one result line.
// Started by mpirun (or scripts/oar-launch) in a build with MPI, it trains data-parallel: the
// global --batch-size is split across the ranks, gradients are averaged, and rank 0 alone prints.
#include <algorithm>   // std::min
#include <chrono>      // std::chrono::steady_clock
#include <csignal>     // SIGINT, SIGTERM
#include <cstdio>      // std::fprintf, std::fopen, std::fclose
#include <cstdlib>     // std::getenv
#include <filesystem>  // std::filesystem
#include <memory>      // std::unique_ptr: optional callbacks
#include <optional>    // std::optional
#include <string>      // std::string
#include <utility>     // std::move
#include <vector>      // std::vector

#include <unistd.h>  // isatty: a progress bar on a terminal, the course's lines elsewhere

#include <oar/data/mnist_json.hpp>                 // the course's mnist.json.gz (simdjson: a .cpp-only header)
#include <oar/dist/data_parallel.hpp>              // DataParallel: gradients averaged across ranks
#include <oar/dist/env.hpp>                        // init_parallel_env: alone, or under mpirun
#include <oar/loss/label_mse.hpp>                  // LabelMSELoss: the regressors' loss
#include <oar/metric/rounded_accuracy.hpp>         // RoundedAccuracy: the regressors' accuracy
#include <oar/models/course.hpp>                   // oar::course::CNN, ...
#include <oar/oar.hpp>                             // the library
#include <oar/train/callbacks/diagnostics.hpp>      // TerminateOnNonFinite
#include <oar/train/callbacks/loggers.hpp>          // CSVLogger, TensorBoardLogger, CurvesLogger
#include <oar/train/callbacks/model_checkpoint.hpp> // ModelCheckpoint
#include <oar/train/callbacks/progress.hpp>         // ProgBarLogger
#include <oar/train/callbacks/signals.hpp>          // StopOnSignal
#include <oar/train/model.hpp>                     // Model, Logs

#include "app/job_lines.hpp"      // say, CourseLog, EpochLine, Maybe, Schedules: the lines the CPU and GPU runs print
#include "app/train_options.hpp"  // TrainOptions, parse_train_options

#if OAR_HAS_GPU_TRAIN
#include "app/gpu_mnist_job.hpp"  // oar::gpu::train_mnist: --device gpu (nvcc-compiled, examples/train_mnist_gpu.cu)
#endif

namespace {

using Config = oar::TrainOptions;

using lines::say;
using lines::flush_output;
using lines::out;
using lines::clock_type;
using lines::seconds_since;
using lines::Maybe;

constexpr const char* usage = R"(usage: train_mnist [options]
Trains one of PaddlePaddle's MNIST-course models with oar and prints a result line.

  --data PATH          folder with the four MNIST IDX files (.gz or raw), or the course's
                       mnist.json.gz (train / valid / eval splits); default: $OAR_DATA,
                       else data/mnist in the checkout, else Debian's Fashion-MNIST
                       (/usr/share/datasets/fashion-mnist)
  --model NAME         linear | sigmoid-mlp | mlp | cnn            (default cnn)
  --epochs N           passes over the 50,000 training images       (default 5)
  --batch-size N       images per step                              (default 100)
  --optimizer NAME     sgd | momentum | adagrad | adam               (default adam)
  --lr X               learning rate                                (default 0.001)
  --l2 X               L2Decay coefficient                          (default 1e-5)
  --lr-schedule S      none | step:SIZE[:GAMMA] | multistep[:E1,E2,...[:GAMMA]] |
                       cosine[:T_MAX] | plateau[:PATIENCE[:FACTOR]]  (default multistep:
                       x0.1 for the last fifth of --epochs, from epoch 4 of 5; 1 or 2
                       epochs stay constant; none: the course's constant rate throughout)
  --lr-step-per W      epoch | batch: when the schedule steps (default epoch); with batch,
                       SIZE, E1,... and T_MAX count batches, T_MAX's default being every
                       batch of the run and multistep's milestone four fifths of them
                       (Paddle's LRScheduler(by_step=True))
  --seed N             seed of initialisation, shuffling and dropout (default 0)
  --init NAME          torch | paddle: whose default initialisation  (default torch:
                       U(+-1/sqrt(fan_in)) weights and biases; paddle: Normal conv
                       weights, XavierUniform Linear weights, zero biases)
  --workers N          DataLoader worker threads, 0 = load in the training thread (default 0)
  --device D           cpu | gpu | gpu:N                            (default cpu; gpu: a build
                       with CUDA, models cnn and mlp, no checkpoints)
  --checkpoint-dir DIR save DIR/latest after every epoch (and when stopped by a signal),
                       DIR/epoch_<n> and DIR/best (by validation accuracy), as safetensors
  --resume CKPT        continue from a checkpoint: "latest" (in --checkpoint-dir), DIR/STEM,
                       or DIR (its latest); same model, optimizer and seed
  --log-every N        not on a terminal: the course's line every N batches, 0 = never
                       (default 200); on a terminal a progress bar instead
  --log-dir DIR        write DIR/curves.svg, DIR/train.csv and a TensorBoard event file, and
                       this process's lines to DIR/workerlog.<rank>
                       (default: $OAR_LOG_DIR, which oar-launch --log_dir sets)
  --help               this text

The last line is: result: dataset=... model=... epochs=... test_accuracy=...
train_images_per_sec=... seconds=...  (images/s of the training steps alone: forward, loss,
backward and update; neither data loading nor evaluation).
Bad flags or unreadable data print the reason and exit with status 2. SIGINT or SIGTERM
(Ctrl-C) finishes the current step, saves DIR/latest when --checkpoint-dir is set, and exits
with status 0 without testing; a second signal ends the program at once.

Under `mpirun -np N` (or scripts/oar-launch) in a build with MPI, N processes train one model
data-parallel: each takes --batch-size / N images per step (DistributedBatchSampler, shuffled by
--seed), gradients are averaged across them, and only rank 0 prints and saves.
)";

/// --data, else $OAR_DATA, else data/mnist in the checkout (or the working directory), else
/// Debian's Fashion-MNIST. Returns the folder and the dataset's name.
std::pair<std::string, std::string> locate_data(const Config& c) {
    namespace fs = std::filesystem;
    auto name_of = [](const std::string& dir) {
        std::string lower = fs::weakly_canonical(fs::path(dir)).string();
        for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        return lower.find("fashion") != std::string::npos ? std::string("fashion-mnist") : std::string("mnist");
    };
    auto checked = [&](const std::string& path, const char* source) {
        if (!fs::exists(path)) throw oar::io_error(oar::detail::concat(path, " (", source, "): no such file or folder"));
        if (!fs::is_directory(path) && !fs::is_regular_file(path))
            throw oar::io_error(oar::detail::concat(path, " (", source,
                                                    "): expected a folder of MNIST IDX files or a .json.gz file"));
        return std::pair{path, name_of(path)};
    };
    if (!c.data.empty()) return checked(c.data, "--data");
    if (const char* env = std::getenv("OAR_DATA"); env && *env) return checked(env, "$OAR_DATA");
    for (const std::string& dir : {std::string(OAR_SOURCE_DIR) + "/data/mnist", std::string("data/mnist")})
        if (oar::data::is_mnist_dir(dir)) return {dir, "mnist"};
    const std::string fashion = "/usr/share/datasets/fashion-mnist";
    if (oar::data::is_mnist_dir(fashion)) return {fashion, "fashion-mnist"};
    throw oar::io_error("no data: pass --data DIR, set OAR_DATA, run scripts/setup.sh (fills data/mnist), or "
                        "install Debian's dataset-fashion-mnist");
}

/// Classifiers score 10 logits with cross-entropy; regressors predict the digit with MSE and count
/// as correct when the rounded prediction equals the label.
template <class Net>
constexpr bool is_classifier = Net::output_shape::size == 10;

/// The three splits as datasets: IDX bytes scaled on load to [-1, 1] (the course's normalisation),
/// or the course's json.gz, already normalised in the file.
template <oar::data::Dataset D>
struct Splits {
    D train, valid, test;
};

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
std::pair<std::string, std::string> locate_checkpoint(const Config& c) {
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

template <class Net, class D>
int train(const Config& c, const std::string& dataset, const Splits<D>& data, Net& net, auto& opt,
          oar::dist::ParallelContext& par, clock_type::time_point start) {
    using Loss = std::conditional_t<is_classifier<Net>, oar::CrossEntropyLoss<>, oar::LabelMSELoss>;
    oar::Model<Net, Loss> model(net);
    model.prepare(opt, Loss{},
                  {is_classifier<Net> ? oar::top_k_accuracy() : oar::Metric("acc", oar::RoundedAccuracy(0, 9))});
    // Checks that every rank built the same model and starts all from rank 0's weights.
    oar::dist::DataParallel dp(net, par.comm());
    if (par.distributed()) model.set_gradient_sync([&dp] { dp.sync_gradients(); });
    const bool writer = dp.is_writer();

    std::string resumed_from;  // "DIR/STEM" when resuming: said once the schedule has its rate
    if (!c.resume.empty()) {
        const auto [dir, stem] = locate_checkpoint(c);
        const oar::TrainingState st = model.load_checkpoint(dir, stem);
        if (st.network_seed != c.seed || st.rng_seed != c.seed)
            throw oar::usage_error(oar::detail::concat("--seed ", c.seed, " differs from the checkpoint's seed ",
                                                       st.network_seed, " (", dir, "/", stem, "): pass --seed ",
                                                       st.network_seed, " to resume it"));
        if (par.distributed()) dp.broadcast_parameters();
        resumed_from = dir + "/" + stem;
    }

    // The course's reader: shuffled every epoch (a new order from (seed, epoch)), the remainder
    // kept as a last, smaller batch. Data-parallel: this rank's share of each global batch.
    const auto w = static_cast<std::size_t>(par.world_size());
    oar::data::DataLoader<D> loader =
        par.distributed()
            ? oar::data::DataLoader<D>(data.train,
                                       oar::data::DistributedBatchSampler(data.train.size(), c.batch_size / w, w,
                                                                          static_cast<std::size_t>(par.rank()),
                                                                          /*shuffle=*/true, /*drop_last=*/false, c.seed),
                                       oar::data::WorkerOptions{.num_workers = c.workers})
            : oar::data::DataLoader<D>(data.train, {.batch_size = c.batch_size, .shuffle = true, .drop_last = false,
                                                    .num_workers = c.workers, .seed = c.seed});
    const oar::FitOptions fit{.epochs = c.epochs, .batch_size = c.batch_size, .log_freq = std::max<std::size_t>(c.log_every, 1),
                              .seed = c.seed, .eval_batch_size = 1000};

    // Under mpirun a rank's stdout is often a pseudo-terminal of Open MPI's even when mpirun's own
    // output goes to a pipe or a file: data-parallel runs print the course's lines.
    const bool tty = writer && !par.distributed() && ::isatty(fileno(stdout)) != 0;
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
    Maybe<oar::CurvesLogger> curves;
    if (writer && !c.log_dir.empty()) {
        const std::filesystem::path dir(c.log_dir);
        csv.c = std::make_unique<oar::CSVLogger>(dir / "train.csv");
        tb.c = std::make_unique<oar::TensorBoardLogger>(dir, fit.log_freq);
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

    const D* valid = writer ? &data.valid : nullptr;  // other ranks' models are the same and print nothing
    // The schedules step before the checkpoint saves their state; the checkpoint comes last.
    model.fit(loader, valid, fit, guard, bar, course, epochs, sched.step, sched.multi, sched.cosine, sched.plateau, csv, tb, curves,
              stop_hook, ckpt);
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
    const oar::EvalResult t = model.evaluate(data.test, 1000);
    say("test: loss %.4f accuracy %.4f (%zu images)\n", t.loss, t.metrics[0].second, data.test.size());
    say("result: dataset=%s model=%s epochs=%zu test_accuracy=%.4f train_images_per_sec=%.0f seconds=%.1f\n",
        dataset.c_str(), c.model.c_str(), c.epochs, t.metrics[0].second,
        epochs.images_per_sec(), seconds_since(start));
    flush_output();
    return 0;
}

template <class Seq, class D>
int run_model(const Config& c, const std::string& dataset, const Splits<D>& data, oar::dist::ParallelContext& par,
              clock_type::time_point start) {
    using Net = oar::Network<Seq, oar::course::Image>;
    Net net(c.seed, c.init == "torch" ? oar::init_scheme::torch : oar::init_scheme::paddle);
    say("%s", oar::summary(net).c_str());
    const oar::L2Decay l2(c.l2);
    auto& p = net.parameters();
    if (c.optimizer == "sgd") {
        oar::SGD opt(p, {.learning_rate = c.lr, .weight_decay = l2});
        return train(c, dataset, data, net, opt, par, start);
    }
    if (c.optimizer == "momentum") {
        oar::Momentum opt(p, {.learning_rate = c.lr, .weight_decay = l2});
        return train(c, dataset, data, net, opt, par, start);
    }
    if (c.optimizer == "adagrad") {
        oar::Adagrad opt(p, {.learning_rate = c.lr, .weight_decay = l2});
        return train(c, dataset, data, net, opt, par, start);
    }
    oar::Adam opt(p, {.learning_rate = c.lr, .weight_decay = l2});
    return train(c, dataset, data, net, opt, par, start);
}

template <class D>
int run(const Config& c, const std::string& path, const std::string& dataset, const Splits<D>& data,
        oar::dist::ParallelContext& par, clock_type::time_point start) {
    say("dataset: %s (%s): train %zu, valid %zu, test %zu images\n", dataset.c_str(), path.c_str(),
        data.train.size(), data.valid.size(), data.test.size());
    say("model: %s, optimizer: %s, lr %g (%s), L2Decay %g, batch %zu, epochs %zu, seed %llu, init %s, workers %zu\n",
        c.model.c_str(), c.optimizer.c_str(), static_cast<double>(c.lr), lines::describe_schedule(c).c_str(),
        static_cast<double>(c.l2), c.batch_size, c.epochs, static_cast<unsigned long long>(c.seed), c.init.c_str(),
        c.workers);
    if (par.distributed())
        say("data parallel: %d ranks, %zu images per rank per step (rank %d of %d writes)\n", par.world_size(),
            c.batch_size / static_cast<std::size_t>(par.world_size()), par.rank(), par.world_size());
#if OAR_HAS_GPU_TRAIN
    if (c.device.kind == oar::DeviceOption::Kind::gpu)  // the same Model and callbacks, built by nvcc
        return oar::gpu::train_mnist({.options = &c, .dataset = dataset, .log = out.log, .start = start}, data.train,
                                     data.valid, data.test);
#endif
    if (c.model == "linear") return run_model<oar::course::LinearRegression>(c, dataset, data, par, start);
    if (c.model == "sigmoid-mlp") return run_model<oar::course::SigmoidMLP>(c, dataset, data, par, start);
    if (c.model == "mlp") return run_model<oar::course::MLP>(c, dataset, data, par, start);
    return run_model<oar::course::CNN>(c, dataset, data, par, start);
}

/// This rank's log file in --log-dir (or $OAR_LOG_DIR), as paddle.distributed.launch's workerlog.N.
void open_log(Config& c, const oar::dist::ParallelContext& par) {
    if (c.log_dir.empty())
        if (const char* env = std::getenv("OAR_LOG_DIR"); env && *env) c.log_dir = env;
    if (c.log_dir.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(c.log_dir, ec);
    const std::string file = (std::filesystem::path(c.log_dir) / ("workerlog." + std::to_string(par.rank()))).string();
    out.log = std::fopen(file.c_str(), "w");
    if (!out.log) throw oar::io_error(oar::detail::concat(file, ": cannot open the log for writing"));
}

}  // namespace

int main(int argc, char** argv) {
    const auto start = clock_type::now();
    Config c;
    oar::dist::ParallelContext par;
    // Any failure: under MPI, this rank names itself and ends the whole job (the others would
    // otherwise wait in their next allreduce for ever); alone, the status is returned.
    auto fail = [&](int status, const char* what, const char* detail) {
        if (par.distributed()) {
            std::fprintf(stderr, "train_mnist: rank %d: %s%s\n", par.rank(), what, detail);
            std::fflush(stderr);
            if (out.log) std::fclose(out.log);
            par.abort(status);
        }
        std::fprintf(stderr, "train_mnist: %s%s\n", what, detail);
        return status;
    };
    try {
        par = oar::dist::init_parallel_env(&argc, &argv);
        out.to_stdout = par.is_writer();
        auto parsed = oar::parse_train_options(argc, argv);
        if (!parsed) {
            say("%s", usage);
            return 0;
        }
        c = std::move(*parsed);
        if (c.device.kind == oar::DeviceOption::Kind::gpu) {
#if OAR_HAS_GPU_TRAIN
            if (par.distributed())
                throw oar::usage_error("--device gpu under mpirun: data-parallel training on GPUs is not supported yet");
            (void)oar::gpu::use_gpu(c.device.index);  // no GPU: no_device_error (status 2) before the data is read
#else
            throw oar::usage_error(oar::detail::concat("--device gpu:", c.device.index,
                                                       ": this train_mnist was built without CUDA (no nvcc, or "
                                                       "OAR_BUILD_CUDA=OFF); use --device cpu"));
#endif
        }
        if (c.batch_size % static_cast<std::size_t>(par.world_size()) != 0)
            throw oar::usage_error(oar::detail::concat("--batch-size ", c.batch_size, " cannot be split evenly across ",
                                                       par.world_size(), " ranks"));
        open_log(c, par);
        const auto [path, dataset] = locate_data(c);
        if (std::filesystem::is_directory(path)) {
            oar::data::MnistSplits idx = oar::data::load_mnist(path);
            if (idx.train.rows != 28 || idx.train.cols != 28)
                throw oar::format_error(oar::detail::concat(path, ": images are ", idx.train.rows, "x", idx.train.cols,
                                                            ", the course's models take 28x28"));
            auto as_dataset = [](oar::data::LabeledImages& s) {
                return oar::data::ByteImageDataset(std::move(s.pixels), std::move(s.labels), oar::make_dims(1, 28, 28));
            };
            return run(c, path, dataset,
                       Splits<oar::data::ByteImageDataset>{as_dataset(idx.train), as_dataset(idx.valid),
                                                           as_dataset(idx.test)},
                       par, start);
        }
        oar::data::MnistJson json = oar::data::read_mnist_json(path);
        return run(c, path, dataset,
                   Splits<oar::data::InMemoryDataset>{std::move(json.train), std::move(json.valid),
                                                      std::move(json.test)},
                   par, start);
    } catch (const oar::error& e) {
        return fail(2, "", e.what());
    } catch (const std::exception& e) {
        return fail(1, "unexpected failure: ", e.what());
    }
}
