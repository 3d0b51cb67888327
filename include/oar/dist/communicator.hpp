// The Communicator concept (docs/ARCHITECTURE.md, "Constraints"): what data-parallel training needs from a
// collective engine. LocalComm (one process), MpiComm (CPU processes and nodes) and NcclComm
// (GPUs) model it; DataParallel and the helpers below are written against it alone.
#pragma once

#include <algorithm>  // std::max
#include <concepts>  // std::convertible_to
#include <cstddef>   // std::size_t
#include <cstdint>   // std::uint64_t
#include <span>      // std::span: the buffers collectives work on, in place
#include <string>    // std::string
#include <vector>    // std::vector

#include "../core/error.hpp"  // error

namespace oar {

/// A collective operation failed (an MPI or NCCL error code, a peer that went away); the message
/// carries the engine's own error string.
class comm_error : public error {
public:
    using error::error;
};

namespace dist {

/// Communicator: one process's handle on a group of `world_size()` processes numbered 0..N-1.
///   int rank() const; int world_size() const;        // 0 <= rank() < world_size()
///   void allreduce_sum(std::span<T> x);               // T = float, double: every rank's x becomes
///   void allreduce_average(std::span<T> x);           //   the element-wise sum (average) over ranks
///   void broadcast(std::span<T> x, int root);         // every rank's x becomes root's x
///   void barrier();                                   // returns once every rank has entered it
/// Contract: collectives are called by every rank, in the same order, with spans of the same size
/// (mismatched sizes are undefined at the engine level, as in MPI); they work in place and are
/// blocking. Every rank gets the same result bits from one call (for two ranks an exact
/// consequence of a + b == b + a; engines that reduce in rank-dependent order must not claim more).
/// Failures throw oar::comm_error with the engine's message. A 1-process communicator makes every
/// collective a no-op that leaves x unchanged (average of one value is the value).
template <class C>
concept Communicator = requires(C& c, const C& cc, std::span<float> f, std::span<double> d, int root) {
    { cc.rank() } -> std::convertible_to<int>;
    { cc.world_size() } -> std::convertible_to<int>;
    c.allreduce_sum(f);
    c.allreduce_sum(d);
    c.allreduce_average(f);
    c.allreduce_average(d);
    c.broadcast(f, root);
    c.broadcast(d, root);
    c.barrier();
};

/// AsyncCommunicator: a Communicator that can also reduce without blocking, so that data-parallel
/// training overlaps gradient averaging with the rest of backward:
///   void start_allreduce_sum(std::span<T> x);  // begins an in-place sum; x stays untouched until
///   void progress();                            //   wait_all(); progress() lets the engine advance
///   void wait_all();                            //   returns when everything started is done
/// Contract: every rank starts the same reductions in the same order (as for the blocking ones);
/// the results are the bits the blocking allreduce_sum gives for the same spans.
template <class C>
concept AsyncCommunicator = Communicator<C> && requires(C& c, std::span<float> f, std::span<double> d) {
    c.start_allreduce_sum(f);
    c.start_allreduce_sum(d);
    c.progress();
    c.wait_all();
};

/// Every rank's `mine` (the same length on all ranks), concatenated in rank order on every rank.
/// Built on allreduce_sum of doubles, exact for values that doubles hold exactly (integers < 2^53):
/// meant for small control data such as model fingerprints, not for tensors. Host memory: a
/// communicator of device memory reduces it through its host_allreduce_sum.
template <Communicator C>
std::vector<double> allgather(C& comm, std::span<const double> mine) {
    const auto n = mine.size();
    const auto r = static_cast<std::size_t>(comm.rank());
    std::vector<double> all(n * static_cast<std::size_t>(comm.world_size()), 0.0);
    for (std::size_t i = 0; i < n; ++i) all[r * n + i] = mine[i];
    if constexpr (requires { comm.host_allreduce_sum(std::span<double>(all)); })
        comm.host_allreduce_sum(std::span<double>(all));
    else
        comm.allreduce_sum(std::span<double>(all));
    return all;
}

/// Every rank's string, in rank order on every rank (two collectives: the longest length, then
/// the bytes). For error messages that name what another rank has.
template <Communicator C>
std::vector<std::string> allgather_strings(C& comm, const std::string& mine) {
    const double len = static_cast<double>(mine.size());
    std::size_t longest = 0;
    for (double l : allgather(comm, std::span<const double>(&len, 1)))
        longest = std::max(longest, static_cast<std::size_t>(l));
    std::vector<double> bytes(longest, -1.0);  // -1 marks the end of a shorter string
    for (std::size_t i = 0; i < mine.size(); ++i) bytes[i] = static_cast<unsigned char>(mine[i]);
    const std::vector<double> all = allgather(comm, std::span<const double>(bytes));
    std::vector<std::string> out(static_cast<std::size_t>(comm.world_size()));
    for (std::size_t r = 0; r < out.size(); ++r)
        for (std::size_t i = 0; i < longest && all[r * longest + i] >= 0.0; ++i)
            out[r].push_back(static_cast<char>(static_cast<unsigned char>(all[r * longest + i])));
    return out;
}

/// A 64-bit value as four exact doubles (16 bits each), for allgather.
inline std::vector<double> split_u64(std::uint64_t v) {
    return {static_cast<double>(v & 0xffff), static_cast<double>((v >> 16) & 0xffff),
            static_cast<double>((v >> 32) & 0xffff), static_cast<double>(v >> 48)};
}

}  // namespace dist
}  // namespace oar
