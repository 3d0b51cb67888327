// An emulated CUDA launch on the CPU: runs a kernel body (oar/kernels/cuda/bodies.hpp) for every
// thread of a grid, so the GPU's math is tested here without a GPU. Kernels that share memory are
// run phase by phase (a phase is the code between two __syncthreads()), every thread of a block
// finishing phase p before any starts p+1, with the block's shared memory as a plain array. Inside
// a phase the threads run in reverse order, so a body that wrongly depends on another thread's
// write from the same phase reads a stale value and fails its comparison.
#pragma once

#include <cstddef>  // std::size_t
#include <vector>   // std::vector: a block's shared memory

#include <oar/kernels/cuda/launch.hpp>  // Dim3, Thread

namespace oar_test {

using oar::cuda_kernels::Dim3;
using oar::cuda_kernels::Thread;

/// body(const Thread&) for every thread of grid x block (x dimension only, as oar's kernels).
template <class Body>
void emulate_launch(Dim3 grid, Dim3 block, Body&& body) {
    for (unsigned b = 0; b < grid.x; ++b)
        for (unsigned t = block.x; t-- > 0;) body(Thread{{b, 0, 0}, {t, 0, 0}, block, grid});
}

/// body(phase, const Thread&, S* shared) for `phases` phases per block, `shared_count` S per block.
template <class S, class Body>
void emulate_phased_launch(Dim3 grid, Dim3 block, unsigned phases, std::size_t shared_count, Body&& body) {
    for (unsigned b = 0; b < grid.x; ++b) {
        std::vector<S> shared(shared_count, S(-12345));  // garbage, as uninitialised shared memory
        for (unsigned p = 0; p < phases; ++p)
            for (unsigned t = block.x; t-- > 0;) body(p, Thread{{b, 0, 0}, {t, 0, 0}, block, grid}, shared.data());
    }
}

}  // namespace oar_test
