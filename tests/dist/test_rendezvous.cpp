// The TCP rendezvous with real processes (fork): three ranks agree on 128 bytes (the size of an
// ncclUniqueId), and every way of not meeting ends in a named error within the timeout.
#include <doctest/doctest.h>

#include <chrono>        // std::chrono: timeouts
#include <functional>    // std::function: what a child runs
#include <cstdlib>       // setenv, unsetenv
#include <random>        // std::random_device: rank 0's bytes, drawn in the child
#include <string>        // std::string
#include <thread>        // std::this_thread::sleep_for
#include <vector>        // std::vector

#include <oar/dist/rendezvous.hpp>  // tcp_broadcast_bytes, rendezvous_from_env, rendezvous_error

#include "support/child_process.hpp"  // start, finish, free_port: real processes

namespace {

using oar::dist::RendezvousConfig;
using oar_test::Clock;
using oar_test::Child;
using oar_test::Finished;
using oar_test::finish;
using oar_test::free_port;
using oar_test::start;

std::string hex(const std::vector<std::byte>& b) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (std::byte x : b) {
        s += digits[std::to_integer<int>(x) >> 4];
        s += digits[std::to_integer<int>(x) & 15];
    }
    return s;
}

/// What rank `rank` of `world` does: rank 0 draws 128 random bytes (in the child, so the parent
/// cannot know them) and sends them; the others receive. Each reports the bytes it ends with.
std::function<std::string()> rank_body(int port, int rank, int world, int timeout_ms, int delay_ms = 0) {
    return [=] {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        std::vector<std::byte> id(128);
        if (rank == 0) {
            std::random_device rd;
            for (auto& b : id) b = static_cast<std::byte>(rd() & 0xff);
        }
        oar::dist::tcp_broadcast_bytes(
            RendezvousConfig{"127.0.0.1", port, rank, world, std::chrono::milliseconds(timeout_ms)}, id);
        return hex(id);
    };
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

/// Sets environment variables for one test and removes them after.
struct Env {
    std::vector<std::string> names;
    Env(std::initializer_list<std::pair<const char*, const char*>> vars) {
        for (const char* n : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "PADDLE_MASTER", "PADDLE_TRAINER_ID",
                              "PADDLE_TRAINERS_NUM", "OAR_RENDEZVOUS_TIMEOUT"})
            ::unsetenv(n);
        for (auto [n, v] : vars) {
            ::setenv(n, v, 1);
            names.push_back(n);
        }
    }
    ~Env() {
        for (const auto& n : names) ::unsetenv(n.c_str());
    }
};

}  // namespace

TEST_CASE("dist rendezvous: 3 processes over TCP all end with rank 0's 128 random bytes, rank 0 starting last") {
    const int port = free_port();
    const auto t0 = Clock::now();
    // Ranks 1 and 2 come first and must retry until rank 0 listens (300 ms later).
    const Child c2 = start(rank_body(port, 2, 3, 20000));
    const Child c1 = start(rank_body(port, 1, 3, 20000));
    const Child c0 = start(rank_body(port, 0, 3, 20000, 300));
    const Finished f0 = finish(c0, t0), f1 = finish(c1, t0), f2 = finish(c2, t0);
    REQUIRE(f0.status == 0);
    CHECK(f1.status == 0);
    CHECK(f2.status == 0);
    REQUIRE(f0.output.size() == 3 + 256);  // "ok " + 128 bytes in hex
    CHECK(f0.output != "ok " + std::string(256, '0'));
    CHECK(f1.output == f0.output);
    CHECK(f2.output == f0.output);
}

TEST_CASE("dist rendezvous: a missing peer makes rank 0 and the peers that came fail within the timeout, naming it") {
    const int port = free_port();
    const auto t0 = Clock::now();
    const Child c0 = start(rank_body(port, 0, 3, 1000));
    const Child c1 = start(rank_body(port, 1, 3, 10000));  // would wait 10 s: rank 0 must tell it at 1 s
    const Finished f0 = finish(c0, t0), f1 = finish(c1, t0);
    CHECK(f0.status == 1);
    CHECK(contains(f0.output, "oar: TCP rendezvous: rank 0 at 127.0.0.1:" + std::to_string(port) +
                                  " waited 1 s for 2 peers; 1 came, missing rank(s) 2"));
    CHECK(f1.status == 1);
    CHECK(contains(f1.output, "rank 1: rank 0 gave up: TCP rendezvous: rank 0 at"));
    CHECK(contains(f1.output, "missing rank(s) 2"));
    // Rank 1 ended because rank 0 told it (the message above), not by its own 10 s timeout; the
    // wall-clock bounds only catch a hang (a tight one flakes on a loaded machine, under TSan).
    CHECK(f0.seconds < 60.0);
    CHECK(f1.seconds < 60.0);
}

TEST_CASE("dist rendezvous: a peer with no rank 0 to meet fails within the timeout, naming the address") {
    const int port = free_port();
    const auto t0 = Clock::now();
    const Finished f1 = finish(start(rank_body(port, 1, 2, 700)), t0);
    CHECK(f1.status == 1);
    CHECK(contains(f1.output, "oar: TCP rendezvous: rank 1 found no rank 0 listening at 127.0.0.1:" +
                                  std::to_string(port) + " within 0.7 s"));
    CHECK(f1.seconds >= 0.6);   // it did wait for its timeout (a lower bound: slowness cannot fail it)
    CHECK(f1.seconds < 60.0);   // a hang guard only
}

