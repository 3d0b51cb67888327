// spawn(fn, nprocs), as paddle.distributed.spawn: data-parallel training on one machine without
// typing mpirun. The calling process re-executes its own program (/proc/self/exe with the same
// arguments, /proc/self/cmdline) as `mpirun -np nprocs`, marking the children with OAR_SPAWNED
// in their environment, and waits for the job: spawn returns its exit status. In a child, the
// program runs from main() again until it reaches the same spawn call, which then initialises
// the parallel environment, runs fn(ctx) and ends the process with fn's status, so nothing after
// spawn runs in a child. As with Paddle's `if __name__ == "__main__"`, call spawn from main, once,
// before work the children should not repeat. nprocs -1 starts one process per core this process
// may run on (Paddle's nprocs=-1 takes every visible device). Linux (/proc), Open MPI's mpirun on PATH.
#pragma once

#include <cerrno>       // errno
#include <cstdio>       // std::fprintf, std::fflush
#include <cstdlib>      // std::getenv, std::exit
#include <cstring>      // std::strerror
#include <exception>    // std::exception
#include <fcntl.h>      // O_CLOEXEC: the exec-failure pipe
#include <sched.h>      // sched_getaffinity, CPU_COUNT: nprocs -1
#include <fstream>      // std::ifstream: /proc/self/cmdline
#include <iterator>     // std::istreambuf_iterator
#include <string>       // std::string
#include <sys/wait.h>   // waitpid, WIFEXITED
#include <type_traits>  // std::is_void_v, std::invoke_result_t
#include <unistd.h>     // fork, execvp, pipe2, getuid
#include <utility>      // std::forward
#include <vector>       // std::vector

#include "../config.hpp"      // OAR_HAS_MPI
#include "../core/error.hpp"  // value_error, detail::concat
#include "communicator.hpp"   // comm_error
#include "env.hpp"            // init_parallel_env, ParallelContext, launched_env

namespace oar::dist {

struct SpawnOptions {
    /// Extra words for mpirun, e.g. {"--mca", "btl", "self,tcp"}.
    std::vector<std::string> mpirun_args;
    /// The launcher; found on PATH.
    std::string mpirun = "mpirun";
};

/// The environment variable that tells a spawned child that it is one.
inline constexpr const char* spawn_marker = "OAR_SPAWNED";

namespace detail {
using namespace oar::detail;  // concat & co. stay visible as detail:: inside this namespace
/// This program's arguments as the kernel has them (argv[0] included).
inline std::vector<std::string> own_arguments() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> args;
    std::string cur;
    for (char c : all) {
        if (c == '\0') args.push_back(std::exchange(cur, {}));
        else cur += c;
    }
    if (!cur.empty()) args.push_back(cur);
    return args;
}

/// Runs fn(ctx) and turns what it returns (int, or void for 0) into an exit status.
template <class F>
int run_rank(F& fn, ParallelContext& ctx) {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, ParallelContext&>>) {
        fn(ctx);
        return 0;
    } else {
        return static_cast<int>(fn(ctx));
    }
}
}  // namespace detail

/// The processes spawn(fn, nprocs) starts: nprocs itself, or for -1 the cores this process may run
/// on (its CPU affinity, as `nproc` counts them). value_error for 0 or below -1.
inline int spawn_process_count(int nprocs) {
    if (nprocs == -1) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
        return 1;
    }
    if (nprocs < 1)
        throw value_error(oar::detail::concat("spawn: nprocs is ", nprocs, ", it must be >= 1 (or -1: one per core)"));
    return nprocs;
}

/// In the parent: starts `nprocs` copies (-1: one per core, spawn_process_count) of this program under mpirun, returns the job's exit
/// status (that of the first rank to fail, or 0; 128 + signal if mpirun was killed). In a child,
/// or when this process was itself started by a launcher (mpirun, oar-launch): runs fn(ctx) in
/// this process and exits with its status. fn: int(ParallelContext&) or void(ParallelContext&).
/// An exception out of fn in a child is printed as "spawn: rank R: what" and aborts the whole
/// job, so that no other rank waits for it in a collective.
template <class F>
int spawn(F&& fn, int nprocs, const SpawnOptions& opts = {}) {
    nprocs = spawn_process_count(nprocs);
    if (std::getenv(spawn_marker) || launched_env()) {
        int status = 0;
        {
            ParallelContext ctx = init_parallel_env();
            try {
                status = detail::run_rank(fn, ctx);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "spawn: rank %d: %s\n", ctx.rank(), e.what());
                std::fflush(stderr);
                ctx.abort(1);
            }
            std::fflush(stdout);
        }  // MPI_Finalize here, before the process ends
        std::exit(status);
    }
#if !OAR_HAS_MPI
    if (nprocs > 1)
        throw comm_error(oar::detail::concat("spawn: ", nprocs, " processes need MPI, and this program was built "
                                             "without it: link it with the oar::mpi CMake target"));
#endif
    std::vector<std::string> args = {opts.mpirun};
    if (::getuid() == 0) args.push_back("--allow-run-as-root");
    for (const char* a : {"--oversubscribe", "-np"}) args.push_back(a);
    args.push_back(std::to_string(nprocs));
    args.insert(args.end(), {"-x", std::string(spawn_marker) + "=1"});
    args.insert(args.end(), opts.mpirun_args.begin(), opts.mpirun_args.end());
    std::vector<std::string> self = detail::own_arguments();
    if (self.empty()) throw comm_error("spawn: cannot read this program's arguments from /proc/self/cmdline");
    char exe[4096];  // the running binary, wherever argv[0] pointed
    const ssize_t len = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) throw comm_error(oar::detail::concat("spawn: cannot read /proc/self/exe: ", std::strerror(errno)));
    self[0].assign(exe, static_cast<std::size_t>(len));
    args.insert(args.end(), self.begin(), self.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    int report[2];  // the child writes errno here if exec fails; closed by a successful exec
    if (::pipe2(report, O_CLOEXEC) != 0)
        throw comm_error(oar::detail::concat("spawn: pipe failed: ", std::strerror(errno)));
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid < 0) throw comm_error(oar::detail::concat("spawn: fork failed: ", std::strerror(errno)));
    if (pid == 0) {
        ::close(report[0]);
        ::execvp(argv[0], argv.data());
        const int err = errno;
        [[maybe_unused]] const ssize_t n = ::write(report[1], &err, sizeof err);
        ::_exit(127);
    }
    ::close(report[1]);
    int err = 0;
    const ssize_t got = ::read(report[0], &err, sizeof err);
    ::close(report[0]);
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (got == static_cast<ssize_t>(sizeof err))
        throw comm_error(oar::detail::concat("spawn: cannot run '", opts.mpirun, "': ", std::strerror(err),
                                             " (install Open MPI: apt-get install openmpi-bin)"));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace oar::dist
