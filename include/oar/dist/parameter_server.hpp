// Parameter-server training over MPI (Paddle's PS mode, ps-lite's push/pull of key ranges): the
// flat parameter buffer is cut into contiguous slices, one per server rank; each server holds its
// slice's parameters and the optimizer's state for it and runs the optimizer there; trainer ranks
// compute gradients, push each server its slice and pull the new parameters.
//   sync  (a_sync = false): a server waits for every trainer's push of a step, averages them in
//         trainer order, steps, and sends the parameters to all: the same arithmetic as collective
//         data parallel on the same global batch.
//   async (a_sync = true): a server applies each push as it arrives and answers that trainer
//         alone; a trainer keeps computing while up to `max_staleness` of its pushes are unanswered
//         (non-blocking MPI), and no trainer waits for another.
// Buffers (BatchNorm's running statistics) are not sent to servers: each trainer keeps its own
// (trainer 0's at the start), as in the collective mode, and trainer 0's are the ones checkpoints save.
// Roles come from role_maker.hpp; ps_fleet.hpp is the fleet facade over this header.
#pragma once

#include <algorithm>  // std::min, std::max
#include <climits>    // INT_MAX: MPI counts are int
#include <cstddef>    // std::size_t, std::byte
#include <cstdint>    // std::uint64_t
#include <cstring>    // std::memcpy
#include <deque>      // std::deque: a trainer's unanswered pushes
#include <functional> // std::function: the trainer's registration with the fleet
#include <initializer_list>  // std::initializer_list: a message's parts
#include <span>       // std::span
#include <string>     // std::string
#include <utility>    // std::move
#include <vector>     // std::vector

#include "../config.hpp"      // OAR_HAS_MPI
#include "../core/error.hpp"  // value_error, detail::concat
#include "role_maker.hpp"     // PsRole

namespace oar::dist::ps {

/// One server's part of the flat buffer: values [first, first + size).
struct Shard {
    std::size_t first = 0, size = 0;
};

/// The flat buffer of n values cut into `servers` contiguous slices balanced by bytes: slice
/// boundaries fall on multiples of `align` values (a cache line of floats, so that every slice
/// keeps the buffer's SIMD alignment), and slice sizes differ by at most `align` values plus the
/// last partial block. Slices may be empty when n is smaller than servers * align.
inline std::vector<Shard> shard_ranges(std::size_t n, int servers, std::size_t align = 16) {
    if (servers < 1) throw value_error(oar::detail::concat("shard_ranges: ", servers, " servers, need at least 1"));
    if (align == 0) throw value_error("shard_ranges: align must be at least 1");
    const std::size_t blocks = (n + align - 1) / align, s_count = static_cast<std::size_t>(servers);
    std::vector<Shard> out;
    std::size_t first = 0;
    for (std::size_t s = 0; s < s_count; ++s) {
        const std::size_t end = s + 1 == s_count ? n : std::min(n, blocks * (s + 1) / s_count * align);
        out.push_back({first, end - first});
        first = end;
    }
    return out;
}

/// How trainers and servers exchange updates (fleet::DistributedStrategy maps onto it).
struct Options {
    /// false: synchronous (a barrier per step); true: asynchronous pushes and pulls.
    bool a_sync = false;
    /// Async: how many of its own pushes a trainer may have unanswered while it computes the next
    /// gradient (0: each push's answer is awaited before the next forward, still without waiting
    /// for other trainers). Pushes of the other trainers are not counted: they land whenever they come.
    int max_staleness = 1;
    /// Seconds a server waits for any message, or a trainer for a server's answer, before it gives
    /// up with a comm_error naming whom it waited for (a trainer that died: the launcher usually ends
    /// the job first). OAR_PS_TIMEOUT overrides it in fleet::init.
    double timeout_s = 60.0;
};

}  // namespace oar::dist::ps

#if OAR_HAS_MPI

#include <chrono>       // std::chrono::steady_clock: deadlines
#include <optional>     // std::optional: the server's optimizer
#include <thread>       // std::this_thread::sleep_for: waiting without spinning a shared core
#include <type_traits>  // std::is_same_v

