// Forked child processes for tests that need real processes without an exec: a free TCP port,
// start(body) runs body in a child that reports one line through a pipe, finish() waits for it.
#pragma once

#include <doctest/doctest.h>  // REQUIRE, MESSAGE

#include <arpa/inet.h>   // htonl, ntohs
#include <array>         // std::array: the read buffer
#include <chrono>        // std::chrono::steady_clock: how long a child took
#include <exception>     // std::exception: a child's failure becomes its report
#include <functional>    // std::function: what a child runs
#include <netinet/in.h>  // sockaddr_in
#include <string>        // std::string
#include <sys/socket.h>  // socket, bind, getsockname
#include <sys/wait.h>    // waitpid, WIFEXITED
#include <unistd.h>      // fork, pipe, read, write, close, _exit

namespace oar_test {

using Clock = std::chrono::steady_clock;

/// A port nobody listens on right now (bound to 0, read back, released).
inline int free_port() {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(s >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    ::close(s);
    return ntohs(a.sin_port);
}

struct Child {
    pid_t pid = -1;
    int fd = -1;
};
struct Finished {
    int status = -1;     ///< exit status, -1 if killed
    std::string output;  ///< what the child reported: "ok " + body() or "error " + what()
    double seconds = 0;  ///< from the t0 given to finish() to the child's end
};

/// Runs `body` in a child process; the child reports through a pipe and exits 0 (ok) or 1.
inline Child start(const std::function<std::string()>& body) {
    int p[2];
    REQUIRE(::pipe(p) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(p[0]);
        std::string out;
        int code = 0;
        try {
            out = "ok " + body();
        } catch (const std::exception& e) {
            out = std::string("error ") + e.what();
            code = 1;
        }
        [[maybe_unused]] const ssize_t n = ::write(p[1], out.data(), out.size());
        ::_exit(code);
    }
    ::close(p[1]);
    return {pid, p[0]};
}

inline Finished finish(const Child& c, Clock::time_point t0) {
    Finished f;
    std::array<char, 4096> buf{};
    for (ssize_t n; (n = ::read(c.fd, buf.data(), buf.size())) > 0;) f.output.append(buf.data(), static_cast<std::size_t>(n));
    ::close(c.fd);
    int st = 0;
    ::waitpid(c.pid, &st, 0);
    f.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    f.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    MESSAGE("child ", c.pid, ": status ", f.status, " after ", f.seconds, " s: ", f.output);
    return f;
}

}  // namespace oar_test
