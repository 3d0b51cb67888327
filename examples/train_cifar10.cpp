// train_cifar10: the course's fleet chapter (lesson 10) in C++: MyNet on CIFAR-10, data parallel
// in fleet's collective mode. The chapter's steps, in its order: fleet.init(is_collective=True),
// the model wrapped by fleet.distributed_model, Adam(1e-3) by fleet.distributed_optimizer,
// DistributedBatchSampler(32 per process, shuffled, drop_last) with a 2-worker DataLoader, then
// per epoch the training loop (its loss line every 1000 batches) and a validation pass printing
//   [validation] accuracy/loss: A/L
// (the mean over the validation batches of every rank), and at the end both histories. Run it
// alone, under `mpirun -np N`, or with `scripts/oar-launch --nproc_per_node N`. Reads the binary
// CIFAR-10 (a cifar-10-batches-bin folder or cifar-10-binary.tar.gz) given by --data.
#include <chrono>      // std::chrono::steady_clock
#include <cstdint>     // std::int64_t
#include <cstdio>      // std::printf, std::fprintf, std::FILE
#include <cstdlib>     // std::getenv
#include <exception>   // std::exception
#include <filesystem>  // std::filesystem
#include <span>        // std::span: the validation sums
#include <string>      // std::string
#include <vector>      // std::vector: the histories

#include <oar/data/cifar10.hpp>        // load_cifar10
#include <oar/data/dataloader.hpp>     // DataLoader, WorkerOptions
#include <oar/data/sampler.hpp>        // DistributedBatchSampler
#include <oar/dist/fleet.hpp>          // fleet::init, distributed_model, distributed_optimizer
#include <oar/loss/cross_entropy.hpp>  // CrossEntropyLoss
#include <oar/models/course.hpp>       // course::MyNet, CifarImage
#include <oar/nn/network.hpp>          // Network
#include <oar/nn/summary.hpp>          // summary
#include <oar/optim/adam.hpp>          // Adam

#include "app/train_options.hpp"  // for_each_flag, parse_count, parse_rate, unknown_flag

namespace {

namespace fleet = oar::dist::fleet;
using Net = oar::Network<oar::course::MyNet, oar::course::CifarImage>;

constexpr const char* usage = R"(usage: train_cifar10 --data PATH [options]
The course's fleet chapter: MyNet on CIFAR-10, data parallel (fleet, collective mode) when started
by mpirun or scripts/oar-launch, alone otherwise.

  --data PATH        the binary CIFAR-10: a cifar-10-batches-bin folder (data_batch_1.bin ..
                     test_batch.bin), a folder holding it, or cifar-10-binary.tar.gz
                     (default: $OAR_DATA, else data/cifar10 in the checkout)
  --epochs N         passes over the training images                   (default 10)
  --batch-size N     images per step on each process, as Paddle's
                     DistributedBatchSampler(dataset, 32)              (default 32)
  --lr X             Adam's learning rate                               (default 0.001)
  --workers N        DataLoader worker threads                          (default 2)
  --log-every N      the loss line every N batches, 0 = never           (default 1000)
  --seed N           seed of initialisation and shuffling               (default 0)
  --help             this text

Prints the chapter's lines (epoch: E, batch_id: B, loss is: [L] and [validation] accuracy/loss:
A/L), then val_acc_history, val_loss_history and a result line. Rank 0 prints; under
scripts/oar-launch --log_dir D (which sets $OAR_LOG_DIR) every rank also writes D/workerlog.R.
)";

struct Options {
    std::string data;
    std::size_t epochs = 10, batch_size = 32, workers = 2, log_every = 1000;
    float lr = 1e-3f;
    std::uint64_t seed = 0;
};

/// Where this process's lines go: stdout on rank 0, and workerlog.<rank> under $OAR_LOG_DIR.
struct Lines {
    bool to_stdout = true;
    std::FILE* log = nullptr;
    template <class... A>
    void say(const char* fmt, A... a) {
        if (to_stdout) std::printf(fmt, a...), std::fflush(stdout);
        if (log) std::fprintf(log, fmt, a...), std::fflush(log);
    }
};

