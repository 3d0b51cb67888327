// Kernel dispatch: `kernel<Op, Backend>::run(...)` over raw pointers and sizes. Layers call only
// this, so a faster or another backend's kernel replaces a specialisation without touching layers.
#pragma once

#include "../core/backend.hpp"  // Backend, cpu

namespace oar {

template <class>
inline constexpr bool dependent_false = false;

/// Operation tags. Each kernel header documents the signature of `run` for its ops.
namespace op {
struct gemm {};              // C = alpha * op(A) * op(B) + beta * C
struct im2col {};            // one sample's (C,H,W) -> (C*K*K, OH*OW)
struct col2im {};            // adjoint of im2col, accumulating into (C,H,W)
struct bias_add {};          // y[n, c, p] += b[c]
struct bias_grad {};         // db[c] += sum_{n,p} dy[n, c, p]
struct max_pool_forward {};
struct max_pool_backward {};
struct avg_pool_forward {};
struct avg_pool_backward {};
struct map {};               // y[i] = f(x[i])
struct map_backward {};      // dx[i] = f.backward(x[i], y[i], dy[i])
struct softmax_forward {};   // rows of y = softmax(rows of x)
struct softmax_backward {};
struct softmax_cross_entropy {};  // fused: loss and d(loss)/d(logits) for integer labels
struct fused_update {};      // f(p[i], g[i], s1[i], s2[i]) over the flat parameter buffer
}  // namespace op

/// Primary template: an op without a kernel on a backend fails to compile with a clear message.
template <class Op, class B>
struct kernel {
    static_assert(dependent_false<Op>,
                  "oar: this operation has no kernel for this backend; include the backend's kernel headers "
                  "(oar/kernels/cpu/*.hpp for oar::cpu)");
};

}  // namespace oar
