// The data-parallel checks with a real `mpirun -np 2`: each test case starts a job (mpi_worker,
// train_mnist or train_cifar10, or those through scripts/oar-launch), times it, and checks its exit status
// and output. Registered as one ctest entry per case (tests/dist/CMakeLists.txt).
#include <doctest/doctest.h>

#include <cstdint>     // std::uint32_t
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ifstream: /proc/self/status
#include <map>         // std::map: CPUs by rank
#include <thread>      // std::thread::hardware_concurrency: the binding check
#include <regex>       // std::regex: the result line
#include <sstream>     // std::istringstream: lines
#include <string>      // std::string
#include <vector>      // std::vector

#include "support/process.hpp"    // oar_test::run_command: mpirun as a real process
#include "support/skip.hpp"       // oar_test::skip: train_mnist not built
#include "support/temp_dir.hpp"   // oar_test::TempDir
#include "support/toy_cifar.hpp"  // oar_test::write_toy_cifar: learnable CIFAR-10 files
#include "support/toy_mnist.hpp"  // oar_test::write_toy_mnist_set: learnable IDX files

namespace fs = std::filesystem;

namespace {

using Job = oar_test::Run;

Job run(const std::string& cmd) {
    const Job j = oar_test::run_command(cmd);
    MESSAGE("$ ", cmd, "\n", j.output, "(exit status ", j.status, " after ", j.seconds, " s)");
    return j;
}

std::string mpirun(int np) { return std::string(OAR_MPIRUN) + " " + std::to_string(np) + " "; }

Job worker(const std::string& mode) { return run(mpirun(2) + OAR_MPI_WORKER + " " + mode + " 2>&1"); }

/// A parameter-server job of the worker: S servers and W trainers, the roles in the environment
/// as oar-launch --server_num S --worker_num W sets them.
Job ps_worker(int servers, int trainers, const std::string& mode, int np = 0) {
    return run(mpirun(np ? np : servers + trainers) + "-x OAR_SERVER_NUM=" + std::to_string(servers) +
               " -x OAR_WORKER_NUM=" + std::to_string(trainers) + " " + OAR_MPI_WORKER + " " + mode + " 2>&1");
}

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

void write_set(const fs::path& dir, const std::string& prefix, std::uint32_t n) {
    oar_test::write_toy_mnist_set(dir, prefix, n);
}

/// train/valid = 1,000 + 200 training images (the IDX loader splits the last off as valid), 200 test.
void write_mnist(const fs::path& dir) {
    write_set(dir, "train", 1200);
    write_set(dir, "t10k", 200);
}

/// The CPUs this process may run on ("Cpus_allowed_list:\t0-1" of /proc/self/status).
std::string own_cpus() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("Cpus_allowed_list:", 0) == 0) return line.substr(line.find_first_not_of(" \t", 18));
    return "";
}

/// "rank R: LIST" lines of a job, by rank.
std::map<int, std::string> cpus_by_rank(const std::string& output) {
    std::map<int, std::string> out;
    std::istringstream in(output);
    std::string line;
    const std::regex re(R"(^rank (\d+)[^:]*: (\S+)$)");
    std::smatch m;
    while (std::getline(in, line))
        if (std::regex_match(line, m, re)) out[std::stoi(m[1])] = m[2];
    return out;
}

/// The "test: loss L accuracy A (N images)" line of a job ("" without one): loss and accuracy to
/// 4 digits, what two runs that computed the same weights print alike.
std::string test_line(const std::string& output) {
    std::smatch m;
    return std::regex_search(output, m, std::regex(R"(test: loss \d+\.\d{4} accuracy \d\.\d{4})")) ? std::string(m[0])
                                                                                                 : std::string();
}

/// The test_accuracy of a job's result line ("" without one).
std::string accuracy_of(const std::string& output) {
    std::smatch m;
    const std::string last = last_line(output);
    return std::regex_search(last, m, std::regex(R"(test_accuracy=(\d\.\d{4}))")) ? std::string(m[1]) : std::string();
}

