// train_mnist, the main job, run as a real process on IDX files written here: every model trains
// and ends with the result line; bad flags and bad data print the reason and exit with status 2;
// logs and checkpoints land where asked; a resumed run and one stopped by a real signal and
// resumed end bit for bit where an uninterrupted run ends.
#include <doctest/doctest.h>

#include <zlib.h>

#include <algorithm>   // std::count
#include <array>       // std::array: the read buffer
#include <csignal>     // SIGINT, SIGTERM, kill
#include <cstdint>
#include <cstdlib>     // std::strtof, std::strtod: the logged values
#include <iterator>    // std::istreambuf_iterator
#include <pty.h>       // forkpty: train_mnist on a terminal
#include <sys/wait.h>  // waitpid
#include <unistd.h>    // fork, execv, pipe
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
#include "support/python.hpp"     // oar_test::skip_without_python: no onnxruntime
#include "support/skip.hpp"       // oar_test::skip: visualdl missing
#include "support/temp_dir.hpp"   // oar_test::TempDir: the data folder

namespace fs = std::filesystem;

namespace {

using oar_test::Run;

Run run_program(const std::string& program, const std::string& args) {
    return oar_test::run_command(program + " " + args + " 2>&1");
}

Run run(const std::string& args) { return run_program(TRAIN_MNIST, args); }

/// train_mnist with stdout and stderr on a pseudo-terminal (isatty is true there): what it wrote
/// and its exit status.
Run run_on_terminal(const std::string& args) {
    int master = -1;
    const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
    REQUIRE(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", (std::string(TRAIN_MNIST) + " " + args).c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    Run r;
    char buf[4096];
    for (ssize_t n; (n = read(master, buf, sizeof buf)) > 0;) r.output.append(buf, static_cast<std::size_t>(n));
    close(master);  // read ends with EIO once the program has exited and closed the terminal
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

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

TEST_CASE("--help fits on one screen and points to --help-all, which lists every flag the parser takes") {
    const Run help = run("--help");
    INFO(help.output);
    CHECK(help.status == 0);
    CHECK(help.output.rfind("usage: train_mnist", 0) == 0);
    CHECK(std::count(help.output.begin(), help.output.end(), '\n') <= 24);
    CHECK(help.output.find("--help-all") != std::string::npos);
    const Run all = run("--epochs 3 --help-all --bogus");  // nothing after it is parsed
    INFO(all.output);
    CHECK(all.status == 0);
    CHECK(all.output.rfind("usage: train_mnist", 0) == 0);
    CHECK(all.output.size() > help.output.size());
    // Every flag examples/app/train_options.hpp compares against is in --help-all.
    std::ifstream src(std::string(OAR_SOURCE_DIR) + "/examples/app/train_options.hpp");
    const std::string code((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
    const std::regex flag_re("flag == \"(--[a-z-]+)\"");
    std::size_t flags = 0;
    for (auto it = std::sregex_iterator(code.begin(), code.end(), flag_re); it != std::sregex_iterator(); ++it, ++flags) {
        const std::string f = (*it)[1];
        CHECK_MESSAGE(all.output.find("  " + f + " ") != std::string::npos, f << " is not in --help-all");
    }
    CHECK(flags >= 20);
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

namespace {

std::string file_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// One job three ways: 4 epochs uninterrupted (checkpoints in dir/a), 2 epochs (dir/b), then
/// resumed from dir/b's latest to 4 epochs.
struct SplitRun {
    Run whole, first, rest;
};
SplitRun run_split(const std::string& args, const fs::path& dir) {
    SplitRun r;
    r.whole = run(args + " --epochs 4 --checkpoint-dir " + (dir / "a").string());
    r.first = run(args + " --epochs 2 --checkpoint-dir " + (dir / "b").string());
    r.rest = run(args + " --epochs 4 --checkpoint-dir " + (dir / "b").string() + " --resume latest");
    return r;
}

/// Starts TRAIN_MNIST with `args` as a real child process, reads its output line by line and
/// sends it `sig` once a line starts with `when`; returns its exit status (or -signal) and output.
Run run_and_signal(const std::vector<std::string>& args, const std::string& when, int sig) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        std::vector<char*> argv{const_cast<char*>(TRAIN_MNIST)};
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execv(TRAIN_MNIST, argv.data());
        _exit(127);
    }
    close(fds[1]);
    Run r;
    FILE* f = fdopen(fds[0], "r");
    bool sent = false;
    std::array<char, 4096> buf{};
    while (std::fgets(buf.data(), buf.size(), f)) {
        const std::string line = buf.data();
        r.output += line;
        if (!sent && line.rfind(when, 0) == 0) {
            kill(pid, sig);
            sent = true;
        }
    }
    std::fclose(f);
    int st = 0;
    waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
    CHECK(sent);
    return r;
}

std::vector<std::string> split_args(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string a; in >> a;) out.push_back(a);
    return out;
}

}  // namespace

TEST_CASE("--log-dir holds the SVG curves, the CSV, a TensorBoard event file and a VisualDL record file; --checkpoint-dir the safetensors") {
    TempDir tmp;
    write_set(tmp.path, "train", 120);
    write_set(tmp.path, "t10k", 30);
    const fs::path logs = tmp.path / "logs", ck = tmp.path / "ck";
    const Run r = run("--data " + tmp.path.string() + " --model mlp --epochs 2 --batch-size 20 --log-every 2 --log-dir " +
                      logs.string() + " --checkpoint-dir " + ck.string());
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(std::regex_search(r.output, result_line));
    CHECK(file_bytes(logs / "curves.svg").find("<svg") != std::string::npos);
    const std::string csv = file_bytes(logs / "train.csv");
    CHECK(csv.rfind("epoch,global_step,loss,acc,eval_loss,eval_acc,lr,train_seconds\n1,6,", 0) == 0);
    CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);
    std::size_t events = 0;
    for (const auto& e : fs::directory_iterator(logs)) events += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
    CHECK(events == 1);
    CHECK(fs::exists(logs / "workerlog.0"));
    // VisualDL's own reader sees the epochs' validation accuracy that the CSV holds.
    fs::path vdl;
    for (const auto& e : fs::directory_iterator(logs))
        if (e.path().filename().string().rfind("vdlrecords.", 0) == 0) vdl = e.path();
    REQUIRE_FALSE(vdl.empty());
    const auto read = oar_test::run_command(std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR +
                                            "/tests/io/read_visualdl.py '" + vdl.string() + "' 2>&1");
    if (read.status == 3) {
        oar_test::skip("the visualdl package is not in the test venv (scripts/setup.sh installs it)");
    } else {
        INFO(read.output);
        REQUIRE(read.status == 0);
        std::vector<double> csv_acc, vdl_acc;
        std::istringstream rows(csv);
        std::string row;
        std::getline(rows, row);  // header
        while (std::getline(rows, row)) {
            std::istringstream f(row);
            std::string cell;
            for (int i = 0; i <= 5; ++i) std::getline(f, cell, ',');  // eval_acc: the 6th column
            csv_acc.push_back(static_cast<double>(std::strtof(cell.c_str(), nullptr)));
        }
        std::istringstream out(read.output);
        std::size_t train_loss = 0;
        for (std::string l; std::getline(out, l);) {
            std::istringstream in(l);
            std::string kind, step, ms, value, tag;
            in >> kind >> step >> ms >> value >> tag;
            if (kind == "scalar" && tag == "eval/acc") vdl_acc.push_back(std::strtod(value.c_str(), nullptr));
            train_loss += kind == "scalar" && tag == "train/loss";
        }
        CHECK(train_loss > 0);
        REQUIRE(vdl_acc.size() == 2);
        REQUIRE(csv_acc.size() == 2);
        for (std::size_t i = 0; i < 2; ++i) CHECK(vdl_acc[i] == doctest::Approx(csv_acc[i]).epsilon(1e-6));
    }
    for (const char* stem : {"latest", "best", "epoch_1", "epoch_2"}) {
        CHECK(fs::exists(ck / (std::string(stem) + ".safetensors")));
        CHECK(fs::exists(ck / (std::string(stem) + ".state.safetensors")));
    }
}

TEST_CASE("folder and file flags that cannot work are refused before training, naming the flag and the expected form") {
    TempDir tmp;
    write_set(tmp.path, "train", 40);
    write_set(tmp.path, "t10k", 10);
    const std::string data = "--data " + tmp.path.string() + " --epochs 1 --batch-size 20 --log-every 0";
    std::ofstream(tmp.path / "a_file") << "x";
    const fs::path file = tmp.path / "a_file";
    const std::vector<std::pair<std::string, std::string>> cases{
        {"--checkpoint-dir " + file.string(), "--checkpoint-dir " + file.string() + ": cannot make the folder ("},
        {"--log-dir " + (file / "sub").string(), "--log-dir " + (file / "sub").string() + ": cannot make the folder ("},
        {"--data=", "--data needs a folder of IDX files or a mnist.json(.gz) file, got ''"},
        {"--resume " + (tmp.path / "nope").string(), "--resume " + (tmp.path / "nope").string() + ": no checkpoint there (expected "},
    };
    for (const auto& c : cases) {
        const Run r = run(data + " " + c.first);
        INFO(c.first, " -> ", r.output);
        CHECK(r.status == 2);
        CHECK(r.output.find("train_mnist: oar: " + c.second) != std::string::npos);
        CHECK(r.output.find("\nepoch ") == std::string::npos);  // nothing trained (no epoch line)
    }
    const Run env = oar_test::run_command("OAR_LOG_DIR=" + (file / "sub").string() + " " + TRAIN_MNIST + " " + data + " 2>&1");
    INFO(env.output);
    CHECK(env.status == 2);
    CHECK(env.output.find("$OAR_LOG_DIR " + (file / "sub").string() + ": cannot make the folder (") != std::string::npos);
#if OAR_TRAIN_MNIST_HAS_ONNX
    const Run dir = run(data + " --export-onnx " + tmp.path.string());
    INFO(dir.output);
    CHECK(dir.status == 2);
    CHECK(dir.output.find("--export-onnx " + tmp.path.string() + ": is a folder (expected a file path such as model.onnx)") !=
          std::string::npos);
#endif
}

TEST_CASE("--export-onnx writes the trained model as ONNX after training; a missing folder is refused before") {
    TempDir tmp;
    write_set(tmp.path, "train", 120);
    write_set(tmp.path, "t10k", 30);
    const std::string data = "--data " + tmp.path.string() + " --model cnn --epochs 1 --batch-size 20 --log-every 0";
    const fs::path missing = tmp.path / "no_such_folder" / "m.onnx";
    const Run bad = run(data + " --export-onnx " + missing.string());
    INFO(bad.output);
    CHECK(bad.status == 2);
#if OAR_TRAIN_MNIST_HAS_ONNX
    CHECK(bad.output.find("--export-onnx " + missing.string() + ": folder " + missing.parent_path().string() +
                          " does not exist") != std::string::npos);
    CHECK(bad.output.find("epoch") == std::string::npos);  // refused before training
    const fs::path model = tmp.path / "cnn.onnx";
    const Run r = run(data + " --export-onnx " + model.string());
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output.find("onnx: wrote " + model.string() + " (opset 17") != std::string::npos);
    CHECK(std::regex_search(r.output, result_line));
    // The course CNN's 20,350 parameters are in it as float initializers.
    CHECK(fs::file_size(model) > 20350 * sizeof(float));
    if (oar_test::skip_without_python("numpy, onnx, onnxruntime")) return;
    const fs::path x = tmp.path / "x.bin", y = tmp.path / "y.bin";
    std::ofstream(x, std::ios::binary) << std::string(3 * 784 * sizeof(float), '\0');
    const Run ort = oar_test::run_command(std::string(OAR_PYTHON) + " " OAR_SOURCE_DIR "/tests/io/run_onnx.py " +
                                          model.string() + " " + x.string() + " " + y.string() + " 2>&1");
    INFO(ort.output);
    CHECK(ort.status == 0);
    CHECK(ort.output.find("onnx-ok opset 17 batches 3") != std::string::npos);
    CHECK(fs::file_size(y) == 3 * 10 * sizeof(float));
#else
    CHECK(bad.output.find("--export-onnx: this train_mnist was built without ONNX export") != std::string::npos);
#endif
}

TEST_CASE("train_mnist stopped after epoch 2 and resumed to epoch 4 ends bit for bit as an uninterrupted 4-epoch run") {
    TempDir tmp;
    write_set(tmp.path, "train", 150);
    write_set(tmp.path, "t10k", 30);
    // the MLP has dropout, Adam has moments and a step count, the schedule decays each epoch
    const std::string args = "--data " + tmp.path.string() +
                             " --model mlp --batch-size 16 --log-every 3 --lr 0.003 --lr-schedule step:1:0.7 --seed 5";
    const auto [whole, first, rest] = run_split(args, tmp.path);
    INFO(whole.output, first.output, rest.output);
    REQUIRE((whole.status == 0 && first.status == 0 && rest.status == 0));
    CHECK(rest.output.find("resumed from " + (tmp.path / "b").string() + "/latest: epoch 2, step 0 of it, 20 steps") !=
          std::string::npos);
    const std::string a = file_bytes(tmp.path / "a" / "epoch_4.safetensors");
    CHECK(a.size() > 400000);
    CHECK(a == file_bytes(tmp.path / "b" / "epoch_4.safetensors"));
    CHECK(file_bytes(tmp.path / "a" / "latest.state.safetensors") == file_bytes(tmp.path / "b" / "latest.state.safetensors"));
    // the epochs after the resume print what the uninterrupted run printed for them
    const auto tail = [](const std::string& out) { return learning(out.substr(out.find("epoch: 2, batch: 0,"))); };
    CHECK(tail(whole.output) == tail(rest.output));
    CHECK(tail(whole.output).find("epoch 3: ") != std::string::npos);
    // a different seed cannot resume this run
    const Run wrong = run("--data " + tmp.path.string() + " --model mlp --epochs 4 --checkpoint-dir " +
                          (tmp.path / "b").string() + " --resume latest --seed 6");
    CHECK(wrong.status == 2);
    CHECK(wrong.output.find("--seed 6 differs from the checkpoint's seed 5") != std::string::npos);
}

TEST_CASE("a real SIGINT or SIGTERM stops train_mnist after the step, saves a checkpoint, and resuming it ends like an uninterrupted run") {
    TempDir tmp;
    write_set(tmp.path, "train", 200);
    write_set(tmp.path, "t10k", 30);
    const std::string args = "--data " + tmp.path.string() + " --model cnn --batch-size 10 --log-every 1 --epochs 3 --seed 2";
    const Run whole = run(args + " --checkpoint-dir " + (tmp.path / "whole").string());
    REQUIRE(whole.status == 0);
    for (const int sig : {SIGINT, SIGTERM}) {
        const std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
        const fs::path ck = tmp.path / name;
        const Run stopped = run_and_signal(split_args(args + " --checkpoint-dir " + ck.string()), "epoch: 1, batch: 3,", sig);
        INFO(stopped.output);
        CHECK(stopped.status == 0);
        CHECK(stopped.output.find("oar: " + name + " received: stopping after this step") != std::string::npos);
        CHECK(stopped.output.find("stopped by " + name + " after training step ") != std::string::npos);
        CHECK(stopped.output.find("checkpoint saved: " + ck.string() + "/latest") != std::string::npos);
        CHECK(stopped.output.find("result: ") == std::string::npos);
        CHECK(stopped.output.find("epoch: 2, batch: 0,") == std::string::npos);  // it did stop inside epoch 1
        const Run resumed = run(args + " --checkpoint-dir " + ck.string() + " --resume " + ck.string());
        INFO(resumed.output);
        CHECK(resumed.status == 0);
        CHECK(resumed.output.find("resumed from " + ck.string() + "/latest: epoch 1, step ") != std::string::npos);
        CHECK(file_bytes(tmp.path / "whole" / "epoch_3.safetensors") == file_bytes(ck / "epoch_3.safetensors"));
    }
}

TEST_CASE("--device gpu:N without that GPU (or without CUDA) is refused with a message and status 2; --lr-schedule changes the rate") {
    TempDir tmp;
    write_set(tmp.path, "train", 60);
    write_set(tmp.path, "t10k", 20);
    const Run gpu = run("--data " + tmp.path.string() + " --device gpu:4096");  // a GPU no machine has
    CHECK(gpu.status == 2);
#if OAR_TRAIN_MNIST_HAS_GPU  // the GPU run is tested in tests/cuda (cuda.gpu_train_mnist, cuda.train_mnist_device)
    CHECK(gpu.output.find("train_mnist: oar: no CUDA device") != std::string::npos);
#else
    CHECK(gpu.output.find("train_mnist: oar: --device gpu:4096: this train_mnist was built without CUDA") != std::string::npos);
#endif
    const Run bad = run("--device tpu");
    CHECK(bad.status == 2);
    CHECK(bad.output.find("--device must be cpu, gpu or gpu:N") != std::string::npos);
    const Run sched = run("--data " + tmp.path.string() + " --model mlp --epochs 3 --batch-size 20 --lr-schedule step:1:0.5");
    INFO(sched.output);
    CHECK(sched.status == 0);
    CHECK(sched.output.find("epoch 0: ") != std::string::npos);
    CHECK(sched.output.find(", lr 0.001\n") != std::string::npos);
    CHECK(sched.output.find(", lr 0.0005\n") != std::string::npos);
    CHECK(sched.output.find(", lr 0.00025\n") != std::string::npos);
    // Per batch: the same step:1:0.5 halves the rate after every batch (3 batches of 20 an epoch
    // here: the line says how many training images there are), so epoch 0 ends at 0.001 / 2^3.
    const Run per_batch = run("--data " + tmp.path.string() +
                              " --model mlp --epochs 2 --batch-size 20 --lr-schedule step:1:0.5 --lr-step-per batch");
    INFO(per_batch.output);
    CHECK(per_batch.status == 0);
    CHECK(per_batch.output.find("train 60, valid 20, test 20 images") != std::string::npos);
    CHECK(per_batch.output.find(", lr 0.000125\n") != std::string::npos);
    CHECK(per_batch.output.find(", lr 1.5625e-05\n") != std::string::npos);
}

TEST_CASE("--precision bf16 trains the CNN and the MLP in bf16 mixed precision, says so in its header line, and learns "
          "other numbers than fp32") {
    TempDir tmp;
    write_set(tmp.path, "train", 240);
    write_set(tmp.path, "t10k", 60);
    for (const std::string model : {"cnn", "mlp"}) {
        const std::string args = "--data " + tmp.path.string() + " --model " + model +
                                 " --epochs 2 --batch-size 32 --log-every 2 --lr 0.003";
        const Run bf16 = run(args + " --precision bf16");
        const Run fp32 = run(args);
        INFO(bf16.output, fp32.output);
        REQUIRE((bf16.status == 0 && fp32.status == 0));
        CHECK(bf16.output.find(", precision bf16\n") != std::string::npos);
        CHECK(fp32.output.find(", precision fp32\n") != std::string::npos);
        std::smatch m;
        REQUIRE(std::regex_search(bf16.output, m, result_line));
        CHECK(std::stod(m[3]) >= 0.9);  // the bars are easy to learn
        CHECK(learning(bf16.output).size() > 200);
        CHECK(learning(bf16.output) != learning(fp32.output));  // the products did change
    }
}

TEST_CASE("--recipe course trains as the course's settings given one by one, and says so in its header line") {
    TempDir tmp;
    write_set(tmp.path, "train", 120);
    write_set(tmp.path, "t10k", 20);
    const std::string data = "--data " + tmp.path.string() + " --epochs 2 --batch-size 20 --log-every 2";
    const Run course = run(data + " --recipe course");
    const Run spelled = run(data + " --init paddle --lr-schedule none --l2 0 --optimizer adam --lr 0.001");
    const Run best = run(data);
    INFO(course.output, spelled.output, best.output);
    REQUIRE((course.status == 0 && spelled.status == 0 && best.status == 0));
    CHECK(course.output.find("recipe: course, model: cnn, optimizer: adam, lr 0.001 (constant), L2Decay 0, batch 20, "
                             "epochs 2, seed 0, init paddle,") != std::string::npos);
    CHECK(best.output.find("recipe: best, model: cnn, optimizer: adam, lr 0.001 (constant), L2Decay 1e-05, batch 20, "
                           "epochs 2, seed 0, init torch,") != std::string::npos);
    CHECK(learning(course.output).size() > 200);
    CHECK(learning(course.output) == learning(spelled.output));
    CHECK(learning(course.output) != learning(best.output));
    // The regressors: the course's SGD.
    const Run linear = run(data + " --recipe course --model linear");
    INFO(linear.output);
    CHECK(linear.status == 0);
    CHECK(linear.output.find("recipe: course, model: linear, optimizer: sgd, lr 0.001 (constant), L2Decay 0,") !=
          std::string::npos);
}

TEST_CASE("on a terminal: a progress bar, or with --log-style course the course's lines") {
    TempDir tmp;
    write_set(tmp.path, "train", 100);
    write_set(tmp.path, "t10k", 20);
    const std::string args = "--data " + tmp.path.string() + " --model mlp --epochs 2 --batch-size 20 --log-every 2";
    const Run bar = run_on_terminal(args);
    const Run lines = run_on_terminal(args + " --log-style course");
    const Run piped = run(args + " --log-style course");
    INFO(bar.output, lines.output);
    REQUIRE((bar.status == 0 && lines.status == 0 && piped.status == 0));
    CHECK(bar.output.find("\rstep ") != std::string::npos);
    CHECK(bar.output.find("epoch: 0, batch: 0, loss is: ") == std::string::npos);
    CHECK(lines.output.find("\rstep ") == std::string::npos);
    const std::regex course_line(R"(\nepoch: 1, batch: 2, loss is: \d+\.\d{4}, acc is: [01]\.\d{4}\r?\n)");
    CHECK(std::regex_search(lines.output, course_line));
    CHECK(std::regex_search(piped.output, course_line));
}

TEST_CASE("with the default schedule a 2-epoch run resumed to 4 epochs ends bit for bit as a 4-epoch run") {
    // The default milestone follows --epochs (2 epochs: none inside the run; 4: epoch 3), and a
    // resumed run takes the position from the checkpoint and the rate from the schedule of now.
    TempDir tmp;
    write_set(tmp.path, "train", 150);
    write_set(tmp.path, "t10k", 30);
    const std::string args = "--data " + tmp.path.string() + " --model mlp --batch-size 16 --log-every 0 --seed 5";
    const auto [whole, first, rest] = run_split(args, tmp.path);
    INFO(whole.output, first.output, rest.output);
    REQUIRE((whole.status == 0 && first.status == 0 && rest.status == 0));
    CHECK(first.output.find("lr 0.001 (constant)") != std::string::npos);
    CHECK(rest.output.find("lr 0.001 (x0.1 from epoch 3)") != std::string::npos);
    CHECK(rest.output.find("resumed from " + (tmp.path / "b").string() + "/latest: epoch 2, step 0 of it, 20 steps in all, lr 0.001\n") !=
          std::string::npos);
    CHECK(file_bytes(tmp.path / "a" / "epoch_4.safetensors").size() > 400000);
    CHECK(file_bytes(tmp.path / "a" / "epoch_4.safetensors") == file_bytes(tmp.path / "b" / "epoch_4.safetensors"));
    CHECK(file_bytes(tmp.path / "a" / "latest.state.safetensors") == file_bytes(tmp.path / "b" / "latest.state.safetensors"));
}

TEST_CASE("the default schedule: the course's rate for four fifths of the epochs, a tenth of it after") {
    TempDir tmp;
    write_set(tmp.path, "train", 60);
    write_set(tmp.path, "t10k", 20);
    const Run five = run("--data " + tmp.path.string() + " --model mlp --epochs 5 --batch-size 20");
    INFO(five.output);
    CHECK(five.status == 0);
    CHECK(five.output.find("lr 0.001 (x0.1 from epoch 4), L2Decay 1e-05") != std::string::npos);
    const auto epoch_lr = [&](int e) {  // the rate the epoch trained at, from its line
        const auto at = five.output.find("epoch " + std::to_string(e) + ": train loss");
        if (at == std::string::npos) return std::string("(no line)");
        const auto lr = five.output.find(", lr ", at);
        return five.output.substr(lr + 5, five.output.find('\n', lr) - lr - 5);
    };
    for (int e = 0; e < 4; ++e) CHECK(epoch_lr(e) == "0.001");
    CHECK(epoch_lr(4) == "0.0001");
    // Two epochs: the milestone is the run's end, so the rate stays the course's.
    const Run two = run("--data " + tmp.path.string() + " --model mlp --epochs 2 --batch-size 20");
    INFO(two.output);
    CHECK(two.status == 0);
    CHECK(two.output.find("lr 0.001 (constant), L2Decay") != std::string::npos);
    CHECK(two.output.find(", lr 0.0001\n") == std::string::npos);
    // Explicit milestones, and per batch (3 batches an epoch: milestone round(4/5 * 6) = 5).
    const Run given = run("--data " + tmp.path.string() + " --model mlp --epochs 3 --batch-size 20 --lr-schedule multistep:1,2:0.5");
    CHECK(given.output.find("lr 0.001 (x0.5 from epoch 1, x0.5 from epoch 2)") != std::string::npos);
    CHECK(given.output.find(", lr 0.00025\n") != std::string::npos);
    const Run per_batch = run("--data " + tmp.path.string() + " --model mlp --epochs 2 --batch-size 20 --lr-schedule multistep --lr-step-per batch");
    INFO(per_batch.output);
    CHECK(per_batch.output.find("(multi-step decay per batch)") != std::string::npos);
    CHECK(per_batch.output.find("epoch 0: ") != std::string::npos);
    CHECK(per_batch.output.find(", lr 0.001\n") != std::string::npos);  // epoch 0: 3 batches at the course's rate
    const auto e1 = per_batch.output.find("epoch 1: train loss");
    REQUIRE(e1 != std::string::npos);
    CHECK(per_batch.output.find(", lr 0.0001\n", e1) != std::string::npos);  // batch 5 of 6 on
}

// ---------------------------------------------------------------------------------------------
// examples/fit_mnist.cpp: Model.fit in a page. It is built beside train_mnist (examples/); a
// targeted build of this test must build fit_mnist too (the test says so when it is missing).

namespace {
std::string fit_mnist_path() { return (fs::path(TRAIN_MNIST).parent_path() / "fit_mnist").string(); }
}  // namespace

TEST_CASE("fit_mnist fits with validation, evaluates and predicts test images: exit status and output") {
    const std::string program = fit_mnist_path();
    REQUIRE_MESSAGE(fs::exists(program), program << " is not built (cmake --build <dir> --target fit_mnist)");
    TempDir tmp;
    write_set(tmp.path, "train", 300);
    write_set(tmp.path, "t10k", 60);
    const Run r = run_program(program, tmp.path.string() + " 3");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const std::regex epoch_line(R"(epoch (\d): loss (\d+\.\d{4}), valid accuracy (\d\.\d{4})\n)");
    std::vector<double> valid_acc;
    for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), epoch_line); it != std::sregex_iterator(); ++it)
        valid_acc.push_back(std::stod((*it)[3]));
    REQUIRE(valid_acc.size() == 3);
    CHECK(valid_acc[2] >= 0.9);  // the bars are easy to learn
    std::smatch m;
    REQUIRE(std::regex_search(r.output, m, std::regex(R"(\ntest accuracy (\d\.\d{4})\n)")));
    CHECK(std::stod(m[1]) >= 0.9);
    const std::regex predicted(R"(test image (\d): predicted (\d) \(probability (0\.\d\d|1\.00)\), label (\d)\n)");
    std::size_t lines = 0, right = 0;
    for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), predicted); it != std::sregex_iterator(); ++it) {
        CHECK((*it)[1] == std::to_string(lines));
        ++lines;
        right += (*it)[2] == (*it)[4];
    }
    CHECK(lines == 5);
    CHECK(right >= 4);
    // A folder without the files: exit status 2 and the missing file named.
    const Run bad = run_program(program, (tmp.path / "nowhere").string());
    CHECK(bad.status == 2);
    CHECK(bad.output.find("fit_mnist: ") != std::string::npos);
    CHECK(bad.output.find("train-images-idx3-ubyte") != std::string::npos);
}
