// resnet_cifar: networks beyond the course's straight chains, on CIFAR-10-shaped data. The network
// is written out below in the block vocabulary (Residual with identity and projection shortcuts,
// BatchNorm2D, AdaptiveAvgPool2D; --model inception swaps in a Concat of three branches) and is
// checked to be oar::models::ResNet8<16>; BatchNorm's momentum is a setting given as a value
// (--bn-momentum). Trains with Adam, evaluates after every epoch (BatchNorm on its running
// statistics) and prints summary() first. Data: --data, a cifar-10-batches-bin folder (or a folder
// holding one, or cifar-10-binary.tar.gz); without it, generated images a small network can learn
// (oar::data::synthetic_cifar10: class k is a tinted 8x8 square at one of ten places, over noise).
#include <chrono>       // std::chrono::steady_clock
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t, std::uint64_t
#include <cstdio>       // std::printf, std::fprintf
#include <exception>    // std::exception
#include <string>       // std::string
#include <tuple>        // std::get: layers inside a block
#include <type_traits>  // std::is_same_v
#include <vector>       // std::vector

#include <oar/data/cifar10.hpp>            // load_cifar10, Cifar10Splits
#include <oar/data/synthetic_cifar10.hpp>  // synthetic_cifar10: the images used without --data
#include <oar/data/dataloader.hpp>     // DataLoader
#include <oar/loss/cross_entropy.hpp>  // CrossEntropyLoss
#include <oar/models/resnet.hpp>       // models::ResNet8, models::InceptionNet, CifarImage
#include <oar/nn/network.hpp>          // Network
#include <oar/nn/summary.hpp>          // summary
#include <oar/optim/adam.hpp>          // Adam

#include "app/train_options.hpp"  // for_each_flag, parse_count, parse_rate, unknown_flag

namespace {

using oar::AdaptiveAvgPool2D;
using oar::BatchNorm2D;
using oar::Bias;
using oar::Conv2D;
using oar::Flatten;
using oar::Linear;
using oar::ReLU;
using oar::Residual;
using oar::Sequential;

/// conv3x3 without bias (the BatchNorm2D after it would cancel one).
template <std::size_t In, std::size_t Out, std::size_t Stride = 1>
using Conv3x3 = Conv2D<In, Out, 3, Stride, 1, Bias::no>;

/// y = x + F(x), F = conv-BN-ReLU-conv-BN keeping the shape.
template <std::size_t C>
using Basic = Residual<Sequential<Conv3x3<C, C>, BatchNorm2D<C>, ReLU, Conv3x3<C, C>, BatchNorm2D<C>>>;

/// y = F(x) + P(x): stride 2 and twice the channels, the shortcut P a strided 1x1 conv + BN.
template <std::size_t In, std::size_t Out>
using Down = Residual<Sequential<Conv3x3<In, Out, 2>, BatchNorm2D<Out>, ReLU, Conv3x3<Out, Out>, BatchNorm2D<Out>>,
                      Sequential<Conv2D<In, Out, 1, 2, 0, Bias::no>, BatchNorm2D<Out>>>;

using ResNet = Sequential<Conv3x3<3, 16>, BatchNorm2D<16>, ReLU,  // stem
                          Basic<16>, ReLU, Basic<16>, ReLU,       // 16 x 32 x 32
                          Down<16, 32>, ReLU,                      // 32 x 16 x 16
                          AdaptiveAvgPool2D<1, 1>, Flatten, Linear<32, 10>>;
static_assert(std::is_same_v<ResNet, oar::models::ResNet8<16>>, "the network above is models::ResNet8<16>");

constexpr const char* usage = R"(usage: resnet_cifar [options]
ResNet8 (Residual blocks, BatchNorm2D, global average pooling) or InceptionNet (a Concat of
three branches) trained with Adam on CIFAR-10-shaped data, evaluated after every epoch.

