// storage<basic_cuda<D>>: the CUDA backend's memory (the contract is in kernels/dispatch.hpp).
// Buffers are cudaMalloc'd device memory (never managed memory); every copy and fill is queued on
// cuda_runtime::compute_stream(), so it is ordered with the kernels; synchronize() waits for it.
// basic_cuda<N> makes device N current before allocating (activate(), which Network calls).
#pragma once

#include <cstddef>  // std::size_t

#include "../dispatch.hpp"  // storage (primary template)
#include "launch.hpp"       // Thread, blocks_for, block_threads
#include "runtime.cuh"      // device_buffer, compute_stream, OAR_CUDA_CHECK, use_device

namespace oar {

namespace cuda_kernels {
template <class U>
__global__ void fill_kernel(U* p, std::size_t n, U v) {
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        p[i] = v;
}
}  // namespace cuda_kernels

template <int D>
struct storage<basic_cuda<D>> {
    static constexpr bool host_memory = false;
    template <class U>
    using buffer = cuda_runtime::device_buffer<U>;

    template <class U>
    static buffer<U> make(std::size_t n) {
        activate();
        buffer<U> b(n);
        b.zero();
        return b;
    }
    /// src is pageable host memory: the call returns once src has been read (the caller may reuse it).
    template <class U>
    static void upload(U* dst, const U* src, std::size_t n) {
        if (n) OAR_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(U), cudaMemcpyHostToDevice, cuda_runtime::compute_stream()));
    }
    /// dst is host memory: valid after synchronize().
    template <class U>
    static void download(U* dst, const U* src, std::size_t n) {
        if (n) OAR_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(U), cudaMemcpyDeviceToHost, cuda_runtime::compute_stream()));
    }
    template <class U>
    static void copy(U* dst, const U* src, std::size_t n) {
        if (n && dst != src)
            OAR_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(U), cudaMemcpyDeviceToDevice, cuda_runtime::compute_stream()));
    }
    template <class U>
    static void fill(U* dst, std::size_t n, U v) {
        if (n == 0) return;
        if (v == U(0)) {
            OAR_CUDA_CHECK(cudaMemsetAsync(dst, 0, n * sizeof(U), cuda_runtime::compute_stream()));
            return;
        }
        cuda_kernels::fill_kernel<U><<<cuda_kernels::blocks_for(n), cuda_kernels::block_threads, 0,
                                       cuda_runtime::compute_stream()>>>(dst, n, v);
        OAR_CUDA_CHECK_LAUNCH();
    }
    static void synchronize() { OAR_CUDA_CHECK(cudaStreamSynchronize(cuda_runtime::compute_stream())); }
    /// Makes the pinned device current (basic_cuda<N>, N >= 0); the current device otherwise.
    static void activate() {
        if constexpr (D >= 0) cuda_runtime::use_device(D);
    }
};

}  // namespace oar
