// The program that tests/dist/mpi_driver.cpp starts under a real `mpirun -np 2`: one mode per
// check. Each mode prints what it found (rank 0 only, unless a rank fails) and exits non-zero when
// a check fails, so that the driver's assertions read the job's exit status and output.
#include <algorithm>  // std::copy: reordered batches; std::sort: medians
#include <chrono>     // std::chrono::steady_clock: the bench mode
#include <csignal>    // std::raise, SIGKILL: the fault mode
#include <cmath>      // std::fabs
#include <cstdio>     // std::printf
#include <cstdlib>    // std::atoi, std::atof: ps_async's arguments
#include <cstring>    // std::memcmp: bitwise equality
#include <exception>  // std::exception
#include <set>        // std::multiset: shard coverage
#include <string>     // std::string
#include <thread>     // std::this_thread::sleep_for: the silent trainer
#include <type_traits>  // std::is_same_v
#include <vector>     // std::vector

#include <oar/dist/data_parallel.hpp>  // DataParallel
#include <oar/dist/env.hpp>            // init_parallel_env
#include <oar/dist/fleet.hpp>           // fleet::init(argc, argv, false): the async mode through the facade
#include <oar/dist/parameter_server.hpp>  // ps::Server, ps::Trainer: the parameter-server modes
#include <oar/dist/role_maker.hpp>        // ps_role_from_env
#include <oar/train/checkpoint.hpp>       // save_checkpoint, load_checkpoint: the PS checkpoint
#include <oar/models/course.hpp>       // course::CNN
#include <oar/oar.hpp>                 // Network, layers, losses, optimizers, data

namespace {

using Image = oar::Shape<1, 28, 28>;
using SmallCNN = oar::Sequential<oar::Conv2D<1, 4, 3, 1, 1>, oar::ReLU, oar::MaxPool2D<2, 2>, oar::Flatten,
                                 oar::Linear<784, 32>, oar::ReLU, oar::Linear<32, 10>>;
using Net = oar::Network<SmallCNN, Image>;  // float

constexpr std::size_t steps = 20, global_batch = 100;
constexpr std::uint64_t data_seed = 11, init_seed = 7, shuffle_seed = 3;

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

const oar::data::RandomDataset& dataset() {
    static const oar::data::RandomDataset ds(steps * global_batch, oar::make_dims(1, 28, 28), 10, data_seed);
    return ds;
}

/// The 20 batches that rank `rank` of `world` sees: DistributedBatchSampler(shuffle) of the
/// global batch 100. With world 1 this is the single-process reference; rank r's batch k is
/// then exactly its share of the reference's batch k (the sampler's layout).
std::vector<oar::data::Batch> batches(std::size_t world, std::size_t rank) {
    const auto& ds = dataset();
    oar::data::DataLoader loader(
        ds, oar::data::DistributedBatchSampler(ds.size(), global_batch / world, world, rank, /*shuffle=*/true, false,
                                               shuffle_seed));
    std::vector<oar::data::Batch> out;
    for (auto&& b : loader.epoch(0)) out.push_back(b);
    if (out.size() != steps) throw oar::value_error(oar::detail::concat("expected ", steps, " batches, got ", out.size()));
    return out;
}

/// The same samples in another order: mathematically the same batch, summed differently.
/// kind 1: reversed; 2: odd positions first, then even; 3: rotated by a quarter; 4: rotated by a
/// half (rank 1's share first).
oar::data::Batch reordered(const oar::data::Batch& b, int kind) {
    oar::data::Batch r = b;
    const std::size_t n = b.labels.size(), per = b.images.size() / n;
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t from = kind == 1   ? n - 1 - i
                                 : kind == 2 ? (i < n / 2 ? 2 * i + 1 : 2 * (i - n / 2)) % n
                                 : kind == 3 ? (i + n / 4) % n
                                             : (i + n / 2) % n;
        std::copy(b.images.data() + from * per, b.images.data() + (from + 1) * per, r.images.data() + i * per);
        r.labels[i] = b.labels[from];
    }
    return r;
}

