// LocalComm: the Communicator of a single process. Data-parallel code runs unchanged on it:
// every collective is a no-op (the sum or average over one rank is the rank's own value).
#pragma once

#include <span>  // std::span

#include "../core/error.hpp"  // value_error
#include "communicator.hpp"   // Communicator

namespace oar::dist {

class LocalComm {
public:
    /// Its collectives touch no memory, so it serves networks on any backend (DataParallel).
    static constexpr bool any_memory = true;

    int rank() const { return 0; }
    int world_size() const { return 1; }

    template <class T>
    void allreduce_sum(std::span<T>) {}
    template <class T>
    void allreduce_average(std::span<T>) {}
    /// root must be 0, the only rank (a wrong root is a bug worth naming, as MPI would).
    template <class T>
    void broadcast(std::span<T>, int root) {
        if (root != 0) throw value_error(detail::concat("LocalComm::broadcast: root ", root, " is not rank 0"));
    }
    void barrier() {}
    template <class T>
    void start_allreduce_sum(std::span<T>) {}
    void progress() {}
    void wait_all() {}
};

static_assert(AsyncCommunicator<LocalComm>);

}  // namespace oar::dist
