// kernel<op::dropout, cpu>: the counter-based dropout mask (core/rng.hpp) applied on the host. The
// mask of element i is u(stream, i) < p, a pure function of the stream, so backward recomputes it.
// The loop is compiled for each ISA (isa/dropout_body.inc) and large tensors are split over the
// default pool; neither changes a bit.
#pragma once

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t
#include <cstdint>  // std::uint64_t

#include "../../core/rng.hpp"  // CounterRng
#include "../dispatch.hpp"     // kernel, op::dropout
#include "../../core/thread_pool.hpp"  // default_pool: large tensors in chunks
#include "isa/dispatch.hpp"            // OAR_ISA_DISPATCH

// The mask loop, once per ISA (isa/region.inc): oar::cpu_detail::isa_<name>::dropout_blocks.
#define OAR_ISA_BODY "dropout_body.inc"
#include "isa/every_isa.inc"

namespace oar {

/// kernel<op::dropout, cpu>::run(rng, stream, p, scale, in, out, n):
///   out[i] = rng.uniform(stream, i) < p ? 0 : in[i] * scale. in == out is allowed.
template <class T>
struct kernel<op::dropout, basic_cpu<T>> {
    static constexpr std::size_t chunk_blocks = 2048;  // Philox blocks per task (8192 elements)

    static void run(const CounterRng& rng, std::uint64_t stream, float p, T scale, const T* in, T* out,
                    std::size_t count) {
        const std::size_t blocks = count / 4, tasks = (blocks + chunk_blocks - 1) / chunk_blocks;
        const auto range = [&](std::size_t t) {
            const std::size_t b0 = t * chunk_blocks, b1 = std::min(blocks, b0 + chunk_blocks);
            OAR_ISA_DISPATCH(dropout_blocks, rng, stream, p, scale, in, out, b0, b1)
        };
        // Each element's mask is a pure function of (stream, i): the split does not change the bits.
        if (tasks > 1 && !ThreadPool::in_task())
            default_pool().parallel_for(tasks, range);
        else
            for (std::size_t t = 0; t < tasks; ++t) range(t);
        for (std::size_t i = blocks * 4; i < count; ++i) out[i] = rng.uniform(stream, i) < p ? T(0) : in[i] * scale;
    }
};

}  // namespace oar