/// 20 data-parallel steps on `comm` with optimizer Opt; `overlap` as DataParallelOptions says.
/// Counts the buckets whose allreduce overlapped backward.
template <class B, template <class> class Opt, class Comm>
NetOn<B> train(Comm& comm, std::uint64_t seed, bool overlap, std::size_t* overlapped = nullptr) {
    const auto mine = batches(static_cast<std::size_t>(comm.world_size()), static_cast<std::size_t>(comm.rank()));
    NetOn<B> net(seed);
    // 4 KB buckets: many of them, so the bucket loop and the overlap are exercised.
    oar::dist::DataParallel dp(net, comm, {.bucket_bytes = 4096, .overlap = overlap});
    Opt<B> opt(net.parameters(), {.learning_rate = 0.01f});
    oar::CrossEntropyLoss<B> ce;
    std::vector<typename B::value_type> buf;
    for (const auto& b : mine) {
        ce(dp.forward(as_input<B>(b.images, buf)), b.labels);
        dp.backward(ce.backward());
        if (overlapped) *overlapped += dp.overlapped_buckets();
        opt.step();
        opt.clear_grad();
    }
    return net;
}

/// One process, batch 100 per step (reordered within each batch by `order` > 0): the reference.
template <class B, template <class> class Opt>
NetOn<B> train_alone(std::uint64_t seed, int order) {
    NetOn<B> net(seed);
    Opt<B> opt(net.parameters(), {.learning_rate = 0.01f});
    oar::CrossEntropyLoss<B> ce;
    std::vector<typename B::value_type> buf;
    for (const auto& b0 : batches(1, 0)) {
        const oar::data::Batch b = order > 0 ? reordered(b0, order) : b0;
        ce(net.forward(as_input<B>(b.images, buf)), b.labels);
        net.backward(ce.backward());
        opt.step();
        opt.clear_grad();
    }
    return net;
}

/// One process doing by hand what 2 ranks do: each step, the gradient of rank 0's 50 samples and
/// of rank 1's 50 samples, summed and halved. No MPI: what DataParallel must equal bit for bit.
template <class B, template <class> class Opt>
NetOn<B> train_two_halves(std::uint64_t seed) {
    using T = typename B::value_type;
    const auto r0 = batches(2, 0), r1 = batches(2, 1);
    NetOn<B> net(seed);
    Opt<B> opt(net.parameters(), {.learning_rate = 0.01f});
    oar::CrossEntropyLoss<B> ce;
    std::vector<T> buf, g0;
    for (std::size_t k = 0; k < steps; ++k) {
        ce(net.forward(as_input<B>(r0[k].images, buf)), r0[k].labels);
        net.backward(ce.backward());
        const auto g = net.parameters().grads();
        g0.assign(g.begin(), g.end());
        net.clear_grad();
        ce(net.forward(as_input<B>(r1[k].images, buf)), r1[k].labels);
        net.backward(ce.backward());
        for (std::size_t i = 0; i < g.size(); ++i) g[i] = (g0[i] + g[i]) / T(2);
        opt.step();
        opt.clear_grad();
    }
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

template <class N>
bool bitwise_equal(const N& a, const N& b) {
    const auto x = a.parameters().values(), y = b.parameters().values();
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size_bytes()) == 0;
}

