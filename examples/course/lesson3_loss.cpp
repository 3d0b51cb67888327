// Lesson 3 of the course, loss functions: the same CNN trained three ways on the same batches —
//   1. regression: one output, MSE against the digit as a number (square_error_cost + mean);
//   2. classification: ten logits, softmax + cross-entropy fused (paddle.nn.CrossEntropyLoss);
//   3. the course's fluid form: a Softmax output layer, then cross-entropy on the probabilities
//      (fluid.layers.cross_entropy, i.e. F.cross_entropy(..., use_softmax=False)).
// 2 and 3 start from the same weights and compute the same loss, so their lines must agree.
// Data: 1,000 generated digits (class c a bright column at x = 2 + 2c over noise), so the lesson
// runs anywhere in seconds, or with `--data DIR` the first 1,000 training images of the real MNIST
// in the IDX folder DIR (data/mnist).
// Usage: course_lesson3_loss [--data DIR]
#include <algorithm>  // std::max, std::copy
#include <cmath>      // std::fabs
#include <cstdint>    // std::int64_t
#include <cstdio>     // std::printf
#include <span>       // std::span
#include <string>     // std::string
#include <utility>    // std::move
#include <vector>     // std::vector

#include <oar/oar.hpp>  // the CPU API

#include "digits.hpp"  // course::first_of, parse_args: the real MNIST

namespace {

/// The course's CNN with `Head...` after its features.
template <class... Head>
using CNN = oar::Network<oar::Sequential<oar::Conv2D<1, 20, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>,  //
                                         oar::Conv2D<20, 20, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>,  //
                                         oar::Flatten, Head...>,
                         oar::Shape<1, 28, 28>>;
using Regressor = CNN<oar::Linear<980, 1>>;
using Classifier = CNN<oar::Linear<980, 10>>;
using SoftmaxClassifier = CNN<oar::Linear<980, 10>, oar::Softmax>;

constexpr std::size_t kImages = 1000, kBatch = 100, kEpochs = 2;

struct Data {
    oar::Tensor images{kImages, oar::make_dims(1, 28, 28)};
    std::vector<std::int64_t> labels = std::vector<std::int64_t>(kImages);
};

Data generated() {
    Data d;
    const oar::CounterRng rng{3};
    for (std::size_t i = 0; i < kImages; ++i) {
        d.labels[i] = static_cast<std::int64_t>(rng.below(1, i, 10));
        for (std::size_t p = 0; p < 784; ++p) {
            const bool on = p % 28 == 2 + 2 * static_cast<std::size_t>(d.labels[i]);
            d.images[i * 784 + p] = (on ? 1.0f : -1.0f) + 0.4f * (rng.uniform(2, i * 784 + p) - 0.5f);
        }
    }
    return d;
}

/// The first kImages training images of the real MNIST in the IDX folder `dir`.
Data mnist(const std::string& dir) {
    course::Digits m = course::first_of(oar::data::load_mnist(dir).train, kImages, "train");
    Data d;
    std::copy(m.images.data(), m.images.data() + m.images.size(), d.images.data());
    d.labels = std::move(m.labels);
    return d;
}

/// The course's loop over one model: forward, loss, backward, step, clear; a line every 2 batches.
/// Returns every batch's loss.
float last_accuracy = 0;  // of the last batch trained (before its step), printed at the end

template <class Net, class Loss>
std::vector<float> train(const char* name, Net& net, Loss& loss_fn, const Data& d, float lr) {
    std::printf("== %s\n", name);
    oar::SGD opt(net.parameters(), {.learning_rate = lr});
    std::vector<float> losses;
    for (std::size_t epoch = 0; epoch < kEpochs; ++epoch)
        for (std::size_t b = 0; b < kImages / kBatch; ++b) {
            const oar::TensorView x(d.images.data() + b * kBatch * 784, kBatch, oar::make_dims(1, 28, 28));
            const std::span<const std::int64_t> y(d.labels.data() + b * kBatch, kBatch);
            auto out = net.forward(x);
            const float loss = loss_fn.forward(out, y);
            const float acc = out.dims().size() == 1 ? oar::RoundedAccuracy(0, 9).update(out, y) : oar::accuracy(out, y);
            last_accuracy = acc;
            net.backward(loss_fn.backward());
            opt.step();
            opt.clear_grad();
            losses.push_back(loss);
            if (b % 2 == 0) {
                std::printf("epoch: %zu, batch: %zu, loss is: %.6f, acc is: %.4f\n", epoch, b, static_cast<double>(loss),
                            static_cast<double>(acc));
            }
        }
    return losses;
}

}  // namespace

int main(int argc, char** argv) try {
    const std::string dir = course::parse_args(argc, argv, {"--data"}, 0).flag("--data");
    const Data d = dir.empty() ? generated() : mnist(dir);
    std::printf("data: %zu %s images, batches of %zu, %zu epochs\n", kImages,
                dir.empty() ? "generated" : "real MNIST training", kBatch, kEpochs);
    Regressor reg(/*seed=*/1);
    oar::LabelMSELoss mse;
    train("MSE on the digit as a number (one output)", reg, mse, d, 0.001f);  // its squared errors are large: 0.01 diverges

    Classifier cls(/*seed=*/1);
    oar::CrossEntropyLoss<> fused;
    const auto a = train("softmax + cross-entropy (ten logits)", cls, fused, d, 0.01f);

    SoftmaxClassifier soft(/*seed=*/1);
    oar::CrossEntropyLoss<> on_probabilities(oar::Reduction::mean, /*use_softmax=*/false);
    const auto b = train("Softmax layer, then cross-entropy on probabilities (fluid form)", soft, on_probabilities, d, 0.01f);

    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])) /
                                    std::max(1.0, std::fabs(static_cast<double>(a[i]))));
    std::printf("fused and fluid forms over %zu steps: largest relative loss difference %.2e; last batch accuracy %.2f\n",
                a.size(), worst, static_cast<double>(last_accuracy));
    return 0;
} catch (const oar::error& e) {
    std::fprintf(stderr, "course_lesson3_loss: %s\n", e.what());
    return 2;
}