#include "../kernels/cpu/elementwise.hpp"  // op::scale_down: the average, as DataParallel divides
#include "../kernels/dispatch.hpp"         // kernel
#include "../nn/parameters.hpp"            // basic_parameter_set, ParamEntry
#include "../optim/optimizer.hpp"          // L2Decay: a parameter's own regularizer
#include "data_parallel.hpp"               // describe_parameters, fingerprint
#include "mpi_comm.hpp"                    // MpiComm, mpi_check

namespace oar::dist::ps {

namespace detail {
using namespace oar::detail;
using oar::dist::detail::mpi_check;

enum Tag : int {
    tag_push = 7301,  ///< trainer -> server: header + gradient slice
    tag_params,       ///< server -> trainer: parameter slice
    tag_pull,         ///< trainer -> server: header only; answered by tag_params
    tag_state_get,    ///< trainer -> server: header only; answered by tag_state
    tag_state,        ///< server -> trainer: header (step count) + optimizer state slices
    tag_state_set,    ///< trainer 0 -> server: header + parameter slice + state slices; answered by tag_ack
    tag_ack,          ///< server -> trainer 0: empty
    tag_stop,         ///< trainer -> server: this trainer is done
};

struct Header {
    std::uint64_t step = 0;       ///< the trainer's push count (push), or the optimizer's step count (state)
    double learning_rate = 0.0;   ///< the trainer's current rate (push): LR schedules run on trainers
};

/// Waits for `reqs` to complete without keeping a core busy (the ranks share few cores): spins
/// briefly, then sleeps in growing steps up to 200 us. After `timeout_s`, comm_error with `what()`.
template <class What>
void wait_all(std::vector<MPI_Request>& reqs, double timeout_s, What&& what) {
    if (reqs.empty()) return;
    const auto start = std::chrono::steady_clock::now();
    std::chrono::microseconds nap{0};
    for (int tries = 0;; ++tries) {
        int done = 0;
        mpi_check(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
        if (done) {
            reqs.clear();
            return;
        }
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s)
            throw comm_error(concat(what(), " for ", timeout_s, " s (OAR_PS_TIMEOUT)"));
        if (tries > 64) {
            nap = std::min(std::chrono::microseconds(200), nap + std::chrono::microseconds(10));
            std::this_thread::sleep_for(nap);
        }
    }
}

/// Every rank (servers and trainers) checks that all built the same model: value_error naming the
/// first rank that differs from rank 0, and its role. A collective over the whole job.
inline void check_same_model(MpiComm& world, const PsRole& role, const std::string& mine, std::size_t buffer,
                             std::size_t count) {
    std::vector<double> fp = split_u64(fingerprint(mine, buffer));
    fp.push_back(static_cast<double>(count));
    const std::size_t k = fp.size();
    const std::vector<double> all = allgather(world, std::span<const double>(fp));
    int odd = -1;
    for (std::size_t r = 0; r < static_cast<std::size_t>(world.world_size()) && odd < 0; ++r)
        for (std::size_t i = 0; i < k; ++i)
            if (all[r * k + i] != all[i]) odd = static_cast<int>(r);
    if (odd < 0) return;
    const std::vector<std::string> what = allgather_strings(world, mine);
    const auto o = static_cast<std::size_t>(odd);
    PsRole other = role;
    other.rank = odd;
    throw value_error(concat("parameter server: the ranks built different models: rank ", odd, " (",
                             other.is_server() ? "server " : "trainer ", other.index(), ") has ",
                             static_cast<std::size_t>(all[o * k + k - 1]), " parameters in ", what[o],
                             ", rank 0 (trainer 0) has ", static_cast<std::size_t>(all[k - 1]), " in ", what[0]));
}

/// A message: header then the values of each span, as bytes.
template <class T>
std::vector<std::byte> pack(const Header& h, std::initializer_list<std::span<const T>> parts) {
    std::size_t bytes = sizeof(Header);
    for (auto p : parts) bytes += p.size_bytes();
    std::vector<std::byte> out(bytes);
    std::memcpy(out.data(), &h, sizeof(Header));
    std::size_t at = sizeof(Header);
    for (auto p : parts) {
        if (!p.empty()) std::memcpy(out.data() + at, p.data(), p.size_bytes());
        at += p.size_bytes();
    }
    return out;
}

inline int byte_count(std::size_t n) {
    if (n > static_cast<std::size_t>(INT_MAX))
        throw value_error(concat("parameter server: a message of ", n, " bytes is larger than MPI's int count allows; "
                                 "use more servers"));
    return static_cast<int>(n);
}
}  // namespace detail

/// A server rank: owns slice `shard` of the parameters and an optimizer of the user's kind and
/// options for it (each parameter's own L2Decay included, as set_regularizer gave it), and answers
/// trainers until every trainer has said stop. Construct it on every server rank at the point where
/// the trainers construct their Trainer (both are collectives over the job); then run().
template <class Opt>
class Server {
public:
    using value_type = typename Opt::value_type;
    using parameter_set = typename Opt::parameter_set;

