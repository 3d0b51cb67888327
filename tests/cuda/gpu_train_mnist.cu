// train_mnist --device gpu, the real program on a real GPU (SKIPPED without one, gpu_main.cu):
// on generated IDX data, a short run of each GPU model (cnn, mlp) ends with the result line, and
// its losses and test accuracy equal the CPU run's within what float summation order explains.
//
// Why those tolerances: both runs start from bitwise equal weights (the GPU network is built
// from the CPU network of the same seed), see the same batches in the same order (the same
// DataLoader and seed) and the same dropout masks (the CPU's counter-based draws); they differ
// only in the order of float sums inside GEMMs and convolutions, which cuda.gpu_network bounds
// at ~1e-5 relative per step. Over the 16 steps here that moves losses by ~1e-4 at most, i.e.
// by at most 2 units in the 4th decimal the program prints (kTol), and moves logits by ~1e-4,
// so only a test image whose two top logits lie that close can change class: at most one of
// the 60 (kImages), i.e. |accuracy difference| <= 1/60.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cmath>       // std::abs
#include <filesystem>  // std::filesystem: the checkpoint folders
#include <regex>       // std::regex: the result and epoch lines
#include <sstream>     // std::istringstream
#include <string>      // std::string
#include <utility>     // std::pair
#include <vector>      // std::vector

#include "support/process.hpp"    // oar_test::run_command
#include "support/temp_dir.hpp"   // oar_test::TempDir
#include "support/toy_mnist.hpp"  // oar_test::write_toy_mnist_set

namespace {

constexpr double kTol = 2e-4;        // two units of the printed 4th decimal
constexpr std::uint32_t kImages = 60;

struct Parsed {
    std::vector<double> train_loss, valid_loss;
    double test_accuracy = -1;
};

Parsed parse(const std::string& out) {
    Parsed p;
    static const std::regex epoch(R"(^epoch \d+: train loss (\d+\.\d{4}) acc \d\.\d{4} \| valid loss (\d+\.\d{4}) acc)");
    static const std::regex result(R"(^result: dataset=mnist model=[a-z-]+ epochs=2 test_accuracy=(\d\.\d{4}) )"
                                   R"(train_images_per_sec=\d+ seconds=\d+\.\d$)");
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (std::regex_search(line, m, epoch)) {
            p.train_loss.push_back(std::stod(m[1]));
            p.valid_loss.push_back(std::stod(m[2]));
        } else if (std::regex_search(line, m, result)) {
            p.test_accuracy = std::stod(m[1]);
        }
    }
    return p;
}

}  // namespace

TEST_CASE("train_mnist --device gpu trains cnn and mlp through Model and matches the CPU run") {
    oar_test::TempDir tmp;
    oar_test::write_toy_mnist_set(tmp.path, "train", 240);
    oar_test::write_toy_mnist_set(tmp.path, "t10k", kImages);
    // Rates at which 2 epochs leave the test accuracy short of 1 (on the CPU, 0.75 and 0.80), so
    // that it can move.
    for (const auto& [model, lr] : {std::pair<std::string, std::string>{"cnn", "0.0003"}, {"mlp", "0.00003"}}) {
        const std::string args = std::string(TRAIN_MNIST) + " --data " + tmp.path.string() + " --model " + model +
                                 " --epochs 2 --batch-size 32 --lr " + lr + " --seed 3 --log-every 0";
        const oar_test::Run cpu = oar_test::run_command(args + " --device cpu 2>&1");
        const oar_test::Run gpu = oar_test::run_command(args + " --device gpu 2>&1");
        INFO(model);
        INFO(cpu.output);
        INFO(gpu.output);
        REQUIRE(cpu.status == 0);
        REQUIRE(gpu.status == 0);
        CHECK(gpu.output.find("device: gpu:0 (") != std::string::npos);
        const Parsed c = parse(cpu.output), g = parse(gpu.output);
        REQUIRE(c.train_loss.size() == 2);
        REQUIRE(g.train_loss.size() == 2);
        REQUIRE(g.test_accuracy >= 0);  // the result line, in full
        for (std::size_t e = 0; e < 2; ++e) {
            CHECK(std::abs(g.train_loss[e] - c.train_loss[e]) <= kTol);
            CHECK(std::abs(g.valid_loss[e] - c.valid_loss[e]) <= kTol);
        }
        CHECK(std::abs(g.test_accuracy - c.test_accuracy) <= 1.0 / kImages + 1e-9);
        CHECK(c.test_accuracy > 0.5);  // it learned: equal accuracies are not both chance
    }
}

