// train_mnist: oar's main job and front door. Trains one of the course's models on MNIST-layout
// IDX data (or the course's mnist.json.gz) with oar::Model: validation every epoch, a progress bar
// on a terminal (the course's log line every --log-every steps otherwise), CSV + TensorBoard + VisualDL +
// SVG curves in --log-dir, checkpoints in --checkpoint-dir, --resume, an LR schedule, and a clean
// stop on SIGINT/SIGTERM (checkpoint saved). Tests at the end and prints one result line.
// Started by mpirun (or scripts/oar-launch) in a build with MPI, it trains data-parallel: the
// global --batch-size is split across the ranks, gradients are averaged, and rank 0 alone prints.
// Started by `oar-launch --server_num S --worker_num W`, ranks 0..W-1 are trainers and the others
// parameter servers (include/oar/dist/parameter_server.hpp), sync or, with --a-sync, async.
#include <chrono>      // std::chrono::steady_clock
#include <cstdio>      // std::fprintf, std::fopen, std::fclose
#include <cstdlib>     // std::getenv
#include <filesystem>  // std::filesystem
#include <optional>    // std::optional: the parameter-server role
#include <span>        // std::span: the ranks' GPU agreement
#include <string>      // std::string
#include <type_traits> // std::remove_cvref_t: the optimizer's type
#include <utility>     // std::move, std::pair

#include <oar/data/mnist_json.hpp>  // the course's mnist.json.gz (simdjson: a .cpp-only header)
#include <oar/dist/env.hpp>         // init_parallel_env: alone, or under mpirun; device_id
#include <oar/dist/fleet.hpp>       // fleet::ps_options: the parameter-server options of a strategy
#include <oar/dist/parameter_server.hpp>  // ps::Server, ps::Trainer: oar-launch --server_num / --worker_num
#include <oar/dist/role_maker.hpp>  // ps_role_from_env: which ranks serve
#include <oar/kernels/cuda/device.hpp>  // no_device_error (plain C++: names the backend, needs no toolkit)
#include <oar/kernels/cpu/gemm_bf16.hpp>  // --precision bf16: the bf16_mixed policy's kernels
#include <oar/models/course.hpp>    // oar::course::CNN, ...
#include <oar/oar.hpp>              // the library

#include "app/job_lines.hpp"      // say, out: the lines the CPU and GPU runs print
#include "app/mnist_job.hpp"      // mnist_job::run_model: the training run, shared with the GPU run
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

/// --help: one screen, the flags a first run needs.
constexpr const char* usage = R"(usage: train_mnist [options]
Trains one of PaddlePaddle's MNIST-course models with oar and prints a result line.

  --data PATH          MNIST IDX folder (.gz or raw) or the course's mnist.json.gz
                       (default: $OAR_DATA, else data/mnist, else Debian's Fashion-MNIST)
  --model NAME         linear | sigmoid-mlp | mlp | cnn            (default cnn)
  --recipe R           best | course: today's defaults, or the course's setup (default best)
  --epochs N           passes over the 50,000 training images       (default 5)
  --batch-size N       images per step                              (default 100)
  --optimizer NAME     sgd | momentum | adagrad | adam               (default adam)
  --lr X               learning rate                                (default 0.001)
  --lr-schedule S      none | step:SIZE | multistep | cosine | plateau (default multistep)
  --seed N             seed of initialisation, shuffling and dropout (default 0)
  --workers N          DataLoader worker threads                    (default 0)
  --device D           cpu | gpu | gpu:N                            (default cpu)
  --precision P        fp32 | bf16: bf16 mixed precision (CPU, GPU)  (default fp32)
  --checkpoint-dir DIR save checkpoints there; --resume latest continues from one
  --log-dir DIR        CSV, TensorBoard events and SVG curves
  --export-onnx PATH   after training, write the model as ONNX to PATH
  --help-all           all flags (--l2, --init, --lr-step-per, --log-every, --a-sync...),
                       the schedules' forms, the result line, exit statuses, mpirun

The last line is: result: dataset=... model=... epochs=... test_accuracy=... ...
Bad flags or unreadable data print the reason and exit with status 2.
)";

