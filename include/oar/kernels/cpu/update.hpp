// CPU loop for the fused optimizer update: one pass over the flat parameter, gradient and state
// buffers (DESIGN.md, commitment 2). Plain loop over restrict pointers: the compiler vectorises it.
#pragma once

#include <cstddef>  // std::size_t

#include "../../config.hpp"    // OAR_RESTRICT
#include "../dispatch.hpp"     // kernel, op::fused_update
#include "../update_fns.hpp"   // the update functors

namespace oar {

/// kernel<op::fused_update, cpu>::run(f, n, p, g, s1, s2): f(p[i], g[i], s1[i], s2[i]).
/// s1 / s2 may be null when f does not use them.
template <class T>
struct kernel<op::fused_update, basic_cpu<T>> {
    template <class F>
    static void run(const F& f, std::size_t n, T* OAR_RESTRICT p, const T* OAR_RESTRICT g, T* OAR_RESTRICT s1,
                    T* OAR_RESTRICT s2) {
        T dummy1 = 0, dummy2 = 0;
        if (s1 && s2)
            for (std::size_t i = 0; i < n; ++i) f(p[i], g[i], s1[i], s2[i]);
        else if (s1)
            for (std::size_t i = 0; i < n; ++i) f(p[i], g[i], s1[i], dummy2);
        else
            for (std::size_t i = 0; i < n; ++i) f(p[i], g[i], dummy1, dummy2);
    }
};

}  // namespace oar