/// Trains with Opt on backend B: 2 ranks overlapped and not, 1 process simulating the 2 ranks,
/// 1 process x batch 100 and the same with each batch's samples in 4 other orders. Checks: the
/// ranks are bitwise equal; overlapped == blocking bitwise, and overlap happened; 2 ranks == the
/// 2-halves simulation bitwise; and vs 1 x 100 the worst relative difference is <= bound.
/// With `or_reordering`, the bound is the larger of `bound` and 4 x the largest difference of the
/// reference from itself under the 4 reorderings (float Adam, where 1e-6 is below what the
/// summation order decides: splitting the batch in two halves is one more such order, so the
/// 4 reorderings only sample the scale of that noise; the halves' order has landed 1.55x above
/// the sampled worst in a ThreadSanitizer build, hence the margin of 4 on the sampled scale).
/// What data parallelism itself adds is checked bitwise above (2 ranks == the 2-halves run).
template <class B, template <class> class Opt>
int equivalence(oar::dist::ParallelContext& ctx, const char* name, double bound, bool or_reordering = false) {
    using T = typename B::value_type;
    auto& comm = ctx.comm();
    // Rank 1 starts from other weights on purpose: DataParallel must broadcast rank 0's.
    const auto seed = init_seed + static_cast<std::uint64_t>(comm.rank()) * 1000;
    std::size_t overlapped = 0;
    const auto dist = train<B, Opt>(comm, seed, /*overlap=*/true, &overlapped);
    const auto blocking = train<B, Opt>(comm, seed, /*overlap=*/false);
    // Rank 1's parameters, sent to everyone, compared bitwise with this rank's.
    std::vector<T> other(dist.parameters().values().begin(), dist.parameters().values().end());
    comm.broadcast(std::span<T>(other), 1);
    const bool same = std::memcmp(other.data(), dist.parameters().values().data(), other.size() * sizeof(T)) == 0;
    const bool same_blocking = bitwise_equal(dist, blocking);
    // Every rank also computes the 1-process references (in parallel, rather than one rank idling
    // in a collective while the other computes them) and checks itself against them.
    const bool same_halves = bitwise_equal(dist, train_two_halves<B, Opt>(init_seed));
    const auto ref = train_alone<B, Opt>(init_seed, 0);
    std::string key, key_rev;
    const double rel = max_relative_diff(dist, ref, key);
    double rel_rev = 0;
    const int orders = or_reordering ? 4 : 1;  // (the others only report the reversed order)
    for (int order = 1; order <= orders; ++order) {
        std::string k;
        const double d = max_relative_diff(train_alone<B, Opt>(init_seed, order), ref, k);
        if (d > rel_rev) rel_rev = d, key_rev = k;
    }
    if (or_reordering) bound = std::max(bound, 4 * rel_rev);
    const bool ok = same && same_blocking && overlapped > 0 && same_halves && rel <= bound;
    if (ctx.is_writer() || !ok)
        std::printf("%s: rank %d: bitwise equal to rank 1: %s; overlapped == blocking bitwise: %s (%zu buckets "
                    "overlapped backward); == 1 process summing the 2 halves' gradients, bitwise: %s; max relative "
                    "difference to 1 process x batch %zu: %.3g in %s (bound %g; the same 1 process with each batch "
                    "reordered, worst of %d orders: %.3g in %s): %s\n",
                    name, comm.rank(), same ? "yes" : "no", same_blocking ? "yes" : "no", overlapped,
                    same_halves ? "yes" : "no", global_batch, rel, key.c_str(), bound, orders, rel_rev, key_rev.c_str(),
                    ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
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

// ---- parameter-server modes (OAR_SERVER_NUM / OAR_WORKER_NUM from the driver's mpirun -x) ----

/// The trainers alone (servers get MPI_COMM_NULL): a collective over the whole job.
MPI_Comm split_trainers(const oar::dist::PsRole& role) {
    MPI_Comm tc = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, role.is_worker() ? 0 : MPI_UNDEFINED, role.rank, &tc);
    return tc;
}

/// The learning rate of step k: a decaying schedule, set on the optimizer before each step as
/// an LR scheduler does.
float ps_rate(std::size_t k) { return 0.01f * std::pow(0.9f, static_cast<float>(k)); }

/// Steps [from, to) of a trainer's batches: fwd, then bwd(dy), then the optimizer-like `opt`
/// (an optimizer, or a ps::Trainer whose step pushes and pulls) at the step's learning rate.
template <class O, class Fwd, class Bwd>
void ps_steps(O& opt, const std::vector<oar::data::Batch>& mine, std::size_t from, std::size_t to, Fwd&& fwd,
              Bwd&& bwd) {
    oar::CrossEntropyLoss<> ce;
    for (std::size_t k = from; k < to; ++k) {
        opt.set_learning_rate(ps_rate(k));
        ce(fwd(mine[k].images.view()), mine[k].labels);
        bwd(ce.backward());
        opt.step();
        opt.clear_grad();
    }
}

/// Sync parameter server vs the collective run (DataParallel over the trainers' MpiComm, MPI's
/// allreduce) on the same global batches, with L2Decay, two parameters with their own (the
/// optimizer's set_regularizer, Paddle's ParamAttr regularizer: 4.weight, which the 2-server
/// slicing cuts in two, decayed 100 times more, 6.bias exempt) and a per-step learning rate. For Adam, a
/// checkpoint is saved after 10 steps by both runs (the PS one through the trainer, gathering the
/// servers' state), the two files compared, and the PS run resumed from its checkpoint in a new
/// server session for steps 10..19: it must give the uninterrupted run's bits.
template <template <class> class Opt>
int ps_sync(const oar::dist::PsRole& role, const char* name, const std::string& dir) {
    using O = Opt<oar::cpu>;
    const oar::L2Decay l2(1e-3f);
    auto make_opt = [&](Net& n) {
        O opt(n.parameters(), {.learning_rate = 0.01f, .weight_decay = l2});
        opt.set_regularizer("4.weight", oar::L2Decay(0.1f));
        opt.set_regularizer("6.bias", oar::L2Decay(0.0f));
        return opt;
    };
    const bool checkpoints = !dir.empty();
    MPI_Comm tc = split_trainers(role);
    const oar::dist::ps::Options o{.a_sync = false};
    auto serve = [&] {
        Net net(init_seed);
        O opt = make_opt(net);
        oar::dist::ps::Server<O> server(role, net, opt, o);
        server.run();
        return server.shard();
    };
    int failed = 0;
    if (role.is_server()) {
        const auto sh = serve();
        double mine[2] = {static_cast<double>(sh.first), static_cast<double>(sh.size)};
        std::vector<double> all(2 * static_cast<std::size_t>(role.world_size()));
        MPI_Allgather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, MPI_COMM_WORLD);
        if (checkpoints) serve();
        return 0;
    }
    oar::dist::MpiComm trainers(tc);
    const auto t = static_cast<std::size_t>(role.index());
    const auto mine = batches(2, t);
    // The collective reference: DataParallel over the 2 trainers (every rank starts from rank 0's).
    Net ref(init_seed + t * 1000);
    {
        O opt = make_opt(ref);
        oar::dist::DataParallel dp(ref, trainers, {.overlap = false});
        auto fwd = [&](auto x) { return dp.forward(x); };
        auto bwd = [&](auto dy) { dp.backward(dy); };
        ps_steps(opt, mine, 0, 10, fwd, bwd);
        if (checkpoints && t == 0) oar::save_checkpoint(dir, "collective", ref, opt, {});
        ps_steps(opt, mine, 10, steps, fwd, bwd);
    }
    // The parameter-server run: trainer 1 starts from other weights on purpose.
    Net net(t == 0 ? init_seed : init_seed + 1001);
    {
        O user = make_opt(net);
        oar::dist::ps::Trainer<Net, O> trainer(role, net, user, o);
        // The plain network's backward: the trainer's step() pushes and pulls.
        auto fwd = [&](auto x) { return net.forward(x); };
        auto bwd = [&](auto dy) { net.backward(dy); };
        ps_steps(trainer, mine, 0, 10, fwd, bwd);
        if (checkpoints && t == 0) oar::save_checkpoint(dir, "ps", net, trainer, {});
        ps_steps(trainer, mine, 10, steps, fwd, bwd);
        trainer.stop();
    }
    {
        double dummy[2] = {0, 0};
        std::vector<double> all(2 * static_cast<std::size_t>(role.world_size()));
        MPI_Allgather(dummy, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, MPI_COMM_WORLD);
        if (t == 0) {  // the servers' slices tile the buffer, balanced by bytes
            const std::size_t n = net.parameters().values().size();
            std::size_t at = 0, lo = n, hi = 0;
            bool tiles = true;
            for (int s = 0; s < role.servers; ++s) {
                const auto first = static_cast<std::size_t>(all[2 * static_cast<std::size_t>(role.server_rank(s))]);
                const auto size = static_cast<std::size_t>(all[2 * static_cast<std::size_t>(role.server_rank(s)) + 1]);
                std::printf("%s: server %d holds values [%zu, %zu) of %zu\n", name, s, first, first + size, n);
                tiles = tiles && first == at;
                at = first + size;
                lo = std::min(lo, size), hi = std::max(hi, size);
            }
            tiles = tiles && at == n && hi - lo <= 16;
            std::printf("%s: %d server slices tile the buffer, sizes within 16 values: %s\n", name, role.servers,
                        tiles ? "ok" : "FAILED");
            failed |= tiles ? 0 : 1;
        }
    }
    std::vector<float> other(net.parameters().values().begin(), net.parameters().values().end());
    trainers.broadcast(std::span<float>(other), 1);
    const bool same_trainers = std::memcmp(other.data(), net.parameters().values().data(), other.size() * 4) == 0;
    std::string key;
    const double rel = max_relative_diff(net, ref, key);
    const bool bitwise = bitwise_equal(net, ref);
    const bool ok = same_trainers && rel <= 1e-6;
    if (t == 0 || !ok)
        std::printf("%s: trainer %zu: %d server(s), 2 trainers, 20 steps: trainers bitwise equal: %s; vs collective "
                    "data parallel (MPI allreduce), both with L2Decay 0.001, 4.weight's own 0.1 and 6.bias's own 0: "
                    "bitwise %s, max relative difference %.3g in %s (bound 1e-6): %s\n",
                    name, t, role.servers, same_trainers ? "yes" : "no", bitwise ? "yes" : "no", rel, key.c_str(),
                    ok ? "ok" : "FAILED");
    failed |= ok ? 0 : 1;
    if (!checkpoints) return failed;

    // The PS checkpoint loads into a plain single-process network and optimizer, like the collective one.
    if (t == 0) {
        Net a(1), b(1);
        O oa = make_opt(a), ob = make_opt(b);
        oar::load_checkpoint(dir, "ps", a, oa);
        oar::load_checkpoint(dir, "collective", b, ob);
        double worst = 0;
        auto sa = oa.state(), sb = ob.state();
        for (std::size_t i = 0; i < sa.size(); ++i)
            for (std::size_t j = 0; j < sa[i].second.size(); ++j) {
                const double x = sa[i].second[j], y = sb[i].second[j];
                worst = std::max(worst, std::fabs(x - y) / std::max(1e-30, std::fabs(y)));
            }
        std::string k2;
        const double wrel = max_relative_diff(a, b, k2);
        bool steps_equal = true;
        if constexpr (requires { oa.step_count(); }) steps_equal = oa.step_count() == ob.step_count() && oa.step_count() == 10;
        const bool cok = wrel <= 1e-6 && worst <= 1e-5 && steps_equal && oa.learning_rate() == ob.learning_rate();
        std::printf("%s: checkpoint after 10 steps loads into a single-process network: weights vs the collective "
                    "run's checkpoint %.3g, optimizer state %zu buffers, worst relative %.3g, step counts equal: %s, "
                    "learning rates %g and %g: %s\n",
                    name, wrel, sa.size(), worst, steps_equal ? "yes" : "no", static_cast<double>(oa.learning_rate()),
                    static_cast<double>(ob.learning_rate()), cok ? "ok" : "FAILED");
        failed |= cok ? 0 : 1;
    }
    // Resume: a new server session, new trainers from other weights; load, upload, steps 10..19.
    Net resumed(init_seed + 77 + t);
    {
        O user = make_opt(resumed);
        oar::dist::ps::Trainer<Net, O> trainer(role, resumed, user, o);
        oar::load_checkpoint(dir, "ps", resumed, trainer);
        trainer.upload();
        ps_steps(trainer, mine, 10, steps, [&](auto x) { return resumed.forward(x); },
                 [&](auto dy) { resumed.backward(dy); });
        trainer.stop();
    }
    const bool rok = bitwise_equal(resumed, net);
    if (t == 0 || !rok)
        std::printf("%s: trainer %zu: resumed from the step-10 checkpoint, steps 10..19 give the uninterrupted run's "
                    "bits: %s\n", name, t, rok ? "ok" : "FAILED");
    return failed | (rok ? 0 : 1);
}