/// --help-all: every flag.
constexpr const char* usage_all = R"(usage: train_mnist [options]
Trains one of PaddlePaddle's MNIST-course models with oar and prints a result line.

  --data PATH          folder with the four MNIST IDX files (.gz or raw), or the course's
                       mnist.json.gz (train / valid / eval splits); default: $OAR_DATA,
                       else data/mnist in the checkout, else Debian's Fashion-MNIST
                       (/usr/share/datasets/fashion-mnist)
  --model NAME         linear | sigmoid-mlp | mlp | cnn            (default cnn)
  --recipe R           best | course                                (default best)
                       best: the defaults below; course: the course's setup for every
                       flag not given: --init paddle, --lr-schedule none, --l2 0, and
                       the course's optimizer for the model (linear, sigmoid-mlp: sgd
                       0.001; mlp, cnn: adam 0.001)
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
  --precision P        fp32 | bf16 (default fp32); bf16: mixed precision, the products of
                       Linear and Conv2D on bf16-rounded weights, inputs and gradients
                       summed in fp32 (AVX512-BF16 / AMX where the CPU has them; cuBLAS
                       bf16 GEMMs with fp32 compute on --device gpu), fp32 master
                       weights, optimizer, loss and checkpoints
  --checkpoint-dir DIR save DIR/latest after every epoch (and when stopped by a signal),
                       DIR/epoch_<n> and DIR/best (by validation accuracy), as safetensors
  --resume CKPT        continue from a checkpoint: "latest" (in --checkpoint-dir), DIR/STEM,
                       or DIR (its latest); same model, optimizer and seed
  --log-every N        not on a terminal: the course's line every N batches, 0 = never
                       (default 200); on a terminal a progress bar instead
  --log-style S        auto | course: auto draws the progress bar on a terminal, course
                       prints the course's lines there too          (default auto)
  --log-dir DIR        write DIR/curves.svg, DIR/train.csv, a TensorBoard event file, a VisualDL
                       record file, and this process's lines to DIR/workerlog.<rank>
                       (default: $OAR_LOG_DIR, which oar-launch --log_dir sets)
  --a-sync             parameter-server mode only: asynchronous pushes and pulls (Paddle's
                       strategy.a_sync) instead of a barrier per step
  --max-staleness N    with --a-sync: pushes a trainer may have unanswered while it computes
                       the next gradient (default 1)
  --export-onnx PATH   after training, write the model as ONNX (opset 17) to PATH
  --help               the short help
  --help-all           this text

The last line is: result: dataset=... model=... epochs=... test_accuracy=...
train_images_per_sec=... seconds=...  (images/s of the training steps alone: forward, loss,
backward and update; neither data loading nor evaluation).
Bad flags or unreadable data print the reason and exit with status 2. SIGINT or SIGTERM
(Ctrl-C) finishes the current step, saves DIR/latest when --checkpoint-dir is set, and exits
with status 0 without testing; a second signal ends the program at once.

Under `mpirun -np N` (or scripts/oar-launch) in a build with MPI, N processes train one model
data-parallel: each takes --batch-size / N images per step (DistributedBatchSampler, shuffled by
--seed), gradients are averaged across them, and only rank 0 prints and saves.
Under `oar-launch --server_num S --worker_num W` the first W ranks are trainers (--batch-size / W
images each per step) and the last S parameter servers, each owning a slice of the parameters
and running the optimizer on it (docs/DISTRIBUTED.md); trainer 0 prints and saves.
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

using mnist_job::Splits;

/// This rank's role when oar-launch --server_num / --worker_num started the job.
std::optional<oar::dist::PsRole> role;

#if OAR_HAS_MPI
/// Parameter-server mode: every rank builds the model and the optimizer; servers serve their
/// slice until the trainers stop, trainers run the usual training with the trainer as optimizer.
template <class Seq, class D>
int run_ps(const Config& c, const mnist_job::Run& job, const Splits<D>& data, const oar::dist::PsRole& r) {
    using Net = oar::Network<Seq, oar::course::Image, oar::cpu>;
    Net net(c.seed, c.init == "torch" ? oar::init_scheme::torch : oar::init_scheme::paddle);
    say("%s", oar::summary(net).c_str());
    // The fleet strategy's options (OAR_PS_TIMEOUT read there).
    const oar::dist::ps::Options o =
        oar::dist::fleet::ps_options({.a_sync = c.a_sync, .max_staleness = static_cast<int>(c.max_staleness)});
    return mnist_job::with_optimizer<oar::cpu>(c, net, [&](auto& opt) {
        using Opt = std::remove_cvref_t<decltype(opt)>;
        if (r.is_server()) {
            oar::dist::ps::Server<Opt> server(r, net, opt, o);
            server.run();
            return 0;
        }
        oar::dist::ps::Trainer<Net, Opt> trainer(r, net, opt, o);
        return mnist_job::train(c, job, data, net, trainer, trainer.trainers());
    });
}
#endif

