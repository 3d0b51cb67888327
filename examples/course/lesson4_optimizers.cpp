// Lesson 4 of the course, optimizers: the course's CNN classifier (ten outputs, softmax +
// cross-entropy) trained four times, once per optimizer the lesson compares at learning rate 0.01
// (SGD, Momentum, Adagrad, Adam, with Paddle's other defaults), EPOCH_NUM = 2, a line every 200
// batches. Every run starts from the same initial weights and sees the same batches, so the curves
// differ by the optimizer alone. Then each one's mean loss per epoch and validation accuracy, and
// the four loss curves (every batch's loss) in one SVG plot.
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t
#include <cstdio>     // std::printf, std::fprintf
#include <exception>  // std::exception
#include <string>     // std::string
#include <vector>     // std::vector

#include <oar/io/svg_plot.hpp>  // write_svg, Panel, Curve

#include "app/cli.hpp"      // cli::for_each_flag, oar::parse_count
#include "lesson_data.hpp"  // lesson::load_splits, first, index_list, data_generator

namespace {

constexpr const char* usage = R"(usage: course_lesson4_optimizers [--data FILE|DIR] [--epochs N] [--train-size N]
                                  [--log-every N] [--plot FILE.svg]
The course's lesson 4: SGD, Momentum, Adagrad and Adam on the CNN, their loss curves in one plot.

  --data FILE|DIR   mnist.json.gz, or an MNIST IDX folder         (default ./work/mnist.json.gz)
  --epochs N        EPOCH_NUM for each optimizer                   (default 2, the course's)
  --train-size N    train on the first N training images (0: all)  (default 0)
  --log-every N     a loss line every N batches                    (default 200, the course's)
  --plot FILE       where the loss curves go                       (default optimizers.svg)
)";

struct Settings {
    std::string data = "./work/mnist.json.gz", plot = "optimizers.svg";
    std::size_t epochs = 2, train_size = 0, log_every = 200;
};

using CNN = oar::Network<oar::course::CNN, oar::course::Image>;
constexpr std::size_t kBatch = 100;
constexpr float kLearningRate = 0.01f;
constexpr std::uint64_t kSeed = 0;  // the same initial weights for every optimizer

/// Trains a fresh CNN with the optimizer `make_optimizer(parameters)` returns; prints the course's
/// lines and the summary line; returns every batch's loss.
template <class MakeOptimizer>
std::vector<double> train(const char* name, MakeOptimizer make_optimizer, const Settings& s,
                          const oar::data::InMemoryDataset& train_set, const oar::data::InMemoryDataset& valid_set) {
    std::printf("== %s\n", name);
    CNN model(kSeed);
    auto opt = make_optimizer(model.parameters());
    oar::CrossEntropyLoss<> cross_entropy;
    std::vector<double> losses;
    std::vector<double> epoch_mean;
    for (std::size_t epoch_id = 0; epoch_id < s.epochs; ++epoch_id) {
        double sum = 0;
        std::size_t batch_id = 0;
        const auto order = lesson::index_list(train_set.size(), /*shuffle=*/true, epoch_id);
        for (auto&& [images, labels] : lesson::data_generator(train_set, order, kBatch)) {
            const float avg_loss = cross_entropy.forward(model.forward(images), labels);
            if (batch_id % s.log_every == 0)
                std::printf("epoch: %zu, batch: %zu, loss is: %.6f\n", epoch_id, batch_id, static_cast<double>(avg_loss));
            model.backward(cross_entropy.backward());
            opt.step();
            opt.clear_grad();
            losses.push_back(static_cast<double>(avg_loss));
            sum += static_cast<double>(avg_loss);
            ++batch_id;
        }
        epoch_mean.push_back(sum / static_cast<double>(batch_id));
    }
    oar::Accuracy accuracy;
    for (auto&& [images, labels] : lesson::data_generator(valid_set, lesson::index_list(valid_set.size(), false, 0), kBatch))
        accuracy.update(model.forward(images), labels);
    std::printf("%s: mean loss epoch 0 %.4f, epoch %zu %.4f; valid accuracy %.4f\n", name, epoch_mean.front(),
                s.epochs - 1, epoch_mean.back(), accuracy.accumulate());
    return losses;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Settings s;
        if (!cli::for_each_flag(argc, argv, [&](const std::string& flag, const std::string& value) {
                if (flag == "--data") s.data = value;
                else if (flag == "--epochs") s.epochs = oar::parse_count(flag, value, 1);
                else if (flag == "--train-size") s.train_size = oar::parse_count(flag, value, 0);
                else if (flag == "--log-every") s.log_every = oar::parse_count(flag, value, 1);
                else if (flag == "--plot") s.plot = value;
                else throw cli::unknown_flag(flag);
            })) {
            std::printf("%s", usage);
            return 0;
        }
        std::printf("loading mnist dataset from %s ......\n", s.data.c_str());
        oar::data::MnistJson data = lesson::load_splits(s.data);
        std::printf("mnist dataset load done\n");
        const oar::data::InMemoryDataset train_set = lesson::first(data.train, s.train_size);
        std::printf("training on %zu images, %zu epochs, batches of %zu, learning rate %.2f, the same initial weights "
                    "and batches for each optimizer\n",
                    train_set.size(), s.epochs, kBatch, static_cast<double>(kLearningRate));

        // The lesson's four choices, each at learning rate 0.01 (Paddle's defaults otherwise).
        std::vector<oar::io::Curve> curves;
        const auto add = [&](const char* name, std::vector<double> losses) {
            oar::io::Curve c{.name = name, .x = {}, .y = std::move(losses), .color = {}};
            for (std::size_t i = 0; i < c.y.size(); ++i) c.x.push_back(static_cast<double>(i));
            curves.push_back(std::move(c));
        };
        add("SGD", train("SGD", [](auto& p) { return oar::SGD(p, {.learning_rate = kLearningRate}); }, s, train_set,
                         data.valid));
        add("Momentum", train("Momentum", [](auto& p) { return oar::Momentum(p, {.learning_rate = kLearningRate}); }, s,
                              train_set, data.valid));
        add("Adagrad", train("Adagrad", [](auto& p) { return oar::Adagrad(p, {.learning_rate = kLearningRate}); }, s,
                             train_set, data.valid));
        add("Adam", train("Adam", [](auto& p) { return oar::Adam(p, {.learning_rate = kLearningRate}); }, s, train_set,
                          data.valid));

        oar::io::write_svg(s.plot, "the course's CNN: loss per batch by optimizer (learning rate 0.01)",
                           {oar::io::Panel{.title = "training loss", .y_label = "loss", .curves = curves,
                                           .x_label = "batch"}});
        std::printf("loss curves of the four optimizers (%zu batches each): %s\n", curves.front().y.size(),
                    s.plot.c_str());
        return 0;
    } catch (const oar::usage_error& e) {
        std::fprintf(stderr, "course_lesson4_optimizers: %s\n%s", e.what(), usage);
        return 2;
    } catch (const oar::error& e) {
        std::fprintf(stderr, "course_lesson4_optimizers: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "course_lesson4_optimizers: unexpected failure: %s\n", e.what());
        return 1;
    }
}
