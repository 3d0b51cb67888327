// The main of the GPU runtime tests (real launches): with no usable CUDA device it prints why and
// exits 77, which ctest reports as SKIPPED (SKIP_RETURN_CODE), never as passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>  // doctest::Context

#include <cstdio>  // std::printf

#include <oar/kernels/cuda/runtime.cuh>  // device_count, no_device_error

int main(int argc, char** argv) {
    try {
        const int n = oar::cuda_runtime::device_count();
        std::printf("oar: %d CUDA device(s); running the GPU tests on gpu:0\n", n);
    } catch (const oar::no_device_error& e) {
        std::printf("SKIPPED: %s\n", e.what());
        return 77;
    }
    doctest::Context context(argc, argv);
    return context.run();
}
