// A network on a device backend trained beside the same network on the CPU: logits, loss, every
// gradient and the parameters after each optimizer step agree. The device's convolution is the
// whole-batch plan (im2col + one GEMM) and the CPU's the direct kernel (Winograd off for the
// comparison): the same sums in another order, so within float rounding, not bit for bit. Used by
// the emulated backend (tests/cuda/test_backend_seam.cpp, g++) and the real GPU (gpu_network.cu,
// nvcc). Plain C++.
#pragma once

#include <doctest/doctest.h>  // CHECK, INFO, REQUIRE

#include <algorithm>  // std::max
#include <cmath>      // std::abs
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t
#include <span>       // std::span
#include <vector>     // std::vector

#include <oar/kernels/cpu/winograd.hpp>  // set_conv_winograd: the CPU reference on the direct kernel
#include <oar/loss/cross_entropy.hpp>    // CrossEntropyLoss
#include <oar/nn/network.hpp>            // Network

#include "support/random.hpp"  // random_vector

namespace oar_test {

/// max |a - b| / max(1, |a|, |b|) over the elements.
inline double max_rel_diff_of(std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) /
                                    std::max({1.0, std::abs(static_cast<double>(a[i])), std::abs(static_cast<double>(b[i]))}));
    return worst;
}

/// `steps` training steps of Network<Seq, Shape<1, 28, 28>, B, P> with optimizer Opt on the CPU and
/// on Dev from seed 7, on random batches: logits and loss to `tol_out`, gradients and parameters to
/// `tol_params` (relative). P is the precision policy of both (a bf16_mixed CPU network needs
/// <oar/kernels/cpu/gemm_bf16.hpp> included before this header is used).
template <class Dev, class Seq, template <class> class Opt, class P = oar::fp32>
void compare_training(std::size_t batch, int steps, double tol_out, double tol_params) {
    using Image = oar::Shape<1, 28, 28>;
    oar::set_conv_winograd(false);
    oar::Network<Seq, Image, oar::cpu, P> host(7);
    oar::Network<Seq, Image, Dev, P> dev(7);
    CHECK(max_rel_diff_of(host.parameters().values(), dev.parameters().host_values()) == 0.0);
    Opt<oar::cpu> opt_h(host.parameters());
    Opt<Dev> opt_d(dev.parameters());
    oar::CrossEntropyLoss<oar::cpu> loss_h;
    oar::CrossEntropyLoss<Dev> loss_d;
    for (int s = 0; s < steps; ++s) {
        const auto x = random_vector<float>(batch * 784, static_cast<std::uint64_t>(100 + s));
        std::vector<std::int64_t> y(batch);
        for (std::size_t i = 0; i < batch; ++i) y[i] = static_cast<std::int64_t>((i * 3 + static_cast<std::size_t>(s)) % 10);
        const oar::TensorView xv(x.data(), batch, Image::dims);
        const auto out_h = host.forward(xv);
        const auto out_d = dev.forward(xv);
        CHECK(max_rel_diff_of(std::span<const float>(out_h.data(), out_h.size()), dev.to_host(out_d)) <= tol_out);
        const float lh = loss_h(out_h, y), ld = loss_d(out_d, y);
        CHECK(std::abs(lh - ld) <= static_cast<float>(tol_out) * std::max(1.0f, std::abs(lh)));
        host.clear_grad();
        dev.clear_grad();
        host.backward(loss_h.backward());
        dev.backward(loss_d.backward());
        const auto gd = dev.parameters().host_grads();
        for (const auto& e : host.parameters().entries()) {
            INFO(e.key << " step " << s);
            CHECK(max_rel_diff_of(host.parameters().grad(e), gd.subspan(e.offset, e.size)) <= tol_params);
        }
        opt_h.step();
        opt_d.step();
        CHECK(max_rel_diff_of(host.parameters().values(), dev.parameters().host_values()) <= tol_params);
    }
    oar::set_conv_winograd(true);
}

}  // namespace oar_test
