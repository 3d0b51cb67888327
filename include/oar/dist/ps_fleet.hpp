// The fleet facade of the parameter-server mode (paddle.distributed.fleet with
// is_collective=False), over parameter_server.hpp and role_maker.hpp:
//
//   auto fleet = oar::dist::fleet::init(&argc, &argv, /*is_collective=*/false, {.a_sync = false});
//   Net net(seed);
//   oar::Adam<> adam(net.parameters(), {.learning_rate = 1e-3f});
//   if (fleet.is_server()) { fleet.run_server(net, adam); return 0; }   // init_server + run_server
//   auto opt = fleet.init_worker(net, adam);  // an Optimizer: step() pushes and pulls
//   ... model.prepare(opt); model.fit(...) ...
//   fleet.stop_worker();
//
// Every process runs the same program and builds the same model and optimizer (as in Paddle); the
// servers use only its layout, the optimizer's kind and options. fleet.init(is_collective=true)
// gives the collective mode's context (fleet.context()).
#pragma once

#include <cstdlib>     // std::getenv, std::strtod
#include <functional>  // std::function: stop_worker's target
#include <optional>    // std::optional: the role
#include <utility>     // std::move

#include "../core/error.hpp"      // usage_error, comm_error
#include "env.hpp"                // init_parallel_env, ParallelContext
#include "fleet.hpp"              // DistributedStrategy
#include "parameter_server.hpp"   // ps::Server, ps::Trainer, ps::Options
#include "role_maker.hpp"         // PsRole, ps_role_from_env

namespace oar::dist::fleet {

/// What fleet::init(argc, argv, is_collective, strategy) returns: the job's context and, in
/// parameter-server mode, this process's role. Keep it alive for as long as you train.
class Fleet {
public:
    Fleet(ParallelContext ctx, std::optional<PsRole> role, ps::Options o)
        : ctx_(std::move(ctx)), role_(role), o_(o) {}

    bool is_collective() const { return !role_; }
    /// A server rank (parameter-server mode only).
    bool is_server() const { return role_ && role_->is_server(); }
    /// A trainer rank (every rank in collective mode).
    bool is_worker() const { return !role_ || role_->is_worker(); }
    int worker_num() const { return role_ ? role_->trainers : ctx_.world_size(); }
    int server_num() const { return role_ ? role_->servers : 0; }
    /// This trainer's index (0 .. worker_num()-1), or this server's.
    int worker_index() const { return role_ ? role_->index() : ctx_.rank(); }
    const std::optional<PsRole>& role() const { return role_; }
    const ps::Options& ps_options() const { return o_; }
    ParallelContext& context() { return ctx_; }

#if OAR_HAS_MPI
    /// fleet.init_server() + fleet.run_server(): serves this rank's slice until every trainer has
    /// called stop_worker(). `net` and `opt` as the trainers build them.
    template <class Net, class Opt>
    void run_server(Net& net, const Opt& opt) {
        if (!is_server())
            throw usage_error(oar::detail::concat("fleet.run_server() on rank ", ctx_.rank(), ", which is ",
                                                  role_ ? "a trainer" : "in collective mode (fleet::init(..., true))"));
        ps::Server<Opt> server(*role_, net, opt, o_);
        server.run();
    }

    /// fleet.init_worker(): the trainer's optimizer (see ps::Trainer). Keep it alive until stop_worker().
    template <class Net, class Opt>
    ps::Trainer<Net, Opt> init_worker(Net& net, Opt& opt) {
        if (!role_ || !role_->is_worker())
            throw usage_error(oar::detail::concat("fleet.init_worker() on rank ", ctx_.rank(), ", which is ",
                                                  role_ ? "a server" : "in collective mode (fleet::init(..., true))"));
        return ps::Trainer<Net, Opt>(*role_, net, opt, o_, [this](ps::Trainer<Net, Opt>* t) {
            stop_ = [t] { t->stop(); };
        });
    }
#endif

    /// fleet.stop_worker(): the trainer from init_worker() finishes (see ps::Trainer::stop).
    void stop_worker() {
        if (!stop_) throw usage_error("fleet.stop_worker() before fleet.init_worker()");
        stop_();
        stop_ = {};
    }

private:
    ParallelContext ctx_;
    std::optional<PsRole> role_;
    ps::Options o_;
    std::function<void()> stop_;
};

/// The parameter-server options of a strategy, with OAR_PS_TIMEOUT (seconds) if set.
inline ps::Options ps_options(const DistributedStrategy& s) {
    ps::Options o{.a_sync = s.a_sync, .max_staleness = s.max_staleness};
    if (s.max_staleness < 0)
        throw value_error(oar::detail::concat("fleet: max_staleness is ", s.max_staleness, ", it must be >= 0"));
    if (const char* v = std::getenv("OAR_PS_TIMEOUT"); v && *v) {
        char* end = nullptr;
        const double t = std::strtod(v, &end);
        if (*end != '\0' || !(t > 0) || t > 1e6)
            throw usage_error(oar::detail::concat("OAR_PS_TIMEOUT='", v, "' is not a number of seconds > 0"));
        o.timeout_s = t;
    }
    return o;
}

/// fleet.init(is_collective, strategy). Collective: as init(argc, argv). Parameter server: the
/// role from the launcher's environment (ps_role_from_env: OAR_SERVER_NUM, OAR_WORKER_NUM), a
/// usage_error naming the variable when it is missing or does not match the job.
inline Fleet init(int* argc, char*** argv, bool is_collective, const DistributedStrategy& s = {}) {
    if (is_collective) return Fleet(init_parallel_env(argc, argv), std::nullopt, ps_options(s));
    const ps::Options o = ps_options(s);
#if OAR_HAS_MPI
    ParallelContext ctx = init_parallel_env(argc, argv);
    const PsRole role = ps_role_from_env(ctx.world_size(), ctx.rank());
    return Fleet(std::move(ctx), role, o);
#else
    (void)argc;
    (void)argv;
    (void)o;
    throw comm_error("fleet.init(is_collective=false): the parameter-server mode runs over MPI; link the program "
                     "with the oar::mpi CMake target");
#endif
}

}  // namespace oar::dist::fleet