/// The model --model names on the CPU, with precision policy P.
template <class P, class D, class Comm>
int run_cpu(const Config& c, const mnist_job::Run& job, const Splits<D>& data, Comm& comm) {
    if (c.model == "linear") return mnist_job::run_model<oar::course::LinearRegression, oar::cpu, P>(c, job, data, comm);
    if (c.model == "sigmoid-mlp") return mnist_job::run_model<oar::course::SigmoidMLP, oar::cpu, P>(c, job, data, comm);
    if (c.model == "mlp") return mnist_job::run_model<oar::course::MLP, oar::cpu, P>(c, job, data, comm);
    return mnist_job::run_model<oar::course::CNN, oar::cpu, P>(c, job, data, comm);
}

template <class D>
int run(const Config& c, const std::string& path, const std::string& dataset, const Splits<D>& data,
        oar::dist::ParallelContext& par, clock_type::time_point start) {
    say("dataset: %s (%s): train %zu, valid %zu, test %zu images\n", dataset.c_str(), path.c_str(),
        data.train.size(), data.valid.size(), data.test.size());
    say("recipe: %s, model: %s, optimizer: %s, lr %g (%s), L2Decay %g, batch %zu, epochs %zu, seed %llu, init %s, "
        "workers %zu, precision %s\n",
        c.recipe.c_str(), c.model.c_str(), c.optimizer.c_str(), static_cast<double>(c.lr), lines::describe_schedule(c).c_str(),
        static_cast<double>(c.l2), c.batch_size, c.epochs, static_cast<unsigned long long>(c.seed), c.init.c_str(),
        c.workers, c.precision.c_str());
    if (role)
        say("parameter server: %d server(s), %d trainers, %zu images per trainer per step, %s (trainer 0 writes)\n",
            role->servers, role->trainers, c.batch_size / static_cast<std::size_t>(role->trainers),
            c.a_sync ? ("async, max_staleness " + std::to_string(c.max_staleness)).c_str() : "sync");
    else if (par.distributed())
        say("data parallel: %d ranks, %zu images per rank per step (rank %d of %d writes)\n", par.world_size(),
            c.batch_size / static_cast<std::size_t>(par.world_size()), par.rank(), par.world_size());
    mnist_job::Run job{.dataset = dataset, .env = par.env(), .start = start};
#if OAR_HAS_MPI
    if (role) {
        job.env = {role->index(), role->trainers, 0};
        if (c.model == "linear") return run_ps<oar::course::LinearRegression>(c, job, data, *role);
        if (c.model == "sigmoid-mlp") return run_ps<oar::course::SigmoidMLP>(c, job, data, *role);
        if (c.model == "mlp") return run_ps<oar::course::MLP>(c, job, data, *role);
        return run_ps<oar::course::CNN>(c, job, data, *role);
    }
#endif
#if OAR_HAS_GPU_TRAIN
    if (c.device.kind == oar::DeviceOption::Kind::gpu)  // the same training run on Network<..., oar::cuda>, built by nvcc
        return oar::gpu::train_mnist({.options = &c, .run = job, .log = out.log}, data);
#endif
    auto& comm = par.comm();
    if (c.precision == "bf16") return run_cpu<oar::bf16_mixed>(c, job, data, comm);
    return run_cpu<oar::fp32>(c, job, data, comm);
}

/// The folder that `flag` names, made if missing, before anything trains: io_error naming the flag
/// and the folder when it cannot be made or is a file. Files written there later (logs,
/// checkpoints) name themselves when their own write fails.
void make_folder(const char* flag, const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir))
        throw oar::io_error(oar::detail::concat(flag, " ", dir, ": cannot make the folder (",
                                                ec ? ec.message() : std::string("a file is in the way"),
                                                "; expected a folder that can be written)"));
}