  --data PATH        the binary CIFAR-10: a cifar-10-batches-bin folder, a folder holding it,
                     or cifar-10-binary.tar.gz (default: generated images, see --train-images)
  --model NAME       resnet8 or inception                               (default resnet8)
  --epochs N         passes over the training images                    (default 5)
  --batch-size N     images per step                                    (default 32)
  --lr X             Adam's learning rate                               (default 0.001)
  --bn-momentum X    every BatchNorm2D's momentum, Paddle's convention  (default 0.9)
  --train-images N   generated training images (without --data)         (default 2000)
  --test-images N    generated evaluation images (without --data)       (default 500)
  --seed N           seed of initialisation, shuffling and the data     (default 0)
  --help             this text

Prints summary(), one line per epoch (training loss and accuracy, evaluation loss and accuracy)
and a result line.
)";

struct Options {
    std::string data, model = "resnet8";
    std::size_t epochs = 5, batch_size = 32, train_images = 2000, test_images = 500;
    float lr = 1e-3f, bn_momentum = 0.9f;
    std::uint64_t seed = 0;
};

Options parse(int argc, char** argv, bool& help) {
    Options o;
    help = !oar::for_each_flag(argc, argv, [&](const std::string& flag, const std::string& v) {
        if (flag == "--data") o.data = v;
        else if (flag == "--model") o.model = v;
        else if (flag == "--epochs") o.epochs = oar::parse_count(flag, v, 1);
        else if (flag == "--batch-size") o.batch_size = oar::parse_count(flag, v, 1);
        else if (flag == "--lr") o.lr = static_cast<float>(oar::parse_rate(flag, v));
        else if (flag == "--bn-momentum") o.bn_momentum = static_cast<float>(oar::parse_rate(flag, v));
        else if (flag == "--train-images") o.train_images = oar::parse_count(flag, v, 1);
        else if (flag == "--test-images") o.test_images = oar::parse_count(flag, v, 1);
        else if (flag == "--seed") o.seed = oar::parse_count(flag, v, 0);
        else throw oar::unknown_flag(flag);
    });
    if (help) return o;
    if (o.model != "resnet8" && o.model != "inception")
        throw oar::usage_error("--model needs resnet8 or inception, got '" + o.model + "'");
    if (o.bn_momentum >= 1.0f)
        throw oar::usage_error(oar::detail::concat("--bn-momentum needs a value below 1, got ", o.bn_momentum));
    if (o.epochs > 100000) throw oar::usage_error(oar::detail::concat("--epochs ", o.epochs, " is more than 100000"));
    if (o.batch_size > 65536) throw oar::usage_error(oar::detail::concat("--batch-size ", o.batch_size, " is more than 65536"));
    if (o.train_images > 1000000 || o.test_images > 1000000)
        throw oar::usage_error("--train-images and --test-images take at most 1000000");
    return o;
}

/// Every BatchNorm2D of ResNet8 gets `momentum` (its settings are values, kept by the network).
void set_momentum(oar::Network<ResNet, oar::models::CifarImage>& net, float momentum) {
    auto block = [&](auto& body) {
        std::get<1>(body).momentum = momentum;
        std::get<4>(body).momentum = momentum;
    };
    net.layer<1>() = BatchNorm2D<16>{.momentum = momentum};
    block(net.layer<3>().body);
    block(net.layer<5>().body);
    block(net.layer<7>().body);
    std::get<1>(net.layer<7>().shortcut).momentum = momentum;
}
void set_momentum(oar::Network<oar::models::InceptionNet<>, oar::models::CifarImage>& net, float momentum) {
    net.layer<1>() = BatchNorm2D<16>{.momentum = momentum};
}

/// Accuracy and mean loss of `net` over a loader's epoch.
struct Score {
    double loss = 0, accuracy = 0;
};
template <class Logits>
std::size_t correct(const Logits& logits, const std::vector<std::int64_t>& labels) {
    std::size_t right = 0;
    for (std::size_t i = 0; i < labels.size(); ++i) {
        const float* row = logits.data() + i * 10;
        std::size_t best = 0;
        for (std::size_t c = 1; c < 10; ++c)
            if (row[c] > row[best]) best = c;
        right += static_cast<std::int64_t>(best) == labels[i] ? 1 : 0;
    }
    return right;
}

