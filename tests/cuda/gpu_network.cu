// GPU runtime test of the CUDA backend (oar/cuda.cuh): Network<course CNN, Image, cuda> against
// Network<..., cpu> from the same seed: forward logits, loss, every parameter gradient, and the
// parameters after Adam steps (1e-4 relative: cuBLAS and the CPU GEMM sum in different orders);
// an MLP with Dropout draws the CPU's masks; BatchNorm2D and rectangular, bias-free convolutions;
// the bf16_mixed policy against the CPU's. Skipped (exit 77) where there is no GPU.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/cuda.cuh>  // Network<..., cuda> and the rest of the backend

#include <oar/kernels/cpu/gemm_bf16.hpp>  // the CPU's bf16_mixed kernels: the reference of the GPU's

#include <oar/layers/activation.hpp>  // ReLU
#include <oar/layers/batch_norm.hpp>  // BatchNorm2D
#include <oar/layers/conv2d.hpp>      // Conv2D with Size2 and Bias::no
#include <oar/layers/linear.hpp>      // Linear
#include <oar/layers/pool2d.hpp>      // MaxPool2D
#include <oar/models/course.hpp>       // course::CNN

#include <algorithm>  // std::max
#include <cmath>      // std::abs
#include <cstdint>    // std::int64_t
#include <utility>    // std::move
#include <vector>   // std::vector

#include "cuda/compare_training.hpp"  // compare_training: the GPU beside the CPU
#include "cuda/gpu_device.hpp"  // max_rel_diff
#include "support/random.hpp"   // random_vector

namespace {
using CNN = oar::course::CNN;
using MLP = oar::Sequential<oar::Flatten, oar::Linear<784, 64>, oar::ReLU, oar::DropoutPercent<20>, oar::Linear<64, 10>>;
using Image = oar::Shape<1, 28, 28>;

}  // namespace

TEST_CASE("the course CNN trains on the GPU as on the CPU: logits, loss, gradients and Adam steps agree") {
    oar_test::compare_training<oar::cuda, CNN, oar::Adam>(16, 3, 1e-4, 1e-4);
}

TEST_CASE("bf16_mixed on the GPU (cuBLAS bf16 GEMMs) trains as the CPU's bf16_mixed network") {
    // The same operands rounded to bf16 on both, fp32 sums in different orders: an fp32 difference
    // can move a value across a bf16 rounding boundary, i.e. by one bf16 step, which is up to 2^-7
    // of the value (8 significant bits). A logit or a gradient is a sum of products of two such
    // values (weight and activation, activation and upstream gradient), each of which can take that
    // step: 2 * 2^-7 relative.
    constexpr double bound = 2.0 / 128;
    oar_test::compare_training<oar::cuda, CNN, oar::Adam, oar::bf16_mixed>(16, 3, bound, bound);
    oar_test::compare_training<oar::cuda, MLP, oar::SGD, oar::bf16_mixed>(16, 2, bound, bound);
}

TEST_CASE("SGD, Momentum and Adagrad on the GPU step as on the CPU") {
    oar_test::compare_training<oar::cuda, MLP, oar::SGD>(16, 2, 1e-4, 1e-4);
    oar_test::compare_training<oar::cuda, MLP, oar::Momentum>(16, 2, 1e-4, 1e-4);
    oar_test::compare_training<oar::cuda, MLP, oar::Adagrad>(16, 2, 1e-4, 1e-4);
}

TEST_CASE("an MLP with Dropout on the GPU draws the CPU's dropout masks") {
    oar_test::compare_training<oar::cuda, MLP, oar::Adam>(32, 3, 1e-4, 1e-4);
}

TEST_CASE("a CNN with BatchNorm2D and rectangular, bias-free convolutions trains on the GPU as on the CPU") {
    // (1,28,28) -> 3x5 kernel, strides 1x2, padding 1x2 -> (4,28,14) -> 3x3 stride 2 -> (4,14,7).
    // Neither convolution has a bias: a bias before BatchNorm gets a gradient that is zero but for
    // rounding (BatchNorm subtracts the channel mean), and Adam's first step turns that noise into
    // +-lr, whose sign then depends on the summation order of each device.
    using BNCNN = oar::Sequential<oar::Conv2D<1, 4, oar::Size2{3, 5}, oar::Size2{1, 2}, oar::Size2{1, 2}, oar::Bias::no>,
                                  oar::BatchNorm2D<4>, oar::ReLU, oar::Conv2D<4, 4, 3, 2, 1, oar::Bias::no>,
                                  oar::BatchNorm2D<4>, oar::ReLU, oar::Flatten, oar::Linear<392, 10>>;
    oar_test::compare_training<oar::cuda, BNCNN, oar::Adam>(16, 3, 1e-4, 1e-4);
}

TEST_CASE("BatchStager uploads pinned batches that the network then reads on the compute stream") {
    const std::size_t batch = 8;
    oar::Network<CNN, Image, oar::cuda> dev(3);
    oar::BatchStager stager(batch, 784);
    const auto a = oar_test::random_vector<float>(batch * 784, 1), b = oar_test::random_vector<float>(batch * 784, 2);
    const std::vector<std::int64_t> labels(batch, 1);
    stager.stage(a.data(), labels.data(), batch);
    stager.stage(b.data(), labels.data(), batch);
    const auto first = stager.take();
    const auto out_a = dev.to_host(dev.forward_device({first.images, batch, Image::dims}));
    const auto second = stager.take();
    const auto out_b = dev.to_host(dev.forward_device({second.images, batch, Image::dims}));
    CHECK(oar_test::max_rel_diff(out_a, dev.to_host(dev.forward(oar::TensorView(a.data(), batch, Image::dims)))) == 0.0);
    CHECK(oar_test::max_rel_diff(out_b, dev.to_host(dev.forward(oar::TensorView(b.data(), batch, Image::dims)))) == 0.0);
}

TEST_CASE("a network pinned to gpu:0 as a type runs there and moves like any value") {
    oar::Network<CNN, Image, oar::basic_cuda<0>> pinned(7);
    auto moved = std::move(pinned);
    const auto x = oar_test::random_vector<float>(4 * 784, 9);
    const auto out = moved.to_host(moved.forward(oar::TensorView(x.data(), 4, Image::dims)));
    oar::Network<CNN, Image, oar::cpu> host(7);
    const auto ref = host.forward(oar::TensorView(x.data(), 4, Image::dims));
    CHECK(oar_test::max_rel_diff(out, std::vector<float>(ref.data(), ref.data() + ref.size())) <= 1e-4);
    CHECK(oar::cuda_runtime::current_device() == 0);
}
