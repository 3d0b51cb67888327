// The program that tests/dist/mpi_driver.cpp starts under a real `mpirun -np 2`: one mode per
// check. Each mode prints what it found (rank 0 only, unless a rank fails) and exits non-zero when
// a check fails, so that the driver's assertions read the job's exit status and output.
#include <csignal>    // std::raise, SIGKILL: the fault mode
#include <cmath>      // std::fabs
#include <cstdio>     // std::printf
#include <cstring>    // std::memcmp: bitwise equality
#include <exception>  // std::exception
#include <set>        // std::multiset: shard coverage
#include <string>     // std::string
#include <type_traits>  // std::is_same_v
#include <vector>     // std::vector

#include <oar/dist/data_parallel.hpp>  // DataParallel
#include <oar/dist/env.hpp>            // init_parallel_env
#include <oar/dist/local_comm.hpp>     // LocalComm: the 1-process reference
#include <oar/oar.hpp>                 // Network, layers, losses, optimizers, data

namespace {

using Image = oar::Shape<1, 28, 28>;
using SmallCNN = oar::Sequential<oar::Conv2D<1, 4, 3, 1, 1>, oar::ReLU, oar::MaxPool2D<2, 2>, oar::Flatten,
                                 oar::Linear<784, 32>, oar::ReLU, oar::Linear<32, 10>>;
using Net = oar::Network<SmallCNN, Image>;  // float

constexpr std::size_t steps = 20, global_batch = 100;
constexpr std::uint64_t data_seed = 11, init_seed = 7, shuffle_seed = 3;

/// 20 steps of `per_rank`-sample batches from DistributedBatchSampler(shuffle) on `comm`, with
/// optimizer Opt. With world_size 1 and batch 100 this is the single-process reference: rank r's
/// batch k is then exactly its half of the reference's batch k (the sampler's layout).
template <class B>
using NetOn = oar::Network<SmallCNN, Image, B>;

/// The batch's images in B's scalar type (the loader makes floats).
template <class B>
auto as_input(const oar::Tensor& images, std::vector<typename B::value_type>& buf) {
    using T = typename B::value_type;
    if constexpr (std::is_same_v<T, float>) {
        return images.view();
    } else {
        buf.assign(images.data(), images.data() + images.size());
        return oar::basic_tensor_view<const T>(buf.data(), images.batch(), images.dims());
    }
}

template <class B, template <class> class Opt, class Comm>
NetOn<B> train(Comm& comm, std::uint64_t seed) {
    const oar::data::RandomDataset ds(steps * global_batch, oar::make_dims(1, 28, 28), 10, data_seed);
    const auto w = static_cast<std::size_t>(comm.world_size());
    oar::data::DataLoader loader(ds, oar::data::DistributedBatchSampler(ds.size(), global_batch / w, w,
                                                                        static_cast<std::size_t>(comm.rank()),
                                                                        /*shuffle=*/true, false, shuffle_seed));
    NetOn<B> net(seed);
    oar::dist::DataParallel dp(net, comm, {.bucket_bytes = 4096});  // many buckets: the bucket loop is tested
    Opt<B> opt(net.parameters(), {.learning_rate = 0.01f});
    oar::CrossEntropyLoss<B> ce;
    std::vector<typename B::value_type> buf;
    std::size_t k = 0;
    for (auto&& b : loader.epoch(0)) {
        ce(dp.forward(as_input<B>(b.images, buf)), b.labels);
        dp.backward(ce.backward());
        opt.step();
        opt.clear_grad();
        ++k;
    }
    if (k != steps) throw oar::value_error(oar::detail::concat("expected ", steps, " steps, ran ", k));
    return net;
}

/// Worst over tensors of max|a - b| / max|b|.
template <class N>
double max_relative_diff(const N& a, const N& ref, std::string& worst_key) {
    double worst = 0.0;
    for (const auto& e : ref.parameters().entries()) {
        const auto x = a.parameters().value(e), y = ref.parameters().value(e);
        double diff = 0.0, scale = 0.0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            diff = std::max(diff, static_cast<double>(std::fabs(x[i] - y[i])));
            scale = std::max(scale, static_cast<double>(std::fabs(y[i])));
        }
        const double rel = scale > 0 ? diff / scale : diff;
        if (rel >= worst) worst = rel, worst_key = e.key;
    }
    return worst;
}

/// Trains with Opt on backend B both ways; checks the ranks are bitwise equal and, when `bound`
/// > 0, that the worst relative difference to the 1-process run is <= bound.
template <class B, template <class> class Opt>
int equivalence(oar::dist::ParallelContext& ctx, const char* name, double bound) {
    using T = typename B::value_type;
    auto& comm = ctx.comm();
    // Rank 1 starts from other weights on purpose: DataParallel must broadcast rank 0's.
    const auto dist = train<B, Opt>(comm, init_seed + static_cast<std::uint64_t>(comm.rank()) * 1000);
    // Rank 1's parameters, sent to everyone, compared bitwise with this rank's.
    std::vector<T> other(dist.parameters().values().begin(), dist.parameters().values().end());
    comm.broadcast(std::span<T>(other), 1);
    const bool same = std::memcmp(other.data(), dist.parameters().values().data(), other.size() * sizeof(T)) == 0;
    // Every rank also trains the 1-process reference (in parallel, rather than one rank idling
    // in a collective while the other computes it) and checks itself against it.
    oar::dist::LocalComm local;
    const auto ref = train<B, Opt>(local, init_seed);
    std::string key;
    const double rel = max_relative_diff(dist, ref, key);
    const bool ok = rel <= bound;
    if (ctx.is_writer() || !ok || !same)
        std::printf("%s: rank %d: bitwise equal to rank 1: %s; max relative difference to 1 process x batch %zu: "
                    "%.3g in %s (bound %g): %s\n",
                    name, comm.rank(), same ? "yes" : "no", global_batch, rel, key.c_str(), bound,
                    ok && same ? "ok" : "FAILED");
    const int failed = ok && same ? 0 : 1;
    return failed;
}

