// Lesson 8 of the course, save, load and resume: the course's CNN trained with its loop (Adam 1e-3,
// L2Decay 1e-5, batches of 100, a new shuffle every epoch), and
//   1. at the end the weights written as the course's `paddle.save(model.state_dict(),
//      'mnist.pdparams')` does: DIR/mnist.safetensors, the same state-dict keys ("0.weight", ...);
//   2. loaded back into a new model (`model.set_state_dict(paddle.load(...))`) and evaluated: the
//      same loss and accuracy as the trained model;
//   3. a checkpoint (weights, Adam's moments, the step and epoch) saved after every epoch, and a
//      second run resumed from the one after epoch 2: it ends on the same bytes as the
//      uninterrupted run.
// Data: 600 generated digits and 200 test digits, or with `--data MNIST_DIR` the first 2,000
// training and 200 test images of the real MNIST in that IDX folder.
// Usage: course_lesson8_save_load [DIR] [--data MNIST_DIR]   (DIR: where the files go, default lesson8)
#include <algorithm>   // std::min
#include <cstdint>     // std::int64_t
#include <cstdio>      // std::printf
#include <filesystem>  // std::filesystem::file_size
#include <fstream>     // std::ifstream: the files compared
#include <iterator>    // std::istreambuf_iterator
#include <span>        // std::span
#include <string>      // std::string
#include <vector>      // std::vector

#include <oar/oar.hpp>               // the CPU API
#include <oar/train/checkpoint.hpp>  // save_weights, load_weights, save_checkpoint, load_checkpoint

#include "digits.hpp"  // course::CNN, load_sets, shuffled, gather, evaluate, parse_args

namespace {

constexpr std::size_t kBatch = 100, kEpochs = 4, kResumeAt = 2;
constexpr std::uint64_t kSeed = 7;

std::string bytes_of(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw oar::io_error(path + ": cannot open");
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// The course's training loop over epochs [first, kEpochs), a checkpoint FOLDER/epoch_<n> after
/// each; the course's line every 2 batches.
void train(course::CNN& net, oar::Adam<>& opt, const course::Digits& d, std::size_t first, const std::string& folder) {
    oar::CrossEntropyLoss<> loss_fn;
    std::uint64_t step = first * ((d.size() + kBatch - 1) / kBatch);
    for (std::size_t epoch = first; epoch < kEpochs; ++epoch) {
        const std::vector<std::size_t> order = course::shuffled(d.size(), kSeed, epoch);
        for (std::size_t b = 0, batch_id = 0; b < d.size(); b += kBatch, ++batch_id) {
            const std::size_t n = std::min(kBatch, d.size() - b);
            const course::Batch batch = course::gather(d, std::span(order).subspan(b, n));
            auto out = net.forward(batch.images);
            const float loss = loss_fn.forward(out, batch.labels);
            const float acc = oar::accuracy(out, batch.labels);
            if (batch_id % 2 == 0)
                std::printf("epoch: %zu, batch: %zu, loss is: %.6f, acc is: %.4f\n", epoch, batch_id,
                            static_cast<double>(loss), static_cast<double>(acc));
            net.backward(loss_fn.backward());
            opt.step();
            opt.clear_grad();
            ++step;
        }
        oar::TrainingState state;
        state.epoch = epoch + 1;
        state.global_step = step;
        state.rng_seed = kSeed;
        state.sampler_epoch = epoch + 1;
        oar::save_checkpoint(folder, "epoch_" + std::to_string(epoch + 1), net, opt, state);
    }
}

oar::AdamOptions course_adam() { return {.learning_rate = 1e-3f, .weight_decay = oar::L2Decay(1e-5f)}; }

}  // namespace

int main(int argc, char** argv) try {
    const course::Args args = course::parse_args(argc, argv, {"--data"}, 1);
    const std::string dir = args.at(0, "lesson8");
    const std::size_t n_train = args.flag("--data").empty() ? 600 : 2000;  // real digits take more steps
    const course::Sets sets = course::load_sets(args.flag("--data"), n_train, 0, 200, {11, 13, 12});
    const course::Digits &train_set = sets.train, &test_set = sets.test;
    const std::string weights = dir + "/mnist.safetensors";

    std::printf("== training %zu epochs on %zu %s images, a checkpoint after each\n", kEpochs, train_set.size(),
                sets.name);
    course::CNN net(kSeed);
    oar::Adam<> opt(net.parameters(), course_adam());
    train(net, opt, train_set, 0, dir + "/run");
    oar::save_weights(weights, net);  // paddle.save(model.state_dict(), 'mnist.pdparams')
    std::printf("saved %s: %zu bytes, %zu parameters\n", weights.c_str(),
                static_cast<std::size_t>(std::filesystem::file_size(weights)), net.parameters().count());

    std::printf("== a new model, its weights loaded from %s, evaluated on %zu test digits\n", weights.c_str(),
                test_set.size());
    course::CNN loaded(/*seed=*/99);  // other weights until the file is loaded
    const course::Score before = course::evaluate(loaded, test_set);
    oar::load_weights(weights, loaded);  // model.set_state_dict(paddle.load('mnist.pdparams'))
    const course::Score trained = course::evaluate(net, test_set), after = course::evaluate(loaded, test_set);
    std::printf("new model before loading: loss %.4f, acc %.4f\n", before.loss, before.accuracy);
    std::printf("loaded model: loss %.6f, acc %.4f; trained model: loss %.6f, acc %.4f\n", after.loss, after.accuracy,
                trained.loss, trained.accuracy);

    std::printf("== resumed from %s/run/epoch_%zu: epochs %zu to %zu again\n", dir.c_str(), kResumeAt, kResumeAt,
                kEpochs - 1);
    course::CNN again(/*seed=*/kSeed);
    oar::Adam<> opt2(again.parameters(), course_adam());
    const oar::TrainingState st = oar::load_checkpoint(dir + "/run", "epoch_" + std::to_string(kResumeAt), again, opt2);
    std::printf("checkpoint: epoch %llu, step %llu, lr %g\n", static_cast<unsigned long long>(st.epoch),
                static_cast<unsigned long long>(st.global_step), static_cast<double>(opt2.learning_rate()));
    train(again, opt2, train_set, st.epoch, dir + "/resumed");
    // The two last checkpoints, file for file (the same names in two folders: a state file names
    // its weights file).
    const std::string last = "epoch_" + std::to_string(kEpochs);
    const bool same_weights = bytes_of(oar::checkpoint_weights_path(dir + "/run", last)) ==
                              bytes_of(oar::checkpoint_weights_path(dir + "/resumed", last));
    const bool same_state = bytes_of(oar::checkpoint_state_path(dir + "/run", last)) ==
                            bytes_of(oar::checkpoint_state_path(dir + "/resumed", last));
    std::printf("result: loaded model %s the trained one (test accuracy %.4f); resumed run against the "
                "uninterrupted one after epoch %zu: weights %s, optimizer state %s\n",
                after.loss == trained.loss && after.accuracy == trained.accuracy ? "scores as" : "DIFFERS FROM",
                after.accuracy, kEpochs, same_weights ? "bitwise equal" : "DIFFERENT",
                same_state ? "bitwise equal" : "DIFFERENT");
    return same_weights && same_state ? 0 : 1;
} catch (const oar::error& e) {
    std::fprintf(stderr, "course_lesson8_save_load: %s\n", e.what());
    return 2;
}
