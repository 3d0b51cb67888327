// The CUDA runtime pieces of oar::cuda: checked calls (OAR_CUDA_CHECK / OAR_CUBLAS_CHECK name the
// call, file and line), "no device" as its own error, device choice by index or string, RAII
// device buffers over cudaMalloc (never managed memory), pinned host buffers, streams, events and
// the per-thread cuBLAS handle. Needs the CUDA toolkit (hence .cuh: the g++-only header check
// skips it); tests/cuda/gpu_*.cu compile it with nvcc.
#pragma once

#include <cublas_v2.h>     // cublasHandle_t, cublasStatus_t
#include <cuda_runtime.h>  // cudaMalloc, cudaStream_t, cudaEvent_t

#include <cstddef>      // std::size_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::exchange, std::swap

#include "../../core/bf16.hpp"   // bf16: the packed GEMM operands' scratch
#include "../../core/error.hpp"  // detail::concat
#include "device.hpp"         // cuda_error, no_device_error, parse_device_spec, basic_cuda

namespace oar::cuda_runtime {

/// Throws for a failed runtime call: no_device_error when the failure means "no usable GPU".
inline void check(cudaError_t e, const char* call, const char* file, int line) {
    if (e == cudaSuccess) return;
    const std::string msg = detail::concat(file, ":", line, ": ", call, " failed: ", cudaGetErrorName(e), " (",
                                           cudaGetErrorString(e), ")");
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice)
        throw no_device_error(msg);
    throw cuda_error(msg);
}

inline const char* cublas_status_name(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        default: return "CUBLAS_STATUS_(unknown)";
    }
}

inline void check_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS)
        throw cuda_error(detail::concat(file, ":", line, ": ", call, " failed: ", cublas_status_name(s)));
}

}  // namespace oar::cuda_runtime

/// Runs a CUDA runtime call and throws oar::cuda_error (no_device_error when there is no GPU)
/// naming the call, file and line if it fails.
#define OAR_CUDA_CHECK(call) ::oar::cuda_runtime::check((call), #call, __FILE__, __LINE__)
/// The same for a cuBLAS call.
#define OAR_CUBLAS_CHECK(call) ::oar::cuda_runtime::check_cublas((call), #call, __FILE__, __LINE__)
/// After a kernel launch: a bad launch configuration is reported where it happened.
#define OAR_CUDA_CHECK_LAUNCH() OAR_CUDA_CHECK(cudaGetLastError())

namespace oar::cuda_runtime {

/// Number of usable CUDA devices; throws no_device_error (with the runtime's reason) when there is
/// none, e.g. no GPU or no driver on this machine.
inline int device_count() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
        throw no_device_error(detail::concat("no CUDA device: cudaGetDeviceCount failed: ", cudaGetErrorName(e), " (",
                                             cudaGetErrorString(e), ")"));
    }
    if (n == 0) throw no_device_error("no CUDA device: cudaGetDeviceCount found 0 devices");
    return n;
}

/// Whether at least one CUDA device is usable (never throws).
inline bool device_available() noexcept {
    int n = 0;
    const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    if (!ok) (void)cudaGetLastError();
    return ok;
}

/// Makes GPU `index` current for this thread; no_device_error names the index and how many exist.
inline void use_device(int index) {
    const int n = device_count();
    if (index < 0 || index >= n)
        throw no_device_error(detail::concat("no CUDA device gpu:", index, " (this machine has ", n, " device",
                                             n == 1 ? "" : "s", ": gpu:0..gpu:", n - 1, ")"));
    OAR_CUDA_CHECK(cudaSetDevice(index));
}

/// paddle.set_device: "cpu" does nothing, "gpu" / "gpu:N" makes that GPU current (usage_error for
/// a malformed string, no_device_error for a GPU that is not there). Returns what was parsed.
inline DeviceSpec set_device(std::string_view text) {
    const DeviceSpec spec = parse_device_spec(text);
    if (spec.gpu) use_device(spec.index);
    return spec;
}

/// The current device of this thread.
inline int current_device() {
    int d = 0;
    OAR_CUDA_CHECK(cudaGetDevice(&d));
    return d;
}

/// The stream oar's kernels run on for this thread (the legacy default stream unless set): the
/// copy streams below are non-blocking, so copies on them overlap this stream's kernels.
inline cudaStream_t& compute_stream() {
    thread_local cudaStream_t s = nullptr;
    return s;
}

/// n values of T in device memory (cudaMalloc), uninitialised; move-only, freed on destruction.
template <class T>
class device_buffer {
public:
    device_buffer() = default;
    explicit device_buffer(std::size_t n) : n_(n) {
        if (n) OAR_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    }
    device_buffer(device_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    device_buffer& operator=(device_buffer o) noexcept {
        std::swap(p_, o.p_);
        std::swap(n_, o.n_);
        return *this;
    }
    ~device_buffer() {
        if (p_) (void)cudaFree(p_);
    }

    T* data() { return p_; }
    const T* data() const { return p_; }
    std::size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }

