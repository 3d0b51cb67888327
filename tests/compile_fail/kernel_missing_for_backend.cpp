// A backend without kernels: calling an op on it names the missing kernel.
// first-error: oar: this operation has no kernel for this backend
// expect: kernel<oar::op::gemm, my_backend>
#include <oar/kernels/dispatch.hpp>

#include <string_view>

struct my_backend {
    using value_type = float;
    static constexpr std::string_view name = "mine";
    static constexpr bool is_oar_backend = true;
};
void f() { oar::kernel<oar::op::gemm, my_backend>::run(); }
