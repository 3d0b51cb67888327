// The data-parallel checks with a real `mpirun -np 2`: each test case starts a job (mpi_worker,
// train_mnist, or train_mnist through scripts/oar-launch), times it, and checks its exit status
// and output. Registered as one ctest entry per case (tests/dist/CMakeLists.txt).
#include <doctest/doctest.h>

#include <array>       // std::array: the read buffer
#include <chrono>      // std::chrono::steady_clock: how long a job took
#include <cstdint>     // std::uint32_t
#include <cstdio>      // popen, pclose, std::fgets
#include <filesystem>  // std::filesystem
#include <regex>       // std::regex: the result line
#include <sstream>     // std::istringstream: lines
#include <string>      // std::string
#include <sys/wait.h>  // WIFEXITED, WEXITSTATUS
#include <vector>      // std::vector

#include "support/files.hpp"      // oar_test::write_gzip
#include "support/idx_files.hpp"  // oar_test::idx_bytes
#include "support/temp_dir.hpp"   // oar_test::TempDir

namespace fs = std::filesystem;

namespace {

struct Job {
    int status = -1;      // the exit status, -1 if killed by a signal
    std::string output;   // what the command printed (stdout, plus stderr where redirected)
    double seconds = 0;
};

Job run(const std::string& cmd) {
    const auto t0 = std::chrono::steady_clock::now();
    Job j;
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf{};
    while (std::fgets(buf.data(), buf.size(), p)) j.output += buf.data();
    const int st = pclose(p);
    j.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    j.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE("$ ", cmd, "\n", j.output, "(exit status ", j.status, " after ", j.seconds, " s)");
    return j;
}

std::string mpirun(int np) { return std::string(OAR_MPIRUN) + " " + std::to_string(np) + " "; }

Job worker(const std::string& mode) { return run(mpirun(2) + OAR_MPI_WORKER + " " + mode + " 2>&1"); }

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

std::string last_line(const std::string& text) {
    std::istringstream in(text);
    std::string line, last;
    while (std::getline(in, line))
        if (!line.empty()) last = line;
    return last;
}

/// A learnable toy set in MNIST's layout (as tests/examples): digit d is a bright bar at column 2 + 2d.
void write_set(const fs::path& dir, const std::string& prefix, std::uint32_t n) {
    oar_test::bytes images, labels;
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t d = (i * 7) % 10;
        for (std::size_t y = 0; y < 28; ++y)
            for (std::size_t x = 0; x < 28; ++x)
                images.push_back(x == 2 + 2 * d || x == 3 + 2 * d ? 255 : static_cast<std::uint8_t>((x * y + i) % 17));
        labels.push_back(static_cast<std::uint8_t>(d));
    }
    oar_test::write_gzip(dir / (prefix + "-images-idx3-ubyte.gz"), oar_test::idx_bytes({n, 28, 28}, images));
    oar_test::write_gzip(dir / (prefix + "-labels-idx1-ubyte.gz"), oar_test::idx_bytes({n}, labels));
}

/// train/valid = 1,000 + 200 training images (the IDX loader splits the last off as valid), 200 test.
void write_mnist(const fs::path& dir) {
    write_set(dir, "train", 1200);
    write_set(dir, "t10k", 200);
}

const std::regex result_line(
    R"(^result: dataset=mnist model=mlp epochs=1 test_accuracy=(\d\.\d{4}) train_images_per_sec=\d+ seconds=\d+\.\d$)");

}  // namespace

TEST_CASE("dist [equivalence]: 20 steps of 2 ranks x batch 50 equal 1 process x batch 100, the ranks bitwise") {
    const Job j = worker("equivalence");
    CHECK(j.status == 0);
    CHECK(count(j.output, ": ok") == 3);  // SGD float, Adam double, Adam float on rank 0
    CHECK(count(j.output, "FAILED") == 0);
}

TEST_CASE("dist [sampler]: DistributedBatchSampler shards are disjoint and cover the dataset across real ranks") {
    const Job j = worker("sampler");
    CHECK(j.status == 0);
    CHECK(count(j.output, ": ok") == 4);
}

