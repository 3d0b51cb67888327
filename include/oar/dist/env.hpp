// init_parallel_env, as paddle.distributed.init_parallel_env: reads what the launcher set
// (mpirun, or scripts/oar-launch which wraps it) and returns this process's place in the job and
// a communicator. Started alone, it is rank 0 of 1 with a LocalComm and MPI is never touched;
// started by mpirun in a program built with oar::mpi, it initialises MPI (finalised when the
// returned context is destroyed) and hands back an MpiComm over MPI_COMM_WORLD.
#pragma once

#include <cstdlib>  // std::getenv, std::strtol
#include <memory>   // std::shared_ptr
#include <optional> // std::optional
#include <string>   // std::string
#include <utility>  // std::move

#include "../config.hpp"      // OAR_HAS_MPI
#include "../core/error.hpp"  // comm_error via communicator.hpp, detail::concat
#include "any_comm.hpp"       // AnyComm
#include "local_comm.hpp"     // LocalComm
#if OAR_HAS_MPI
#include "mpi_comm.hpp"  // MpiComm, MPI_Init_thread
#endif

namespace oar::dist {

/// This process's place in the job (paddle.distributed.ParallelEnv's rank / world_size / local_rank).
struct ParallelEnv {
    int rank = 0;
    int world_size = 1;
    int local_rank = 0;  ///< rank among the processes on this node (which GPU to take)
    bool distributed() const { return world_size > 1; }
};

/// The GPU this process trains on (paddle.distributed.ParallelEnv().device_id): entry local_rank of
/// the comma-separated list in $OAR_GPUS (what `oar-launch --gpus 0,1` sets), else local_rank
/// itself. Indices count the devices CUDA sees, so CUDA_VISIBLE_DEVICES is honoured. A malformed
/// list, or one shorter than the node's ranks, is a usage_error naming OAR_GPUS.
inline int device_id(const ParallelEnv& e) {
    const char* v = std::getenv("OAR_GPUS");
    if (!v || !*v) return e.local_rank;
    const std::string list = v;
    std::size_t start = 0;
    for (int i = 0;; ++i) {
        const std::size_t end = list.find(',', start);
        const std::string item = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
        char* stop = nullptr;
        const long id = std::strtol(item.c_str(), &stop, 10);
        if (item.empty() || *stop != '\0' || id < 0 || id > 1023)
            throw usage_error(oar::detail::concat("OAR_GPUS='", list, "': entry ", i, " ('", item,
                                                  "') is not a GPU index (expected e.g. OAR_GPUS=0,1)"));
        if (i == e.local_rank) return static_cast<int>(id);
        if (end == std::string::npos)
            throw usage_error(oar::detail::concat("OAR_GPUS='", list, "' lists ", i + 1, " GPU", i == 0 ? "" : "s",
                                                  ", but this is local rank ", e.local_rank,
                                                  " of the node: give one GPU per process"));
        start = end + 1;
    }
}

/// What a launcher put in the environment, if one did: Open MPI's mpirun sets OMPI_COMM_WORLD_*,
/// MPICH / Intel MPI's hydra PMI_RANK / PMI_SIZE, PMIx launchers PMIX_RANK (no size: MPI tells).
/// world_size is 0 when the launcher does not say.
inline std::optional<ParallelEnv> launched_env() {
    auto get = [](const char* name) -> std::optional<int> {
        const char* v = std::getenv(name);
        if (!v || !*v) return std::nullopt;
        char* end = nullptr;
        const long x = std::strtol(v, &end, 10);
        if (*end != '\0' || x < 0) return std::nullopt;
        return static_cast<int>(x);
    };
    if (auto r = get("OMPI_COMM_WORLD_RANK"))
        return ParallelEnv{*r, get("OMPI_COMM_WORLD_SIZE").value_or(0), get("OMPI_COMM_WORLD_LOCAL_RANK").value_or(0)};
    if (auto r = get("PMI_RANK")) return ParallelEnv{*r, get("PMI_SIZE").value_or(0), get("MPI_LOCALRANKID").value_or(0)};
    if (auto r = get("PMIX_RANK")) return ParallelEnv{*r, 0, 0};
    return std::nullopt;
}

#if OAR_HAS_MPI
/// MPI_Init_thread on construction (unless MPI is already up: then it leaves MPI alone), and
/// MPI_Finalize on destruction. MPI_THREAD_FUNNELED: only the main thread calls MPI (the
/// DataLoader's workers never do).
class MpiSession {
public:
    MpiSession(int* argc, char*** argv) {
        int init = 0;
        MPI_Initialized(&init);
        if (init) return;
        int provided = 0;
        detail::mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
        owns_ = true;
    }
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;
    ~MpiSession() {
        int fin = 0;
        MPI_Finalized(&fin);
        if (owns_ && !fin) MPI_Finalize();
    }

private:
    bool owns_ = false;
};
#endif

/// What init_parallel_env returns: the environment, the communicator, and (under MPI) the MPI
/// session, which ends with it. Keep it alive for as long as you train; move-only.
class ParallelContext {
public:
    ParallelContext() = default;
    ParallelContext(ParallelContext&&) = default;
    ParallelContext& operator=(ParallelContext&&) = default;

