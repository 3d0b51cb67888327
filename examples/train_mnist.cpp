// train_mnist: oar's main job. Trains one of the course's models on MNIST-layout IDX data with
// the course's loop (forward, loss, backward, step, clear_grad; a line every 200 batches),
// validates every epoch, tests at the end and prints one machine-readable result line.
// Started by mpirun (or scripts/oar-launch) in a build with MPI, it trains data-parallel: the
// global --batch-size is split across the ranks, gradients are averaged, and rank 0 alone prints.
#include <algorithm>   // std::clamp, std::min
#include <chrono>      // std::chrono::steady_clock
#include <cmath>       // std::lround, std::isfinite
#include <cstdint>     // std::int64_t, std::uint64_t
#include <cstdarg>     // va_list: say()
#include <cstdio>      // std::printf, std::fprintf, std::vfprintf
#include <cstdlib>     // std::getenv
#include <filesystem>  // std::filesystem
#include <string>      // std::string
#include <utility>     // std::move
#include <vector>      // std::vector

#include <oar/data/mnist_json.hpp>  // the course's mnist.json.gz (simdjson: a .cpp-only header)
#include <oar/dist/data_parallel.hpp>  // DataParallel: gradients averaged across ranks
#include <oar/dist/env.hpp>            // init_parallel_env: alone, or under mpirun
#include <oar/oar.hpp>                // the library

#include "cli.hpp"     // cli::for_each_flag
#include "models.hpp"  // course::CNN, ...

namespace {

struct Config {
    std::string data;  // as given by --data, $OAR_DATA or the defaults
    std::string model = "cnn";
    std::string optimizer = "adam";
    std::size_t epochs = 5;
    std::size_t batch_size = 100;
    float lr = 1e-3f;
    float l2 = 1e-5f;
    std::uint64_t seed = 0;
    std::size_t log_every = 200;
    std::size_t workers = 0;
    std::string log_dir;  // --log-dir, else $OAR_LOG_DIR: every rank writes workerlog.<rank> there
};

/// Where the program's lines go: stdout on rank 0 only, and this rank's log file if there is one.
struct Output {
    bool to_stdout = true;
    std::FILE* log = nullptr;
} out;

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void say(const char* fmt, ...) {
    va_list args;
    if (out.to_stdout) {
        va_start(args, fmt);
        std::vfprintf(stdout, fmt, args);
        va_end(args);
    }
    if (out.log) {
        va_start(args, fmt);
        std::vfprintf(out.log, fmt, args);
        va_end(args);
    }
}

void flush_output() {
    std::fflush(stdout);
    if (out.log) std::fflush(out.log);
}

constexpr const char* usage = R"(usage: train_mnist [options]
Trains one of PaddlePaddle's MNIST-course models with oar and prints a result line.

  --data PATH         folder with the four MNIST IDX files (.gz or raw), or the course's
                      mnist.json.gz (train / valid / eval splits); default: $OAR_DATA,
                      else data/mnist in the checkout, else Debian's Fashion-MNIST
                      (/usr/share/datasets/fashion-mnist)
  --model NAME        linear | sigmoid-mlp | mlp | cnn            (default cnn)
  --epochs N          passes over the 50,000 training images       (default 5)
  --batch-size N      images per step                              (default 100)
  --optimizer NAME    sgd | momentum | adagrad | adam               (default adam)
  --lr X              learning rate                                (default 0.001)
  --l2 X              L2Decay coefficient                          (default 1e-5)
  --seed N            seed of initialisation, shuffling and dropout (default 0)
  --workers N         DataLoader worker threads, 0 = load in the training thread (default 0)
  --log-every N       print the loss every N batches, 0 = never    (default 200)
  --log-dir DIR       also write this process's lines to DIR/workerlog.<rank>
                      (default: $OAR_LOG_DIR, which oar-launch --log_dir sets)
  --help              this text

The last line is: result: dataset=... model=... epochs=... test_accuracy=...
train_images_per_sec=... seconds=...  (images/s of the training steps alone: forward, loss,
backward and update; neither data loading nor evaluation).
Bad flags or unreadable data print the reason and exit with status 2.

Under `mpirun -np N` (or scripts/oar-launch) in a build with MPI, N processes train one model
data-parallel: each takes --batch-size / N images per step (DistributedBatchSampler, shuffled by
--seed), gradients are averaged across them, and only rank 0 prints.
)";

std::size_t parse_count(const std::string& flag, const std::string& v, std::size_t min) {
    std::size_t pos = 0;
    unsigned long long n = 0;
    try {
        n = std::stoull(v, &pos);
    } catch (const std::exception&) {
        pos = 0;
    }
    if (pos != v.size() || v.empty() || v[0] == '-' || n < min)
        throw oar::usage_error(oar::detail::concat(flag, " needs an integer >= ", min, ", got '", v, "'"));
    return static_cast<std::size_t>(n);
}