TEST_CASE("mpi [fault]: a rank killed by SIGKILL ends the job non-zero within 60 s, saying which rank died") {
    const Job j = worker("fault");
    CHECK(j.status != 0);
    CHECK(j.seconds < 60.0);
    CHECK(count(j.output, "rank 1: raising SIGKILL") == 1);
    CHECK(count(j.output, "process rank 1") == 1);       // Open MPI names the dead rank...
    CHECK(count(j.output, "exited on signal 9") == 1);   // ...and the signal
    CHECK(count(j.output, "the fault went unnoticed") == 0);
}

TEST_CASE("dist [mismatch]: ranks whose models differ are refused at start-up, naming both") {
    const Job j = worker("mismatch");
    CHECK(j.status != 0);
    CHECK(j.seconds < 60.0);
    const std::string msg =
        "the ranks built different models: rank 1 has 20680 parameters in [1.weight [784, 26], 1.bias [26], "
        "3.weight [26, 10], 3.bias [10]], rank 0 has 19885 in [1.weight [784, 25], 1.bias [25], 3.weight [25, 10], "
        "3.bias [10]]";
    CHECK(count(j.output, "rank 0 refused: oar: DataParallel: " + msg) == 1);
    CHECK(count(j.output, "rank 1 refused: oar: DataParallel: " + msg) == 1);
}

TEST_CASE("dist [train_mnist]: train_mnist under mpirun -np 2 trains data-parallel, rank 0 alone printing") {
    if (std::string(TRAIN_MNIST).empty()) return;
    oar_test::TempDir tmp;
    write_mnist(tmp.path);
    const std::string args = " --data " + tmp.path.string() + " --model mlp --epochs 1 --batch-size 50 --log-every 5";
    const Job j = run(mpirun(2) + TRAIN_MNIST + args + " 2>" + (tmp.path / "stderr").string());
    CHECK(j.status == 0);
    CHECK(count(j.output, "data parallel: 2 ranks, 25 images per rank per step") == 1);
    CHECK(count(j.output, "result: ") == 1);
    std::smatch m;
    const std::string last = last_line(j.output);
    REQUIRE(std::regex_match(last, m, result_line));
    CHECK(std::stod(m[1]) >= 0.9);
    CHECK(count(j.output, "epoch: 0, batch: 0,") == 1);  // one rank's progress lines, not two

    // An odd global batch cannot be split in two: refused on every rank before training.
    const Job odd = run(mpirun(2) + TRAIN_MNIST + " --data " + tmp.path.string() + " --batch-size 51 2>&1");
    CHECK(odd.status == 2);
    CHECK(count(odd.output, "--batch-size 51 cannot be split evenly across 2 ranks") >= 1);
}

TEST_CASE("dist [launcher]: oar-launch --nproc_per_node 2 --log_dir runs train_mnist and keeps a log per rank") {
    if (std::string(TRAIN_MNIST).empty()) return;
    oar_test::TempDir tmp;
    write_mnist(tmp.path);
    const fs::path logs = tmp.path / "logs";
    const Job j = run(std::string(OAR_LAUNCH) + " --nproc_per_node 2 --log_dir " + logs.string() + " " + TRAIN_MNIST +
                      " --data " + tmp.path.string() + " --model mlp --epochs 1 --batch-size 50 --log-every 5 2>&1");
    CHECK(j.status == 0);
    std::smatch m;
    const std::string last = last_line(j.output);
    CHECK(std::regex_match(last, m, result_line));
    for (int r = 0; r < 2; ++r) {
        const fs::path log = logs / ("workerlog." + std::to_string(r));
        CHECK_MESSAGE(fs::exists(log), log.string());
    }
    // A bad flag of the launcher itself is named.
    const Job bad = run(std::string(OAR_LAUNCH) + " --nproc_per_node x true 2>&1");
    CHECK(bad.status == 2);
    CHECK(count(bad.output, "--nproc_per_node needs a positive integer") == 1);
}
