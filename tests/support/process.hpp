// Running a program as a real process from a test: its exit status, what it printed, how long it took.
#pragma once

#include <doctest/doctest.h>  // REQUIRE

#include <array>       // std::array: the read buffer
#include <chrono>      // std::chrono::steady_clock: the duration
#include <cstdio>      // popen, pclose, std::fgets
#include <string>      // std::string
#include <sys/wait.h>  // WIFEXITED, WEXITSTATUS

namespace oar_test {

struct Run {
    int status = -1;      ///< the exit status, -1 if killed by a signal
    std::string output;   ///< stdout (and stderr where the command redirects it)
    double seconds = 0;   ///< wall time
};

/// Runs `cmd` through the shell and waits for it.
inline Run run_command(const std::string& cmd) {
    const auto t0 = std::chrono::steady_clock::now();
    Run r;
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf{};
    while (std::fgets(buf.data(), buf.size(), p)) r.output += buf.data();
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

}  // namespace oar_test