    /// `net` is the model the trainers train (only its layout is used: the values come from
    /// trainer 0), `opt` the optimizer they were given (its kind, options and per-parameter
    /// regularizers are used).
    template <class Net>
    Server(const PsRole& role, Net& net, const Opt& opt, Options o = {})
        : role_(role), o_(o), world_(MPI_COMM_WORLD) {
        static_assert(std::is_same_v<typename Net::value_type, value_type>,
                      "oar: the parameter server's optimizer must work on the network's scalar type");
        if (!role.is_server())
            throw value_error(oar::detail::concat("ps::Server on rank ", role.rank, ", which is trainer ", role.index()));
        detail::check_same_model(world_, role_, describe_parameters(net), net.parameters().values().size(),
                                 net.parameters().count());
        MPI_Comm none = MPI_COMM_NULL;  // the trainers' communicator: servers take no part in it
        detail::mpi_check(MPI_Comm_split(world_.native(), MPI_UNDEFINED, role.rank, &none), "MPI_Comm_split");
        shard_ = shard_ranges(net.parameters().values().size(), role.servers)[static_cast<std::size_t>(role.index())];
        // This slice's parts of the parameters under their own keys (a parameter cut by a slice
        // boundary keeps its key on both sides), so that each part keeps the regularizer the
        // trainers' optimizer gives that parameter (set_regularizer: Paddle's ParamAttr regularizer).
        std::vector<ParamEntry> parts;
        for (const ParamEntry& e : net.parameters().entries()) {
            const std::size_t lo = std::max(e.offset, shard_.first);
            const std::size_t hi = std::min(e.offset + e.size, shard_.first + shard_.size);
            if (lo < hi) parts.push_back({e.key, make_dims(hi - lo), lo - shard_.first, hi - lo});
        }
        params_.emplace(shard_.size, std::move(parts));
        opt_.emplace(*params_, opt.options());
        for (const ParamEntry& e : params_->entries())
            if (const float c = opt.l2_decay(e.key); c != opt.l2_decay()) opt_->set_regularizer(e.key, L2Decay(c));
        if (!o_.a_sync) pushes_.assign(static_cast<std::size_t>(role.trainers), std::vector<value_type>(shard_.size));
    }
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    const Shard& shard() const { return shard_; }
    /// Updates applied so far (sync: one per step; async: one per push).
    std::uint64_t updates() const { return updates_; }

