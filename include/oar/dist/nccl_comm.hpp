// NcclComm: the Communicator over NCCL, one process per GPU (Paddle's collective mode). The
// 128-byte ncclUniqueId that NCCL needs to form the group is made by rank 0 and handed to the
// others over MPI (from_mpi) or over the TCP rendezvous (from_rendezvous: MASTER_ADDR/PORT).
// Buffers are DEVICE memory (cudaMalloc'd); every collective runs on the communicator's own
// stream and returns when it is done, as the Communicator contract says (blocking, in place).
// A peer that dies makes NCCL wait for ever; we poll ncclCommGetAsyncError while waiting and
// give up after `timeout` with ncclCommAbort and a comm_error, instead of hanging.
// Needs the oar::cuda CMake target with NCCL found (it defines OAR_HAS_CUDA=1 and OAR_HAS_NCCL=1).
// Without it this header still compiles; naming NcclComm is then a compile error that says so.
#pragma once

#include "../config.hpp"  // OAR_HAS_NCCL, OAR_HAS_CUDA, OAR_HAS_MPI

#if OAR_HAS_NCCL && OAR_HAS_CUDA

#include <cuda_runtime.h>  // cudaSetDevice, cudaStream_t, cudaStreamQuery
#include <nccl.h>          // ncclCommInitRank, ncclAllReduce, ncclBroadcast

#include <chrono>       // std::chrono: the collective timeout
#include <cstddef>      // std::byte, std::size_t
#include <cstring>      // std::memcpy
#include <span>         // std::span
#include <string>       // std::string
#include <thread>       // std::this_thread::yield while polling
#include <type_traits>  // std::is_same_v
#include <utility>      // std::exchange

#include "../core/error.hpp"  // value_error, detail::concat
#include "communicator.hpp"   // Communicator, comm_error
#include "rendezvous.hpp"     // RendezvousConfig, tcp_broadcast_bytes
#if OAR_HAS_MPI
#include "mpi_comm.hpp"  // MpiComm: from_mpi broadcasts the id over it
#endif

namespace oar::dist {

namespace detail {
using namespace oar::detail;  // concat & co. stay visible as detail:: inside this namespace
inline void cuda_check(cudaError_t rc, const char* what) {
    if (rc != cudaSuccess)
        throw comm_error(oar::detail::concat("NcclComm: ", what, " failed: ", cudaGetErrorString(rc)));
}
inline void nccl_check(ncclResult_t rc, const char* what, ncclComm_t comm = nullptr) {
    if (rc == ncclSuccess || rc == ncclInProgress) return;
    std::string why = ncclGetErrorString(rc);
    if (comm) {
        const char* last = ncclGetLastError(comm);
        if (last && *last) why += std::string(" (") + last + ")";
    }
    throw comm_error(oar::detail::concat("NcclComm: ", what, " failed: ", why));
}
template <class T>
ncclDataType_t nccl_type() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "oar: NcclComm reduces float or double");
    if constexpr (std::is_same_v<T, float>) return ncclFloat32;
    else return ncclFloat64;
}
}  // namespace detail

class NcclComm {
public:
    /// A fresh id (rank 0 makes it; the others must receive its bytes).
    static ncclUniqueId make_unique_id() {
        ncclUniqueId id;
        detail::nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
        return id;
    }

