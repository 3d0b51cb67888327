// MpiComm: the Communicator over MPI (Debian's OpenMPI), for CPU processes on one or many nodes.
// It works on its own duplicate of the given communicator, with MPI_ERRORS_RETURN, so that an MPI
// failure becomes an oar::comm_error carrying MPI's error string instead of an abort.
// Needs the oar::mpi CMake target (it defines OAR_HAS_MPI=1 and links MPI). Without it this
// header still compiles (every header does, alone), but naming MpiComm is a compile error that
// says so.
#pragma once

#include "../config.hpp"  // OAR_HAS_MPI

#if OAR_HAS_MPI

// Only MPI's C API is used: skip the deprecated C++ bindings (they do not compile warning-free).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>  // MPI_Allreduce, MPI_Bcast, ...

#include <algorithm>    // std::min
#include <climits>      // INT_MAX: MPI counts are int
#include <cstddef>      // std::size_t
#include <span>         // std::span
#include <string>       // std::string
#include <type_traits>  // std::is_same_v
#include <utility>      // std::exchange, std::move
#include <vector>       // std::vector: pending requests

#include "../core/error.hpp"  // value_error, detail::concat
#include "communicator.hpp"   // Communicator, AsyncCommunicator, comm_error

namespace oar::dist {

namespace detail {
using namespace oar::detail;  // concat & co. stay visible as detail:: inside this namespace
/// MPI's text for an error code: "MPI_ERR_TRUNCATE: message truncated".
inline std::string mpi_error_string(int code) {
    char buf[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return oar::detail::concat("MPI error code ", code);
    return std::string(buf, static_cast<std::size_t>(len));
}

/// Throws comm_error naming the call and MPI's message unless rc is MPI_SUCCESS.
inline void mpi_check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) throw comm_error(oar::detail::concat("MpiComm: ", what, " failed: ", mpi_error_string(rc)));
}

template <class T>
MPI_Datatype mpi_type() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "oar: MpiComm reduces float or double");
    if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
    else return MPI_DOUBLE;
}
}  // namespace detail

class MpiComm {
public:
    /// Duplicates `base` (MPI_COMM_WORLD by default) and sets MPI_ERRORS_RETURN on the copy.
    /// MPI must be initialised (init_parallel_env() does it); comm_error otherwise.
    explicit MpiComm(MPI_Comm base = MPI_COMM_WORLD) {
        int init = 0;
        MPI_Initialized(&init);
        if (!init)
            throw comm_error("MpiComm: MPI is not initialised: call oar::dist::init_parallel_env() (or MPI_Init) first");
        detail::mpi_check(MPI_Comm_dup(base, &comm_), "MPI_Comm_dup");
        detail::mpi_check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
        detail::mpi_check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
        detail::mpi_check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    }
    MpiComm(const MpiComm&) = delete;
    MpiComm& operator=(const MpiComm&) = delete;
    MpiComm(MpiComm&& o) noexcept
        : comm_(std::exchange(o.comm_, MPI_COMM_NULL)), rank_(o.rank_), size_(o.size_),
          pending_(std::move(o.pending_)) {}
    MpiComm& operator=(MpiComm&& o) noexcept {
        if (this != &o) {
            release();
            comm_ = std::exchange(o.comm_, MPI_COMM_NULL);
            rank_ = o.rank_;
            size_ = o.size_;
            pending_ = std::move(o.pending_);
        }
        return *this;
    }
    ~MpiComm() { release(); }

    int rank() const { return rank_; }
    int world_size() const { return size_; }
    MPI_Comm native() const { return comm_; }

    /// MPI_Allreduce(MPI_IN_PLACE, ..., MPI_SUM), in chunks of at most INT_MAX elements.
    template <class T>
    void allreduce_sum(std::span<T> x) {
        for_chunks(x, [&](T* p, int n) {
            detail::mpi_check(MPI_Allreduce(MPI_IN_PLACE, p, n, detail::mpi_type<T>(), MPI_SUM, comm_), "MPI_Allreduce");
        });
    }
    /// The sum divided by world_size(): correctly rounded, the same bits on every rank.
    template <class T>
    void allreduce_average(std::span<T> x) {
        allreduce_sum(x);
        const T n = static_cast<T>(size_);
        if (size_ > 1)
            for (T& v : x) v /= n;
    }
    template <class T>
    void broadcast(std::span<T> x, int root) {
        if (root < 0 || root >= size_)
            throw value_error(oar::detail::concat("MpiComm::broadcast: root ", root, " is not a rank (world size ",
                                                  size_, ")"));
        for_chunks(x, [&](T* p, int n) {
            detail::mpi_check(MPI_Bcast(p, n, detail::mpi_type<T>(), root, comm_), "MPI_Bcast");
        });
    }
    void barrier() { detail::mpi_check(MPI_Barrier(comm_), "MPI_Barrier"); }

    /// AsyncCommunicator: MPI_Iallreduce(MPI_IN_PLACE, ..., MPI_SUM). x must stay alive and
    /// untouched until wait_all(); reductions started in the same order on every rank.
    template <class T>
    void start_allreduce_sum(std::span<T> x) {
        for_chunks(x, [&](T* p, int n) {
            MPI_Request r = MPI_REQUEST_NULL;
            detail::mpi_check(MPI_Iallreduce(MPI_IN_PLACE, p, n, detail::mpi_type<T>(), MPI_SUM, comm_, &r),
                              "MPI_Iallreduce");
            pending_.push_back(r);
        });
    }
    /// Lets started reductions advance (Open MPI moves non-blocking collectives only inside MPI
    /// calls, so the caller calls this between pieces of its own work).
    void progress() {
        if (pending_.empty()) return;
        int done = 0;
        detail::mpi_check(MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done, MPI_STATUSES_IGNORE),
                          "MPI_Testall");
        if (done) pending_.clear();
    }
    /// Returns when every started reduction is complete.
    void wait_all() {
        if (pending_.empty()) return;
        const int rc = MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE);
        pending_.clear();
        detail::mpi_check(rc, "MPI_Waitall");
    }
    std::size_t pending() const { return pending_.size(); }

private:
    template <class T, class F>
    static void for_chunks(std::span<T> x, F&& f) {
        for (std::size_t first = 0; first < x.size(); first += INT_MAX)
            f(x.data() + first, static_cast<int>(std::min<std::size_t>(INT_MAX, x.size() - first)));
    }

    void release() noexcept {
        if (comm_ == MPI_COMM_NULL) return;
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Comm_free(&comm_);
        comm_ = MPI_COMM_NULL;
    }

    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    int size_ = 1;
    std::vector<MPI_Request> pending_;  // started by start_allreduce_sum, not yet waited for
};

static_assert(AsyncCommunicator<MpiComm>);

}  // namespace oar::dist

#else  // !OAR_HAS_MPI

#include "../core/dependent_false.hpp"  // dependent_false

namespace oar::dist {

/// Stand-in when oar was built without MPI: including this header is harmless (so every header
/// compiles alone), constructing an MpiComm is a compile error that says what to do.
class MpiComm {
public:
    template <class T = void>
    explicit MpiComm(T* = nullptr) {
        static_assert(dependent_false<T>,
                      "oar: MpiComm needs MPI: link your target with the oar::mpi CMake target (it defines "
                      "OAR_HAS_MPI=1 and links MPI::MPI_CXX), or use LocalComm for one process");
    }
};

}  // namespace oar::dist

#endif  // OAR_HAS_MPI