    /// Answers trainers until all have stopped. comm_error when nothing arrives for timeout_s.
    void run() {
        const int W = role_.trainers;
        std::vector<bool> stopped(static_cast<std::size_t>(W), false), pushed(static_cast<std::size_t>(W), false);
        int n_stopped = 0, n_pushed = 0;
        double lr = 0;
        while (n_stopped < W) {
            // Whom a timeout names: in the middle of a sync step the trainers whose push is missing.
            std::vector<bool> awaited(stopped.size());
            for (std::size_t i = 0; i < awaited.size(); ++i) awaited[i] = !stopped[i] && !(n_pushed > 0 && pushed[i]);
            const MPI_Status st = probe(awaited);
            const int t = st.MPI_SOURCE;  // trainers are ranks 0..W-1
            int bytes = 0;
            detail::mpi_check(MPI_Get_count(&st, MPI_BYTE, &bytes), "MPI_Get_count");
            buf_.resize(static_cast<std::size_t>(bytes));
            detail::mpi_check(MPI_Recv(buf_.data(), bytes, MPI_BYTE, t, st.MPI_TAG, world_.native(), MPI_STATUS_IGNORE),
                              "MPI_Recv");
            if (t < 0 || t >= W) throw comm_error(oar::detail::concat("parameter server: a message from rank ", t,
                                                                      ", which is not a trainer"));
            detail::Header h{};
            std::memcpy(&h, buf_.data(), sizeof(h));
            const auto* payload = reinterpret_cast<const value_type*>(buf_.data() + sizeof(h));
            const std::size_t n = shard_.size;
            switch (st.MPI_TAG) {
            case detail::tag_push:
                expect_bytes(bytes, n, t, "push");
                if (o_.a_sync) {
                    std::memcpy(params_->grads().data(), payload, n * sizeof(value_type));
                    update(h.learning_rate);
                    send_params({t});
                } else {
                    if (pushed[static_cast<std::size_t>(t)])
                        throw comm_error(oar::detail::concat("parameter server ", role_.index(), ": trainer ", t,
                                                             " pushed twice in one synchronous step"));
                    pushed[static_cast<std::size_t>(t)] = true;
                    std::memcpy(pushes_[static_cast<std::size_t>(t)].data(), payload, n * sizeof(value_type));
                    if (t == 0) lr = h.learning_rate;
                    if (++n_pushed == W) {
                        average_pushes();
                        update(lr);
                        std::vector<int> all;
                        for (int i = 0; i < W; ++i) all.push_back(i);
                        send_params(all);
                        pushed.assign(pushed.size(), false);
                        n_pushed = 0;
                    }
                }
                break;
            case detail::tag_pull: send_params({t}); break;
            case detail::tag_state_get: send_state(t); break;
            case detail::tag_state_set: receive_state(payload, bytes, t, h.step); break;
            case detail::tag_stop:
                if (!stopped[static_cast<std::size_t>(t)]) ++n_stopped;
                stopped[static_cast<std::size_t>(t)] = true;
                break;
            default:
                throw comm_error(oar::detail::concat("parameter server: unknown message tag ", st.MPI_TAG, " from rank ", t));
            }
        }
    }

private:
    MPI_Status probe(const std::vector<bool>& awaited) {
        const auto start = std::chrono::steady_clock::now();
        std::chrono::microseconds nap{0};
        for (int tries = 0;; ++tries) {
            int flag = 0;
            MPI_Status st{};
            detail::mpi_check(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, world_.native(), &flag, &st), "MPI_Iprobe");
            if (flag) return st;
            if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > o_.timeout_s) {
                std::string who;  // trainer t is rank t
                for (std::size_t i = 0; i < awaited.size(); ++i)
                    if (awaited[i]) who += (who.empty() ? "" : ", ") + std::to_string(i);
                throw comm_error(oar::detail::concat("parameter server ", role_.index(), " (rank ", role_.rank,
                                                     "): waited ", o_.timeout_s, " s (OAR_PS_TIMEOUT) for trainer rank(s) ",
                                                     who, ", which sent nothing: stopping the job"));
            }
            if (tries > 64) {
                nap = std::min(std::chrono::microseconds(200), nap + std::chrono::microseconds(10));
                std::this_thread::sleep_for(nap);
            }
        }
    }

    void expect_bytes(int bytes, std::size_t values, int t, const char* what) const {
        const std::size_t want = sizeof(detail::Header) + values * sizeof(value_type);
        if (static_cast<std::size_t>(bytes) != want)
            throw comm_error(oar::detail::concat("parameter server ", role_.index(), ": trainer ", t, "'s ", what, " has ",
                                                 bytes, " bytes, expected ", want, " (did it build the same model?)"));
    }

    /// The trainers' gradients summed in trainer order and divided by their number, with the kernel
    /// DataParallel divides with (for two trainers exactly the allreduce's sum: a + b == b + a).
    void average_pushes() {
        value_type* g = params_->grads().data();
        const std::size_t n = shard_.size;
        std::memcpy(g, pushes_[0].data(), n * sizeof(value_type));
        for (std::size_t t = 1; t < pushes_.size(); ++t)
            for (std::size_t i = 0; i < n; ++i) g[i] += pushes_[t][i];
        if (pushes_.size() > 1)
            kernel<op::scale_down, basic_cpu<value_type>>::run(g, n, static_cast<value_type>(pushes_.size()));
    }

    void update(double lr) {
        opt_->set_learning_rate(static_cast<float>(lr));
        opt_->step();
        ++updates_;
    }

    void send_params(const std::vector<int>& trainers) {
        std::vector<MPI_Request> reqs(trainers.size(), MPI_REQUEST_NULL);
        const auto bytes = detail::byte_count(shard_.size * sizeof(value_type));
        for (std::size_t i = 0; i < trainers.size(); ++i)
            detail::mpi_check(MPI_Isend(params_->values().data(), bytes, MPI_BYTE, trainers[i], detail::tag_params,
                                        world_.native(), &reqs[i]),
                              "MPI_Isend");
        detail::wait_all(reqs, o_.timeout_s, [&] {
            return oar::detail::concat("parameter server ", role_.index(), ": sending parameters to trainer(s) waited");
        });
    }

    std::uint64_t step_count() const {
        if constexpr (requires(const Opt& p) { p.step_count(); }) return opt_->step_count();
        else return updates_;
    }

    void send_state(int t) {
        std::vector<std::span<const value_type>> parts;
        for (auto& [name, buf] : opt_->state()) parts.emplace_back(buf.data(), buf.size());
        std::vector<std::byte> msg(sizeof(detail::Header) + parts.size() * shard_.size * sizeof(value_type));
        const detail::Header h{step_count(), 0.0};
        std::memcpy(msg.data(), &h, sizeof(h));
        std::size_t at = sizeof(h);
        for (auto p : parts) {
            if (!p.empty()) std::memcpy(msg.data() + at, p.data(), p.size_bytes());
            at += p.size_bytes();
        }
        detail::mpi_check(MPI_Send(msg.data(), detail::byte_count(msg.size()), MPI_BYTE, t, detail::tag_state,
                                   world_.native()),
                          "MPI_Send");
    }

    void receive_state(const value_type* payload, int bytes, int t, std::uint64_t steps) {
        auto state = opt_->state();
        expect_bytes(bytes, shard_.size * (1 + state.size()), t, "parameters and optimizer state");
        const std::size_t n = shard_.size;
        if (n) std::memcpy(params_->values().data(), payload, n * sizeof(value_type));
        std::size_t at = n;
        for (auto& [name, buf] : state) {
            if (n) std::memcpy(buf.data(), payload + at, n * sizeof(value_type));
            at += n;
        }
        if constexpr (requires(Opt& p) { p.set_step_count(steps); }) opt_->set_step_count(steps);
        detail::mpi_check(MPI_Send(nullptr, 0, MPI_BYTE, t, detail::tag_ack, world_.native()), "MPI_Send");
    }

    PsRole role_;
    Options o_;
    MpiComm world_;
    Shard shard_;
    std::optional<parameter_set> params_;
    std::optional<Opt> opt_;
    std::vector<std::vector<value_type>> pushes_;  // sync: this step's push of each trainer
    std::vector<std::byte> buf_;
    std::uint64_t updates_ = 0;
};