/// Every rank's shard, gathered: disjoint and covering when the size divides, covering with
/// total_size - n repeats when it does not.
int sampler(oar::dist::ParallelContext& ctx) {
    auto& comm = ctx.comm();
    int failed = 0;
    for (std::size_t n : {1000u, 1003u})
        for (std::uint64_t epoch : {0u, 1u}) {
            oar::data::DistributedBatchSampler s(n, 8, static_cast<std::size_t>(comm.world_size()),
                                                 static_cast<std::size_t>(comm.rank()), true, false, 5);
            s.set_epoch(epoch);
            std::vector<double> mine;
            for (const auto& b : s.batches())
                for (std::size_t i : b) mine.push_back(static_cast<double>(i));
            const std::vector<double> all = oar::dist::allgather(comm, std::span<const double>(mine));
            if (!ctx.is_writer()) continue;
            std::multiset<std::size_t> seen;
            for (double v : all) seen.insert(static_cast<std::size_t>(v));
            std::size_t missing = 0, repeats = 0;
            for (std::size_t i = 0; i < n; ++i) {
                const std::size_t c = seen.count(i);
                missing += c == 0 ? 1 : 0;
                repeats += c > 1 ? c - 1 : 0;
            }
            const std::size_t padding = s.total_size() - n;
            const bool ok = missing == 0 && repeats == padding && all.size() == s.total_size();
            std::printf("sampler n=%zu epoch=%llu: %zu ranks x %zu indices, missing %zu, repeats %zu (padding %zu): %s\n",
                        n, static_cast<unsigned long long>(epoch), static_cast<std::size_t>(comm.world_size()),
                        mine.size(), missing, repeats, padding, ok ? "ok" : "FAILED");
            failed |= ok ? 0 : 1;
        }
    return failed;
}

/// Rank 1 kills itself with SIGKILL at step 5; rank 0 goes on training. The job must end.
int fault(oar::dist::ParallelContext& ctx) {
    auto& comm = ctx.comm();
    const oar::data::RandomDataset ds(1000, oar::make_dims(1, 28, 28), 10, data_seed);
    Net net(init_seed);
    oar::dist::DataParallel dp(net, comm);
    oar::Adam opt(net.parameters());
    oar::CrossEntropyLoss<> ce;
    oar::data::DataLoader loader(ds, oar::data::DistributedBatchSampler(ds.size(), 10, 2,
                                                                        static_cast<std::size_t>(comm.rank())));
    for (std::size_t epoch = 0; epoch < 1000; ++epoch)
        for (auto&& b : loader.epoch(epoch)) {
            if (comm.rank() == 1 && b.index == 5) {
                std::printf("rank 1: raising SIGKILL at step 5\n");
                std::fflush(stdout);
                std::raise(SIGKILL);
            }
            ce(dp.forward(b.images), b.labels);
            dp.backward(ce.backward());
            opt.step();
            opt.clear_grad();
        }
    std::printf("rank %d: trained 1000 epochs without its peer: the fault went unnoticed\n", comm.rank());
    return 0;
}

/// Rank 1 builds a wider hidden layer: DataParallel must refuse, on both ranks, naming both.
int mismatch(oar::dist::ParallelContext& ctx) {
    using A = oar::Sequential<oar::Flatten, oar::Linear<784, 25>, oar::ReLU, oar::Linear<25, 10>>;
    using B = oar::Sequential<oar::Flatten, oar::Linear<784, 26>, oar::ReLU, oar::Linear<26, 10>>;
    auto& comm = ctx.comm();
    try {
        if (comm.rank() == 0) {
            oar::Network<A, Image> net(1);
            oar::dist::DataParallel dp(net, comm);
        } else {
            oar::Network<B, Image> net(1);
            oar::dist::DataParallel dp(net, comm);
        }
    } catch (const oar::value_error& e) {
        std::printf("rank %d refused: %s\n", comm.rank(), e.what());
        return 3;
    }
    std::printf("rank %d: different models were accepted\n", comm.rank());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        oar::dist::ParallelContext ctx = oar::dist::init_parallel_env(&argc, &argv);
        const std::string mode = argc > 1 ? argv[1] : "";
        if (ctx.is_writer()) std::printf("mpi_worker %s: %d ranks\n", mode.c_str(), ctx.world_size());
        int rc = 2;
        // SGD in float, Adam in double: <= 1e-6. Adam in float only to 1e-4: it divides each
        // gradient by its own RMS, so where a gradient is tiny, the ~1e-7 relative rounding
        // difference between one sum over 100 samples and two over 50 becomes a visible step.
        if (mode == "equivalence")
            rc = equivalence<oar::cpu, oar::SGD>(ctx, "SGD float", 1e-6) |
                 equivalence<oar::cpu64, oar::Adam>(ctx, "Adam double", 1e-6) |
                 equivalence<oar::cpu, oar::Adam>(ctx, "Adam float", 1e-4);
        else if (mode == "sampler") rc = sampler(ctx);
        else if (mode == "fault") rc = fault(ctx);
        else if (mode == "mismatch") rc = mismatch(ctx);
        else std::printf("usage: mpi_worker equivalence|sampler|fault|mismatch\n");
        std::fflush(stdout);
        return rc;
    } catch (const std::exception& e) {
        std::printf("mpi_worker: %s\n", e.what());
        return 1;
    }
}
