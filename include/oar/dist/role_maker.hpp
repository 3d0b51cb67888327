// The role maker of parameter-server training (Paddle's PaddleCloudRoleMaker): which processes of
// one MPI job are servers and which are trainers, read from what the launcher put in the
// environment. `oar-launch --server_num S --worker_num W` starts S + W ranks under mpirun and sets
// OAR_SERVER_NUM=S and OAR_WORKER_NUM=W for all of them: ranks 0..W-1 are trainers (trainer 0 is
// rank 0, the one that prints and writes checkpoints, as in the collective mode), ranks W..W+S-1
// are servers. MPI-free: the ranks come from the launcher's variables (launched_env()).
#pragma once

#include <cstdlib>   // std::getenv, std::strtol
#include <optional>  // std::optional
#include <string>    // std::string
#include <utility>   // std::pair

#include "../core/error.hpp"  // usage_error, detail::concat
#include "env.hpp"            // launched_env, ParallelEnv

namespace oar::dist {

/// A process's role in a parameter-server job and the job's layout.
struct PsRole {
    int servers = 0;  ///< S: server ranks, each owning one slice of the parameters
    int trainers = 0; ///< W: trainer ranks, computing gradients
    int rank = 0;     ///< this process's rank in the whole job (0 .. S+W-1)

    bool is_server() const { return rank >= trainers; }
    bool is_worker() const { return rank < trainers; }
    /// This trainer's index (0..W-1) or this server's (0..S-1).
    int index() const { return is_server() ? rank - trainers : rank; }
    /// The job rank of server s / trainer t.
    int server_rank(int s) const { return trainers + s; }
    int trainer_rank(int t) const { return t; }
    int world_size() const { return servers + trainers; }
};

namespace detail {
/// The value of a count variable: nullopt when unset, usage_error naming it when not a positive int.
inline std::optional<int> positive_env(const char* name) {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (!*v || *end != '\0' || x < 1 || x > 1'000'000)
        throw usage_error(oar::detail::concat(name, "='", v, "' is not a positive number of processes (set by oar-launch "
                                              "--server_num / --worker_num)"));
    return static_cast<int>(x);
}
}  // namespace detail

/// PaddleCloudRoleMaker: reads OAR_SERVER_NUM and OAR_WORKER_NUM (or Paddle's PADDLE_PSERVER_NUM
/// and PADDLE_TRAINERS_NUM) and the launcher's rank and size (launched_env()). `world_size` is
/// the job's size as MPI reports it (0: take the launcher's). Every inconsistency is a
/// usage_error naming the variable: a count missing or not a positive integer, or S + W not the
/// number of processes the launcher started.
inline PsRole ps_role_from_env(int world_size = 0, std::optional<int> rank = std::nullopt) {
    auto count = [](const char* oar_name, const char* paddle_name) -> std::pair<int, const char*> {
        if (auto v = detail::positive_env(oar_name)) return {*v, oar_name};
        if (auto v = detail::positive_env(paddle_name)) return {*v, paddle_name};
        throw usage_error(oar::detail::concat("parameter-server mode needs ", oar_name, " (or ", paddle_name,
                                              "): start the job with oar-launch --server_num S --worker_num W"));
    };
    const auto [servers, sname] = count("OAR_SERVER_NUM", "PADDLE_PSERVER_NUM");
    const auto [trainers, tname] = count("OAR_WORKER_NUM", "PADDLE_TRAINERS_NUM");
    const std::optional<ParallelEnv> launched = launched_env();
    if (!rank && !launched)
        throw usage_error(oar::detail::concat(sname, "=", servers, " and ", tname, "=", trainers,
                                              " are set, but no launcher started this process (no OMPI_COMM_WORLD_RANK, "
                                              "PMI_RANK or PMIX_RANK): use oar-launch --server_num ", servers,
                                              " --worker_num ", trainers));
    PsRole r{servers, trainers, rank ? *rank : launched->rank};
    const int size = world_size > 0 ? world_size : (launched ? launched->world_size : 0);
    if (size > 0 && size != servers + trainers)
        throw usage_error(oar::detail::concat(sname, "=", servers, " + ", tname, "=", trainers, " = ",
                                              servers + trainers, " processes, but the launcher started ", size,
                                              ": start S + W ranks (oar-launch --server_num ", servers,
                                              " --worker_num ", trainers, ")"));
    if (r.rank < 0 || r.rank >= servers + trainers)
        throw usage_error(oar::detail::concat("rank ", r.rank, " is outside the ", servers + trainers,
                                              " processes that ", sname, " and ", tname, " describe"));
    return r;
}

/// True when the environment asks for parameter-server mode (OAR_SERVER_NUM or PADDLE_PSERVER_NUM set).
inline bool ps_mode_requested() {
    const char* a = std::getenv("OAR_SERVER_NUM");
    const char* b = std::getenv("PADDLE_PSERVER_NUM");
    return (a && *a) || (b && *b);
}

}  // namespace oar::dist