TEST_CASE("train_mnist --device gpu names what the GPU run does not support, with status 2") {
    oar_test::TempDir tmp;
    oar_test::write_toy_mnist_set(tmp.path, "train", 40);
    oar_test::write_toy_mnist_set(tmp.path, "t10k", 20);
    const std::string base = std::string(TRAIN_MNIST) + " --data " + tmp.path.string() + " --device gpu --epochs 1";
    const oar_test::Run linear = oar_test::run_command(base + " --model linear 2>&1");
    CHECK(linear.status == 2);
    CHECK(linear.output.find("--model linear --device gpu: the regressors' MSE loss has no GPU version yet") !=
          std::string::npos);
}

// A GPU run's checkpoints are the CPU run's files (fp32 safetensors + state): one epoch on the GPU,
// then the second epoch resumed from that checkpoint on the GPU and, from a copy, on the CPU. Both
// end where the uninterrupted 2-epoch GPU run ends, within the summation-order tolerance above
// (the same 16 steps as the first case).
TEST_CASE("train_mnist --device gpu --checkpoint-dir: the checkpoint resumes on the GPU and on the CPU") {
    oar_test::TempDir tmp;
    oar_test::write_toy_mnist_set(tmp.path, "train", 240);
    oar_test::write_toy_mnist_set(tmp.path, "t10k", kImages);
    const std::string args = std::string(TRAIN_MNIST) + " --data " + tmp.path.string() +
                             " --model cnn --batch-size 32 --lr 0.0003 --seed 3 --log-every 0";
    const auto dir = [&](const char* name) { return (tmp.path / name).string(); };
    const oar_test::Run whole = oar_test::run_command(args + " --device gpu --epochs 2 --checkpoint-dir " + dir("a") + " 2>&1");
    const oar_test::Run first = oar_test::run_command(args + " --device gpu --epochs 1 --checkpoint-dir " + dir("b") + " 2>&1");
    INFO(whole.output);
    INFO(first.output);
    REQUIRE(whole.status == 0);
    REQUIRE(first.status == 0);
    CHECK(std::filesystem::exists(tmp.path / "b" / "latest.safetensors"));
    std::filesystem::copy(tmp.path / "b", tmp.path / "c", std::filesystem::copy_options::recursive);
    const oar_test::Run rest_gpu =
        oar_test::run_command(args + " --device gpu --epochs 2 --checkpoint-dir " + dir("b") + " --resume latest 2>&1");
    const oar_test::Run rest_cpu =
        oar_test::run_command(args + " --device cpu --epochs 2 --checkpoint-dir " + dir("c") + " --resume latest 2>&1");
    INFO(rest_gpu.output);
    INFO(rest_cpu.output);
    REQUIRE(rest_gpu.status == 0);
    REQUIRE(rest_cpu.status == 0);
    CHECK(rest_gpu.output.find("resumed from " + dir("b") + "/latest: epoch 1") != std::string::npos);
    CHECK(rest_cpu.output.find("resumed from " + dir("c") + "/latest: epoch 1") != std::string::npos);
    const Parsed w = parse(whole.output), g = parse(rest_gpu.output), c = parse(rest_cpu.output);
    REQUIRE(w.train_loss.size() == 2);
    REQUIRE(g.train_loss.size() == 1);  // the resumed runs train and print the second epoch only
    REQUIRE(c.train_loss.size() == 1);
    for (const Parsed* r : {&g, &c}) {
        CHECK(std::abs(r->train_loss[0] - w.train_loss[1]) <= kTol);
        CHECK(std::abs(r->valid_loss[0] - w.valid_loss[1]) <= kTol);
        CHECK(std::abs(r->test_accuracy - w.test_accuracy) <= 1.0 / kImages + 1e-9);
    }
}
