// oar/kernels/cpu/conv_bf16.hpp in a build without the AVX-512 bodies: this file is its own
// executable, compiled with OAR_ISA_LEVELS=3 (the baseline and AVX2; tests/CMakeLists.txt), as a
// user's build that leaves AVX-512 out, or any non-x86 build, where no AVX512-BF16 body exists.
// Then Conv2D's weight gradient never goes to the bf16 units (conv_bf16_dw_applies is false for
// every shape), calling that gradient anyway is a usage_error naming the missing body, and a
// bf16_mixed network's Conv2D computes its weight gradient with the fp32 kernels on rounded
// operands: the bits of those kernels on rounded copies. The shape is one that takes the units'
// weight gradient in a full build on an AVX512-BF16 CPU (8 channels, 3x3, outputs under 29 wide).
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cpu/conv_bf16.hpp>  // the header under test: conv_bf16_dw_applies, precision_conv<bf16_mixed>
#include <oar/core/bf16.hpp>              // round_to_bf16: the reference's rounded copies
#include <oar/core/cpu_isa.hpp>           // active_cpu_isa, cpu_isa_compiled
#include <oar/kernels/cpu/conv.hpp>       // kernel<op::conv2d_backward, cpu>: the reference
#include <oar/layers/conv2d.hpp>          // Conv2D
#include <oar/layers/flatten.hpp>         // Flatten
#include <oar/nn/network.hpp>             // Network
#include <oar/nn/sequential.hpp>          // Sequential

#include <algorithm>  // std::all_of
#include <bit>        // std::bit_cast: bits compared, not values
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint32_t
#include <string>     // std::string
#include <vector>     // std::vector

#include "support/errors.hpp"  // oar_test::message_of, contains
#include "support/random.hpp"  // oar_test::random_vector

static_assert(OAR_ISA_MASK == 3, "oar: this test is built with OAR_ISA_LEVELS=3 (tests/CMakeLists.txt)");

namespace {

std::vector<std::uint32_t> bits_without_avx512(const float* v, std::size_t n) {
    std::vector<std::uint32_t> b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = std::bit_cast<std::uint32_t>(v[i]);
    return b;
}

}  // namespace

TEST_CASE("without the AVX-512 bodies Conv2D's weight gradient never goes to the bf16 units, and asking for it is a usage_error") {
    CHECK_FALSE(oar::cpu_isa_compiled(oar::cpu_isa::avx512));
    const oar::cpu_isa isa = oar::active_cpu_isa();
    CHECK(isa != oar::cpu_isa::avx512);
    CHECK(isa != oar::cpu_isa::avx512_bf16);
    CHECK(isa != oar::cpu_isa::amx);
    const oar::ConvGeometry g{8, 9, 9, 3, 1, 0};
    CHECK_FALSE(oar::conv_bf16_dw_applies(g, 16));
    CHECK_FALSE(oar::precision_conv<oar::bf16_mixed>::weight_grad_applies(g, 16));
    CHECK_FALSE(oar::conv_bf16_dw_applies(oar::ConvGeometry{32, 15, 15, 3, 1, 0}, 64));  // MyNet's conv2
    std::vector<float> x(2 * 8 * 9 * 9, 1.0f), dy(2 * 16 * 7 * 7, 1.0f), dw(16 * 8 * 9, 0.0f);
    const std::string what = oar_test::message_of<oar::usage_error>([&] {
        oar::precision_conv<oar::bf16_mixed>::weight_grad(g, 16, 2, x.data(), dy.data(), dw.data(), nullptr);
    });
    CHECK(oar_test::contains(what, "conv2d_bf16_dw"));
    CHECK(oar_test::contains(what, "no AVX512-BF16 body"));
    CHECK(std::all_of(dw.begin(), dw.end(), [](float v) { return v == 0.0f; }));  // nothing written
}

TEST_CASE("without the AVX-512 bodies a bf16_mixed Conv2D's gradients are the fp32 kernels' on rounded copies, bit for bit") {
    using namespace oar;
    constexpr std::size_t C = 8, O = 16, H = 9, OH = 7, N = 5;
    using Net = Network<Sequential<Conv2D<C, O, 3>, Flatten>, Shape<C, H, H>, cpu, bf16_mixed>;
    Net net(3);
    const auto x = oar_test::random_vector<float>(N * C * H * H, 81);
    const auto dy = oar_test::random_vector<float>(N * O * OH * OH, 82);
    net.clear_grad();
    net.forward(typename Net::view_type(x.data(), N, Net::input_shape::dims));
    std::vector<float> dx(x.size(), 0.0f);
    net.backward({dy.data(), N, Net::output_shape::dims}, {dx.data(), N, Net::input_shape::dims});

    auto& params = net.parameters();
    const ParamEntry& we = params.entry("0.weight");
    const ParamEntry& be = params.entry("0.bias");
    std::vector<float> rx(x.size()), rdy(dy.size()), rw(we.size);
    round_to_bf16(x.data(), rx.data(), rx.size());
    round_to_bf16(dy.data(), rdy.data(), rdy.size());
    round_to_bf16(params.values().data() + we.offset, rw.data(), rw.size());
    std::vector<float> dw(we.size, 0.0f), db(be.size, 0.0f), rdx(x.size(), 0.0f);
    kernel<op::conv2d_backward, cpu>::run(ConvGeometry{C, H, H, 3, 1, 0}, O, N, rx.data(), rw.data(), rdy.data(),
                                          dw.data(), db.data(), rdx.data());
    const float* grads = params.grads().data();
    CHECK(bits_without_avx512(grads + we.offset, we.size) == bits_without_avx512(dw.data(), dw.size()));
    CHECK(bits_without_avx512(grads + be.offset, be.size) == bits_without_avx512(db.data(), db.size()));
    CHECK(bits_without_avx512(dx.data(), dx.size()) == bits_without_avx512(rdx.data(), rdx.size()));
}
