// The check that a network's evaluation-mode forwards, which keep its Linear weights packed between
// calls (kernels/cpu/gemm.hpp: gemm_pack_cache), give the bits of a training-mode forward, which
// never uses the kept copies: nn/test_network.cpp (fp32) and core/test_precision.cpp (bf16_mixed).
#pragma once

#include <doctest/doctest.h>  // INFO, CHECK

#include <oar/core/tensor.hpp>  // Tensor

#include <vector>  // std::vector

namespace oar_test {

/// Two evaluation-mode forwards of net on x, each checked equal to the training-mode forward that
/// follows them (a network without Dropout, so both modes compute the same function); returns the
/// training-mode output. `what` names the moment in the check's messages.
template <class Net>
std::vector<float> eval_forwards_match_train(Net& net, const oar::Tensor& x, const char* what) {
    const auto out = [&](bool eval) {
        eval ? net.eval() : net.train();
        const auto y = net.forward(x);
        return std::vector<float>(y.data(), y.data() + y.size());
    };
    INFO(what);
    const auto e1 = out(true), e2 = out(true), t = out(false);
    CHECK(e1 == t);
    CHECK(e2 == t);
    return t;
}

}  // namespace oar_test
