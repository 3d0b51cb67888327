// Lesson 2 of the course, network structure: the sigmoid curve, then the lesson's three networks
// for the same regression task (the digit predicted as one number, square error averaged over the
// batch), trained as the course's train(model) does: SGD at 0.001, batches of 100 from the
// shuffled generator, a line every 200 batches.
//   1. linear regression: Linear(784, 1);
//   2. the fully connected network: Linear(784, 10) - Sigmoid - Linear(10, 10) - Sigmoid - Linear(10, 1);
//   3. the convolutional network: Conv2D(1, 20, 5, pad 2) - ReLU - MaxPool(2) - Conv2D(20, 20, 5,
//      pad 2) - ReLU - MaxPool(2) - Linear(980, 1).
// The sigmoid is plotted (SVG) at x = -8, -7.8, ..., 7.8, the course's np.arange(-8, 8, 0.2), by
// oar's Sigmoid layer. After each model: its mean loss in the first and the last epoch, and on
// the validation split its mean square error and how often the rounded prediction is the digit.
#include <algorithm>  // std::min
#include <cstddef>    // std::size_t
#include <cstdio>     // std::printf, std::fprintf
#include <exception>  // std::exception
#include <string>     // std::string
#include <vector>     // std::vector

#include <oar/io/svg_plot.hpp>  // write_svg, Panel, Curve

#include "app/cli.hpp"      // cli::for_each_flag, oar::parse_count
#include "lesson_data.hpp"  // lesson::load_splits, first, index_list, data_generator

namespace {

constexpr const char* usage = R"(usage: course_lesson2_network [--data FILE|DIR] [--epochs N] [--train-size N]
                              [--batch-size N] [--log-every N] [--models LIST] [--plot FILE.svg]
The course's lesson 2: the sigmoid curve, then linear regression, the sigmoid MLP and the CNN.