float parse_float(const std::string& flag, const std::string& v) {
    std::size_t pos = 0;
    float x = 0;
    try {
        x = std::stof(v, &pos);
    } catch (const std::exception&) {
        pos = 0;
    }
    if (pos != v.size() || v.empty() || !std::isfinite(x) || x < 0)
        throw oar::usage_error(oar::detail::concat(flag, " needs a finite number >= 0, got '", v, "'"));
    return x;
}

/// Returns false when --help was asked for.
bool parse_args(int argc, char** argv, Config& c) {
    const bool run = cli::for_each_flag(argc, argv, [&](const std::string& flag, const std::string& value) {
        if (flag == "--data") c.data = value;
        else if (flag == "--model") c.model = value;
        else if (flag == "--optimizer") c.optimizer = value;
        else if (flag == "--epochs") c.epochs = parse_count(flag, value, 1);
        else if (flag == "--batch-size") c.batch_size = parse_count(flag, value, 1);
        else if (flag == "--lr") c.lr = parse_float(flag, value);
        else if (flag == "--l2") c.l2 = parse_float(flag, value);
        else if (flag == "--seed") c.seed = parse_count(flag, value, 0);
        else if (flag == "--log-every") c.log_every = parse_count(flag, value, 0);
        else if (flag == "--workers") c.workers = parse_count(flag, value, 0);
        else if (flag == "--log-dir") c.log_dir = value;
        else throw cli::unknown_flag(flag);
    });
    if (!run) return false;
    if (c.model != "linear" && c.model != "sigmoid-mlp" && c.model != "mlp" && c.model != "cnn")
        throw oar::usage_error("--model must be linear, sigmoid-mlp, mlp or cnn, got '" + c.model + "'");
    if (c.optimizer != "sgd" && c.optimizer != "momentum" && c.optimizer != "adagrad" && c.optimizer != "adam")
        throw oar::usage_error("--optimizer must be sgd, momentum, adagrad or adam, got '" + c.optimizer + "'");
    return true;
}

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

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

/// Classifiers score 10 logits with cross-entropy; regressors predict the digit with MSE and count
/// as correct when the rounded prediction equals the label.
template <class Net>
constexpr bool is_classifier = Net::output_shape::size == 10;

struct EvalResult {
    double loss = 0.0, accuracy = 0.0;
};

template <class Net>
struct Task {
    oar::CrossEntropyLoss<> ce;
    oar::MSELoss<> mse;
    oar::Tensor targets;  // regression targets

    float loss(typename Net::view_type out, const std::vector<std::int64_t>& labels) {
        if constexpr (is_classifier<Net>) {
            return ce(out, labels);
        } else {
            targets.resize(labels.size(), oar::make_dims(1));
            for (std::size_t i = 0; i < labels.size(); ++i) targets[i] = static_cast<float>(labels[i]);
            return mse(out, targets);
        }
    }
    oar::TensorView grad() const {
        if constexpr (is_classifier<Net>) return ce.backward();
        else return mse.backward();
    }
    std::size_t correct(typename Net::view_type out, const std::vector<std::int64_t>& labels) const {
        if constexpr (is_classifier<Net>) {
            return oar::count_correct(out, labels, 1);
        } else {
            std::size_t c = 0;
            for (std::size_t i = 0; i < labels.size(); ++i)
                c += std::clamp<long>(std::lround(out[i]), 0, 9) == labels[i] ? 1 : 0;
            return c;
        }
    }
};

/// The three splits as datasets: IDX bytes scaled on load to [-1, 1] (the course's normalisation),
/// or the course's json.gz, already normalised in the file.
template <oar::data::Dataset D>
struct Splits {
    D train, valid, test;
};

template <class Net, oar::data::Dataset D>
EvalResult evaluate(Net& net, Task<Net>& task, const D& set) {
    net.eval();
    double loss = 0.0;
    std::size_t correct = 0;
    oar::data::DataLoader loader(set, {.batch_size = 1000});
    for (auto&& b : loader.epoch(0)) {
        auto out = net.forward(b.images);
        loss += static_cast<double>(task.loss(out, b.labels)) * static_cast<double>(b.labels.size());
        correct += task.correct(out, b.labels);
    }
    net.train();
    return {loss / static_cast<double>(set.size()), static_cast<double>(correct) / static_cast<double>(set.size())};
}

/// The course's reader: shuffled every epoch (a new order from (seed, epoch)), the remainder
/// kept as a last, smaller batch. Data-parallel: this rank's share of each global batch, as
/// paddle.io.DistributedBatchSampler(shuffle=True) gives it.
template <class D>
oar::data::DataLoader<D> make_train_loader(const Config& c, const D& train, const oar::dist::ParallelContext& par) {
    if (!par.distributed())
        return oar::data::DataLoader<D>(train, {.batch_size = c.batch_size,
                                                .shuffle = true,
                                                .drop_last = false,
                                                .num_workers = c.workers,
                                                .seed = c.seed});
    const auto w = static_cast<std::size_t>(par.world_size());
    return oar::data::DataLoader<D>(
        train,
        oar::data::DistributedBatchSampler(train.size(), c.batch_size / w, w, static_cast<std::size_t>(par.rank()),
                                           /*shuffle=*/true, /*drop_last=*/false, c.seed),
        oar::data::WorkerOptions{.num_workers = c.workers});
}

