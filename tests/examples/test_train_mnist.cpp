// train_mnist, the main job, run as a real process on IDX files written here: every model trains
// and ends with the result line; bad flags and bad data print the reason and exit with status 2.
#include <doctest/doctest.h>

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/files.hpp"      // oar_test::write_gzip: the .gz inputs
#include "support/idx_files.hpp"  // oar_test::idx_bytes: their contents
#include "support/process.hpp"    // oar_test::run_command: the programs as real processes
#include "support/toy_mnist.hpp"  // oar_test::write_toy_mnist_set: learnable IDX files
#include "support/temp_dir.hpp"   // oar_test::TempDir: the data folder

namespace fs = std::filesystem;

namespace {

using oar_test::Run;

Run run_program(const std::string& program, const std::string& args) {
    return oar_test::run_command(program + " " + args + " 2>&1");
}

Run run(const std::string& args) { return run_program(TRAIN_MNIST, args); }

/// What a run learned, without its timings: the course's log lines, each epoch's train and valid
/// loss and accuracy, and the test line.
std::string learning(const std::string& out) {
    std::string kept;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("epoch", 0) == 0) kept += line.substr(0, line.find(" | ", line.find(" | ") + 3)) + "\n";
        if (line.rfind("test:", 0) == 0) kept += line + "\n";
    }
    return kept;
}

void write_set(const fs::path& dir, const std::string& prefix, std::uint32_t n) {
    oar_test::write_toy_mnist_set(dir, prefix, n);
}

using oar_test::TempDir;

const std::regex result_line(
    R"(\nresult: dataset=mnist model=([a-z-]+) epochs=(\d+) test_accuracy=(\d\.\d{4}) train_images_per_sec=(\d+) seconds=(\d+\.\d)\n$)");

}  // namespace

TEST_CASE("train_mnist trains every course model and ends with the result line") {
    TempDir tmp;
    write_set(tmp.path, "train", 240);
    write_set(tmp.path, "t10k", 60);
    for (const std::string model : {"linear", "sigmoid-mlp", "mlp", "cnn"}) {
        const Run r = run("--data " + tmp.path.string() + " --model " + model +
                          " --epochs 2 --batch-size 32 --log-every 2 --lr 0.003");
        INFO(r.output);
        REQUIRE(r.status == 0);
        std::smatch m;
        REQUIRE(std::regex_search(r.output, m, result_line));
        CHECK(m[1] == model);
        CHECK(m[2] == "2");
        CHECK(r.output.find("dataset: mnist") != std::string::npos);
        CHECK(r.output.find("train 240, valid 60, test 60 images") != std::string::npos);  // too few to split
        CHECK(r.output.find("epoch: 1, batch: 6, loss is: ") != std::string::npos);       // the course's log line
        CHECK(r.output.find("Total params: ") != std::string::npos);
        if (model == "cnn" || model == "mlp") CHECK(std::stod(m[3]) >= 0.9);  // the bars are easy to learn
    }
}

TEST_CASE("worker threads change nothing in what is trained: the same losses for 0 and 2 workers") {
    TempDir tmp;
    write_set(tmp.path, "train", 300);
    write_set(tmp.path, "t10k", 40);
    const std::string args = "--data " + tmp.path.string() + " --model mlp --epochs 2 --batch-size 25 --log-every 3";
    const Run zero = run(args + " --workers 0");
    const Run two = run(args + " --workers 2");
    INFO(zero.output, two.output);
    REQUIRE(zero.status == 0);
    REQUIRE(two.status == 0);
    CHECK(learning(zero.output).size() > 200);
    CHECK(learning(zero.output) == learning(two.output));
    CHECK(two.output.find("workers 2") != std::string::npos);
}

TEST_CASE("the course's mnist.json.gz made by mnist_to_json trains exactly like the IDX folder it came from") {
    TempDir tmp;
    write_set(tmp.path, "train", 260);  // fewer than the 10,000 validation images: all train, valid = test
    write_set(tmp.path, "t10k", 30);
    const std::string json = (tmp.path / "mnist.json.gz").string();
    const Run conv = run_program(MNIST_TO_JSON, "--data " + tmp.path.string() + " --out " + json);
    INFO(conv.output);
    REQUIRE(conv.status == 0);
    // The same splits, the same floats (x / 127.5 - 1 either way) and the same shuffles: the same run.
    const std::string args = " --model cnn --epochs 2 --batch-size 20 --log-every 4";
    const Run from_idx = run("--data " + tmp.path.string() + args);
    const Run from_json = run("--data " + json + args);
    INFO(from_idx.output, from_json.output);
    REQUIRE(from_idx.status == 0);
    REQUIRE(from_json.status == 0);
    CHECK(from_json.output.find("mnist.json.gz): train 260, valid 30, test 30 images") != std::string::npos);
    CHECK(learning(from_idx.output).size() > 200);
    CHECK(learning(from_idx.output) == learning(from_json.output));
}