/// A trainer rank's side: an Optimizer (so Model::prepare and save/load_checkpoint take it) whose
/// step() pushes the gradients to the servers and pulls the parameters back. `opt` is the user's
/// optimizer over the network: it is never stepped here; it keeps the learning rate (which LR
/// schedules set and every push carries) and, for checkpoints, the servers' optimizer state
/// gathered by state(). Constructing one is fleet.init_worker(): a collective over the job (the
/// servers construct their Server at the same point); it starts the servers from trainer 0's
/// parameters and optimizer state, and every trainer from them.
template <class Net, class Opt>
class Trainer {
public:
    using value_type = typename Opt::value_type;
    using backend = typename Opt::backend;
    using parameter_set = typename Opt::parameter_set;
    using state_view = typename Opt::state_view;

    /// `registered` (if any) is called with the trainer once it is ready (fleet::Fleet keeps it
    /// for stop_worker()).
    Trainer(const PsRole& role, Net& net, Opt& opt, Options o = {}, const std::function<void(Trainer*)>& registered = {})
        : role_(role), o_(o), net_(&net), opt_(&opt), world_(MPI_COMM_WORLD) {
        if (!role.is_worker())
            throw value_error(oar::detail::concat("ps::Trainer on rank ", role.rank, ", which is server ", role.index()));
        if (o_.a_sync && o_.max_staleness < 0)
            throw value_error(oar::detail::concat("parameter server: max_staleness is ", o_.max_staleness,
                                                  ", it must be >= 0"));
        detail::check_same_model(world_, role_, describe_parameters(net), net.parameters().values().size(),
                                 net.parameters().count());
        MPI_Comm tc = MPI_COMM_NULL;
        detail::mpi_check(MPI_Comm_split(world_.native(), 0, role.rank, &tc), "MPI_Comm_split");
        trainers_.emplace(tc);  // MpiComm duplicates it
        MPI_Comm_free(&tc);
        shards_ = shard_ranges(net.parameters().values().size(), role.servers);
        upload();
        if (registered) registered(this);
    }
    Trainer(const Trainer&) = delete;
    Trainer& operator=(const Trainer&) = delete;
    ~Trainer() = default;