  --data FILE|DIR   mnist.json.gz, or an MNIST IDX folder       (default ./work/mnist.json.gz)
  --epochs N        EPOCH_NUM for each model                     (default 10, the course's)
  --train-size N    train on the first N training images (0: all) (default 0)
  --batch-size N    BATCHSIZE                                    (default 100, the course's)
  --log-every N     a loss line every N batches                  (default 200, the course's)
  --models LIST     which to train, of linear,mlp,cnn            (default all three)
  --plot FILE       where the sigmoid curve goes                 (default sigmoid.svg)
)";

struct Settings {
    std::string data = "./work/mnist.json.gz", plot = "sigmoid.svg";
    std::size_t epochs = 10, train_size = 0, batch_size = 100, log_every = 200;
    bool linear = true, mlp = true, cnn = true;
};

/// --models: a comma-separated list of linear, mlp and cnn.
void parse_models(const std::string& list, Settings& s) {
    s.linear = s.mlp = s.cnn = false;
    std::size_t begin = 0;
    while (begin <= list.size()) {
        const std::size_t end = std::min(list.find(',', begin), list.size());
        const std::string m = list.substr(begin, end - begin);
        if (m == "linear") s.linear = true;
        else if (m == "mlp") s.mlp = true;
        else if (m == "cnn") s.cnn = true;
        else throw oar::usage_error("--models: '" + m + "' is not linear, mlp or cnn");
        begin = end + 1;
    }
}

using Linear = oar::Network<oar::course::LinearRegression, oar::course::Image>;
using SigmoidMLP = oar::Network<oar::course::SigmoidMLP, oar::course::Image>;
/// The course's CNN with one output (course::CNN has ten: the classifier of lessons 3 and 4).
using CNN = oar::Network<oar::Sequential<oar::Conv2D<1, 20, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>,
                                         oar::Conv2D<20, 20, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>, oar::Flatten,
                                         oar::Linear<980, 1>>,
                         oar::course::Image>;

/// x = np.arange(-8, 8, 0.2) and y = sigmoid(x) through oar's Sigmoid layer, plotted.
void plot_sigmoid(const std::string& path) {
    constexpr std::size_t n = 80;
    oar::Network<oar::Sequential<oar::Sigmoid>, oar::Shape<n>> sigmoid;
    oar::Tensor x(1, oar::make_dims(n));
    for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(-8.0 + 0.2 * static_cast<double>(i));
    const auto y = sigmoid.forward(x);
    oar::io::Curve curve{.name = "sigmoid(x)", .x = {}, .y = {}, .color = {}};
    for (std::size_t i = 0; i < n; ++i) {
        curve.x.push_back(static_cast<double>(x[i]));
        curve.y.push_back(static_cast<double>(y[i]));
    }
    oar::io::write_svg(path, "sigmoid(x) = 1 / (1 + exp(-x))",
                       {oar::io::Panel{.title = "sigmoid", .y_label = "y", .curves = {curve}, .x_label = "x"}});
    std::printf("sigmoid at %zu points x = -8, -7.8, ..., 7.8: sigmoid(-8) = %.6f, sigmoid(0) = %.6f, sigmoid(7.8) = "
                "%.6f; plotted to %s\n",
                n, curve.y[0], curve.y[40], curve.y[n - 1], path.c_str());
}

/// The course's train(model), then the model on the validation split.
template <class Net>
void train(const char* name, const Settings& s, const oar::data::InMemoryDataset& train_set,
           const oar::data::InMemoryDataset& valid_set) {
    Net model(/*seed=*/0);
    std::printf("== %s: %zu parameters\n", name, Net::info::total_params);
    oar::SGD opt(model.parameters(), {.learning_rate = 0.001f});
    oar::LabelMSELoss square_error;
    double first_epoch = 0, last_epoch = 0;
    for (std::size_t epoch_id = 0; epoch_id < s.epochs; ++epoch_id) {
        double sum = 0;
        std::size_t batches = 0;
        const auto order = lesson::index_list(train_set.size(), /*shuffle=*/true, epoch_id);
        for (auto&& [images, labels] : lesson::data_generator(train_set, order, s.batch_size)) {
            const float avg_loss = square_error.forward(model.forward(images), labels);
            if (batches % s.log_every == 0)
                std::printf("epoch: %zu, batch: %zu, loss is: %.6f\n", epoch_id, batches, static_cast<double>(avg_loss));
            model.backward(square_error.backward());
            opt.step();
            opt.clear_grad();
            sum += static_cast<double>(avg_loss);
            ++batches;
        }
        (epoch_id == 0 ? first_epoch : last_epoch) = sum / static_cast<double>(batches);
        if (epoch_id == 0) last_epoch = first_epoch;
    }
    double valid_sum = 0;
    oar::RoundedAccuracy rounded;
    for (auto&& [images, labels] : lesson::data_generator(valid_set, lesson::index_list(valid_set.size(), false, 0), s.batch_size)) {
        const auto out = model.forward(images);
        valid_sum += static_cast<double>(square_error.forward(out, labels)) * static_cast<double>(labels.size());
        rounded.update(out, labels);
    }
    std::printf("%s: mean loss epoch 0 %.4f, epoch %zu %.4f; valid: mean square error %.4f, rounded prediction right "
                "%.4f\n",
                name, first_epoch, s.epochs - 1, last_epoch, valid_sum / static_cast<double>(valid_set.size()),
                rounded.accumulate());
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Settings s;
        if (!cli::for_each_flag(argc, argv, [&](const std::string& flag, const std::string& value) {
                if (flag == "--data") s.data = value;
                else if (flag == "--epochs") s.epochs = oar::parse_count(flag, value, 1);
                else if (flag == "--train-size") s.train_size = oar::parse_count(flag, value, 0);
                else if (flag == "--batch-size") s.batch_size = oar::parse_count(flag, value, 1);
                else if (flag == "--log-every") s.log_every = oar::parse_count(flag, value, 1);
                else if (flag == "--models") parse_models(value, s);
                else if (flag == "--plot") s.plot = value;
                else throw cli::unknown_flag(flag);
            })) {
            std::printf("%s", usage);
            return 0;
        }
        plot_sigmoid(s.plot);

        std::printf("loading mnist dataset from %s ......\n", s.data.c_str());
        oar::data::MnistJson data = lesson::load_splits(s.data);
        std::printf("mnist dataset load done\n");
        const oar::data::InMemoryDataset train_set = lesson::first(data.train, s.train_size);
        std::printf("training on %zu images, %zu epochs, batches of %zu, SGD learning rate 0.001, square error\n",
                    train_set.size(), s.epochs, s.batch_size);

        if (s.linear) train<Linear>("linear regression", s, train_set, data.valid);
        if (s.mlp) train<SigmoidMLP>("sigmoid MLP", s, train_set, data.valid);
        if (s.cnn) train<CNN>("CNN", s, train_set, data.valid);
        return 0;
    } catch (const oar::usage_error& e) {
        std::fprintf(stderr, "course_lesson2_network: %s\n%s", e.what(), usage);
        return 2;
    } catch (const oar::error& e) {
        std::fprintf(stderr, "course_lesson2_network: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "course_lesson2_network: unexpected failure: %s\n", e.what());
        return 1;
    }
}