/// Async: 2 trainers memorise 200 random samples with Adam (lr 0.003, 60 epochs of 5 pushes per
/// trainer), pushing without a barrier (max_staleness 1). Convergence, not bits: trainer 0
/// evaluates the final parameters on all 200. Arguments (for trying settings by hand): a_sync,
/// max_staleness, learning rate, epochs.
int ps_async(int* argc, char*** argv, bool a_sync, int staleness, float lr, std::size_t epochs) {
    // Through the fleet facade, as a Paddle program reads.
    auto fleet = oar::dist::fleet::init(argc, argv, /*is_collective=*/false, {.a_sync = a_sync, .max_staleness = staleness});
    const oar::data::RandomDataset ds(200, oar::make_dims(1, 28, 28), 10, data_seed);
    Net net(init_seed);
    oar::Adam<> opt(net.parameters(), {.learning_rate = lr});
    if (fleet.is_server()) {
        fleet.run_server(net, opt);
        std::printf("async server %d: served until every trainer stopped\n", fleet.worker_index());
        return 0;
    }
    oar::CrossEntropyLoss<> ce;
    auto evaluate = [&] {
        oar::data::DataLoader all(ds, {.batch_size = 200});
        double loss = 0;
        std::size_t correct = 0;
        for (auto&& b : all.epoch(0)) {
            const auto y = net.forward(b.images.view());
            loss = ce(y, b.labels);
            for (std::size_t i = 0; i < b.labels.size(); ++i) {
                std::size_t best = 0;
                for (std::size_t c = 1; c < 10; ++c)
                    if (y[i * 10 + c] > y[i * 10 + best]) best = c;
                correct += best == static_cast<std::size_t>(b.labels[i]) ? 1 : 0;
            }
        }
        return std::pair{loss, static_cast<double>(correct) / 200.0};
    };
    const auto before = evaluate();
    auto trainer = fleet.init_worker(net, opt);
    oar::data::DataLoader loader(ds, oar::data::DistributedBatchSampler(ds.size(), 20, 2,
                                                                        static_cast<std::size_t>(fleet.worker_index()), true));
    for (std::size_t epoch = 0; epoch < epochs; ++epoch)
        for (auto&& b : loader.epoch(epoch)) {
            ce(net.forward(b.images.view()), b.labels);
            net.backward(ce.backward());
            trainer.step();
            trainer.clear_grad();
        }
    fleet.stop_worker();
    if (fleet.worker_index() != 0) return 0;
    const auto after = evaluate();
    const bool ok = after.first < 0.25 * before.first && after.second >= 0.9;
    std::printf("%s: %d trainers x %zu pushes, max_staleness %d (%llu pushes still unanswered when the next "
                "gradient was computed): loss %.4f -> %.4f, accuracy %.3f -> %.3f on the 200 samples: %s\n",
                a_sync ? "async" : "sync", fleet.worker_num(), epochs * loader.num_batches(), staleness,
                static_cast<unsigned long long>(trainer.stale_answers()), before.first, after.first, before.second,
                after.second, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

/// Sync, 1 server, the server's timeout 2 s (the trainers' 30 s): trainer 1 stops sending at
/// step 3 without dying (it sleeps). The server must give up, naming trainer rank 1, and the
/// job end (the worker returns non-zero, mpirun aborts the others).
int ps_silent(const oar::dist::PsRole& role) {
    const oar::data::RandomDataset ds(200, oar::make_dims(1, 28, 28), 10, data_seed);
    Net net(init_seed);
    oar::Adam<> opt(net.parameters());
    if (role.is_server()) {
        oar::dist::ps::Server<oar::Adam<>> server(role, net, opt, {.timeout_s = 2});
        server.run();
        std::printf("server: every trainer stopped: the silent trainer went unnoticed\n");
        return 0;
    }
    oar::dist::ps::Trainer<Net, oar::Adam<>> trainer(role, net, opt, {.timeout_s = 30});
    oar::CrossEntropyLoss<> ce;
    oar::data::DataLoader loader(ds, oar::data::DistributedBatchSampler(ds.size(), 10, 2,
                                                                        static_cast<std::size_t>(role.index())));
    for (auto&& b : loader.epoch(0)) {
        if (role.index() == 1 && b.index == 3) {
            std::printf("trainer 1 (rank 1): silent from step 3\n");
            std::fflush(stdout);
            std::this_thread::sleep_for(std::chrono::seconds(40));
        }
        ce(net.forward(b.images.view()), b.labels);
        net.backward(ce.backward());
        trainer.step();
        trainer.clear_grad();
    }
    trainer.stop();
    std::printf("trainer %d: finished: the silent trainer went unnoticed\n", role.index());
    return 0;
}

/// Sync, 1 server: trainer 1 kills itself at step 5. The job must end, naming the rank.
int ps_fault(const oar::dist::PsRole& role) {
    const oar::data::RandomDataset ds(1000, oar::make_dims(1, 28, 28), 10, data_seed);
    Net net(init_seed);
    oar::Adam<> opt(net.parameters());
    const oar::dist::ps::Options o{};
    if (role.is_server()) {
        oar::dist::ps::Server<oar::Adam<>> server(role, net, opt, o);
        server.run();
        std::printf("server: every trainer stopped: the fault went unnoticed\n");
        return 0;
    }
    oar::dist::ps::Trainer<Net, oar::Adam<>> trainer(role, net, opt, o);
    oar::CrossEntropyLoss<> ce;
    oar::data::DataLoader loader(ds, oar::data::DistributedBatchSampler(ds.size(), 10, 2,
                                                                        static_cast<std::size_t>(role.index())));
    for (std::size_t epoch = 0; epoch < 1000; ++epoch)
        for (auto&& b : loader.epoch(epoch)) {
            if (role.index() == 1 && b.index == 5) {
                std::printf("trainer 1 (rank 1): raising SIGKILL at step 5\n");
                std::fflush(stdout);
                std::raise(SIGKILL);
            }
            ce(net.forward(b.images.view()), b.labels);
            net.backward(ce.backward());
            trainer.step();
            trainer.clear_grad();
        }
    std::printf("trainer %d: trained 1000 epochs without its peer: the fault went unnoticed\n", role.index());
    return 0;
}

}  // namespace

/// Timings for the cost model in docs/DISTRIBUTED.md (benchmarks/bench_dist.sh runs it): the
/// allreduce of n floats (median of 50) for n from 1 to 1M, and for the course's CNN at batch
/// 50 per rank: forward + backward alone, and a data-parallel step blocking and overlapped.
int bench(oar::dist::ParallelContext& ctx) {
    using Clock = std::chrono::steady_clock;
    auto& comm = ctx.comm();
    auto median_us = [&](auto&& f, int reps) {
        std::vector<double> t;
        for (int i = 0; i < reps; ++i) {
            comm.barrier();
            const auto t0 = Clock::now();
            f();
            t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
        std::sort(t.begin(), t.end());
        std::vector<double> mid{t[t.size() / 2]};
        comm.allreduce_average(std::span<double>(mid));  // the ranks' medians, averaged
        return mid[0];
    };
    for (std::size_t n : {1u, 16u, 256u, 4096u, 20350u, 65536u, 1u << 20}) {
        std::vector<float> x(n, 1.0f);
        const double us = median_us([&] { comm.allreduce_sum(std::span<float>(x)); }, 50);
        if (ctx.is_writer())
            std::printf("allreduce %8zu floats (%9zu bytes): %9.1f us  (%.1f MB/s)\n", n, 4 * n, us,
                        4.0 * static_cast<double>(n) / us);
    }
    using CNN = oar::course::CNN;
    oar::Network<CNN, Image> net(1);
    const oar::data::RandomDataset ds(50, oar::make_dims(1, 28, 28), 10, data_seed);
    oar::data::DataLoader loader(ds, oar::data::DistributedBatchSampler(ds.size(), 50, 1, 0));
    oar::data::Batch b;
    for (auto&& x : loader.epoch(0)) b = x;
    oar::CrossEntropyLoss<> ce;
    const double compute = median_us([&] {
        ce(net.forward(b.images.view()), b.labels);
        net.backward(ce.backward());
        net.clear_grad();
    }, 20);
    if (ctx.is_writer())
        std::printf("CNN (%zu parameters), batch 50 per rank: forward + backward %.0f us\n",
                    net.parameters().count(), compute);
    for (bool overlap : {false, true})
        for (std::size_t bucket : {std::size_t{25} << 20, std::size_t{16384}, std::size_t{4096}}) {
            oar::dist::DataParallel dp(net, comm, {.bucket_bytes = bucket, .overlap = overlap});
            const double us = median_us([&] {
                ce(dp.forward(b.images.view()), b.labels);
                dp.backward(ce.backward());
                net.clear_grad();
            }, 20);
            if (ctx.is_writer())
                std::printf("data-parallel step, %s, %zu buckets of <= %zu bytes: %.0f us (+%.0f us over compute)\n",
                            overlap ? "overlapped" : "blocking  ", dp.num_buckets(), bucket, us, us - compute);
        }
    return 0;
}

int main(int argc, char** argv) {
    try {
        oar::dist::ParallelContext ctx = oar::dist::init_parallel_env(&argc, &argv);
        const std::string mode = argc > 1 ? argv[1] : "";
        if (ctx.is_writer()) std::printf("mpi_worker %s: %d ranks\n", mode.c_str(), ctx.world_size());
        int rc = 2;
        // Every optimizer: bitwise equal to 1 process summing the two halves' gradients. Against
        // 1 process x batch 100: SGD in float and Adam in double <= 1e-6; Adam in float no further
        // than that same process is from itself with each batch's samples reordered (~5e-5):
        // Adam divides each gradient by its own RMS, so for gradients that are sums of cancelling
        // terms, the summation order's rounding becomes a visible step (docs/DISTRIBUTED.md).
        if (mode == "equivalence")
            rc = equivalence<oar::cpu, oar::SGD>(ctx, "SGD float", 1e-6) |
                 equivalence<oar::cpu64, oar::Adam>(ctx, "Adam double", 1e-6) |
                 equivalence<oar::cpu, oar::Adam>(ctx, "Adam float", 1e-6, /*or_reordering=*/true);
        else if (mode == "sampler") rc = sampler(ctx);
        else if (mode == "fault") rc = fault(ctx);
        else if (mode == "mismatch") rc = mismatch(ctx);
        else if (mode == "bench") rc = bench(ctx);
        else if (mode.rfind("ps_", 0) == 0) try {
            const oar::dist::PsRole role = oar::dist::ps_role_from_env(ctx.world_size(), ctx.rank());
            const std::string dir = argc > 2 ? argv[2] : "";
            if (mode == "ps_sync")
                rc = ps_sync<oar::SGD>(role, "PS sync SGD", "") | ps_sync<oar::Adam>(role, "PS sync Adam", dir);
            else if (mode == "ps_async")
                rc = ps_async(&argc, &argv, argc > 2 ? std::atoi(argv[2]) != 0 : true, argc > 3 ? std::atoi(argv[3]) : 1,
                              argc > 4 ? static_cast<float>(std::atof(argv[4])) : 0.003f,
                              argc > 5 ? static_cast<std::size_t>(std::atoi(argv[5])) : 60);
            else if (mode == "ps_fault") rc = ps_fault(role);
            else if (mode == "ps_silent") rc = ps_silent(role);
        } catch (const oar::comm_error& e) {
            // As train_mnist does: a rank that gives up ends the whole job (returning would leave
            // it in MPI_Finalize, waiting for ranks that wait for it).
            std::printf("mpi_worker: rank %d: %s\n", ctx.rank(), e.what());
            std::fflush(stdout);
            ctx.abort(1);
        }
        else std::printf("usage: mpi_worker equivalence|sampler|fault|mismatch|bench|ps_sync DIR|ps_async|ps_fault\n");
        std::fflush(stdout);
        return rc;
    } catch (const std::exception& e) {
        std::printf("mpi_worker: %s\n", e.what());
        return 1;
    }
}
