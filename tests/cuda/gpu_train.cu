// GPU runtime test of the main job's GPU entry point (examples/app/gpu_train.hpp, examples/gpu_train.cu):
// its parameters after a few unshuffled steps equal a CPU Network + Adam + CrossEntropyLoss loop
// on the same batches (1e-4), it learns a separable toy problem, the same seed gives the same
// bits, and bad input is named. Skipped (exit 77) where there is no GPU.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include "app/gpu_train.hpp"  // the interface under test (examples/app/, through oar_app)

#include <oar/kernels/cuda/device.hpp>        // usage_error, no_device_error
#include <oar/models/course.hpp>       // course::CNN, course::Image
#include <oar/loss/cross_entropy.hpp> // CrossEntropyLoss<cpu>
#include <oar/nn/network.hpp>         // Network<..., cpu>
#include <oar/optim/adam.hpp>         // Adam<cpu>

#include <cstdint>  // std::int64_t
#include <span>     // std::span
#include <vector>   // std::vector

#include "cuda/gpu_device.hpp"  // max_rel_diff
#include "support/random.hpp"   // random_vector

namespace {
using CNN = oar::course::CNN;
using Image = oar::course::Image;

/// Class c: a bright 6x6 square at a position that depends on c, over noise.
void toy(std::size_t n, std::uint64_t seed, std::vector<float>& x, std::vector<std::int64_t>& y) {
    x = oar_test::random_vector<float>(n * 784, seed, 0.1);
    y.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t c = (i * 7 + seed) % 10, r0 = 2 + (c / 5) * 12, c0 = 2 + (c % 5) * 5;
        y[i] = static_cast<std::int64_t>(c);
        for (std::size_t r = 0; r < 6; ++r)
            for (std::size_t k = 0; k < 6 && c0 + k < 28; ++k) x[i * 784 + (r0 + r) * 28 + c0 + k] = 1.0f;
    }
}
}  // namespace

TEST_CASE("train_course_cnn's steps equal the CPU network's Adam steps on the same batches") {
    std::vector<float> x;
    std::vector<std::int64_t> y;
    toy(96, 1, x, y);
    oar::gpu::TrainOptions o;
    o.batch_size = 32;
    o.shuffle = false;
    o.seed = 5;
    o.log = false;
    const auto r = oar::gpu::train_course_cnn({x.data(), y.data(), 96}, nullptr, o);
    CHECK(r.steps == 3);

    oar::Network<CNN, Image, oar::cpu> net(5);
    oar::Adam<oar::cpu> opt(net.parameters());
    oar::CrossEntropyLoss<oar::cpu> loss;
    for (std::size_t b = 0; b < 3; ++b) {
        const auto out = net.forward(oar::TensorView(x.data() + b * 32 * 784, 32, Image::dims));
        (void)loss(out, std::span<const std::int64_t>(y.data() + b * 32, 32));
        net.clear_grad();
        net.backward(loss.backward());
        opt.step();
    }
    const auto v = net.parameters().values();
    CHECK(oar_test::max_rel_diff(r.parameters, std::vector<float>(v.begin(), v.end())) <= 1e-4);
}

TEST_CASE("train_course_cnn learns a separable toy problem and is deterministic for a seed") {
    std::vector<float> x, ex;
    std::vector<std::int64_t> y, ey;
    toy(2000, 2, x, y);
    toy(500, 3, ex, ey);
    oar::gpu::TrainOptions o;
    o.epochs = 3;
    o.log = false;
    oar::gpu::Samples eval{ex.data(), ey.data(), 500};
    const auto a = oar::gpu::train_course_cnn({x.data(), y.data(), 2000}, &eval, o);
    const auto b = oar::gpu::train_course_cnn({x.data(), y.data(), 2000}, &eval, o);
    REQUIRE(a.epochs.size() == 3);
    CHECK(a.epochs.back().eval_accuracy > 0.95);
    CHECK(a.epochs.back().mean_loss < a.epochs.front().mean_loss);
    CHECK(a.parameters == b.parameters);
    CHECK(a.train_images_per_sec > 0);
}

TEST_CASE("train_course_cnn names a bad device string, a bad precision and a label outside [0, 10)") {
    std::vector<float> x;
    std::vector<std::int64_t> y;
    toy(10, 1, x, y);
    oar::gpu::TrainOptions o;
    o.device = "gpu:x";
    CHECK_THROWS_AS(oar::gpu::train_course_cnn({x.data(), y.data(), 10}, nullptr, o), oar::usage_error);
    o.device = "gpu:0";
    o.precision = "fp16";
    CHECK_THROWS_WITH_AS(oar::gpu::train_course_cnn({x.data(), y.data(), 10}, nullptr, o),
                         doctest::Contains("precision must be fp32 or bf16, got 'fp16'"), oar::usage_error);
    o.precision = "fp32";
    y[4] = 10;
    CHECK_THROWS_WITH_AS(oar::gpu::train_course_cnn({x.data(), y.data(), 10}, nullptr, o),
                         doctest::Contains("label 10 at index 4"), oar::value_error);
}
