// TCP rendezvous: how processes that share no MPI find each other and agree on a few bytes
// (NCCL's 128-byte unique id), as torch's MASTER_ADDR/MASTER_PORT or Paddle's PADDLE_MASTER.
// Rank 0 listens on the master port; every other rank connects (retrying until rank 0 is up),
// says who it is, and receives rank 0's bytes. Everything is bounded by one deadline: a missing
// peer or a missing rank 0 ends in a rendezvous_error naming who is missing, never in a hang.
// POSIX sockets only; no MPI, no CUDA.
#pragma once

#include <algorithm>     // std::min
#include <arpa/inet.h>   // htonl, ntohl
#include <cerrno>        // errno, EINTR, EINPROGRESS
#include <chrono>        // std::chrono::steady_clock: the deadline
#include <cstddef>       // std::byte, std::size_t
#include <cstdint>       // std::uint32_t
#include <cstdlib>       // std::getenv, std::strtol
#include <cstring>       // std::memcpy, std::strerror
#include <fcntl.h>       // fcntl, O_NONBLOCK: connect with a timeout
#include <netdb.h>       // getaddrinfo
#include <netinet/in.h>  // sockaddr_in
#include <netinet/tcp.h> // TCP_NODELAY
#include <optional>      // std::optional
#include <poll.h>        // poll
#include <span>          // std::span
#include <string>        // std::string
#include <sys/socket.h>  // socket, bind, listen, accept, connect, send, recv
#include <thread>        // std::this_thread::sleep_for: connect retries
#include <unistd.h>      // close
#include <utility>       // std::exchange
#include <vector>        // std::vector

#include "../core/error.hpp"  // detail::concat
#include "communicator.hpp"   // comm_error

namespace oar {

/// The rendezvous failed: a bad address or port, a peer or rank 0 that did not come in time,
/// two processes claiming one rank, ranks that disagree on the world size or payload size.
class rendezvous_error : public comm_error {
public:
    using comm_error::comm_error;
};

namespace dist {

struct RendezvousConfig {
    std::string master_addr = "127.0.0.1";  ///< where rank 0 listens (name or IPv4/IPv6 address)
    int master_port = 0;                    ///< 1..65535
    int rank = 0;
    int world_size = 1;
    std::chrono::milliseconds timeout{60000};  ///< the whole rendezvous, connect and exchange
};

namespace detail {
using namespace oar::detail;  // concat & co. stay visible as detail:: inside this namespace

inline std::string errno_text() { return std::strerror(errno); }

/// An owned socket descriptor.
class Socket {
public:
    Socket() = default;
    explicit Socket(int fd) : fd_(fd) {}
    Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Socket& operator=(Socket&& o) noexcept {
        if (this != &o) reset(std::exchange(o.fd_, -1));
        return *this;
    }
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;
    ~Socket() { reset(); }
    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }
    void reset(int fd = -1) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

using Clock = std::chrono::steady_clock;

/// Milliseconds left until `deadline` (0 when past), as poll() wants them.
inline int ms_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

/// Waits until fd is readable (POLLIN) or writable (POLLOUT); false at the deadline.
inline bool wait_for(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        pollfd p{fd, events, 0};
        const int r = ::poll(&p, 1, ms_left(deadline));
        if (r > 0) return true;
        if (r == 0) return false;
        if (errno != EINTR) throw rendezvous_error(oar::detail::concat("TCP rendezvous: poll failed: ", errno_text()));
    }
}

/// Reads exactly out.size() bytes; `who` names the other side in errors.
inline void read_exact(int fd, std::span<std::byte> out, Clock::time_point deadline, const std::string& who,
                       double timeout_s) {
    std::size_t got = 0;
    while (got < out.size()) {
        if (!wait_for(fd, POLLIN, deadline))
            throw rendezvous_error(oar::detail::concat("TCP rendezvous: ", who, " sent nothing within ", timeout_s,
                                                       " s (got ", got, " of ", out.size(), " bytes)"));
        const ssize_t n = ::recv(fd, out.data() + got, out.size() - got, 0);
        if (n == 0)
            throw rendezvous_error(oar::detail::concat("TCP rendezvous: ", who, " closed the connection after ", got,
                                                       " of ", out.size(), " bytes"));
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            throw rendezvous_error(oar::detail::concat("TCP rendezvous: reading from ", who, " failed: ", errno_text()));
        }
        got += static_cast<std::size_t>(n);
    }
}

inline void write_all(int fd, std::span<const std::byte> in, Clock::time_point deadline, const std::string& who) {
    std::size_t put = 0;
    while (put < in.size()) {
        if (!wait_for(fd, POLLOUT, deadline))
            throw rendezvous_error(oar::detail::concat("TCP rendezvous: could not send to ", who, " in time"));
        const ssize_t n = ::send(fd, in.data() + put, in.size() - put, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            throw rendezvous_error(oar::detail::concat("TCP rendezvous: sending to ", who, " failed: ", errno_text()));
        }
        put += static_cast<std::size_t>(n);
    }
}

inline void put_u32(std::vector<std::byte>& out, std::uint32_t v) {
    const std::uint32_t be = htonl(v);
    const auto* p = reinterpret_cast<const std::byte*>(&be);
    out.insert(out.end(), p, p + 4);
}
inline std::uint32_t get_u32(const std::byte* p) {
    std::uint32_t be = 0;
    std::memcpy(&be, p, 4);
    return ntohl(be);
}

constexpr std::uint32_t hello_magic = 0x4f415252;  // "OARR"
constexpr std::size_t hello_size = 16;             // magic, rank, world size, payload size
constexpr std::size_t max_error_text = 4096;

/// The addresses of host:port (getaddrinfo), for listening (passive) or connecting.
struct AddrInfo {
    addrinfo* list = nullptr;
    AddrInfo(const std::string& host, int port, bool passive) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = passive ? AI_PASSIVE : 0;
        const std::string service = std::to_string(port);
        const int rc = ::getaddrinfo(passive ? nullptr : host.c_str(), service.c_str(), &hints, &list);
        if (rc != 0)
            throw rendezvous_error(oar::detail::concat("TCP rendezvous: cannot resolve master address '", host,
                                                       "': ", ::gai_strerror(rc)));
    }
    AddrInfo(const AddrInfo&) = delete;
    AddrInfo& operator=(const AddrInfo&) = delete;
    ~AddrInfo() {
        if (list) ::freeaddrinfo(list);
    }
};

