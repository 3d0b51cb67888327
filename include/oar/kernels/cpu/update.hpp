// CPU loop for the fused optimizer update: one pass over the flat parameter, gradient and state
// buffers (docs/ARCHITECTURE.md). Plain loop over restrict pointers, compiled for each ISA
// (isa/update_body.inc) so the compiler vectorises it at the CPU's width whatever the user's flags;
// large buffers are updated in fixed chunks on the thread pool.
#pragma once

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t
#include <type_traits>  // std::is_same_v: the ISA bodies pick Adam's vector loop

#include "../../config.hpp"    // OAR_RESTRICT
#include "../../core/thread_pool.hpp"  // default_pool: large buffers in chunks
#include "../dispatch.hpp"     // kernel, op::fused_update
#include "../update_fns.hpp"   // the update functors
#include "isa/dispatch.hpp"     // OAR_ISA_DISPATCH

// The loop, once per ISA (isa/region.inc): oar::cpu_detail::isa_<name>::update_range.
#define OAR_ISA_BODY "update_body.inc"
#include "isa/every_isa.inc"

namespace oar {

/// kernel<op::fused_update, cpu>::run(f, n, p, g, s1, s2): f(p[i], g[i], s1[i], s2[i]).
/// s1 / s2 may be null when f does not use them. Large buffers are split into fixed chunks over
/// the default pool (each element's update is independent: results do not depend on threads).
template <class T>
struct kernel<op::fused_update, basic_cpu<T>> {
    static constexpr std::size_t chunk = 1 << 15;  // elements per task: ~0.5 MB of streams

    template <class F>
    static void run(const F& f, std::size_t n, T* OAR_RESTRICT p, const T* OAR_RESTRICT g, T* OAR_RESTRICT s1,
                    T* OAR_RESTRICT s2) {
        const std::size_t tasks = (n + chunk - 1) / chunk;
        if (tasks <= 1) return run_range(f, 0, n, p, g, s1, s2);
        default_pool().parallel_for(tasks, [&](std::size_t t) {
            run_range(f, t * chunk, std::min(n, (t + 1) * chunk), p, g, s1, s2);
        });
    }

private:
    template <class F>
    static void run_range(const F& f, std::size_t b, std::size_t e, T* OAR_RESTRICT p, const T* OAR_RESTRICT g,
                          T* OAR_RESTRICT s1, T* OAR_RESTRICT s2) {
        OAR_ISA_DISPATCH(update_range, f, b, e, p, g, s1, s2)
    }
};

}  // namespace oar