    // Optimizer
    void step() {
        ++pushes_;
        if (o_.a_sync) async_step();
        else sync_step();
    }
    void clear_grad() { opt_->clear_grad(); }
    float learning_rate() const { return opt_->learning_rate(); }
    void set_learning_rate(float lr) { opt_->set_learning_rate(lr); }
    /// The servers' optimizer state gathered into the user's optimizer's (full-size) buffers, so
    /// that save_checkpoint writes the file a single-process run writes. Also sets the step count.
    std::vector<state_view> state() {
        drain();
        auto mine = opt_->state();
        std::vector<std::byte> buf;
        std::uint64_t steps = 0;
        for (int s = 0; s < role_.servers; ++s) {
            const Shard& sh = shards_[static_cast<std::size_t>(s)];
            send_header(s, detail::tag_state_get, {});
            buf.resize(sizeof(detail::Header) + mine.size() * sh.size * sizeof(value_type));
            recv(buf.data(), buf.size(), s, detail::tag_state, "the optimizer state");
            detail::Header h{};
            std::memcpy(&h, buf.data(), sizeof(h));
            if (s == 0) steps = h.step;
            std::size_t at = sizeof(h);
            for (auto& [name, b] : mine) {
                if (sh.size) std::memcpy(b.data() + sh.first, buf.data() + at, sh.size * sizeof(value_type));
                at += sh.size * sizeof(value_type);
            }
        }
        if constexpr (requires(Opt& p) { p.set_step_count(steps); }) opt_->set_step_count(steps);
        return mine;
    }
    std::uint64_t step_count() const
        requires requires(const Opt& p) { p.step_count(); }
    {
        return opt_->step_count();
    }
    void set_step_count(std::uint64_t t)
        requires requires(Opt& p) { p.set_step_count(t); }
    {
        opt_->set_step_count(t);
    }

    /// Trainer 0's parameters and optimizer state (and step count) become the servers'; then every
    /// trainer pulls them and takes trainer 0's buffers. A collective over the trainers: the
    /// constructor calls it, and so does a resume after load_checkpoint (every trainer loads it).
    void upload() {
        drain();
        if (role_.index() == 0) {
            auto state = opt_->state();
            std::uint64_t steps = 0;
            if constexpr (requires(const Opt& p) { p.step_count(); }) steps = opt_->step_count();
            const auto v = net_->parameters().host_values();
            std::vector<MPI_Request> reqs;
            std::vector<std::vector<std::byte>> msgs;
            for (int s = 0; s < role_.servers; ++s) {
                const Shard& sh = shards_[static_cast<std::size_t>(s)];
                std::vector<std::span<const value_type>> parts{v.subspan(sh.first, sh.size)};
                for (auto& [name, b] : state) parts.emplace_back(b.data() + sh.first, sh.size);
                std::vector<std::byte> m(sizeof(detail::Header) + parts.size() * sh.size * sizeof(value_type));
                const detail::Header h{steps, 0.0};
                std::memcpy(m.data(), &h, sizeof(h));
                std::size_t at = sizeof(h);
                for (auto p : parts) {
                    if (!p.empty()) std::memcpy(m.data() + at, p.data(), p.size_bytes());
                    at += p.size_bytes();
                }
                msgs.push_back(std::move(m));
            }
            for (int s = 0; s < role_.servers; ++s) {
                auto& m = msgs[static_cast<std::size_t>(s)];
                reqs.push_back(MPI_REQUEST_NULL);
                detail::mpi_check(MPI_Isend(m.data(), detail::byte_count(m.size()), MPI_BYTE, role_.server_rank(s),
                                            detail::tag_state_set, world_.native(), &reqs.back()),
                                  "MPI_Isend");
                reqs.push_back(MPI_REQUEST_NULL);
                detail::mpi_check(MPI_Irecv(nullptr, 0, MPI_BYTE, role_.server_rank(s), detail::tag_ack, world_.native(),
                                            &reqs.back()),
                                  "MPI_Irecv");
            }
            detail::wait_all(reqs, o_.timeout_s, [&] { return waited_for("to take trainer 0's parameters"); });
        }
        trainers_->barrier();  // every server holds trainer 0's parameters before anyone pulls
        pull();
        if constexpr (requires(Net& n) { n.parameters().buffers(); })
            if (!net_->parameters().buffers().empty()) trainers_->broadcast(net_->parameters().buffers(), 0);
    }

