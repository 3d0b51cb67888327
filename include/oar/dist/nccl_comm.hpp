// NcclComm: the Communicator over NCCL, one process per GPU (Paddle's collective mode). The
// 128-byte ncclUniqueId that NCCL needs to form the group is made by rank 0 and handed to the
// others over MPI (from_mpi) or over the TCP rendezvous (from_rendezvous: MASTER_ADDR/PORT).
// Buffers are DEVICE memory (cudaMalloc'd); every collective runs on the communicator's own
// stream, after the work already queued on oar's compute stream (the kernels that wrote the
// buffer), and the blocking ones return when it is done, as the Communicator contract says. It is
// also an AsyncCommunicator: start_allreduce_sum queues a reduction and returns at once, wait_all
// waits for all of them, so DataParallel overlaps bucketed allreduces with backward as over MPI.
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

#include <vector>       // std::vector: staging of host control data

#include "../core/error.hpp"              // value_error, detail::concat
#include "../kernels/cuda/runtime.cuh"    // compute_stream(): the stream the gradients are written on
#include "communicator.hpp"               // Communicator, AsyncCommunicator, comm_error
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
    /// Collectives take device memory (DataParallel pairs it with networks on the GPU).
    static constexpr bool device_memory = true;

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
            detail::cuda_check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
            detail::cuda_check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
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
          scratch_(std::exchange(o.scratch_, nullptr)), ready_(std::exchange(o.ready_, nullptr)),
          done_(std::exchange(o.done_, nullptr)), rank_(o.rank_), size_(o.size_), device_(o.device_),
          timeout_(o.timeout_), pending_(o.pending_) {}
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
        after_compute();
        detail::nccl_check(ncclBroadcast(x.data(), x.data(), x.size(), detail::nccl_type<T>(), root, comm_, stream_),
                           "ncclBroadcast", comm_);
        wait("ncclBroadcast");
    }
    /// An allreduce of one float: returns once every rank has entered it.
    void barrier() { allreduce_sum(std::span<float>(scratch_, 1)); }

    /// x: HOST memory (small control data: DataParallel's model fingerprints), summed through a
    /// device copy.
    void host_allreduce_sum(std::span<double> x) {
        if (x.empty()) return;
        detail::cuda_check(cudaSetDevice(device_), "cudaSetDevice");
        double* d = nullptr;
        detail::cuda_check(cudaMalloc(reinterpret_cast<void**>(&d), x.size_bytes()), "cudaMalloc");
        try {
            detail::cuda_check(cudaMemcpy(d, x.data(), x.size_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
            reduce(std::span<double>(d, x.size()), ncclSum, "ncclAllReduce(sum, host data)");
            detail::cuda_check(cudaMemcpy(x.data(), d, x.size_bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
        } catch (...) {
            cudaFree(d);
            throw;
        }
        cudaFree(d);
    }

    /// x: device memory. Queues an in-place sum after the compute stream's work so far and returns;
    /// x must stay untouched until wait_all().
    template <class T>
    void start_allreduce_sum(std::span<T> x) {
        if (x.empty()) return;
        detail::cuda_check(cudaSetDevice(device_), "cudaSetDevice");
        after_compute();
        detail::nccl_check(ncclAllReduce(x.data(), x.data(), x.size(), detail::nccl_type<T>(), ncclSum, comm_, stream_),
                           "ncclAllReduce(sum, started)", comm_);
        ++pending_;
    }
    /// NCCL progresses on its own stream: nothing to drive from the host.
    void progress() {}
    /// Waits for every started reduction (bounded by the timeout, like the blocking ones); the
    /// compute stream then also waits for them, so kernels queued later read the sums.
    void wait_all() {
        if (pending_ == 0) return;
        pending_ = 0;
        wait("ncclAllReduce(sum, started)");
        detail::cuda_check(cudaEventRecord(done_, stream_), "cudaEventRecord");
        detail::cuda_check(cudaStreamWaitEvent(cuda_runtime::compute_stream(), done_, 0), "cudaStreamWaitEvent");
    }
    /// Reductions started and not yet waited for.
    std::size_t pending() const { return pending_; }

private:
    /// The communicator's stream waits for what the compute stream queued so far (the kernels
    /// that wrote the buffer about to be reduced).
    void after_compute() {
        detail::cuda_check(cudaEventRecord(ready_, cuda_runtime::compute_stream()), "cudaEventRecord");
        detail::cuda_check(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
    }

    template <class T>
    void reduce(std::span<T> x, ncclRedOp_t op, const char* what) {
        if (x.empty()) return;
        detail::cuda_check(cudaSetDevice(device_), "cudaSetDevice");
        after_compute();
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
        if (ready_) cudaEventDestroy(std::exchange(ready_, nullptr));
        if (done_) cudaEventDestroy(std::exchange(done_, nullptr));
        if (stream_) cudaStreamDestroy(std::exchange(stream_, nullptr));
    }

    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
    float* scratch_ = nullptr;
    cudaEvent_t ready_ = nullptr, done_ = nullptr;
    int rank_ = 0, size_ = 1, device_ = 0;
    std::chrono::milliseconds timeout_;
    std::size_t pending_ = 0;
};

static_assert(AsyncCommunicator<NcclComm>);

}  // namespace oar::dist

#else  // !(OAR_HAS_NCCL && OAR_HAS_CUDA)

#include "../core/dependent_false.hpp"  // dependent_false

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
