// Tests of oar/kernels/dispatch.hpp: dependent_false is false for every type, and the CPU kernel
// headers specialise kernel<op::X, cpu> (and cpu64) with a callable `run` for every op tag
// (checked with requires-expressions, which never instantiate the failing primary template for a
// specialised pair). A missing specialisation failing to compile is tests/compile_fail's job.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/dispatch.hpp>  // the header under test

#include <concepts>     // std::same_as
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <type_traits>  // std::is_empty_v, std::is_same_v

// The CPU specialisations whose existence is checked.
#include <oar/kernels/cpu/conv.hpp>         // im2col, col2im, bias_add, bias_grad
#include <oar/kernels/cpu/elementwise.hpp>  // map, map_backward, relu_fn
#include <oar/kernels/cpu/gemm.hpp>         // gemm
#include <oar/kernels/cpu/pool.hpp>         // max/avg pool forward/backward
#include <oar/kernels/cpu/softmax.hpp>      // softmax_forward/backward, softmax_cross_entropy
#include <oar/kernels/cpu/update.hpp>       // fused_update

namespace {

struct some_type {};

template <class B, class T = typename B::value_type>
concept HasCpuKernels = requires(T* p, const T* cp, const std::int64_t* labels, std::size_t n,
                                 const oar::ConvGeometry& g) {
    oar::kernel<oar::op::gemm, B>::run(oar::Trans::no, oar::Trans::yes, n, n, n, T(1), cp, n, cp, n, T(0), p, n);
    oar::kernel<oar::op::im2col, B>::run(g, cp, p);
    oar::kernel<oar::op::col2im, B>::run(g, cp, p);
    oar::kernel<oar::op::bias_add, B>::run(p, cp, n, n, n);
    oar::kernel<oar::op::bias_grad, B>::run(cp, p, n, n, n);
    oar::kernel<oar::op::max_pool_forward, B>::run(g, n, cp, p);
    oar::kernel<oar::op::max_pool_backward, B>::run(g, n, cp, cp, p);
    oar::kernel<oar::op::avg_pool_forward, B>::run(g, n, cp, p);
    oar::kernel<oar::op::avg_pool_backward, B>::run(g, n, cp, p);
    oar::kernel<oar::op::map, B>::run(oar::relu_fn{}, cp, p, n);
    oar::kernel<oar::op::map_backward, B>::run(oar::relu_fn{}, cp, cp, cp, p, n);
    oar::kernel<oar::op::softmax_forward, B>::run(cp, p, n, n);
    oar::kernel<oar::op::softmax_backward, B>::run(cp, cp, p, n, n);
    { oar::kernel<oar::op::softmax_cross_entropy, B>::run(cp, labels, n, n, T(1), p, p) } -> std::same_as<double>;
    oar::kernel<oar::op::fused_update, B>::run(oar::adam_fn{}, n, p, cp, p, p);
};

}  // namespace

static_assert(!oar::dependent_false<int>);
static_assert(!oar::dependent_false<some_type>);
static_assert(!oar::dependent_false<oar::op::gemm>);
static_assert(!oar::dependent_false<oar::cpu>);

// Every op tag is a distinct empty type.
static_assert(std::is_empty_v<oar::op::gemm> && std::is_empty_v<oar::op::fused_update>);
static_assert(!std::is_same_v<oar::op::map, oar::op::map_backward>);

static_assert(HasCpuKernels<oar::cpu>, "every op has a float CPU kernel");
static_assert(HasCpuKernels<oar::cpu64>, "every op has a double CPU kernel (gradient checks run on it)");

TEST_CASE("dependent_false is false for every type, so only an instantiated primary template fires") {
    CHECK_FALSE(oar::dependent_false<int>);
    CHECK_FALSE(oar::dependent_false<oar::op::softmax_forward>);
}

TEST_CASE("a kernel found through dispatch computes: gemm of 1x1 matrices on cpu and cpu64") {
    const float a = 3.0f, b = 4.0f;
    float c = 100.0f;
    oar::kernel<oar::op::gemm, oar::cpu>::run(oar::Trans::no, oar::Trans::no, 1, 1, 1, 0.5f, &a, 1, &b, 1, 1.0f, &c, 1);
    CHECK(c == 106.0f);
    const double ad = 3.0, bd = 4.0;
    double cd = 100.0;
    oar::kernel<oar::op::gemm, oar::cpu64>::run(oar::Trans::yes, oar::Trans::yes, 1, 1, 1, 2.0, &ad, 1, &bd, 1, 0.0,
                                                &cd, 1);
    CHECK(cd == 24.0);
}
