// A thin fleet facade (paddle.distributed.fleet, collective mode) over what oar already has, so
// that the course's fleet code reads the same: fleet::init -> init_parallel_env,
// fleet::distributed_model -> DataParallel with the strategy's bucket size and overlap,
// fleet::distributed_optimizer -> the optimizer itself. It adds no behaviour of its own: in
// collective mode Paddle's gradient averaging happens in the DataParallel model's backward, as
// here; the strategy switches that distributed_optimizer applies (amp, recompute, sharding,
// gradient merge) have no oar counterpart, so the strategy holds only what DataParallel uses.
#pragma once

#include <cstddef>  // std::size_t

#include "../core/error.hpp"  // value_error, detail::concat
#include "any_comm.hpp"       // AnyComm: the communicator init hands back
#include "data_parallel.hpp"  // DataParallel, DataParallelOptions, FlatParameterModel
#include "env.hpp"            // init_parallel_env, ParallelContext

namespace oar::dist::fleet {

/// fleet.DistributedStrategy, the part that means something here.
struct DistributedStrategy {
    /// Paddle's strategy.fuse_grad_size_in_MB (default 32): the allreduce bucket size.
    double fuse_grad_size_in_MB = 32;
    /// Overlap the buckets' allreduce with backward (Paddle always does in collective mode).
    bool overlap = true;
    /// Parameter-server mode (fleet::init(argc, argv, false), ps_fleet.hpp): Paddle's a_sync,
    /// asynchronous pushes and pulls instead of a barrier per step.
    bool a_sync = false;
    /// Parameter-server async mode: how many of its own pushes a trainer may have unanswered
    /// while it computes (ps::Options::max_staleness).
    int max_staleness = 1;
    DataParallelOptions options() const {
        return {.bucket_bytes = static_cast<std::size_t>(fuse_grad_size_in_MB * 1024 * 1024), .root = 0,
                .overlap = overlap};
    }
};

/// fleet.init(is_collective=True): the job's place and communicator (see init_parallel_env).
inline ParallelContext init(int* argc = nullptr, char*** argv = nullptr) { return init_parallel_env(argc, argv); }

/// fleet.distributed_model(model): the network replicated over ctx's ranks. Keep ctx alive.
template <FlatParameterModel M>
DataParallel<M, AnyComm> distributed_model(M& net, ParallelContext& ctx, const DistributedStrategy& s = {}) {
    if (s.fuse_grad_size_in_MB <= 0)
        throw value_error(oar::detail::concat("fleet: fuse_grad_size_in_MB is ", s.fuse_grad_size_in_MB,
                                              ", it must be > 0"));
    return DataParallel<M, AnyComm>(net, ctx.comm(), s.options());
}

/// fleet.distributed_optimizer(optimizer): the optimizer, unchanged (see the header comment).
template <class Opt>
Opt& distributed_optimizer(Opt& opt) {
    return opt;
}

}  // namespace oar::dist::fleet

#include "ps_fleet.hpp"  // fleet::init(argc, argv, is_collective), Fleet: the parameter-server mode