/// This rank's log file in --log-dir (or $OAR_LOG_DIR), as paddle.distributed.launch's workerlog.N.
void open_log(Config& c, const oar::dist::ParallelContext& par) {
    const char* flag = "--log-dir";
    if (c.log_dir.empty())
        if (const char* env = std::getenv("OAR_LOG_DIR"); env && *env) {
            c.log_dir = env;
            flag = "$OAR_LOG_DIR";
        }
    if (c.log_dir.empty()) return;
    make_folder(flag, c.log_dir);
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
            bool all = false;  // the first help flag decides (nothing after it is parsed)
            for (int i = 1; i < argc; ++i) {
                const std::string f = argv[i] ? argv[i] : "";
                if (f == "--help" || f == "-h" || f == "--help-all") {
                    all = f == "--help-all";
                    break;
                }
            }
            say("%s", all ? usage_all : usage);
            return 0;
        }
        c = std::move(*parsed);
        if (c.device.kind == oar::DeviceOption::Kind::gpu) {
#if OAR_HAS_GPU_TRAIN
            // Before the data is read: this rank's GPU (under a launcher the one of its local rank,
            // oar::dist::device_id). Under MPI every rank learns whether any lacks its GPU, so that
            // each says why and all stop with status 2 together (none is left waiting in NCCL's set-up).
            if (par.distributed() && c.device.index != 0)
                throw oar::usage_error(oar::detail::concat(
                    "--device gpu:", c.device.index, " under a launcher: each rank takes the GPU of its local rank "
                    "(oar-launch --gpus picks which); pass --device gpu"));
            c.device.index = par.distributed() ? static_cast<std::size_t>(oar::dist::device_id(par.env())) : c.device.index;
            std::string missing;
            try {
                (void)oar::gpu::use_gpu(c.device.index);
            } catch (const oar::no_device_error& e) {
                if (!par.distributed()) throw;
                missing = e.what();
            }
            if (par.distributed()) {
                double without = missing.empty() ? 0.0 : 1.0;
                par.comm().allreduce_sum(std::span<double>(&without, 1));
                if (without > 0.0) {
                    if (!missing.empty())
                        std::fprintf(stderr, "train_mnist: rank %d: %s\n", par.rank(), missing.c_str());
                    else
                        std::fprintf(stderr, "train_mnist: rank %d: stopping: %.0f rank(s) have no usable GPU\n",
                                     par.rank(), without);
                    return 2;
                }
            }
#else
            throw oar::usage_error(oar::detail::concat("--device gpu:", c.device.index,
                                                       ": this train_mnist was built without CUDA (no nvcc, or "
                                                       "OAR_BUILD_CUDA=OFF); use --device cpu"));
#endif
        }
        if (oar::dist::ps_mode_requested()) {
            role = oar::dist::ps_role_from_env(par.world_size(), par.rank());
            if (c.device.kind == oar::DeviceOption::Kind::gpu)
                throw oar::usage_error("--device gpu: the parameter-server mode trains on the CPU");
            if (c.precision != "fp32")
                throw oar::usage_error("--precision bf16: the parameter-server mode trains in fp32");
        } else if (c.a_sync) {
            throw oar::usage_error("--a-sync is the parameter server's asynchronous mode: start the job with "
                                   "oar-launch --server_num S --worker_num W");
        }
        const int splits = role ? role->trainers : par.world_size();
        if (c.batch_size % static_cast<std::size_t>(splits) != 0)
            throw oar::usage_error(oar::detail::concat("--batch-size ", c.batch_size, " cannot be split evenly across ",
                                                       splits, role ? " trainers" : " ranks"));
        if (!c.export_onnx.empty()) {
#if !OAR_HAS_ONNX
            throw oar::usage_error("--export-onnx: this train_mnist was built without ONNX export; install "
                                   "libonnx-dev (apt-get install libonnx-dev) and reconfigure");
#endif
            if (c.device.kind == oar::DeviceOption::Kind::gpu)
                throw oar::usage_error("--export-onnx needs --device cpu (the GPU run does not export)");
            const auto folder = std::filesystem::absolute(c.export_onnx).parent_path();
            if (!std::filesystem::is_directory(folder))
                throw oar::io_error(oar::detail::concat("--export-onnx ", c.export_onnx, ": folder ", folder.string(),
                                                        " does not exist (expected PATH in an existing folder)"));
            if (std::filesystem::is_directory(c.export_onnx))
                throw oar::io_error(oar::detail::concat("--export-onnx ", c.export_onnx,
                                                        ": is a folder (expected a file path such as model.onnx)"));
        }
        if (!c.checkpoint_dir.empty()) make_folder("--checkpoint-dir", c.checkpoint_dir);
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