    /// Joins the group `id` as `rank` of `world_size`, on CUDA device `device`. Collective: every
    /// rank calls it with the same id. `timeout` bounds each later collective (a dead peer).
    NcclComm(const ncclUniqueId& id, int rank, int world_size, int device,
             std::chrono::milliseconds timeout = std::chrono::minutes(5))
        : rank_(rank), size_(world_size), device_(device), timeout_(timeout) {
        if (world_size < 1 || rank < 0 || rank >= world_size)
            throw value_error(oar::detail::concat("NcclComm: rank ", rank, " is not in 0..", world_size - 1));
        int devices = 0;
        detail::cuda_check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
        if (device < 0 || device >= devices)
            throw value_error(oar::detail::concat("NcclComm: device ", device, " does not exist (", devices,
                                                  " CUDA devices)"));
        try {
            detail::cuda_check(cudaSetDevice(device), "cudaSetDevice");
            detail::cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
            detail::cuda_check(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc");
            detail::nccl_check(ncclCommInitRank(&comm_, world_size, id, rank), "ncclCommInitRank");
        } catch (...) {
            release();  // the destructor does not run for a constructor that throws
            throw;
        }
    }

    /// Rank 0 makes the id and sends it to the others over the TCP rendezvous.
    static NcclComm from_rendezvous(const RendezvousConfig& c, int device,
                                    std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
        ncclUniqueId id{};
        if (c.rank == 0) id = make_unique_id();
        tcp_broadcast_bytes(c, std::as_writable_bytes(std::span<char>(id.internal, sizeof id.internal)));
        return NcclComm(id, c.rank, c.world_size, device, timeout);
    }

#if OAR_HAS_MPI
    /// Rank 0 of `mpi` makes the id and broadcasts it over MPI; the NCCL group has mpi's ranks.
    static NcclComm from_mpi(MpiComm& mpi, int device, std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
        ncclUniqueId id{};
        if (mpi.rank() == 0) id = make_unique_id();
        detail::mpi_check(MPI_Bcast(id.internal, sizeof id.internal, MPI_BYTE, 0, mpi.native()), "MPI_Bcast");
        return NcclComm(id, mpi.rank(), mpi.world_size(), device, timeout);
    }
#endif

    NcclComm(const NcclComm&) = delete;
    NcclComm& operator=(const NcclComm&) = delete;
    NcclComm(NcclComm&& o) noexcept
        : comm_(std::exchange(o.comm_, nullptr)), stream_(std::exchange(o.stream_, nullptr)),
          scratch_(std::exchange(o.scratch_, nullptr)), rank_(o.rank_), size_(o.size_), device_(o.device_),
          timeout_(o.timeout_) {}
    NcclComm& operator=(NcclComm&&) = delete;
    ~NcclComm() { release(); }

    int rank() const { return rank_; }
    int world_size() const { return size_; }
    int device() const { return device_; }
    cudaStream_t stream() const { return stream_; }
    ncclComm_t native() const { return comm_; }

    /// x: device memory. In place, ncclSum.
    template <class T>
    void allreduce_sum(std::span<T> x) { reduce(x, ncclSum, "ncclAllReduce(sum)"); }
    /// x: device memory. In place, ncclAvg (the sum divided by world_size on the device).
    template <class T>
    void allreduce_average(std::span<T> x) { reduce(x, ncclAvg, "ncclAllReduce(avg)"); }
    /// x: device memory; every rank's x becomes root's.
    template <class T>
    void broadcast(std::span<T> x, int root) {
        if (root < 0 || root >= size_)
            throw value_error(oar::detail::concat("NcclComm::broadcast: root ", root, " is not a rank (world size ",
                                                  size_, ")"));
        if (x.empty()) return;
        detail::cuda_check(cudaSetDevice(device_), "cudaSetDevice");
        detail::nccl_check(ncclBroadcast(x.data(), x.data(), x.size(), detail::nccl_type<T>(), root, comm_, stream_),
                           "ncclBroadcast", comm_);
        wait("ncclBroadcast");
    }
    /// An allreduce of one float: returns once every rank has entered it.
    void barrier() { allreduce_sum(std::span<float>(scratch_, 1)); }

private:
    template <class T>
    void reduce(std::span<T> x, ncclRedOp_t op, const char* what) {
        if (x.empty()) return;
        detail::cuda_check(cudaSetDevice(device_), "cudaSetDevice");
        detail::nccl_check(ncclAllReduce(x.data(), x.data(), x.size(), detail::nccl_type<T>(), op, comm_, stream_),
                           what, comm_);
        wait(what);
    }

    /// Waits for the stream, checking NCCL's asynchronous error; aborts the group at the timeout.
    void wait(const char* what) {
        const auto deadline = std::chrono::steady_clock::now() + timeout_;
        for (;;) {
            const cudaError_t q = cudaStreamQuery(stream_);
            if (q == cudaSuccess) return;
            if (q != cudaErrorNotReady) detail::cuda_check(q, what);
            ncclResult_t async = ncclSuccess;
            detail::nccl_check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError", comm_);
            if (async != ncclSuccess && async != ncclInProgress) {
                const std::string why = ncclGetErrorString(async);
                ncclCommAbort(std::exchange(comm_, nullptr));
                throw comm_error(oar::detail::concat("NcclComm: rank ", rank_, ": ", what, " failed: ", why));
            }
            if (std::chrono::steady_clock::now() > deadline) {
                ncclCommAbort(std::exchange(comm_, nullptr));
                throw comm_error(oar::detail::concat("NcclComm: rank ", rank_, ": ", what, " did not finish within ",
                                                     timeout_.count() / 1000.0,
                                                     " s (a peer died or never called it); the communicator is aborted"));
            }
            std::this_thread::yield();
        }
    }

    void release() noexcept {
        if (comm_) ncclCommDestroy(std::exchange(comm_, nullptr));
        if (scratch_) cudaFree(std::exchange(scratch_, nullptr));
        if (stream_) cudaStreamDestroy(std::exchange(stream_, nullptr));
    }

    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
    float* scratch_ = nullptr;
    int rank_ = 0, size_ = 1, device_ = 0;
    std::chrono::milliseconds timeout_;
};

static_assert(Communicator<NcclComm>);

}  // namespace oar::dist

#else  // !(OAR_HAS_NCCL && OAR_HAS_CUDA)

#include "../kernels/dispatch.hpp"  // dependent_false

namespace oar::dist {

/// Stand-in when oar was built without NCCL: including this header is harmless, constructing an
/// NcclComm is a compile error that says what to do.
class NcclComm {
public:
    template <class T = void>
    explicit NcclComm(T* = nullptr) {
        static_assert(dependent_false<T>,
                      "oar: NcclComm needs NCCL: link your target with the oar::cuda CMake target on a machine "
                      "where CUDA and NCCL are found (it defines OAR_HAS_NCCL=1), or use MpiComm / LocalComm");
    }
};

}  // namespace oar::dist

#endif
