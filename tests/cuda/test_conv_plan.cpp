// Tests of oar/kernels/cuda/conv_plan.hpp: the CUDA backend's batched Conv2D, run step by step
// with emulated launches of its kernel bodies and the CPU GEMM in place of cuBLAS, equals the CPU
// Conv2D layer on its direct kernel (set_conv_winograd(false); forward output and input gradient to 1e-5; weight and bias gradients, which the
// batch-wide GEMM sums in another order, against the layer in double within the float summation
// error bound), for the
// course's two convolutions and for stride / no-padding variants.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cuda/conv_plan.hpp>  // the header under test

#include <oar/core/context.hpp>         // Context<cpu> for the reference layer
#include <oar/kernels/cuda/bodies.hpp>  // the bodies the executor launches
#include <oar/layers/conv2d.hpp>        // the CPU reference: Conv2D
#include <oar/kernels/cpu/winograd.hpp>  // set_conv_winograd: the reference on the direct kernel

#include <algorithm>  // std::max
#include <cmath>      // std::abs
#include <cstddef>    // std::size_t
#include <vector>     // std::vector

#include "cuda/emulated_backend.hpp"  // EmulatedExec: the plan's steps as emulated launches
#include "support/random.hpp"  // random_vector

namespace {

namespace ck = oar::cuda_kernels;

using oar_test::EmulatedExec;

double max_rel_diff(const float* a, const float* b, std::size_t n) {
    double worst = 0.0;
    for (std::size_t i = 0; i < n; ++i)
        worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) /
                                    std::max({1.0, std::abs(static_cast<double>(a[i])), std::abs(static_cast<double>(b[i]))}));
    return worst;
}

template <class L>
void check_plan(oar::Dims in, std::size_t n, std::size_t out_c) {
    const L layer{};
    const auto g = L::geometry(in);
    const auto out = L::output_dims(in);
    const std::size_t params = oar::param_block_size(L::params(in));
    auto w = oar_test::random_vector<float>(params, 1, 0.5);
    const auto x = oar_test::random_vector<float>(n * in.size(), 2);
    const auto dy = oar_test::random_vector<float>(n * out.size(), 3);

    // The CPU layer, on its direct kernel: Winograd (the CPU default for the second convolution)
    // rounds differently, within the bound tests/kernels/cpu/test_winograd.cpp holds it to; the
    // plan's im2col + GEMM is compared with the direct sum.
    oar::set_conv_winograd(false);
    std::vector<float> y_ref(n * out.size()), dx_ref(n * in.size()), grads_ref(params, 0.25f), ws(L::workspace(in));
    oar::Context<oar::cpu> ctx;
    ctx.params = w.data();
    ctx.grads = grads_ref.data();
    ctx.workspace = ws.data();
    ctx.workspace_size = ws.size();
    layer.forward(ctx, in, x.data(), y_ref.data(), n);
    layer.backward(ctx, in, x.data(), y_ref.data(), dy.data(), dx_ref.data(), n);
    oar::set_conv_winograd(true);

    // The plan, emulated.
    EmulatedExec ex;
    std::vector<float> y(n * out.size(), -7.0f), dx(n * in.size(), -7.0f), grads(params, 0.25f);
    std::vector<float> plan_ws(ck::conv_plan_workspace(g, out_c, n), -7.0f);
    ck::conv2d_forward(ex, g, out_c, n, w.data(), w.data() + L::bias_offset, x.data(), y.data(), plan_ws.data());
    ck::conv2d_backward(ex, g, out_c, n, w.data(), x.data(), dy.data(), grads.data(), grads.data() + L::bias_offset,
                        dx.data(), plan_ws.data());
    CHECK(max_rel_diff(y.data(), y_ref.data(), y.size()) <= 1e-5);
    CHECK(max_rel_diff(dx.data(), dx_ref.data(), dx.size()) <= 1e-5);
    // The weight gradient is one dot product of n*P terms here and n of P terms on the CPU: both
    // float roundings are ~1e-5 apart for conv1 (2352 terms), so each is checked against the same
    // layer run in double (cpu64) instead.
    std::vector<double> wd(w.begin(), w.end()), xd(x.begin(), x.end()), dyd(dy.begin(), dy.end());
    std::vector<double> yd(n * out.size()), dxd(n * in.size()), gd(params, 0.25), wsd(L::workspace(in));
    oar::Context<oar::cpu64> c64;
    c64.params = wd.data();
    c64.grads = gd.data();
    c64.workspace = wsd.data();
    c64.workspace_size = wsd.size();
    layer.forward(c64, in, xd.data(), yd.data(), n);
    layer.backward(c64, in, xd.data(), yd.data(), dyd.data(), dxd.data(), n);
    // Criterion: the float summation bound (Higham): |computed - exact| <= (m + 1) u sum|terms| for
    // a sum of m terms in float, u = 2^-24, where sum|terms| is the same gradient computed in
    // double from |x| and |dy|. Both the plan and the CPU layer must meet it.
    std::vector<double> xa(xd.size()), dya(dyd.size()), ga(params, 0.25), ya(yd.size());
    for (std::size_t i = 0; i < xd.size(); ++i) xa[i] = std::abs(xd[i]);
    for (std::size_t i = 0; i < dyd.size(); ++i) dya[i] = std::abs(dyd[i]);
    c64.grads = ga.data();
    layer.backward(c64, in, xa.data(), ya.data(), dya.data(), static_cast<double*>(nullptr), n);
    const double m = static_cast<double>(n * g.col_cols()) + 1.0, u = 1.0 / 16777216.0;
    std::size_t plan_bad = 0, cpu_bad = 0;
    double worst_ratio = 0.0;
    for (std::size_t i = 0; i < params; ++i) {
        const double bound = (m + 1.0) * u * ga[i] + u * std::abs(gd[i]);
        plan_bad += std::abs(grads[i] - gd[i]) > bound;
        cpu_bad += std::abs(grads_ref[i] - gd[i]) > bound;
        if (bound > 0) worst_ratio = std::max(worst_ratio, std::abs(grads[i] - gd[i]) / bound);
    }
    INFO("worst plan error / bound = " << worst_ratio);
    CHECK(plan_bad == 0);
    CHECK(cpu_bad == 0);

    // Without dx (the first layer), the parameter gradients are the same and nothing else is written.
    std::vector<float> grads2(params, 0.25f);
    ck::conv2d_backward(ex, g, out_c, n, w.data(), x.data(), dy.data(), grads2.data(), grads2.data() + L::bias_offset,
                        static_cast<float*>(nullptr), plan_ws.data());
    CHECK(max_rel_diff(grads2.data(), grads.data(), params) == 0.0);
}

}  // namespace

TEST_CASE("the batched conv plan equals the CPU Conv2D layer for the course's first convolution") {
    check_plan<oar::Conv2D<1, 20, 5, 1, 2>>(oar::make_dims(1, 28, 28), 3, 20);
}

TEST_CASE("the batched conv plan equals the CPU Conv2D layer for the course's second convolution") {
    check_plan<oar::Conv2D<20, 20, 5, 1, 2>>(oar::make_dims(20, 14, 14), 2, 20);
}

TEST_CASE("the batched conv plan equals the CPU Conv2D layer with stride 2, no padding and a non-square input") {
    check_plan<oar::Conv2D<3, 4, 3, 2, 0>>(oar::make_dims(3, 9, 7), 4, 4);
    check_plan<oar::Conv2D<2, 5, 1, 1, 0>>(oar::make_dims(2, 4, 6), 3, 5);
}