inline std::string where(const RendezvousConfig& c) { return oar::detail::concat(c.master_addr, ":", c.master_port); }
inline double seconds(std::chrono::milliseconds t) { return static_cast<double>(t.count()) / 1000.0; }

inline void validate(const RendezvousConfig& c, std::size_t payload) {
    if (c.world_size < 1)
        throw rendezvous_error(oar::detail::concat("TCP rendezvous: world size ", c.world_size, " must be >= 1"));
    if (c.rank < 0 || c.rank >= c.world_size)
        throw rendezvous_error(oar::detail::concat("TCP rendezvous: rank ", c.rank, " is not in 0..",
                                                   c.world_size - 1, " (world size ", c.world_size, ")"));
    if (c.master_port < 1 || c.master_port > 65535)
        throw rendezvous_error(oar::detail::concat("TCP rendezvous: master port ", c.master_port, " is not in 1..65535"));
    if (c.timeout.count() <= 0)
        throw rendezvous_error(oar::detail::concat("TCP rendezvous: timeout ", c.timeout.count(), " ms must be > 0"));
    if (payload > (1u << 30))
        throw rendezvous_error(oar::detail::concat("TCP rendezvous: payload of ", payload, " bytes is too large"));
}

/// Rank 0: accept world_size - 1 peers, check each, send them the payload (or the reason why not).
inline void serve(const RendezvousConfig& c, std::span<const std::byte> payload, Clock::time_point deadline) {
    AddrInfo ai(c.master_addr, c.master_port, true);
    Socket listener;
    std::string last_error = "no address to listen on";
    for (addrinfo* a = ai.list; a && !listener; a = a->ai_next) {
        Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
        if (!s) continue;
        const int one = 1;
        ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(s.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.get(), c.world_size) == 0)
            listener = std::move(s);
        else
            last_error = errno_text();
    }
    if (!listener)
        throw rendezvous_error(oar::detail::concat("TCP rendezvous: rank 0 cannot listen on port ", c.master_port, ": ",
                                                   last_error));
    const auto n = static_cast<std::size_t>(c.world_size);
    std::vector<Socket> peers(n);  // by rank; peers[0] unused
    std::size_t joined = 0;
    auto fail = [&](const std::string& why) {
        // Tell every connected peer why, so they fail with rank 0's message, not a timeout.
        std::vector<std::byte> msg{std::byte{'E'}};
        const std::string text = why.substr(0, max_error_text);
        put_u32(msg, static_cast<std::uint32_t>(text.size()));
        for (char ch : text) msg.push_back(static_cast<std::byte>(ch));
        const auto soon = Clock::now() + std::chrono::seconds(1);
        for (std::size_t r = 0; r < n; ++r)  // peers[0]: the peer being refused, if any
            if (peers[r]) try {
                    write_all(peers[r].get(), msg, soon, "rank " + std::to_string(r));
                } catch (const rendezvous_error&) {
                }
        throw rendezvous_error(why);
    };
    while (joined + 1 < n) {
        if (!wait_for(listener.get(), POLLIN, deadline)) {
            std::string missing;
            for (std::size_t r = 1; r < n; ++r)
                if (!peers[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            fail(oar::detail::concat("TCP rendezvous: rank 0 at ", where(c), " waited ", seconds(c.timeout), " s for ",
                                     n - 1, " peers; ", joined, " came, missing rank(s) ", missing));
        }
        Socket s(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!s) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            fail(oar::detail::concat("TCP rendezvous: accept failed: ", errno_text()));
        }
        std::byte hello[hello_size];
        try {
            read_exact(s.get(), hello, deadline, "a connecting peer", seconds(c.timeout));
        } catch (const rendezvous_error& e) {
            fail(e.what());
        }
        const std::uint32_t magic = get_u32(hello), rank = get_u32(hello + 4), world = get_u32(hello + 8),
                            size = get_u32(hello + 12);
        if (magic != hello_magic) continue;  // not one of ours (a port scanner, a stale client): ignore it
        std::string bad;
        if (world != n)
            bad = oar::detail::concat("rank ", rank, " says the world size is ", world, ", rank 0 says ", n);
        else if (rank == 0 || rank >= n)
            bad = oar::detail::concat("a peer claims rank ", rank, ", not in 1..", n - 1);
        else if (peers[rank])
            bad = oar::detail::concat("two processes claim rank ", rank);
        else if (size != payload.size())
            bad = oar::detail::concat("rank ", rank, " expects ", size, " bytes, rank 0 has ", payload.size());
        if (!bad.empty()) {
            peers[0] = std::move(s);  // so that fail() tells this one too
            fail("TCP rendezvous: " + bad);
        }
        peers[rank] = std::move(s);
        ++joined;
    }
    std::vector<std::byte> msg{std::byte{'K'}};
    msg.insert(msg.end(), payload.begin(), payload.end());
    for (std::size_t r = 1; r < n; ++r) write_all(peers[r].get(), msg, deadline, "rank " + std::to_string(r));
}