    /// fleet.stop_worker(): waits for this trainer's unanswered pushes, then (once every trainer
    /// has) pulls the final parameters and tells the servers it is done. Idempotent.
    void stop() {
        if (stopped_) return;
        drain();
        trainers_->barrier();  // all pushes of all trainers are applied: the final parameters
        pull();
        std::vector<MPI_Request> reqs;
        for (int s = 0; s < role_.servers; ++s) {
            reqs.push_back(MPI_REQUEST_NULL);
            detail::mpi_check(MPI_Isend(nullptr, 0, MPI_BYTE, role_.server_rank(s), detail::tag_stop, world_.native(),
                                        &reqs.back()),
                              "MPI_Isend");
        }
        detail::wait_all(reqs, o_.timeout_s, [&] { return waited_for("to hear stop"); });
        stopped_ = true;
    }

    /// The trainers alone (their own collectives: metrics, DataParallel's start-up check).
    MpiComm& trainers() { return *trainers_; }
    const PsRole& role() const { return role_; }
    const std::vector<Shard>& shards() const { return shards_; }
    const Options& options() const { return o_; }
    /// Bytes this trainer sends and receives per step (gradients out, parameters in, headers).
    std::size_t bytes_per_step() const {
        return 2 * net_->parameters().values().size() * sizeof(value_type) +
               static_cast<std::size_t>(role_.servers) * sizeof(detail::Header);
    }
    /// Async: pushes answered after this trainer had computed another gradient (its staleness at work).
    std::uint64_t stale_answers() const { return stale_answers_; }

private:
    struct Slot {  // one push in flight (async)
        std::vector<std::vector<std::byte>> out;  // per server
        std::vector<value_type> in;               // the whole buffer, each server's slice
        std::vector<MPI_Request> reqs;
    };

    std::string waited_for(const char* what) const {
        return oar::detail::concat("trainer ", role_.index(), " (rank ", role_.rank, ") waited for the servers (ranks ",
                                   role_.server_rank(0), "..", role_.server_rank(role_.servers - 1), ") ", what);
    }

    void send_header(int s, int tag, const detail::Header& h) {
        detail::mpi_check(MPI_Send(&h, sizeof(h), MPI_BYTE, role_.server_rank(s), tag, world_.native()), "MPI_Send");
    }
    void recv(void* p, std::size_t bytes, int s, int tag, const char* what) {
        std::vector<MPI_Request> r(1, MPI_REQUEST_NULL);
        detail::mpi_check(MPI_Irecv(p, detail::byte_count(bytes), MPI_BYTE, role_.server_rank(s), tag, world_.native(),
                                    &r[0]),
                          "MPI_Irecv");
        detail::wait_all(r, o_.timeout_s, [&] { return waited_for(what); });
    }

