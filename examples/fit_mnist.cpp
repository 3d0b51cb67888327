// Model.fit on MNIST in a page, as paddle's hapi: the course's split as ready datasets, the
// course's CNN fitted with validation, a test evaluation, and predict on a few test images (no
// labels needed). Usage: fit_mnist MNIST_DIR [EPOCHS]  (train_mnist is the full program)
#include <algorithm>  // std::min
#include <cstdint>    // std::int64_t
#include <cstdio>     // std::printf
#include <exception>  // std::exception
#include <string>     // std::stoul
#include <vector>     // std::vector

#include <oar/oar.hpp>  // load_mnist_datasets, course::CNN, Network, Adam, Model

int main(int argc, char** argv) try {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s MNIST_DIR [EPOCHS]\n", argv[0]);
        return 2;
    }
    const std::size_t epochs = argc > 2 ? std::stoul(argv[2]) : 2;
    const auto [train, valid, test] = oar::data::load_mnist_datasets(argv[1]);  // 50k / 10k / 10k, in [-1, 1]

    oar::Network<oar::course::CNN, oar::course::Image> net(/*seed=*/1);
    oar::Adam opt(net.parameters(), {.learning_rate = 1e-3f});
    oar::Model model(net);
    model.prepare(opt, {}, {oar::top_k_accuracy()});  // {}: cross-entropy; the metric is "acc"
    const oar::History h = model.fit(train, &valid, {.epochs = epochs, .batch_size = 64});
    for (const oar::Logs& e : h.epochs)
        std::printf("epoch %zu: loss %.4f, valid accuracy %.4f\n", e.epoch, e.loss, e.at("eval_acc"));
    std::printf("test accuracy %.4f\n", model.evaluate(test).metric("acc"));

    // A few test images as one tensor [n, 1, 28, 28]: predict gives classes and probabilities.
    const std::size_t n = std::min<std::size_t>(5, test.size()), per = test.dims().size();
    oar::Tensor images(n, test.dims());
    std::vector<std::int64_t> labels(n);
    for (std::size_t i = 0; i < n; ++i) labels[i] = test.load(i, {images.data() + i * per, per});
    const oar::Prediction p = model.predict(images);
    for (std::size_t i = 0; i < n; ++i) {
        const float* prob = p.probabilities.data() + i * p.probabilities.dims().size();
        std::printf("test image %zu: predicted %lld (probability %.2f), label %lld\n", i,
                    static_cast<long long>(p.classes[i]), static_cast<double>(prob[p.classes[i]]),
                    static_cast<long long>(labels[i]));
    }
} catch (const std::exception& e) {
    std::fprintf(stderr, "fit_mnist: %s\n", e.what());
    return 2;
}
