// The seam between the backend-neutral code (layers, Network, optimizers, losses, DataParallel)
// and a backend (docs/ARCHITECTURE.md): `kernel<Op, Backend>::run(...)` over raw pointers and
// sizes, and `storage<Backend>`: where the backend's buffers live and how values move between
// them and the host. A backend specialises both; nothing else in oar is backend-specific.
#pragma once

#include "../core/backend.hpp"          // Backend, cpu
#include "../core/dependent_false.hpp"  // dependent_false
#include "ops.hpp"                      // op::* tags
#include "types.hpp"                    // ConvGeometry, Trans

namespace oar {

/// Primary template: an op without a kernel on a backend fails to compile with a clear message.
template <class Op, class B>
struct kernel {
    static_assert(dependent_false<Op>,
                  "oar: this operation has no kernel for this backend; include the backend's kernel headers "
                  "(oar/kernels/cpu/*.hpp for oar::cpu, oar/kernels/cuda/*.cuh for oar::cuda)");
};

/// storage<B>: a backend's memory. Each specialisation provides
///   host_memory                      whether its pointers may be dereferenced on the host;
///   buffer<U>                        an owning buffer (data(), size()), made by make<U>(n), zeroed;
///   upload(dst, src, n)              host -> backend;   download(dst, src, n)   backend -> host;
///   copy(dst, src, n)                backend -> backend; fill(dst, n, v);
///   synchronize()                    waits until queued work on the backend is done.
/// All are ordered with the backend's kernels (on a GPU: its compute stream).
template <class B>
struct storage {
    static_assert(dependent_false<B>,
                  "oar: this backend has no storage; include the backend's headers (oar/kernels/cpu/storage.hpp "
                  "for oar::cpu, oar/kernels/cuda/storage.cuh for oar::cuda)");
};

/// The backend of a network, parameter set or optimizer (X::backend); the CPU of X::value_type for
/// types that name none (a user's own model).
template <class X>
struct backend_of {
    using type = basic_cpu<typename X::value_type>;
};
template <class X>
    requires requires { typename X::backend; }
struct backend_of<X> {
    using type = typename X::backend;
};
template <class X>
using storage_of = storage<typename backend_of<X>::type>;

/// Whether B's buffers are host memory (a CPU backend). Backend-neutral code copies through
/// storage<B> where this is false.
template <class B>
inline constexpr bool host_backend = storage<B>::host_memory;

}  // namespace oar
