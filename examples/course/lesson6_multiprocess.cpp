// Lesson 6 of the course, training with several processes: the launch lesson's basic-API program
// (`dist.init_parallel_env()`, `paddle.DataParallel(mnist)`, Adam, batches of 32 per process,
// `loss.backward()` averaging the gradients over the processes) on generated digits, or with
// `--data DIR` on the first 4,096 training and 256 validation images of the real MNIST in the IDX
// folder DIR, started
//   alone:                         course_lesson6_multiprocess
//   by a launcher:                 mpirun -np 2 course_lesson6_multiprocess
//                                  scripts/oar-launch --nproc_per_node 2 course_lesson6_multiprocess
//   by itself, as dist.spawn:      course_lesson6_multiprocess --spawn 2   (--spawn -1: one per core)
// (each with [--data DIR]).
// The model is the lesson's Sequential (Flatten, Linear(784, 512), ReLU, Dropout(0.2),
// Linear(512, 10)). Each process reads its own share of every global batch (the course's
// DistributedBatchSampler), rank 0 prints the course's lines, and at the end every rank checks
// that all ranks hold the same weights.
#include <cstdint>  // std::uint64_t
#include <cstdio>   // std::printf
#include <cstring>  // std::memcpy: the weights' fingerprint
#include <span>     // std::span
#include <string>   // std::string, std::stoi
#include <vector>   // std::vector

#include <oar/dist/data_parallel.hpp>  // DataParallel: paddle.DataParallel
#include <oar/dist/env.hpp>            // init_parallel_env, ParallelContext
#include <oar/dist/spawn.hpp>          // spawn: paddle.distributed.spawn
#include <oar/models/course.hpp>        // oar::course::MLP
#include <oar/oar.hpp>                 // the CPU API

#include "digits.hpp"  // course::load_sets, shuffled, gather, evaluate, parse_args

namespace {

/// The lesson's Sequential: Flatten, Linear(784, 512), ReLU, Dropout(0.2), Linear(512, 10).
using MLP = oar::Network<oar::course::MLP, oar::course::Image>;

constexpr std::size_t kBatch = 32, kEpochs = 2, kImages = 1024, kMnistImages = 4096;
constexpr std::uint64_t kSeed = 5;

std::string mnist_dir;  // --data: the real MNIST's IDX folder, or empty for generated digits

/// FNV-1a over the weights' bytes: equal on every rank when the ranks stayed in step.
double fingerprint(MLP& net) {
    std::uint64_t h = 1469598103934665603ull;
    for (const float v : net.parameters().values()) {
        unsigned char b[sizeof v];
        std::memcpy(b, &v, sizeof v);
        for (const unsigned char c : b) h = (h ^ c) * 1099511628211ull;
    }
    return static_cast<double>(h >> 11);  // 53 bits: exact in a double
}

/// The lesson's train(): every rank runs it.
int train(oar::dist::ParallelContext& ctx) {
    const std::size_t ranks = static_cast<std::size_t>(ctx.world_size()), rank = static_cast<std::size_t>(ctx.rank());
    const std::size_t images = mnist_dir.empty() ? kImages : kMnistImages;  // real digits take more steps
    const course::Sets sets = course::load_sets(mnist_dir, images, 256, 0, {31, 32, 33});
    const course::Digits &train_set = sets.train, &valid_set = sets.valid;
    MLP net(kSeed);
    oar::dist::DataParallel dp(net, ctx.comm());  // paddle.DataParallel(mnist): rank 0's weights everywhere
    oar::Adam<> opt(net.parameters());           // paddle.optimizer.Adam(parameters=...)
    oar::CrossEntropyLoss<> loss_fn;
    if (ctx.is_writer())
        std::printf("%zu process(es), %zu images per process per step, %zu %s images\n", ranks, kBatch, images,
                    sets.name);
    const std::size_t global = kBatch * ranks;
    for (std::size_t epoch = 0; epoch < kEpochs; ++epoch) {
        const std::vector<std::size_t> order = course::shuffled(images, kSeed, epoch);
        for (std::size_t b = 0, batch_id = 0; b + global <= images; b += global, ++batch_id) {
            // This rank's share of the global batch (DistributedBatchSampler, drop_last).
            const course::Batch batch = course::gather(train_set, std::span(order).subspan(b + rank * kBatch, kBatch));
            auto out = dp.forward(batch.images);
            const float loss = loss_fn.forward(out, batch.labels);
            const float acc = oar::accuracy(out, batch.labels);
            dp.backward(loss_fn.backward());  // loss.backward(): gradients averaged over the ranks
            if (ctx.is_writer() && (batch_id + 1) % 4 == 0)
                std::printf("epoch: %zu, batch_id: %zu, loss is: %.6f, acc is: %.4f\n", epoch, batch_id,
                            static_cast<double>(loss), static_cast<double>(acc));
            opt.step();
            opt.clear_grad();
        }
    }
    // Every rank's weights, side by side: one slot per rank, summed.
    std::vector<double> prints(ranks, 0.0);
    prints[rank] = fingerprint(net);
    ctx.comm().allreduce_sum(std::span<double>(prints));
    bool same = true;
    for (const double p : prints) same = same && p == prints[0];
    const course::Score v = course::evaluate(net, valid_set);
    if (ctx.is_writer()) {
        std::printf("result: processes=%zu weights %s on every rank; validation accuracy %.4f\n", ranks,
                    same ? "identical" : "DIFFERENT", v.accuracy);
        std::fflush(stdout);
    }
    return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
    const course::Args args = course::parse_args(argc, argv, {"--spawn", "--data"}, 0);
    mnist_dir = args.flag("--data");
    if (args.flags.count("--spawn")) {  // dist.spawn(train, nprocs=N): this program again, N times, under mpirun
        const int status = oar::dist::spawn(train, std::stoi(args.flag("--spawn")));
        std::printf("spawn: the processes ended with status %d\n", status);
        return status;
    }
    oar::dist::ParallelContext ctx = oar::dist::init_parallel_env(&argc, &argv);  // alone, mpirun or oar-launch
    return train(ctx);
} catch (const oar::error& e) {
    std::fprintf(stderr, "course_lesson6_multiprocess: %s\n", e.what());
    return 2;
}
