// train_mnist --device gpu[:N] where that GPU does not exist: the real program says "no CUDA
// device ..." and exits with status 2 before reading any data. Runs with or without a GPU (never
// skipped): gpu:4096 exists nowhere; plain `gpu` is checked on machines without a device (this
// one), and trains on machines with one (cuda.gpu_train_mnist covers that). On a machine without a
// device, the data-parallel GPU run (mpirun -np 2, oar-launch --gpus 0,1) reaches the device check
// on every rank: each rank names itself and the job exits 2.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <string>  // std::string

#include <oar/kernels/cuda/runtime.cuh>  // device_available

#include "support/process.hpp"    // oar_test::run_command
#include "support/skip.hpp"       // oar_test::skip: no MPI, or a GPU here
#include "support/temp_dir.hpp"   // oar_test::TempDir
#include "support/toy_mnist.hpp"  // oar_test::write_toy_mnist_set

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("train_mnist --device gpu without that GPU prints 'no CUDA device' and exits 2 before reading data") {
    oar_test::TempDir tmp;
    oar_test::write_toy_mnist_set(tmp.path, "train", 40);
    oar_test::write_toy_mnist_set(tmp.path, "t10k", 20);
    const std::string base = std::string(TRAIN_MNIST) + " --data " + tmp.path.string() + " --epochs 1";

    const oar_test::Run far = oar_test::run_command(base + " --device gpu:4096 2>&1");
    INFO(far.output);
    CHECK(far.status == 2);
    CHECK(contains(far.output, "train_mnist: oar: no CUDA device"));
    CHECK_FALSE(contains(far.output, "dataset:"));  // refused before the data was read

    if (!oar::cuda_runtime::device_available()) {
        const oar_test::Run plain = oar_test::run_command(base + " --device gpu 2>&1");
        INFO(plain.output);
        CHECK(plain.status == 2);
        CHECK(contains(plain.output, "train_mnist: oar: no CUDA device: cudaGetDeviceCount"));
        CHECK_FALSE(contains(plain.output, "dataset:"));
        CHECK_FALSE(contains(plain.output, "result:"));
    }
}

TEST_CASE("mpirun -np 2 / oar-launch --gpus 0,1 train_mnist --device gpu without GPUs: every rank says so, status 2") {
#ifndef OAR_MPIEXEC
    oar_test::skip("this build found no MPI (mpirun), so the data-parallel GPU run cannot be launched");
#else
    if (oar::cuda_runtime::device_available()) {
        oar_test::skip("this machine has a GPU, so the no-GPU refusal cannot be seen; scripts/gpu_check.sh runs the data-parallel GPU job");
        return;
    }
    oar_test::TempDir tmp;
    oar_test::write_toy_mnist_set(tmp.path, "train", 40);
    oar_test::write_toy_mnist_set(tmp.path, "t10k", 20);
    const std::string args = std::string(TRAIN_MNIST) + " --data " + tmp.path.string() + " --epochs 1 --device gpu 2>&1";
    for (const std::string& launcher : {std::string(OAR_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 2 ",
                                        std::string(OAR_LAUNCH) + " --gpus 0,1 "}) {
        const oar_test::Run r = oar_test::run_command(launcher + args);
        INFO(launcher << "\n" << r.output);
        CHECK(r.status == 2);
        CHECK(contains(r.output, "train_mnist: rank 0: oar: no CUDA device"));
        CHECK(contains(r.output, "train_mnist: rank 1: oar: no CUDA device"));
        CHECK_FALSE(contains(r.output, "dataset:"));
        CHECK_FALSE(contains(r.output, "not supported"));
    }
#endif
}
