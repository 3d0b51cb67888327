// Lesson 7 of the course, training tuning: the course's CNN trained with its loop (Adam 1e-3,
// batches of 100), printing the batch accuracy with the loss, validating after every epoch,
// writing VisualDL logs (the course's `LogWriter.add_scalar`) and the curves as one SVG (the
// course's matplotlib plot), three times from the same weights:
//   1. no regularisation;
//   2. L2Decay on every parameter (`Adam(..., weight_decay=L2Decay(coeff))`);
//   3. L2Decay on the last Linear layer's weight only (Paddle's `ParamAttr(regularizer=L2Decay(coeff))`
//      on that layer, oar's `opt.set_regularizer("7.weight", L2Decay(coeff))`).
// At the end, each layer's weight norm: the regularised weights are the smaller ones. Data: 600
// generated digits and 200 for validation, or with `--data MNIST_DIR` the first 2,000 training and
// 200 validation images of the real MNIST in that IDX folder.
// Usage: course_lesson7_tuning [DIR] [--data MNIST_DIR]   (DIR: where the logs go, default lesson7)
#include <algorithm>   // std::min
#include <cmath>       // std::sqrt
#include <initializer_list>  // the keys of norm_of
#include <cstdint>     // std::int64_t
#include <cstdio>      // std::printf
#include <filesystem>  // std::filesystem::path
#include <span>        // std::span
#include <string>      // std::string
#include <vector>      // std::vector

#include <oar/io/svg_plot.hpp>  // write_svg: the curves
#include <oar/io/visualdl.hpp>  // VisualDLWriter: VisualDL's LogWriter
#include <oar/oar.hpp>          // the CPU API

#include "digits.hpp"  // course::CNN, load_sets, shuffled, gather, evaluate, parse_args

namespace {

constexpr std::size_t kBatch = 100, kEpochs = 3;
constexpr std::uint64_t kSeed = 3;
constexpr float kCoeff = 0.05f;  // large, so that three short epochs show what it does

/// What one run leaves for the plot and the summary.
struct History {
    std::string name;
    std::vector<double> iters, train_loss;                     // every batch
    std::vector<double> epochs, valid_loss, valid_accuracy;    // every epoch
    double conv_norm = 0, fc_norm = 0;                         // after training
};

/// The L2 norm of the parameters with the state-dict keys `keys`, together.
double norm_of(course::CNN& net, std::initializer_list<const char*> keys) {
    double s = 0;
    for (const auto& e : net.parameters().entries())
        for (const char* k : keys)
            if (e.key == k)
                for (const float v : net.parameters().value(e)) s += static_cast<double>(v) * static_cast<double>(v);
    return std::sqrt(s);
}

History train(const std::string& name, const std::string& tag, oar::AdamOptions options, const char* only_key,
              const course::Digits& train_set, const course::Digits& valid_set, const std::filesystem::path& dir) {
    std::printf("== %s\n", name.c_str());
    course::CNN net(kSeed);  // the same initial weights for every run
    oar::Adam<> opt(net.parameters(), options);
    if (only_key) opt.set_regularizer(only_key, oar::L2Decay(kCoeff));  // ParamAttr(regularizer=...)
    oar::io::VisualDLWriter log(dir / tag);                              // LogWriter(logdir=...)
    oar::CrossEntropyLoss<> loss_fn;
    History h;
    h.name = name;
    std::int64_t iter = 0;
    for (std::size_t epoch = 0; epoch < kEpochs; ++epoch) {
        const std::vector<std::size_t> order = course::shuffled(train_set.size(), kSeed, epoch);
        for (std::size_t b = 0, batch_id = 0; b < train_set.size(); b += kBatch, ++batch_id, ++iter) {
            const course::Batch batch = course::gather(train_set, std::span(order).subspan(b, kBatch));
            auto out = net.forward(batch.images);
            const float loss = loss_fn.forward(out, batch.labels);
            const float acc = oar::accuracy(out, batch.labels);  // paddle.metric.accuracy
            if (batch_id % 2 == 0)
                std::printf("epoch: %zu, batch: %zu, loss is: %.6f, acc is: %.4f\n", epoch, batch_id,
                            static_cast<double>(loss), static_cast<double>(acc));
            log.add_scalar("train/loss", loss, iter);
            log.add_scalar("train/acc", acc, iter);
            h.iters.push_back(static_cast<double>(iter));
            h.train_loss.push_back(loss);
            net.backward(loss_fn.backward());
            opt.step();
            opt.clear_grad();
        }
        const course::Score v = course::evaluate(net, valid_set);  // the course's evaluation(model)
        std::printf("[validation] epoch %zu: loss %.4f, accuracy %.4f\n", epoch, v.loss, v.accuracy);
        log.add_scalar("valid/loss", v.loss, static_cast<std::int64_t>(epoch));
        log.add_scalar("valid/acc", v.accuracy, static_cast<std::int64_t>(epoch));
        h.epochs.push_back(static_cast<double>(epoch));
        h.valid_loss.push_back(v.loss);
        h.valid_accuracy.push_back(v.accuracy);
    }
    h.conv_norm = norm_of(net, {"0.weight", "3.weight"});
    h.fc_norm = norm_of(net, {"7.weight"});
    return h;
}

}  // namespace