/// Rank r > 0: connect to rank 0 (retrying while it is not up yet), say who we are, receive.
inline void join(const RendezvousConfig& c, std::span<std::byte> out, Clock::time_point deadline) {
    Socket s;
    std::string last_error;
    while (!s) {
        AddrInfo ai(c.master_addr, c.master_port, false);
        for (addrinfo* a = ai.list; a && !s; a = a->ai_next) {
            Socket t(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
            if (!t) continue;
            int rc = ::connect(t.get(), a->ai_addr, a->ai_addrlen);
            if (rc != 0 && errno == EINPROGRESS) {
                if (wait_for(t.get(), POLLOUT, deadline)) {
                    int err = 0;
                    socklen_t len = sizeof err;
                    ::getsockopt(t.get(), SOL_SOCKET, SO_ERROR, &err, &len);
                    rc = err == 0 ? 0 : -1;
                    errno = err;
                } else {
                    errno = ETIMEDOUT;
                }
            }
            if (rc == 0) s = std::move(t);
            else last_error = errno_text();
        }
        if (s) break;
        if (ms_left(deadline) == 0)
            throw rendezvous_error(oar::detail::concat("TCP rendezvous: rank ", c.rank, " found no rank 0 listening at ",
                                                       where(c), " within ", seconds(c.timeout), " s (last error: ",
                                                       last_error, ")"));
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, ms_left(deadline))));
    }
    const int one = 1;
    ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::vector<std::byte> hello;
    put_u32(hello, hello_magic);
    put_u32(hello, static_cast<std::uint32_t>(c.rank));
    put_u32(hello, static_cast<std::uint32_t>(c.world_size));
    put_u32(hello, static_cast<std::uint32_t>(out.size()));
    const std::string root = "rank 0 at " + where(c);
    write_all(s.get(), hello, deadline, root);
    std::byte status{};
    read_exact(s.get(), std::span<std::byte>(&status, 1), deadline, root, seconds(c.timeout));
    if (status == std::byte{'E'}) {
        std::byte len[4];
        read_exact(s.get(), len, deadline, root, seconds(c.timeout));
        std::string text(std::min<std::size_t>(get_u32(len), max_error_text), '\0');
        read_exact(s.get(), std::as_writable_bytes(std::span<char>(text)), deadline, root, seconds(c.timeout));
        throw rendezvous_error(oar::detail::concat("rank ", c.rank, ": rank 0 gave up: ", text));
    }
    if (status != std::byte{'K'})
        throw rendezvous_error(oar::detail::concat("TCP rendezvous: ", root, " answered with an unknown status"));
    read_exact(s.get(), out, deadline, root, seconds(c.timeout));
}

}  // namespace detail