Options parse(int argc, char** argv, bool& help) {
    Options o;
    help = !oar::for_each_flag(argc, argv, [&](const std::string& flag, const std::string& v) {
        if (flag == "--data") o.data = v;
        else if (flag == "--epochs") o.epochs = oar::parse_count(flag, v, 1);
        else if (flag == "--batch-size") o.batch_size = oar::parse_count(flag, v, 1);
        else if (flag == "--lr") o.lr = static_cast<float>(oar::parse_rate(flag, v));
        else if (flag == "--workers") o.workers = oar::parse_count(flag, v, 0);
        else if (flag == "--log-every") o.log_every = oar::parse_count(flag, v, 0);
        else if (flag == "--seed") o.seed = oar::parse_count(flag, v, 0);
        else throw oar::unknown_flag(flag);
    });
    if (help) return o;
    if (o.epochs > 100000) throw oar::usage_error(oar::detail::concat("--epochs ", o.epochs, " is more than 100000"));
    if (o.batch_size > 65536) throw oar::usage_error(oar::detail::concat("--batch-size ", o.batch_size, " is more than 65536"));
    if (o.workers > 64) throw oar::usage_error(oar::detail::concat("--workers ", o.workers, " is more than 64"));
    if (o.data.empty())
        if (const char* env = std::getenv("OAR_DATA"); env && *env) o.data = env;
    if (o.data.empty()) {
        const std::string dir = std::string(OAR_SOURCE_DIR) + "/data/cifar10";
        if (!std::filesystem::exists(dir))
            throw oar::usage_error("no data: pass --data PATH (a cifar-10-batches-bin folder or cifar-10-binary.tar.gz) "
                                   "or set OAR_DATA");
        o.data = dir;
    }
    return o;
}

std::string list(const std::vector<double>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += oar::detail::concat(i ? ", " : "", v[i]);
    return s + "]";
}

