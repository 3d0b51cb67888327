// The fused ReLU epilogue of a layer (forward_relu / backward_relu: Linear, Conv2D) against its
// plain forward and backward around the ReLU layer's map, and a finite-difference check of the
// fused network. Shared by layers/test_linear.cpp and layers/test_conv2d.cpp (one unit in the
// unity build, so one definition).
#pragma once

#include <doctest/doctest.h>

#include <cstddef>  // std::size_t
#include <vector>   // std::vector

#include <oar/layers/activation.hpp>  // ReLU, relu_fn
#include <oar/nn/network.hpp>         // Network
#include <oar/nn/sequential.hpp>      // Sequential
#include <oar/testing/gradcheck.hpp>  // gradcheck_network

#include "support/random.hpp"  // oar_test::random_vector

namespace oar_test {

/// forward_relu / backward_relu of layer L against its forward and backward around the ReLU layer's
/// (relu_fn's map and map_backward), on the same parameters: every output bit equal. Then a
/// finite-difference check in double of Network<Sequential<L, ReLU>>, which runs them fused.
template <class L, class In>
void check_fused_relu(std::size_t batch) {
    using namespace oar;
    constexpr Dims in = In::dims, out = L::output_dims(In::dims);
    const auto specs = L::params(in);
    auto params = oar_test::random_vector<float>(param_block_size(specs), 51);
    const auto x = oar_test::random_vector<float>(batch * in.size(), 52);
    const auto dy = oar_test::random_vector<float>(batch * out.size(), 53);
    const std::size_t ny = batch * out.size();
    std::vector<float> pre(ny), y(ny), dmask(ny), g1(params.size(), 0.0f), dx1(batch * in.size());
    std::vector<float> fy(ny, 5.0f), fdy = dy, g2(params.size(), 0.0f), dx2(batch * in.size(), 5.0f);
    const L layer{};
    Context<cpu> ctx;
    ctx.params = params.data();
    ctx.grads = g1.data();
    layer.forward(ctx, in, x.data(), pre.data(), batch);
    kernel<op::map, cpu>::run(relu_fn{}, pre.data(), y.data(), ny);
    kernel<op::map_backward, cpu>::run(relu_fn{}, pre.data(), y.data(), dy.data(), dmask.data(), ny);
    layer.backward(ctx, in, x.data(), pre.data(), dmask.data(), dx1.data(), batch);
    ctx.grads = g2.data();
    layer.forward_relu(ctx, in, x.data(), fy.data(), batch);
    layer.backward_relu(ctx, in, x.data(), fy.data(), fdy.data(), dx2.data(), batch);
    std::size_t cut = 0;
    for (float v : pre) cut += v < 0.0f;
    CHECK(cut > ny / 8);  // the mask matters
    CHECK(fy == y);
    CHECK(fdy == dmask);
    CHECK(g2 == g1);
    CHECK(dx2 == dx1);
    using Net = Network<Sequential<L, ReLU>, In, cpu64>;
    static_assert(Net::fuses_relu(0));
    const auto r = testing::gradcheck_network<Net>({.batch = 2});
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.checked > 0);
}

}  // namespace oar_test