const std::regex result_line(
    R"(^result: dataset=mnist model=mlp epochs=1 test_accuracy=(\d\.\d{4}) train_images_per_sec=\d+ seconds=\d+\.\d$)");

}  // namespace

TEST_CASE("dist [equivalence]: 20 steps of 2 ranks x batch 50 equal 1 process x batch 100, the ranks bitwise") {
    const Job j = worker("equivalence");
    CHECK(j.status == 0);
    CHECK(count(j.output, ": ok") == 3);  // SGD float, Adam double, Adam float on rank 0
    CHECK(count(j.output, "FAILED") == 0);
    // Each line says what it compared: the overlapped allreduce gave the blocking one's bits, and
    // the 2 ranks gave the bits of 1 process summing the two halves' gradients by hand.
    CHECK(count(j.output, "overlapped == blocking bitwise: yes") == 3);
    CHECK(count(j.output, "== 1 process summing the 2 halves' gradients, bitwise: yes") == 3);
    CHECK(count(j.output, " 0 buckets overlapped backward") == 0);
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
    if (std::string(TRAIN_MNIST).empty()) {
        oar_test::skip("the examples are not built (OAR_BUILD_EXAMPLES=OFF), so there is no train_mnist to run");
        return;
    }
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
    if (std::string(TRAIN_MNIST).empty()) {
        oar_test::skip("the examples are not built (OAR_BUILD_EXAMPLES=OFF), so there is no train_mnist to run");
        return;
    }
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

TEST_CASE("ps [ps_sync]: sync parameter server, 1 server: equal to the collective run; checkpoint and resume") {
    oar_test::TempDir tmp;
    const Job j = ps_worker(1, 2, "ps_sync " + tmp.path.string());
    CHECK(j.status == 0);
    CHECK(count(j.output, "FAILED") == 0);
    // SGD and Adam: the slices tile the buffer and the trainers equal collective data parallel.
    CHECK(count(j.output, "1 server slices tile the buffer, sizes within 16 values: ok") == 2);
    CHECK(count(j.output, "trainer 0: 1 server(s), 2 trainers, 20 steps: trainers bitwise equal: yes; vs collective") == 2);
    CHECK(count(j.output, "(bound 1e-6): ok") == 2);
    // ... with per-parameter regularizers (set_regularizer), which the server applies as local training does.
    CHECK(count(j.output, "both with L2Decay 0.001, 4.weight's own 0.1 and 6.bias's own 0: bitwise") == 2);
    // Adam: the PS checkpoint equals the collective one and loads in one process; resume gives the bits.
    CHECK(count(j.output, "checkpoint after 10 steps loads into a single-process network") == 1);
    CHECK(count(j.output, "give the uninterrupted run's bits: ok") == 1);
    CHECK(fs::exists(tmp.path / "ps.safetensors"));
    CHECK(fs::exists(tmp.path / "ps.state.safetensors"));
}

TEST_CASE("ps [ps_sharding]: 2 servers each own a contiguous half of the buffer and the result is the collective one") {
    oar_test::TempDir tmp;
    const Job j = ps_worker(2, 2, "ps_sync " + tmp.path.string());
    CHECK(j.status == 0);
    CHECK(count(j.output, "FAILED") == 0);
    CHECK(count(j.output, "server 0 holds values [0, ") == 2);
    CHECK(count(j.output, "server 1 holds values [") == 2);
    CHECK(count(j.output, "2 server slices tile the buffer, sizes within 16 values: ok") == 2);
    CHECK(count(j.output, "trainer 0: 2 server(s), 2 trainers, 20 steps: trainers bitwise equal: yes") == 2);
    CHECK(count(j.output, "(bound 1e-6): ok") == 2);
    // 4.weight, with its own L2Decay, is cut by the slice boundary: each server decays its part.
    CHECK(count(j.output, "both with L2Decay 0.001, 4.weight's own 0.1 and 6.bias's own 0: bitwise") == 2);
    CHECK(count(j.output, "give the uninterrupted run's bits: ok") == 1);
}

TEST_CASE("ps [ps_async]: async parameter server (max_staleness 1) converges") {
    const Job j = ps_worker(1, 2, "ps_async");
    CHECK(j.status == 0);
    CHECK(count(j.output, "async: 2 trainers x 300 pushes, max_staleness 1") == 1);
    CHECK(count(j.output, "on the 200 samples: ok") == 1);
    CHECK(count(j.output, "async server 0: served until every trainer stopped") == 1);
}

TEST_CASE("ps [ps_fault]: a trainer killed by SIGKILL ends the parameter-server job within 60 s, naming its rank") {
    const Job j = ps_worker(1, 2, "ps_fault");
    CHECK(j.status != 0);
    CHECK(j.seconds < 60.0);
    CHECK(count(j.output, "trainer 1 (rank 1): raising SIGKILL") == 1);
    CHECK(count(j.output, "process rank 1") == 1);
    CHECK(count(j.output, "exited on signal 9") == 1);
    CHECK(count(j.output, "the fault went unnoticed") == 0);
}

TEST_CASE("ps [ps_fault]: a trainer that stops sending without dying ends the job by the server's timeout, named") {
    const Job j = ps_worker(1, 2, "ps_silent");
    CHECK(j.status != 0);
    CHECK(j.seconds < 30.0);  // the server's 2 s, not the trainers' 30 s nor trainer 1's 40 s sleep
    CHECK(count(j.output, "trainer 1 (rank 1): silent from step 3") == 1);
    CHECK(count(j.output, "parameter server 0 (rank 2): waited 2 s (OAR_PS_TIMEOUT) for trainer rank(s) 1, which "
                          "sent nothing: stopping the job") == 1);
    CHECK(count(j.output, "went unnoticed") == 0);
}

TEST_CASE("ps [ps_roles]: a role configuration that does not match the job is refused, naming the variable") {
    const Job j = ps_worker(2, 2, "ps_sync", 3);
    CHECK(j.status != 0);
    CHECK(j.seconds < 60.0);
    // Every rank refuses; mpirun may end the others before they print, once one has exited.
    CHECK(count(j.output, "OAR_SERVER_NUM=2 + OAR_WORKER_NUM=2 = 4 processes, but the launcher started 3") >= 1);
    const Job bad = run(mpirun(3) + "-x OAR_SERVER_NUM=1 -x OAR_WORKER_NUM=two " + OAR_MPI_WORKER + " ps_sync 2>&1");
    CHECK(bad.status != 0);
    CHECK(count(bad.output, "OAR_WORKER_NUM='two' is not a positive number of processes") >= 1);
}

TEST_CASE("ps [ps_launch]: train_mnist under oar-launch --server_num 1 --worker_num 2, sync and --a-sync") {
    if (std::string(TRAIN_MNIST).empty()) {
        oar_test::skip("the examples are not built (OAR_BUILD_EXAMPLES=OFF), so there is no train_mnist to run");
        return;
    }
    oar_test::TempDir tmp;
    write_mnist(tmp.path);
    const std::string args = " --data " + tmp.path.string() + " --model mlp --epochs 1 --batch-size 50 --log-every 5";
    // Async gets 3 epochs (the later --epochs wins): its 20 steps of one epoch on these 1,000
    // images land anywhere from 0.9 up, the stale gradients and the order of pushes deciding.
    for (const std::string mode : {"", " --a-sync --epochs 3"}) {
        const Job j = run(std::string(OAR_LAUNCH) + " --server_num 1 --worker_num 2 " + TRAIN_MNIST + args + mode + " 2>&1");
        CHECK(j.status == 0);
        CHECK(count(j.output, std::string("parameter server: 1 server(s), 2 trainers, 25 images per trainer per step, ") +
                                  (mode.empty() ? "sync" : "async, max_staleness 1")) == 1);
        if (mode.empty()) CHECK(std::regex_match(last_line(j.output), result_line));
        REQUIRE(!accuracy_of(j.output).empty());
        CHECK(std::stod(accuracy_of(j.output)) >= 0.9);
        CHECK(count(j.output, "epoch: 0, batch: 0,") == 1);  // trainer 0 alone prints
    }
    // --a-sync without servers is refused on every rank; so are bad launcher counts.
    const Job collective = run(mpirun(2) + TRAIN_MNIST + args + " --a-sync 2>&1");
    CHECK(collective.status == 2);
    CHECK(count(collective.output, "--a-sync is the parameter server's asynchronous mode") >= 1);
    const Job bad = run(std::string(OAR_LAUNCH) + " --server_num 0 --worker_num 2 true 2>&1");
    CHECK(bad.status == 2);
    CHECK(count(bad.output, "--server_num needs a positive integer, got '0'") == 1);
}

TEST_CASE("dist [binding]: oar-launch gives each rank its own cores when they suffice, else binds nothing") {
    const std::string all = own_cpus();
    REQUIRE(!all.empty());
    const unsigned cores = std::thread::hardware_concurrency();
    const std::string print = " sh -c 'echo \"rank $OMPI_COMM_WORLD_RANK: $(grep Cpus_allowed_list /proc/self/status | cut -f2)\"' 2>&1";
    const Job one = run(std::string(OAR_LAUNCH) + " --nproc_per_node 1" + print);
    CHECK(cpus_by_rank(one.output)[0] == all);  // one rank: every core
    if (cores >= 2) {
        const auto two = cpus_by_rank(run(std::string(OAR_LAUNCH) + " --nproc_per_node 2" + print).output);
        REQUIRE(two.size() == 2);
        CHECK(two.at(0) != two.at(1));  // disjoint shares, not both on core 0
        CHECK(two.at(0) != all);
    }
    const auto over = cpus_by_rank(
        run(std::string(OAR_LAUNCH) + " --nproc_per_node " + std::to_string(cores + 1) + print).output);
    REQUIRE(over.size() == cores + 1);
    for (const auto& [rank, cpus] : over) CHECK_MESSAGE(cpus == all, "rank ", rank);  // more ranks than cores: none bound
}

TEST_CASE("dist [two_hosts]: collective and parameter-server jobs across two network namespaces over TCP") {
    if (std::string(TRAIN_MNIST).empty()) {
        oar_test::skip("the examples are not built (OAR_BUILD_EXAMPLES=OFF), so there is no train_mnist to run");
        return;
    }
    const std::string hosts = std::string("sh ") + OAR_SOURCE_DIR + "/tests/dist/netns_hosts.sh ";
    const Job probe = run(hosts + "'true' 2>&1");
    if (probe.status == 77) {
        const auto at = probe.output.find("SKIPPED: ");
        oar_test::skip(at == std::string::npos ? probe.output : probe.output.substr(at + 9));
        return;
    }
    REQUIRE(probe.status == 0);
    oar_test::TempDir tmp;
    write_mnist(tmp.path);
    const std::string launch = std::string(OAR_LAUNCH) + " --ips $OAR_NS_IPS --mpirun-arg \"$OAR_NS_MPIRUN\" ";
    const std::string args = std::string(TRAIN_MNIST) + " --data " + tmp.path.string() +
                             " --model mlp --epochs 1 --batch-size 50 --log-every 0";
    // One rank on each host, then the same job on this host alone: the same test loss and accuracy.
    const Job across = run(hosts + "'" + launch + "--mpirun-arg --report-bindings " + args + "' 2>&1");
    CHECK(across.status == 0);
    const Job here = run(std::string(OAR_LAUNCH) + " --nproc_per_node 2 " + args + " 2>&1");
    CHECK(here.status == 0);
    CHECK(!test_line(across.output).empty());
    CHECK(test_line(across.output) == test_line(here.output));
    CHECK(count(across.output, "is not bound") == 2);  // --ips: no rank pinned (both hosts share these cores)
    // Parameter server: trainers on host A, the server on host B. Sync equals the collective run.
    const Job sync = run(hosts + "'" + launch + "--server_num 1 --worker_num 2 " + args + "' 2>&1");
    CHECK(sync.status == 0);
    CHECK(test_line(sync.output) == test_line(here.output));
    const Job async = run(hosts + "'" + launch + "--server_num 1 --worker_num 2 " + args + " --a-sync --epochs 3' 2>&1");
    CHECK(async.status == 0);
    REQUIRE(!accuracy_of(async.output).empty());
    CHECK(std::stod(accuracy_of(async.output)) >= 0.9);
    // The protocol's bitwise checks, across the hosts.
    const Job bits = run(hosts + "'" + launch + "--server_num 1 --worker_num 2 " + OAR_MPI_WORKER + " ps_sync " +
                         tmp.path.string() + "' 2>&1");
    CHECK(bits.status == 0);
    CHECK(count(bits.output, "FAILED") == 0);
    CHECK(count(bits.output, "6.bias's own 0: bitwise yes") == 2);  // SGD and Adam, per-parameter L2 included
    CHECK(count(bits.output, "give the uninterrupted run's bits: ok") == 1);
}

TEST_CASE("dist [train_cifar10]: the fleet chapter's train_cifar10 learns under mpirun -np 2 and oar-launch") {
    if (std::string(TRAIN_CIFAR10).empty()) {
        oar_test::skip("the examples are not built (OAR_BUILD_EXAMPLES=OFF), so there is no train_cifar10 to run");
        return;
    }
    oar_test::TempDir tmp;
    const fs::path data = tmp.path / "cifar-10-batches-bin";
    oar_test::write_toy_cifar(data, 100, 200);  // 500 training images, 200 test
    const std::string args = " --data " + data.string() + " --epochs 3 --log-every 3";
    const std::regex result(
        R"(^result: dataset=cifar10 processes=2 epochs=3 val_accuracy=(\d\.\d{4}) val_loss=\d+\.\d{4} seconds=\d+\.\d$)");

    const Job j = run(mpirun(2) + TRAIN_CIFAR10 + args + " 2>" + (tmp.path / "stderr").string());
    CHECK(j.status == 0);
    // Each process 250 images, 7 whole batches of 32: the loss lines at batches 0, 3 and 6.
    CHECK(count(j.output, "fleet: collective, 2 process(es); train 500 images, test 200; batch 32 per process") == 1);
    CHECK(count(j.output, "epoch: 0, batch_id: 0, loss is: [") == 1);  // rank 0 alone prints
    CHECK(count(j.output, "epoch: 2, batch_id: 6, loss is: [") == 1);
    CHECK(count(j.output, "[validation] accuracy/loss: ") == 3);
    std::smatch m;
    const std::string last = last_line(j.output);
    REQUIRE(std::regex_match(last, m, result));
    CHECK(std::stod(m[1]) >= 0.9);  // ten classes: chance is 0.1

    // The same through oar-launch, each rank keeping its log.
    const fs::path logs = tmp.path / "logs";
    const Job l = run(std::string(OAR_LAUNCH) + " --nproc_per_node 2 --log_dir " + logs.string() + " " + TRAIN_CIFAR10 +
                      args + " 2>&1");
    CHECK(l.status == 0);
    const std::string launched = last_line(l.output);
    REQUIRE(std::regex_match(launched, m, result));
    CHECK(std::stod(m[1]) >= 0.9);
    for (int r = 0; r < 2; ++r) {
        const fs::path log = logs / ("workerlog." + std::to_string(r));
        REQUIRE_MESSAGE(fs::exists(log), log.string());
        CHECK(count(oar_test::read_text(log), "[validation] accuracy/loss: ") == 3);
    }
}