    /// At least n values; old contents are lost when it grows.
    void reserve_discard(std::size_t n) {
        if (n > n_) *this = device_buffer(n);
    }
    void zero(cudaStream_t s = compute_stream()) {
        if (n_) OAR_CUDA_CHECK(cudaMemsetAsync(p_, 0, n_ * sizeof(T), s));
    }
    /// Copies n host values in (synchronous for pageable memory).
    void copy_from_host(const T* src, std::size_t n, std::size_t offset = 0) {
        if (offset + n > n_)
            throw value_error(detail::concat("device_buffer: copying ", n, " values at ", offset, " into ", n_));
        if (n) OAR_CUDA_CHECK(cudaMemcpy(p_ + offset, src, n * sizeof(T), cudaMemcpyHostToDevice));
    }
    void copy_to_host(T* dst, std::size_t n, std::size_t offset = 0) const {
        if (offset + n > n_)
            throw value_error(detail::concat("device_buffer: copying ", n, " values from ", offset, " of ", n_));
        if (n) OAR_CUDA_CHECK(cudaMemcpy(dst, p_ + offset, n * sizeof(T), cudaMemcpyDeviceToHost));
    }

private:
    T* p_ = nullptr;
    std::size_t n_ = 0;
};

/// n values of T in page-locked host memory (cudaMallocHost): the source of asynchronous copies.
template <class T>
class pinned_buffer {
public:
    pinned_buffer() = default;
    explicit pinned_buffer(std::size_t n) : n_(n) {
        if (n) OAR_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    }
    pinned_buffer(pinned_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    pinned_buffer& operator=(pinned_buffer o) noexcept {
        std::swap(p_, o.p_);
        std::swap(n_, o.n_);
        return *this;
    }
    ~pinned_buffer() {
        if (p_) (void)cudaFreeHost(p_);
    }
    T* data() { return p_; }
    const T* data() const { return p_; }
    std::size_t size() const { return n_; }

private:
    T* p_ = nullptr;
    std::size_t n_ = 0;
};

/// A non-blocking stream (does not synchronise with the legacy default stream).
class Stream {
public:
    Stream() { OAR_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    ~Stream() { (void)cudaStreamDestroy(s_); }
    cudaStream_t get() const { return s_; }
    void synchronize() const { OAR_CUDA_CHECK(cudaStreamSynchronize(s_)); }

private:
    cudaStream_t s_ = nullptr;
};

/// An event without timing (the cheap kind), for ordering streams.
class Event {
public:
    explicit Event(bool timing = false) {
        OAR_CUDA_CHECK(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    ~Event() { (void)cudaEventDestroy(e_); }
    void record(cudaStream_t s) { OAR_CUDA_CHECK(cudaEventRecord(e_, s)); }
    /// Work later queued on s waits for this event.
    void make_wait(cudaStream_t s) const { OAR_CUDA_CHECK(cudaStreamWaitEvent(s, e_, 0)); }
    void synchronize() const { OAR_CUDA_CHECK(cudaEventSynchronize(e_)); }
    /// Milliseconds from `start` to this event (both created with timing).
    float since(const Event& start) const {
        float ms = 0;
        OAR_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
        return ms;
    }
    cudaEvent_t get() const { return e_; }

private:
    cudaEvent_t e_ = nullptr;
};

/// This thread's grow-only float scratch on the current device, for kernels that need a workspace
/// (the whole-batch convolution): at least n floats, contents undefined. Growing frees the old
/// block (cudaFree waits for the work that still reads it).
inline float* device_scratch(std::size_t n) {
    struct Blocks {
        device_buffer<float> b[64];
    };
    thread_local Blocks blocks;
    const int d = current_device();
    if (d < 0 || d >= 64) throw cuda_error(detail::concat("device_scratch(): device index ", d, " is beyond 63"));
    blocks.b[d].reserve_discard(n);
    return blocks.b[d].data();
}

/// This thread's grow-only bf16 scratch on the current device (the packed operands of the bf16
/// GEMM, kernel<op::gemm_bf16, cuda>): at least n values, contents undefined. Separate from
/// device_scratch, which the convolution holds while its GEMMs run.
inline bf16* device_bf16_scratch(std::size_t n) {
    struct Blocks {
        device_buffer<bf16> b[64];
    };
    thread_local Blocks blocks;
    const int d = current_device();
    if (d < 0 || d >= 64) throw cuda_error(detail::concat("device_bf16_scratch(): device index ", d, " is beyond 63"));
    blocks.b[d].reserve_discard(n);
    return blocks.b[d].data();
}

/// This thread's cuBLAS handle for the current device (created on first use, one per device),
/// bound to compute_stream().
inline cublasHandle_t cublas() {
    struct Handles {
        cublasHandle_t h[64] = {};
        ~Handles() {
            for (auto x : h)
                if (x) (void)cublasDestroy(x);
        }
    };
    thread_local Handles handles;
    const int d = current_device();
    if (d < 0 || d >= 64) throw cuda_error(detail::concat("cublas(): device index ", d, " is beyond 63"));
    if (!handles.h[d]) OAR_CUBLAS_CHECK(cublasCreate(&handles.h[d]));
    OAR_CUBLAS_CHECK(cublasSetStream(handles.h[d], compute_stream()));
    return handles.h[d];
}

}  // namespace oar::cuda_runtime