template <class Net, class Opt, class D>
int train(const Config& c, const std::string& dataset, const Splits<D>& data, Net& net, Opt& opt,
          oar::dist::ParallelContext& par, clock_type::time_point start) {
    Task<Net> task;
    auto loader = make_train_loader(c, data.train, par);
    // Checks that every rank built the same model and starts all from rank 0's weights.
    oar::dist::DataParallel dp(net, par.comm());
    const double ranks = static_cast<double>(par.world_size());  // images per step = local x ranks
    double train_seconds = 0.0;
    std::size_t trained = 0;
    net.train();
    for (std::size_t epoch = 0; epoch < c.epochs; ++epoch) {
        const auto t0 = clock_type::now();
        double loss_sum = 0.0, step_seconds = 0.0;
        std::size_t correct = 0, seen = 0;
        for (auto&& b : loader.epoch(epoch)) {
            const auto ts = clock_type::now();  // steps only: waiting for the loader is not training
            const std::size_t n = b.labels.size();
            auto out = net.forward(b.images);
            const float loss = task.loss(out, b.labels);
            const std::size_t ok = task.correct(out, b.labels);
            dp.backward(task.grad());  // net.backward, then the gradients averaged across ranks
            opt.step();
            opt.clear_grad();
            step_seconds += seconds_since(ts);
            if (!std::isfinite(loss))
                throw oar::value_error(oar::detail::concat("loss became ", loss, " at epoch ", epoch, ", batch ",
                                                           b.index, "; lower --lr"));
            loss_sum += static_cast<double>(loss) * static_cast<double>(n);
            correct += ok;
            seen += n;
            if (c.log_every && b.index % c.log_every == 0)
                say("epoch: %zu, batch: %zu, loss is: %.4f, acc is: %.4f\n", epoch, b.index, loss,
                            static_cast<double>(ok) / static_cast<double>(n));
        }
        const double dt = seconds_since(t0);
        train_seconds += step_seconds;
        trained += seen;
        // Ranks other than 0 skip evaluation: their models are the same and they print nothing.
        const EvalResult v = dp.is_writer() ? evaluate(net, task, data.valid) : EvalResult{};
        say("epoch %zu: train loss %.4f acc %.4f | valid loss %.4f acc %.4f | %.1f s, %.0f img/s\n", epoch,
            loss_sum / static_cast<double>(seen), static_cast<double>(correct) / static_cast<double>(seen), v.loss,
            v.accuracy, dt, ranks * static_cast<double>(seen) / step_seconds);
        flush_output();
    }
    if (!dp.is_writer()) return 0;
    const EvalResult t = evaluate(net, task, data.test);
    say("test: loss %.4f accuracy %.4f (%zu images)\n", t.loss, t.accuracy, data.test.size());
    say("result: dataset=%s model=%s epochs=%zu test_accuracy=%.4f train_images_per_sec=%.0f seconds=%.1f\n",
        dataset.c_str(), c.model.c_str(), c.epochs, t.accuracy, ranks * static_cast<double>(trained) / train_seconds,
        seconds_since(start));
    flush_output();
    return 0;
}

template <class Seq, class D>
int run_model(const Config& c, const std::string& dataset, const Splits<D>& data, oar::dist::ParallelContext& par,
              clock_type::time_point start) {
    using Net = oar::Network<Seq, course::Image>;
    Net net(c.seed);
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
    say("model: %s, optimizer: %s, lr %g, L2Decay %g, batch %zu, epochs %zu, seed %llu, workers %zu\n",
        c.model.c_str(), c.optimizer.c_str(), static_cast<double>(c.lr), static_cast<double>(c.l2), c.batch_size,
        c.epochs, static_cast<unsigned long long>(c.seed), c.workers);
    if (par.distributed())
        say("data parallel: %d ranks, %zu images per rank per step (rank %d of %d writes)\n", par.world_size(),
            c.batch_size / static_cast<std::size_t>(par.world_size()), par.rank(), par.world_size());
    if (c.model == "linear") return run_model<course::LinearRegression>(c, dataset, data, par, start);
    if (c.model == "sigmoid-mlp") return run_model<course::SigmoidMLP>(c, dataset, data, par, start);
    if (c.model == "mlp") return run_model<course::MLP>(c, dataset, data, par, start);
    return run_model<course::CNN>(c, dataset, data, par, start);
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
        if (!parse_args(argc, argv, c)) {
            say("%s", usage);
            return 0;
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
