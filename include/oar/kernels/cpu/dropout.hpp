// kernel<op::dropout, cpu>: the counter-based dropout mask (core/rng.hpp) applied on the host. The
// mask of element i is u(stream, i) < p, a pure function of the stream, so backward recomputes it.
// The loop is compiled for each ISA (isa/dropout_body.inc: Philox on one block per 32-bit lane) and
// large tensors are split over the default pool; neither changes a bit.
#pragma once

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t
#include <cstdint>  // std::uint64_t
#include <type_traits>  // std::is_same_v: the ISA bodies' float loop

#include "../../core/rng.hpp"  // CounterRng
#include "../../core/simd.hpp"  // xsimd::batch, select: dropout_relu_backward
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

namespace cpu_detail {
/// The backward of a ReLU followed by a Dropout, from the Dropout's output y alone:
/// dx[i] = y[i] > 0 ? dy[i] * scale : 0 (scale 1: dy[i] itself). y > 0 exactly where the element was
/// kept and the ReLU's output was > 0 (a kept value is that output times scale >= 1; NaN is not > 0),
/// so this is the bits of the Dropout's backward (its mask drawn again) then op::relu_mask, in one
/// pass and without drawing the mask.
template <class T>
void dropout_relu_backward(const T* y, const T* dy, T* dx, std::size_t n, T scale) {
    using V = xsimd::batch<T>;
    std::size_t i = 0;
    if (scale == T(1)) {
        for (; i + V::size <= n; i += V::size)
            xsimd::select(V::load_unaligned(y + i) > V(T(0)), V::load_unaligned(dy + i), V(T(0))).store_unaligned(dx + i);
        for (; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
        return;
    }
    for (; i + V::size <= n; i += V::size)
        xsimd::select(V::load_unaligned(y + i) > V(T(0)), V::load_unaligned(dy + i) * V(scale), V(T(0)))
            .store_unaligned(dx + i);
    for (; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] * scale : T(0);
}
}  // namespace cpu_detail

}  // namespace oar