    /// Every server's current slice into the network (nothing of this trainer's may be in flight).
    void pull() {
        auto v = net_->parameters().values();
        std::vector<MPI_Request> reqs;
        for (int s = 0; s < role_.servers; ++s) {
            send_header(s, detail::tag_pull, {});
            const Shard& sh = shards_[static_cast<std::size_t>(s)];
            reqs.push_back(MPI_REQUEST_NULL);
            detail::mpi_check(MPI_Irecv(v.data() + sh.first, detail::byte_count(sh.size * sizeof(value_type)), MPI_BYTE,
                                        role_.server_rank(s), detail::tag_params, world_.native(), &reqs.back()),
                              "MPI_Irecv");
        }
        detail::wait_all(reqs, o_.timeout_s, [&] { return waited_for("for the parameters"); });
    }

    void start_push(Slot& slot, value_type* into) {
        const auto g = net_->parameters().grads();
        const detail::Header h{pushes_, static_cast<double>(opt_->learning_rate())};
        slot.out.resize(static_cast<std::size_t>(role_.servers));
        slot.reqs.clear();
        for (int s = 0; s < role_.servers; ++s) {
            const Shard& sh = shards_[static_cast<std::size_t>(s)];
            auto& m = slot.out[static_cast<std::size_t>(s)];
            m = detail::pack<value_type>(h, {std::span<const value_type>(g.data() + sh.first, sh.size)});
            slot.reqs.push_back(MPI_REQUEST_NULL);
            detail::mpi_check(MPI_Isend(m.data(), detail::byte_count(m.size()), MPI_BYTE, role_.server_rank(s),
                                        detail::tag_push, world_.native(), &slot.reqs.back()),
                              "MPI_Isend");
            slot.reqs.push_back(MPI_REQUEST_NULL);
            detail::mpi_check(MPI_Irecv(into + sh.first, detail::byte_count(sh.size * sizeof(value_type)), MPI_BYTE,
                                        role_.server_rank(s), detail::tag_params, world_.native(), &slot.reqs.back()),
                              "MPI_Irecv");
        }
    }

    /// Push, then wait for the servers' new parameters (they answer once every trainer has pushed).
    void sync_step() {
        Slot& slot = slots_.empty() ? slots_.emplace_back() : slots_.front();
        start_push(slot, net_->parameters().values().data());
        detail::wait_all(slot.reqs, o_.timeout_s, [&] { return waited_for("for the step's parameters"); });
    }

    /// Push without waiting; take every answer that has come (oldest first); wait only while more
    /// than max_staleness pushes are unanswered.
    void async_step() {
        const std::size_t ring = static_cast<std::size_t>(o_.max_staleness) + 1;
        if (slots_.size() < ring) slots_.resize(ring);
        Slot& slot = slots_[next_];
        next_ = (next_ + 1) % ring;
        slot.in.resize(net_->parameters().values().size());
        start_push(slot, slot.in.data());
        in_flight_.push_back(&slot);
        while (!in_flight_.empty() && arrived(*in_flight_.front())) take_front();
        while (in_flight_.size() > static_cast<std::size_t>(o_.max_staleness)) {
            detail::wait_all(in_flight_.front()->reqs, o_.timeout_s, [&] { return waited_for("for an answer"); });
            take_front();
        }
        stale_answers_ += in_flight_.size();
    }

    bool arrived(Slot& s) {
        int done = 0;
        detail::mpi_check(MPI_Testall(static_cast<int>(s.reqs.size()), s.reqs.data(), &done, MPI_STATUSES_IGNORE),
                          "MPI_Testall");
        if (done) s.reqs.clear();
        return done != 0;
    }
    void take_front() {
        Slot& s = *in_flight_.front();
        auto v = net_->parameters().values();
        std::memcpy(v.data(), s.in.data(), v.size_bytes());
        in_flight_.pop_front();
    }
    void drain() {
        while (!in_flight_.empty()) {
            detail::wait_all(in_flight_.front()->reqs, o_.timeout_s, [&] { return waited_for("for an answer"); });
            take_front();
        }
    }

    PsRole role_;
    Options o_;
    Net* net_;
    Opt* opt_;
    MpiComm world_;
    std::optional<MpiComm> trainers_;
    std::vector<Shard> shards_;
    std::deque<Slot> slots_;
    std::deque<Slot*> in_flight_;
    std::size_t next_ = 0;
    std::uint64_t pushes_ = 0, stale_answers_ = 0;
    bool stopped_ = false;
};

}  // namespace oar::dist::ps

#endif  // OAR_HAS_MPI