int main(int argc, char** argv) try {
    const course::Args args = course::parse_args(argc, argv, {"--data"}, 1);
    const std::filesystem::path dir = args.at(0, "lesson7");
    const std::size_t n_train = args.flag("--data").empty() ? 600 : 2000;  // real digits take more steps
    const course::Sets sets = course::load_sets(args.flag("--data"), n_train, 200, 0, {21, 22, 23});
    const course::Digits &train_set = sets.train, &valid_set = sets.valid;
    std::printf("data: %zu %s training images, %zu for validation\n", train_set.size(), sets.name, valid_set.size());
    const oar::AdamOptions adam{.learning_rate = 1e-3f};
    oar::AdamOptions decayed = adam;
    decayed.weight_decay = oar::L2Decay(kCoeff);

    const std::vector<History> runs{
        train("no regularisation", "none", adam, nullptr, train_set, valid_set, dir),
        train("L2Decay(" + oar::detail::concat(kCoeff) + ") on every parameter", "all", decayed, nullptr, train_set,
              valid_set, dir),
        train("L2Decay(" + oar::detail::concat(kCoeff) + ") on the last Linear's weight only (ParamAttr)", "fc_only",
              adam, "7.weight", train_set, valid_set, dir),
    };

    // The course's plot: the training loss per iteration, and the validation accuracy per epoch.
    oar::io::Panel loss{.title = "training loss", .y_label = "loss", .curves = {}, .x_label = "iteration"};
    oar::io::Panel acc{.title = "validation accuracy", .y_label = "accuracy", .curves = {}, .x_label = "epoch"};
    for (const History& h : runs) {
        loss.curves.push_back({.name = h.name, .x = h.iters, .y = h.train_loss, .color = ""});
        acc.curves.push_back({.name = h.name, .x = h.epochs, .y = h.valid_accuracy, .color = ""});
    }
    oar::io::write_svg(dir / "curves.svg", "lesson 7: L2 regularisation", {loss, acc});
    std::printf("wrote %s and VisualDL logs in %s/{none,all,fc_only} (visualdl --logdir %s)\n",
                (dir / "curves.svg").string().c_str(), dir.string().c_str(), dir.string().c_str());

    std::printf("weight norms after training (convolutions | last Linear):\n");
    for (const History& h : runs)
        std::printf("  %-62s %8.4f | %8.4f   validation accuracy %.4f\n", h.name.c_str(), h.conv_norm, h.fc_norm,
                    h.valid_accuracy.back());
    const History &none = runs[0], &all = runs[1], &fc = runs[2];
    const bool all_shrinks = all.conv_norm < none.conv_norm && all.fc_norm < none.fc_norm;
    const bool fc_shrinks = fc.fc_norm < none.fc_norm && fc.conv_norm > all.conv_norm;
    double worst = 1;
    for (const History& h : runs) worst = std::min(worst, h.valid_accuracy.back());
    std::printf("result: L2 on every parameter shrinks every layer: %s; on the last Linear only it shrinks that "
                "layer, not the convolutions: %s; lowest validation accuracy %.4f\n",
                all_shrinks ? "yes" : "no", fc_shrinks ? "yes" : "no", worst);
    return 0;
} catch (const oar::error& e) {
    std::fprintf(stderr, "course_lesson7_tuning: %s\n", e.what());
    return 2;
}
