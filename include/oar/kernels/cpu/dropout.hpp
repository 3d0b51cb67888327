// kernel<op::dropout, cpu>: the counter-based dropout mask (core/rng.hpp) applied on the host. The
// mask of element i is u(stream, i) < p, a pure function of the stream, so backward recomputes it.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t

#include "../../core/rng.hpp"  // CounterRng
#include "../dispatch.hpp"     // kernel, op::dropout

namespace oar {

/// kernel<op::dropout, cpu>::run(rng, stream, p, scale, in, out, n):
///   out[i] = rng.uniform(stream, i) < p ? 0 : in[i] * scale. in == out is allowed.
template <class T>
struct kernel<op::dropout, basic_cpu<T>> {
    static void run(const CounterRng& rng, std::uint64_t stream, float p, T scale, const T* in, T* out,
                    std::size_t count) {
        // One Philox block holds the uniforms of 4 consecutive elements (CounterRng::uniform(stream, i)
        // reads word i % 4 of block i / 4): draw each block once.
        std::size_t i = 0;
        for (; i + 4 <= count; i += 4) {
            const auto block = rng.bits(stream, i / 4);
            for (std::size_t k = 0; k < 4; ++k) {
                const float u = static_cast<float>(block[k] >> 8) * (1.0f / 16777216.0f);  // as uniform()
                out[i + k] = u < p ? T(0) : in[i + k] * scale;
            }
        }
        for (; i < count; ++i) out[i] = rng.uniform(stream, i) < p ? T(0) : in[i] * scale;
    }
};

}  // namespace oar
