// resnet_cifar (examples/resnet_cifar.cpp: ResNet8 and InceptionNet from blocks) run for real on a
// small generated CIFAR-10 (tests/support/toy_cifar.hpp): summary() with the blocks' inner layers,
// one line per epoch, the evaluation accuracy learned and the loss falling; bad flags refused
// with status 2.
#include <doctest/doctest.h>

#include <filesystem>  // std::filesystem
#include <regex>       // std::regex: the epoch lines
#include <sstream>     // std::istringstream
#include <string>      // std::string
#include <vector>      // std::vector

#include "support/process.hpp"    // run_command
#include "support/temp_dir.hpp"   // TempDir
#include "support/toy_cifar.hpp"  // write_toy_cifar

namespace {

oar_test::Run run(const std::string& args) {
    const std::string cmd = std::string(RESNET_CIFAR) + " " + args + " 2>&1";
    const oar_test::Run r = oar_test::run_command(cmd);
    MESSAGE("$ ", cmd, "\n", r.output, "(exit status ", r.status, " after ", r.seconds, " s)");
    return r;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

/// The evaluation losses and accuracies of the epoch lines.
struct Epochs {
    std::vector<double> train_loss, eval_loss, eval_acc;
};
Epochs epochs_of(const std::string& out) {
    const std::regex line(R"(^epoch \d+: train loss (\d+\.\d{4}) accuracy \d\.\d{4} \| eval loss (\d+\.\d{4}) accuracy (\d\.\d{4})$)");
    Epochs e;
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);) {
        std::smatch m;
        if (std::regex_match(l, m, line)) {
            e.train_loss.push_back(std::stod(m[1]));
            e.eval_loss.push_back(std::stod(m[2]));
            e.eval_acc.push_back(std::stod(m[3]));
        }
    }
    return e;
}

}  // namespace

TEST_CASE("resnet_cifar trains ResNet8 on generated CIFAR-10 files and learns them") {
    oar_test::TempDir tmp;
    const auto data = tmp.path / "cifar-10-batches-bin";
    oar_test::write_toy_cifar(data, 80, 200);  // 400 training images, 200 test
    // 25 steps an epoch; a BatchNorm momentum of 0.5 lets the running statistics that evaluation
    // uses follow weights that move this fast.
    const oar_test::Run r =
        run("--data " + data.string() + " --epochs 3 --batch-size 16 --lr 0.003 --bn-momentum 0.5 --seed 1");
    REQUIRE(r.status == 0);
    // summary() lists the blocks' inner layers under them, and the running statistics.
    CHECK(has(r.output, "Residual"));
    CHECK(has(r.output, "7.shortcut.0"));
    CHECK(has(r.output, "AdaptiveAvgPool2D"));
    CHECK(has(r.output, "resnet8: CIFAR-10 files, train 400 images, test 200; batch 16, Adam lr 0.003, BatchNorm momentum 0.5"));
    const Epochs e = epochs_of(r.output);
    REQUIRE(e.eval_acc.size() == 3);
    CHECK(e.train_loss.back() < 0.7 * e.train_loss.front());
    CHECK(e.eval_loss.back() < e.eval_loss.front());
    CHECK(e.eval_acc.back() >= 0.7);  // ten classes: chance is 0.1
    CHECK(has(r.output, "result: model=resnet8 epochs=3 eval_accuracy="));
}

TEST_CASE("resnet_cifar --model inception trains the Concat network; bad flags are refused with status 2") {
    const oar_test::Run r = run("--model inception --epochs 2 --train-images 320 --test-images 100 --seed 2");
    REQUIRE(r.status == 0);
    CHECK(has(r.output, "Concat"));
    CHECK(has(r.output, "inception: generated images, train 320 images, test 100"));
    const Epochs e = epochs_of(r.output);
    REQUIRE(e.eval_acc.size() == 2);
    CHECK(e.train_loss.back() < e.train_loss.front());

    CHECK(run("--help").status == 0);
    const oar_test::Run model = run("--model vgg");
    CHECK(model.status == 2);
    CHECK(has(model.output, "--model needs resnet8 or inception, got 'vgg'"));
    const oar_test::Run momentum = run("--bn-momentum 1.5");
    CHECK(momentum.status == 2);
    CHECK(has(momentum.output, "--bn-momentum"));
    const oar_test::Run few = run("--train-images 10");
    CHECK(few.status == 2);
    CHECK(has(few.output, "10 training images give no batch of 32"));
}