TEST_CASE("a bad mnist.json.gz and bad converter flags print the reason and exit with status 2") {
    TempDir tmp;
    const std::string json = (tmp.path / "bad.json.gz").string();
    oar_test::write_gzip(json, oar_test::bytes{'[', '[', '[', '1', ']', ']', ']'});
    const Run bad = run("--data " + json);
    INFO(bad.output);
    CHECK(bad.status == 2);
    CHECK(bad.output.find("train_mnist: oar: " + json) != std::string::npos);

    const Run no_data = run_program(MNIST_TO_JSON, "--out " + json);
    CHECK(no_data.status == 2);
    const Run missing = run_program(MNIST_TO_JSON, "--data " + (tmp.path / "none").string() + " --out " + json);
    CHECK(missing.status == 2);
    CHECK(missing.output.find("mnist_to_json: oar: ") != std::string::npos);
    const Run unknown = run_program(MNIST_TO_JSON, "--frobnicate 1");
    CHECK(unknown.status == 2);
}

TEST_CASE("a dataset smaller than one batch still trains") {
    TempDir tmp;
    write_set(tmp.path, "train", 7);
    write_set(tmp.path, "t10k", 5);
    const Run r = run("--data " + tmp.path.string() + " --model mlp --epochs 1 --batch-size 100");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(std::regex_search(r.output, result_line));
}

TEST_CASE("train_mnist reads raw (uncompressed) IDX files and $OAR_DATA") {
    TempDir tmp;
    write_set(tmp.path, "train", 50);
    write_set(tmp.path, "t10k", 20);
    for (const auto& e : fs::directory_iterator(tmp.path)) {  // gunzip each file in place
        const std::string gz = e.path().string();
        gzFile f = gzopen(gz.c_str(), "rb");
        std::vector<char> all(1 << 20);
        const int n = gzread(f, all.data(), static_cast<unsigned>(all.size()));
        gzclose(f);
        std::ofstream(gz.substr(0, gz.size() - 3), std::ios::binary).write(all.data(), n);
        fs::remove(gz);
    }
    const Run raw = run("--model linear --epochs 1 --log-every 0 --data " + tmp.path.string());
    INFO(raw.output);
    CHECK(raw.status == 0);
    setenv("OAR_DATA", tmp.path.c_str(), 1);  // no --data: $OAR_DATA is used
    const Run with_env = run("--model linear --epochs 1 --log-every 0");
    unsetenv("OAR_DATA");
    INFO(with_env.output);
    CHECK(with_env.status == 0);
    CHECK(with_env.output.find(tmp.path.string()) != std::string::npos);
}

TEST_CASE("bad flags print the reason and exit with status 2") {
    const std::vector<std::pair<std::string, std::string>> cases{
        {"--model resnet", "--model must be linear, sigmoid-mlp, mlp or cnn, got 'resnet'"},
        {"--epochs 0", "--epochs needs an integer >= 1, got '0'"},
        {"--epochs two", "--epochs needs an integer >= 1, got 'two'"},
        {"--workers x", "--workers needs an integer >= 0, got 'x'"},
        {"--batch-size -5", "--batch-size needs an integer >= 1, got '-5'"},
        {"--lr nan", "--lr needs a finite number >= 0, got 'nan'"},
        {"--optimizer rmsprop", "--optimizer must be sgd, momentum, adagrad or adam"},
        {"--frobnicate 1", "unknown flag '--frobnicate'"},
        {"--data", "--data needs a value"},
        {"stray", "unexpected argument 'stray'"},
    };
    for (const auto& c : cases) {  // (no structured bindings: clang 14 cannot capture them in INFO)
        const std::string& args = c.first;
        const std::string& message = c.second;
        const Run r = run(args);
        INFO(args, " -> ", r.output);
        CHECK(r.status == 2);
        CHECK(r.output.find("train_mnist: oar: " + message) != std::string::npos);
    }
    const Run help = run("--help");
    CHECK(help.status == 0);
    CHECK(help.output.find("usage: train_mnist") != std::string::npos);
}

TEST_CASE("unreadable or bad data prints the reason and exits with status 2") {
    TempDir tmp;
    const Run missing = run("--data " + (tmp.path / "nope").string());
    CHECK(missing.status == 2);
    CHECK(missing.output.find("nope (--data): no such file or folder") != std::string::npos);

    const Run empty_dir = run("--data " + tmp.path.string());
    CHECK(empty_dir.status == 2);
    CHECK(empty_dir.output.find("neither train-images-idx3-ubyte.gz nor train-images-idx3-ubyte exists") !=
          std::string::npos);

    write_set(tmp.path, "train", 30);
    write_set(tmp.path, "t10k", 10);
    // a label file whose header promises more labels than the file has
    oar_test::write_gzip(tmp.path / "t10k-labels-idx1-ubyte.gz", oar_test::idx_bytes({1000}, {3}));
    const Run bad = run("--data " + tmp.path.string());
    INFO(bad.output);
    CHECK(bad.status == 2);
    CHECK(bad.output.find("t10k-labels-idx1-ubyte.gz: IDX header claims 1000 at dimension 0 (offset 4)") !=
          std::string::npos);

    // a corrupt gzip stream
    std::ofstream(tmp.path / "t10k-labels-idx1-ubyte.gz", std::ios::binary) << "\x1f\x8b\x08 this is not deflate";
    const Run corrupt = run("--data " + tmp.path.string());
    CHECK(corrupt.status == 2);
    CHECK(corrupt.output.find("t10k-labels-idx1-ubyte.gz: ") != std::string::npos);
}
