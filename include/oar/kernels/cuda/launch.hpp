// Launch coordinates as plain values, so that a CUDA kernel's body can run on the host too: the
// device wrapper fills `Thread` from blockIdx/threadIdx/blockDim/gridDim, a CPU test fills it by
// looping over the grid (tests/cuda/emulate.hpp). Plain C++: g++ compiles this header.
#pragma once

#include <cstddef>  // std::size_t

#include "../../config.hpp"  // OAR_HOST_DEVICE

namespace oar::cuda_kernels {

/// dim3 without the CUDA headers.
struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
};

/// Where one thread runs: its block and thread index, and the launch's block and grid sizes.
struct Thread {
    Dim3 block, thread, block_dim, grid_dim;

    /// Index of this thread over the whole x extent of the grid.
    OAR_HOST_DEVICE std::size_t global_x() const {
        return static_cast<std::size_t>(block.x) * block_dim.x + thread.x;
    }
    /// Threads in the whole grid along x (the step of a grid-stride loop).
    OAR_HOST_DEVICE std::size_t stride_x() const { return static_cast<std::size_t>(grid_dim.x) * block_dim.x; }
};

/// Threads per block for the one-dimensional kernels.
inline constexpr unsigned block_threads = 256;
/// At most this many blocks for a grid-stride loop (enough to fill an H100's 132 SMs many times).
inline constexpr unsigned max_blocks = 65535;

/// Blocks for n elements at `threads` per block, capped at max_blocks (grid-stride loops cover the rest).
constexpr unsigned blocks_for(std::size_t n, unsigned threads = block_threads) {
    const std::size_t b = (n + threads - 1) / threads;
    return b == 0 ? 1u : (b > max_blocks ? max_blocks : static_cast<unsigned>(b));
}

}  // namespace oar::cuda_kernels