TEST_CASE("dist rendezvous: two processes claiming one rank are refused, both told why") {
    const int port = free_port();
    const auto t0 = Clock::now();
    const Child c0 = start(rank_body(port, 0, 3, 10000));
    const Child a = start(rank_body(port, 1, 3, 10000));
    const Child b = start(rank_body(port, 1, 3, 10000));
    const Finished f0 = finish(c0, t0), fa = finish(a, t0), fb = finish(b, t0);
    CHECK(f0.status == 1);
    CHECK(contains(f0.output, "oar: TCP rendezvous: two processes claim rank 1"));
    CHECK(fa.status == 1);
    CHECK(fb.status == 1);
    CHECK(contains(fa.output, "rank 0 gave up: TCP rendezvous: two processes claim rank 1"));
    CHECK(contains(fb.output, "rank 0 gave up: TCP rendezvous: two processes claim rank 1"));
    CHECK(f0.seconds < 60.0);  // a hang guard only: the message says it was refused, not timed out
}

TEST_CASE("dist rendezvous: ranks that disagree on the world size are refused by rank 0") {
    const int port = free_port();
    const auto t0 = Clock::now();
    const Child c0 = start(rank_body(port, 0, 2, 10000));
    const Child c1 = start(rank_body(port, 1, 3, 10000));
    const Finished f0 = finish(c0, t0), f1 = finish(c1, t0);
    CHECK(f0.status == 1);
    CHECK(contains(f0.output, "rank 1 says the world size is 3, rank 0 says 2"));
    CHECK(f1.status == 1);
}

TEST_CASE("dist rendezvous: a bad rank, port or world size is named before any socket is opened") {
    std::vector<std::byte> id(128);
    auto msg = [&](RendezvousConfig c) {
        try {
            oar::dist::tcp_broadcast_bytes(c, id);
        } catch (const oar::rendezvous_error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(msg({"127.0.0.1", 29500, 3, 3}) == "oar: TCP rendezvous: rank 3 is not in 0..2 (world size 3)");
    CHECK(msg({"127.0.0.1", 0, 0, 2}) == "oar: TCP rendezvous: master port 0 is not in 1..65535");
    CHECK(msg({"127.0.0.1", 70000, 0, 2}) == "oar: TCP rendezvous: master port 70000 is not in 1..65535");
    CHECK(msg({"127.0.0.1", 29500, 0, 0}) == "oar: TCP rendezvous: world size 0 must be >= 1");
    CHECK(msg({"no-such-host.invalid", 29500, 1, 2, std::chrono::milliseconds(500)})
              .starts_with("oar: TCP rendezvous: cannot resolve master address 'no-such-host.invalid'"));
    // One process: nothing to exchange, the bytes stay.
    id[0] = std::byte{42};
    CHECK(msg({"127.0.0.1", 29500, 0, 1}) == "no error");
    CHECK(id[0] == std::byte{42});
}

TEST_CASE("dist rendezvous: the environment is read with torch's and Paddle's names, bad values named") {
    {
        Env e{};
        CHECK_FALSE(oar::dist::rendezvous_from_env().has_value());
    }
    {
        Env e{{"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "6170"}, {"RANK", "2"}, {"WORLD_SIZE", "4"},
              {"OAR_RENDEZVOUS_TIMEOUT", "5"}};
        const auto c = oar::dist::rendezvous_from_env();
        REQUIRE(c.has_value());
        CHECK(c->master_addr == "10.0.0.5");
        CHECK(c->master_port == 6170);
        CHECK(c->rank == 2);
        CHECK(c->world_size == 4);
        CHECK(c->timeout == std::chrono::seconds(5));
    }
    {
        Env e{{"PADDLE_MASTER", "node1:36001"}, {"PADDLE_TRAINER_ID", "1"}, {"PADDLE_TRAINERS_NUM", "2"}};
        const auto c = oar::dist::rendezvous_from_env();
        REQUIRE(c.has_value());
        CHECK(c->master_addr == "node1");
        CHECK(c->master_port == 36001);
        CHECK(c->rank == 1);
        CHECK(c->world_size == 2);
        CHECK(c->timeout == std::chrono::seconds(60));
    }
    auto msg = [] {
        try {
            (void)oar::dist::rendezvous_from_env();
        } catch (const oar::rendezvous_error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    {
        Env e{{"MASTER_ADDR", "h"}, {"MASTER_PORT", "abc"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}};
        CHECK(msg() == "oar: TCP rendezvous: MASTER_PORT='abc' is not an integer in 1..65535");
    }
    {
        Env e{{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}, {"RANK", "2"}, {"WORLD_SIZE", "2"}};
        CHECK(msg() == "oar: TCP rendezvous: RANK='2' is not an integer in 0..1");
    }
    {
        Env e{{"MASTER_ADDR", "h"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}};
        CHECK(msg() == "oar: TCP rendezvous: MASTER_ADDR is set but MASTER_PORT is not");
    }
    {
        Env e{{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}, {"WORLD_SIZE", "2"}};
        CHECK(msg() == "oar: TCP rendezvous: the master is set but RANK (or PADDLE_TRAINER_ID) is not");
    }
    {
        Env e{{"PADDLE_MASTER", "node1"}};
        CHECK(msg() == "oar: TCP rendezvous: PADDLE_MASTER='node1' is not host:port");
    }
}