int train(const Options& o, oar::dist::ParallelContext& ctx, Lines& out) {
    const auto start = std::chrono::steady_clock::now();
    const auto world = static_cast<std::size_t>(ctx.world_size()), rank = static_cast<std::size_t>(ctx.rank());

    Net net(o.seed);  // Paddle's default initialisation, as the chapter's paddle.nn layers
    auto model = fleet::distributed_model(net, ctx);  // checks every rank built the same MyNet, starts all from rank 0's
    oar::Adam adam(net.parameters(), {.learning_rate = o.lr});
    auto& opt = fleet::distributed_optimizer(adam);

    const oar::data::Cifar10Splits cifar = oar::data::load_cifar10(o.data);  // ToTensor: [0, 1]
    oar::data::DataLoader train_loader(
        cifar.train, oar::data::DistributedBatchSampler(cifar.train.size(), o.batch_size, world, rank, /*shuffle=*/true,
                                                        /*drop_last=*/true, o.seed),
        oar::data::WorkerOptions{.num_workers = o.workers});
    oar::data::DataLoader valid_loader(
        cifar.test, oar::data::DistributedBatchSampler(cifar.test.size(), o.batch_size, world, rank, /*shuffle=*/false,
                                                       /*drop_last=*/true),
        oar::data::WorkerOptions{.num_workers = o.workers});
    if (train_loader.num_batches() == 0 || valid_loader.num_batches() == 0)
        throw oar::value_error(oar::detail::concat(o.data, ": ", cifar.train.size(), " training and ", cifar.test.size(),
                                                   " test images give no whole batch of ", o.batch_size, " on each of ",
                                                   world, " process(es)"));
    out.say("%s", oar::summary(net).c_str());
    out.say("fleet: collective, %zu process(es); train %zu images, test %zu; batch %zu per process, Adam lr %g, "
            "epochs %zu, workers %zu, seed %llu\n",
            world, cifar.train.size(), cifar.test.size(), o.batch_size, static_cast<double>(o.lr), o.epochs, o.workers,
            static_cast<unsigned long long>(o.seed));

    oar::CrossEntropyLoss ce;
    std::vector<double> val_acc_history, val_loss_history;
    for (std::size_t epoch = 0; epoch < o.epochs; ++epoch) {
        net.train();
        for (const oar::data::Batch& b : train_loader.epoch(epoch)) {
            const float loss = ce(model.forward(b.images.view()), b.labels);
            if (o.log_every > 0 && b.index % o.log_every == 0)
                out.say("epoch: %zu, batch_id: %zu, loss is: [%.7g]\n", epoch, b.index, static_cast<double>(loss));
            model.backward(ce.backward());  // the gradients, averaged over the processes
            opt.step();
            opt.clear_grad();
        }

        // Validation: every process its shard; the means over all the processes' batches.
        net.eval();
        double sums[3] = {0, 0, 0};  // accuracy, loss, batches
        for (const oar::data::Batch& b : valid_loader.epoch(epoch)) {
            const auto logits = net.forward(b.images.view());
            const std::size_t n = b.labels.size(), classes = 10;
            std::size_t right = 0;
            for (std::size_t i = 0; i < n; ++i) {
                const float* row = logits.data() + i * classes;
                std::size_t best = 0;
                for (std::size_t c = 1; c < classes; ++c)
                    if (row[c] > row[best]) best = c;
                right += static_cast<std::int64_t>(best) == b.labels[i];
            }
            sums[0] += static_cast<double>(right) / static_cast<double>(n);
            sums[1] += ce(logits, b.labels);
            sums[2] += 1;
        }
        ctx.comm().allreduce_sum(std::span<double>(sums, 3));
        const double avg_acc = sums[0] / sums[2], avg_loss = sums[1] / sums[2];
        out.say("[validation] accuracy/loss: %.4f/%.4f\n", avg_acc, avg_loss);
        val_acc_history.push_back(avg_acc);
        val_loss_history.push_back(avg_loss);
    }
    out.say("val_acc_history: %s\nval_loss_history: %s\n", list(val_acc_history).c_str(), list(val_loss_history).c_str());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.say("result: dataset=cifar10 processes=%zu epochs=%zu val_accuracy=%.4f val_loss=%.4f seconds=%.1f\n", world,
            o.epochs, val_acc_history.back(), val_loss_history.back(), seconds);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    oar::dist::ParallelContext ctx;
    Lines out;
    auto fail = [&](int status, const char* what, const char* detail) {
        if (ctx.distributed()) {
            std::fprintf(stderr, "train_cifar10: rank %d: %s%s\n", ctx.rank(), what, detail);
            std::fflush(stderr);
            if (out.log) std::fclose(out.log);
            ctx.abort(status);  // the other ranks would wait in their next allreduce for ever
        }
        std::fprintf(stderr, "train_cifar10: %s%s\n", what, detail);
        return status;
    };
    try {
        ctx = fleet::init(&argc, &argv);  // fleet.init(is_collective=True)
        out.to_stdout = ctx.is_writer();
        bool help = false;
        const Options o = parse(argc, argv, help);
        if (help) {
            out.say("%s", usage);
            return 0;
        }
        if (const char* dir = std::getenv("OAR_LOG_DIR"); dir && *dir) {
            std::error_code ec;
            std::filesystem::create_directories(dir, ec);
            const std::string file = (std::filesystem::path(dir) / ("workerlog." + std::to_string(ctx.rank()))).string();
            out.log = std::fopen(file.c_str(), "w");
            if (!out.log) throw oar::io_error(oar::detail::concat(file, ": cannot open the log for writing"));
        }
        const int status = train(o, ctx, out);
        if (out.log) std::fclose(out.log);
        return status;
    } catch (const oar::error& e) {
        return fail(2, "", e.what());
    } catch (const std::exception& e) {
        return fail(1, "unexpected failure: ", e.what());
    }
}
