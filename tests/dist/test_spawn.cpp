// spawn(fn, nprocs): tests/dist/spawn_main.cpp calls it from main as a user program would; this
// test runs that program (a real mpirun job) and reads who printed what. In-process, it checks
// the refusals that need no MPI (this test binary is built without oar::mpi).
#include <doctest/doctest.h>

#include <cstdio>   // std::sscanf: the children's lines
#include <set>     // std::set: distinct processes
#include <sstream> // std::istringstream: lines
#include <string>  // std::string

#include <oar/dist/spawn.hpp>  // spawn

#include "support/process.hpp"  // oar_test::run_command
#include "support/skip.hpp"     // oar_test::skip

namespace {
std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}
std::string refusal(int nprocs) {
    try {
        (void)oar::dist::spawn([](oar::dist::ParallelContext&) {}, nprocs);
    } catch (const oar::error& e) {
        return e.what();
    }
    return "no error";
}
}  // namespace

TEST_CASE("dist spawn refuses fewer than one process, and more than one in a build without MPI") {
    CHECK(refusal(0) == "oar: spawn: nprocs is 0, it must be >= 1 (or -1: one per core)");
    CHECK(refusal(-2) == "oar: spawn: nprocs is -2, it must be >= 1 (or -1: one per core)");
    CHECK(refusal(2) == "oar: spawn: 2 processes need MPI, and this program was built without it: link it with "
                        "the oar::mpi CMake target");
}

TEST_CASE("dist spawn with nprocs -1 starts one process per core this process may run on, as nproc counts them") {
    const oar_test::Run n = oar_test::run_command("env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc");  // its affinity count
    REQUIRE(n.status == 0);
    CHECK(oar::dist::spawn_process_count(-1) == std::stoi(n.output));
    CHECK(oar::dist::spawn_process_count(3) == 3);
}

#ifdef OAR_SPAWN_MAIN
namespace {
oar_test::Run run(const std::string& args) {
    // Open MPI leaks in MPI_Init/Finalize: leak checking off for the MPI processes (as for the
    // other mpirun tests); the environment reaches the ranks through mpirun.
    const auto r = oar_test::run_command("ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 " + std::string(OAR_SPAWN_MAIN) +
                                         " " + args + " 2>&1");
    MESSAGE("spawn_main ", args, ": status ", r.status, " after ", r.seconds, " s:\n", r.output);
    return r;
}
}  // namespace

TEST_CASE("dist spawn runs fn in N new processes with a communicator, the parent waits and gets status 0") {
    for (int n : {2, 3}) {
        const oar_test::Run r = run("ok " + std::to_string(n));
        CHECK(r.status == 0);
        // Each child ran fn once as its own rank, all in one world, and the allreduce summed 1..n.
        std::set<std::string> pids;
        std::istringstream lines(r.output);
        for (std::string line; std::getline(lines, line);) {
            int rank = -1, of = -1, world = -1, pid = -1, got = -1;
            if (std::sscanf(line.c_str(), "child rank %d of %d (world %d, process %d): sum %d", &rank, &of, &world, &pid,
                            &got) != 5)
                continue;
            CHECK(of == n);
            CHECK(world == n);
            CHECK(got == n * (n + 1) / 2);
            pids.insert(std::to_string(pid));
        }
        CHECK(pids.size() == static_cast<std::size_t>(n));
        for (int k = 0; k < n; ++k) CHECK(count(r.output, "child rank " + std::to_string(k) + " of") == 1);
        // main ran in the parent and again in each child; only the parent went past spawn.
        CHECK(count(r.output, "main starts in process") == static_cast<std::size_t>(n + 1));
        CHECK(count(r.output, "spawn returned 0") == 1);
    }
}

TEST_CASE("dist spawn returns the status of a child that fails, and a child's exception ends the whole job") {
    const oar_test::Run fail = run("fail");
    CHECK(fail.status == 10);
    CHECK(count(fail.output, "spawn returned 3") == 1);

    const oar_test::Run thrown = run("throw");
    CHECK(thrown.status == 10);
    CHECK(thrown.seconds < 60);
    CHECK(count(thrown.output, "spawn: rank 1: the data folder is missing") == 1);
    CHECK(count(thrown.output, "spawn returned 0") == 0);
}

TEST_CASE("dist spawn names a launcher it cannot start") {
    const oar_test::Run r = run("nompirun");
    CHECK(r.status == 11);
    CHECK(count(r.output, "parent: oar: spawn: cannot run 'no-such-mpirun': No such file or directory") == 1);
}
#else
TEST_CASE("dist spawn with a real mpirun job (skipped: this build found no MPI)") {
    oar_test::skip("dist.test_spawn's mpirun half: this build found no MPI, so tests/dist/spawn_main.cpp is not built");
}
#endif