template <class Model>
int train(const Options& o, const oar::data::Cifar10Splits& data, const char* source) {
    const auto start = std::chrono::steady_clock::now();
    using Net = oar::Network<Model, oar::models::CifarImage>;
    Net net(o.seed);
    set_momentum(net, o.bn_momentum);
    oar::Adam adam(net.parameters(), {.learning_rate = o.lr});
    oar::CrossEntropyLoss ce;
    oar::data::DataLoader train_loader(data.train, {.batch_size = o.batch_size, .shuffle = true, .drop_last = true, .seed = o.seed});
    oar::data::DataLoader test_loader(data.test, {.batch_size = o.batch_size});
    std::printf("%s", oar::summary(net).c_str());
    std::printf("%s: %s, train %zu images, test %zu; batch %zu, Adam lr %g, BatchNorm momentum %g, epochs %zu, seed %llu\n",
                o.model.c_str(), source, data.train.size(), data.test.size(), o.batch_size, static_cast<double>(o.lr),
                static_cast<double>(o.bn_momentum), o.epochs, static_cast<unsigned long long>(o.seed));

    Score last{};
    for (std::size_t epoch = 0; epoch < o.epochs; ++epoch) {
        net.train();  // BatchNorm on the batch's statistics, updating the running ones
        double loss_sum = 0;
        std::size_t right = 0, seen = 0, batches = 0;
        for (const oar::data::Batch& b : train_loader.epoch(epoch)) {
            const auto logits = net.forward(b.images.view());
            right += correct(logits, b.labels);
            loss_sum += ce(logits, b.labels);
            seen += b.labels.size();
            ++batches;
            net.clear_grad();
            net.backward(ce.backward());
            adam.step();
        }
        net.eval();  // BatchNorm on its running statistics
        double eval_loss = 0;
        std::size_t eval_right = 0, eval_seen = 0, eval_batches = 0;
        for (const oar::data::Batch& b : test_loader.epoch(epoch)) {
            const auto logits = net.forward(b.images.view());
            eval_right += correct(logits, b.labels);
            eval_loss += ce(logits, b.labels);
            eval_seen += b.labels.size();
            ++eval_batches;
        }
        last = {eval_loss / static_cast<double>(eval_batches),
                static_cast<double>(eval_right) / static_cast<double>(eval_seen)};
        std::printf("epoch %zu: train loss %.4f accuracy %.4f | eval loss %.4f accuracy %.4f\n", epoch,
                    loss_sum / static_cast<double>(batches), static_cast<double>(right) / static_cast<double>(seen),
                    last.loss, last.accuracy);
        std::fflush(stdout);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("result: model=%s epochs=%zu eval_accuracy=%.4f eval_loss=%.4f seconds=%.1f\n", o.model.c_str(),
                o.epochs, last.accuracy, last.loss, seconds);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        bool help = false;
        const Options o = parse(argc, argv, help);
        if (help) {
            std::printf("%s", usage);
            return 0;
        }
        const oar::data::Cifar10Splits data =
            o.data.empty() ? oar::data::Cifar10Splits{oar::data::synthetic_cifar10(o.train_images, 1, o.seed),
                                                      oar::data::synthetic_cifar10(o.test_images, 0, o.seed + 1)}
                           : oar::data::load_cifar10(o.data);  // [0, 1], as ToTensor
        const char* source = o.data.empty() ? "generated images" : "CIFAR-10 files";
        if (data.train.size() < o.batch_size)
            throw oar::value_error(oar::detail::concat(o.data.empty() ? "the generated set" : o.data, ": ",
                                                       data.train.size(), " training images give no batch of ", o.batch_size));
        if (o.model == "inception") return train<oar::models::InceptionNet<>>(o, data, source);
        return train<ResNet>(o, data, source);
    } catch (const oar::error& e) {
        std::fprintf(stderr, "resnet_cifar: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "resnet_cifar: unexpected failure: %s\n", e.what());
        return 1;
    }
}
