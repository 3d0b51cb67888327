// train_cifar10 (examples/train_cifar10.cpp, the course's fleet chapter) run for real on a small
// generated CIFAR-10 (tests/support/toy_cifar.hpp: classes a conv net can learn): from the
// cifar-10-batches-bin files and from a .tar.gz of them, the chapter's lines and histories, the
// validation accuracy learned; bad flags and data are refused with status 2. The mpirun -np 2
// and oar-launch runs are tests/dist/mpi_driver.cpp's [train_cifar10] check.
#include <doctest/doctest.h>

#include <filesystem>  // std::filesystem
#include <regex>       // std::regex: the chapter's lines
#include <sstream>     // std::istringstream
#include <string>      // std::string

#include "support/process.hpp"    // run_command
#include "support/temp_dir.hpp"   // TempDir
#include "support/toy_cifar.hpp"  // write_toy_cifar

namespace {

namespace fs = std::filesystem;

oar_test::Run run_cifar(const std::string& args) {
    const std::string cmd = std::string(TRAIN_CIFAR10) + " " + args + " 2>&1";
    const oar_test::Run r = oar_test::run_command(cmd);
    MESSAGE("$ ", cmd, "\n", r.output, "(exit status ", r.status, " after ", r.seconds, " s)");
    return r;
}

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

TEST_CASE("train_cifar10 learns generated CIFAR-10 files, printing the chapter's lines and histories") {
    oar_test::TempDir tmp;
    const fs::path data = tmp.path / "cifar-10-batches-bin";
    oar_test::write_toy_cifar(data, 100, 200);  // 500 training images, 200 test
    const oar_test::Run r = run_cifar("--data " + data.string() + " --epochs 3 --log-every 5 --seed 1");
    REQUIRE(r.status == 0);
    CHECK(count(r.output, "fleet: collective, 1 process(es); train 500 images, test 200; batch 32 per process") == 1);
    // 500 / 32 = 15 whole batches (drop_last): lines at batches 0, 5 and 10 of each epoch.
    CHECK(count(r.output, "epoch: 0, batch_id: 0, loss is: [") == 1);
    CHECK(count(r.output, "epoch: 2, batch_id: 10, loss is: [") == 1);
    CHECK(count(r.output, "batch_id: 15,") == 0);
    const std::regex validation(R"(^\[validation\] accuracy/loss: (\d\.\d{4})/(\d+\.\d{4})$)");
    std::istringstream in(r.output);
    std::vector<double> acc, loss;
    for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (std::regex_match(line, m, validation)) acc.push_back(std::stod(m[1])), loss.push_back(std::stod(m[2]));
    }
    REQUIRE(acc.size() == 3);
    CHECK(acc.back() >= 0.9);            // ten classes: chance is 0.1
    CHECK(loss.back() < loss.front());   // and the loss fell
    CHECK(count(r.output, "val_acc_history: [") == 1);
    CHECK(count(r.output, "val_loss_history: [") == 1);
    const std::regex result(R"(result: dataset=cifar10 processes=1 epochs=3 val_accuracy=(\d\.\d{4}) val_loss=\d+\.\d{4} seconds=\d+\.\d)");
    std::smatch m;
    REQUIRE(std::regex_search(r.output, m, result));
    CHECK(std::stod(m[1]) == doctest::Approx(acc.back()));

    // The same files as a .tar.gz (what the CIFAR-10 site ships) give the same run, bit for bit.
    const fs::path archive = tmp.path / "cifar-10-binary.tar.gz";
    REQUIRE(oar_test::run_command("tar -czf " + archive.string() + " -C " + tmp.path.string() + " cifar-10-batches-bin").status == 0);
    const oar_test::Run t = run_cifar("--data " + archive.string() + " --epochs 3 --log-every 5 --seed 1");
    REQUIRE(t.status == 0);
    auto validation_lines = [](const std::string& out) {
        std::string v;
        std::istringstream s(out);
        for (std::string line; std::getline(s, line);)
            if (line.rfind("[validation]", 0) == 0 || line.rfind("epoch: ", 0) == 0) v += line + "\n";
        return v;
    };
    CHECK(validation_lines(t.output) == validation_lines(r.output));
}

TEST_CASE("train_cifar10 refuses bad flags and data with status 2, naming them") {
    oar_test::TempDir tmp;
    CHECK(run_cifar("--help").status == 0);
    const oar_test::Run flag = run_cifar("--data " + tmp.path.string() + " --epochs 0");
    CHECK(flag.status == 2);
    CHECK(count(flag.output, "--epochs needs an integer >= 1, got '0'") == 1);
    const oar_test::Run unknown = run_cifar("--data " + tmp.path.string() + " --optimizer sgd");
    CHECK(unknown.status == 2);
    CHECK(count(unknown.output, "unknown flag '--optimizer'") == 1);
    const oar_test::Run empty = run_cifar("--data " + tmp.path.string());
    CHECK(empty.status == 2);
    CHECK(count(empty.output, tmp.path.string() + ": no CIFAR-10 batch files") == 1);
    // Too few images for one whole batch per process.
    const fs::path tiny = tmp.path / "tiny";
    oar_test::write_toy_cifar(tiny, 4, 10);
    const oar_test::Run few = run_cifar("--data " + tiny.string());
    CHECK(few.status == 2);
    CHECK(count(few.output, "20 training and 10 test images give no whole batch of 32") == 1);
}