/// Every rank's `bytes` become rank 0's (the same size on every rank, e.g. an ncclUniqueId).
/// Collective over the config's world: every rank calls it once with the same master, world
/// size and size of `bytes`. Throws rendezvous_error within about config.timeout otherwise.
inline void tcp_broadcast_bytes(const RendezvousConfig& config, std::span<std::byte> bytes) {
    detail::validate(config, bytes.size());
    if (config.world_size == 1) return;
    const auto deadline = detail::Clock::now() + config.timeout;
    if (config.rank == 0) detail::serve(config, bytes, deadline);
    else detail::join(config, bytes, deadline);
}

/// The rendezvous as the environment describes it: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
/// (torch.distributed's names) or PADDLE_MASTER=host:port, PADDLE_TRAINER_ID,
/// PADDLE_TRAINERS_NUM (Paddle's); OAR_RENDEZVOUS_TIMEOUT in seconds (default 60). A variable
/// that is set but not a number is named in a rendezvous_error; none set at all gives nullopt.
inline std::optional<RendezvousConfig> rendezvous_from_env() {
    auto text = [](const char* name) -> std::optional<std::string> {
        const char* v = std::getenv(name);
        if (!v || !*v) return std::nullopt;
        return std::string(v);
    };
    auto number = [](const std::string& name, const std::string& v, long lo, long hi) {
        char* end = nullptr;
        errno = 0;
        const long x = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi)
            throw rendezvous_error(oar::detail::concat("TCP rendezvous: ", name, "='", v, "' is not an integer in ", lo,
                                                       "..", hi));
        return static_cast<int>(x);
    };
    RendezvousConfig c;
    std::optional<std::string> port;
    if (auto m = text("PADDLE_MASTER")) {
        const auto colon = m->rfind(':');
        if (colon == std::string::npos)
            throw rendezvous_error("TCP rendezvous: PADDLE_MASTER='" + *m + "' is not host:port");
        c.master_addr = m->substr(0, colon);
        port = m->substr(colon + 1);
        c.master_port = number("PADDLE_MASTER's port", *port, 1, 65535);
    } else if (auto a = text("MASTER_ADDR")) {
        c.master_addr = *a;
        port = text("MASTER_PORT");
        if (!port) throw rendezvous_error("TCP rendezvous: MASTER_ADDR is set but MASTER_PORT is not");
        c.master_port = number("MASTER_PORT", *port, 1, 65535);
    } else {
        return std::nullopt;
    }
    const char* rank_name = text("PADDLE_TRAINER_ID") ? "PADDLE_TRAINER_ID" : "RANK";
    const char* size_name = text("PADDLE_TRAINERS_NUM") ? "PADDLE_TRAINERS_NUM" : "WORLD_SIZE";
    const auto rank = text(rank_name), size = text(size_name);
    if (!rank || !size)
        throw rendezvous_error(oar::detail::concat("TCP rendezvous: the master is set but ", !rank ? "RANK" : "WORLD_SIZE",
                                                   " (or PADDLE_", !rank ? "TRAINER_ID" : "TRAINERS_NUM", ") is not"));
    c.world_size = number(size_name, *size, 1, 1 << 20);
    c.rank = number(rank_name, *rank, 0, c.world_size - 1);
    if (auto t = text("OAR_RENDEZVOUS_TIMEOUT"))
        c.timeout = std::chrono::seconds(number("OAR_RENDEZVOUS_TIMEOUT", *t, 1, 86400));
    return c;
}

}  // namespace dist
}  // namespace oar