    const ParallelEnv& env() const { return env_; }
    int rank() const { return env_.rank; }
    int world_size() const { return env_.world_size; }
    int local_rank() const { return env_.local_rank; }
    bool distributed() const { return env_.distributed(); }
    /// Rank 0 alone writes results, checkpoints and curves.
    bool is_writer() const { return env_.rank == 0; }
    AnyComm& comm() { return comm_; }

    /// Ends the whole job with `code` (MPI_Abort under MPI, std::exit alone). For a failure on one
    /// rank: returning normally would leave the other ranks waiting in a collective for ever.
    [[noreturn]] void abort(int code) {
#if OAR_HAS_MPI
        if (session_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
        std::exit(code);
    }

private:
    friend ParallelContext init_parallel_env(int*, char***);
    ParallelEnv env_{};
    std::shared_ptr<void> session_;  // declared before comm_: destroyed after it (MPI_Finalize last)
    AnyComm comm_{};
};

/// Reads the launcher's environment (launched_env()). Not launched: rank 0 of 1, LocalComm.
/// Launched by mpirun and built with oar::mpi: MPI is initialised (argc/argv may be null) and
/// the communicator is an MpiComm over MPI_COMM_WORLD. Launched with more than one process but
/// built without MPI: comm_error saying so (N copies that each train alone would be a silent lie).
inline ParallelContext init_parallel_env(int* argc = nullptr, char*** argv = nullptr) {
    ParallelContext ctx;
    const std::optional<ParallelEnv> launched = launched_env();
    if (!launched) return ctx;
#if OAR_HAS_MPI
    auto session = std::make_shared<MpiSession>(argc, argv);
    MpiComm world(MPI_COMM_WORLD);
    ParallelEnv e{world.rank(), world.world_size(), 0};
    MPI_Comm node = MPI_COMM_NULL;  // the ranks sharing this node's memory: local_rank
    detail::mpi_check(MPI_Comm_split_type(world.native(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node),
                      "MPI_Comm_split_type");
    detail::mpi_check(MPI_Comm_rank(node, &e.local_rank), "MPI_Comm_rank");
    MPI_Comm_free(&node);
    ctx.env_ = e;
    ctx.session_ = std::move(session);
    ctx.comm_ = AnyComm(std::move(world));
    return ctx;
#else
    (void)argc;
    (void)argv;
    if (launched->world_size > 1)
        throw comm_error(oar::detail::concat("started by a launcher as rank ", launched->rank, " of ",
                                             launched->world_size,
                                             ", but this program was built without MPI: link it with the oar::mpi "
                                             "CMake target (or run it as one process)"));
    return ctx;
#endif
}

}  // namespace oar::dist
