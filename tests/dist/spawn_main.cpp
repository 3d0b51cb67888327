// A program that calls oar::dist::spawn from main, as a user's would: tests/dist/test_spawn.cpp
// runs it and reads what the parent and the children print.
//   spawn_main ok N     N ranks each allreduce rank + 1 and print the sum; the parent prints
//                       what spawn returned
//   spawn_main fail     rank 1 returns 3, rank 0 returns 0
//   spawn_main throw    rank 1 throws while rank 0 waits in a barrier
//   spawn_main nompirun spawn with a launcher that does not exist
#include <cstdio>     // std::printf
#include <exception>  // std::exception
#include <span>       // std::span
#include <stdexcept>  // std::runtime_error
#include <string>     // std::string, std::stoi
#include <unistd.h>   // getpid: parent and children are different processes

#include <oar/dist/spawn.hpp>  // spawn

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    std::printf("main starts in process %d\n", static_cast<int>(::getpid()));
    std::fflush(stdout);
    try {
        int status = -1;
        if (mode == "ok") {
            const int n = argc > 2 ? std::stoi(argv[2]) : 2;
            status = oar::dist::spawn(
                [n](oar::dist::ParallelContext& ctx) {
                    double x = ctx.rank() + 1;
                    ctx.comm().allreduce_sum(std::span<double>(&x, 1));
                    std::printf("child rank %d of %d (world %d, process %d): sum %g\n", ctx.rank(), n,
                                ctx.world_size(), static_cast<int>(::getpid()), x);
                },
                n);
        } else if (mode == "fail") {
            status = oar::dist::spawn([](oar::dist::ParallelContext& ctx) { return ctx.rank() == 1 ? 3 : 0; }, 2);
        } else if (mode == "throw") {
            status = oar::dist::spawn(
                [](oar::dist::ParallelContext& ctx) {
                    if (ctx.rank() == 1) throw std::runtime_error("the data folder is missing");
                    ctx.comm().barrier();  // would wait for ever without the abort
                },
                2);
        } else if (mode == "nompirun") {
            oar::dist::SpawnOptions opts;
            opts.mpirun = "no-such-mpirun";
            status = oar::dist::spawn([](oar::dist::ParallelContext&) {}, 2, opts);
        } else {
            std::printf("usage: spawn_main ok N | fail | throw | nompirun\n");
            return 2;
        }
        std::printf("parent %d: spawn returned %d\n", static_cast<int>(::getpid()), status);
        return status == 0 ? 0 : 10;
    } catch (const std::exception& e) {
        std::printf("parent: %s\n", e.what());
        return 11;
    }
}
