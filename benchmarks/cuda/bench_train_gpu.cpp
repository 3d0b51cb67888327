// Training throughput of the course CNN on the GPU (img/s at batch 100 and 1024), through the
// same C++ entry point the main job calls (examples/app/gpu_train.hpp; this file is compiled by g++ and
// links the nvcc-built oar_gpu_train). Synthetic data: the speed does not depend on pixel values.
// Run: build/release/benchmarks/cuda/bench_train_gpu [steps=200] [--precision fp32|bf16]
//   (exits 77 without a GPU, 2 on a bad argument); bf16: Network<CNN, Image, cuda, bf16_mixed>.
// PyTorch side by side: benchmarks/cuda/torch_cnn.py (same model, batch sizes and steps).
#include <oar/core/error.hpp>  // oar::error
#include <oar/kernels/cuda/device.hpp> // no_device_error

#include "app/gpu_train.hpp"  // oar::gpu::train_course_cnn (examples/app/, through oar_app)

#include <cstdint>  // std::int64_t
#include <cstdio>   // std::printf
#include <cstdlib>  // std::strtoul
#include <string>   // std::string
#include <vector>   // std::vector

int main(int argc, char** argv) {
    std::size_t steps = 200;
    std::string precision = "fp32";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--precision" && i + 1 < argc) {
            precision = argv[++i];
        } else {
            char* end = nullptr;
            const unsigned long v = std::strtoul(a.c_str(), &end, 10);
            if (a.empty() || *end != '\0' || v == 0) {
                std::fprintf(stderr, "bench_train_gpu: unexpected argument '%s' (usage: bench_train_gpu [steps] "
                                     "[--precision fp32|bf16])\n", a.c_str());
                return 2;
            }
            steps = static_cast<std::size_t>(v);
        }
    }
    if (precision != "fp32" && precision != "bf16") {
        std::fprintf(stderr, "bench_train_gpu: --precision must be fp32 or bf16, got '%s'\n", precision.c_str());
        return 2;
    }
    const std::size_t count = 60000;
    std::vector<float> images(count * 784);
    std::vector<std::int64_t> labels(count);
    std::uint64_t state = 1;
    for (auto& v : images) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        v = static_cast<float>(state >> 40) / 16777216.0f - 0.5f;
    }
    for (std::size_t i = 0; i < count; ++i) labels[i] = static_cast<std::int64_t>(i % 10);
    try {
        for (std::size_t batch : {std::size_t{100}, std::size_t{1024}}) {
            oar::gpu::TrainOptions o;
            o.batch_size = batch;
            o.log = false;
            o.precision = precision;
            o.max_steps = 20;  // warm-up: cuBLAS heuristics, allocations, clocks
            (void)oar::gpu::train_course_cnn({images.data(), labels.data(), count}, nullptr, o);
            o.max_steps = steps;
            o.epochs = 1000;
            const auto r = oar::gpu::train_course_cnn({images.data(), labels.data(), count}, nullptr, o);
            std::printf("{\"impl\": \"oar\", \"device\": \"%s\", \"precision\": \"%s\", \"batch\": %zu, "
                        "\"steps\": %zu, \"seconds\": %.4f, \"train_images_per_sec\": %.0f}\n",
                        r.device_name.c_str(), precision.c_str(), batch, r.steps, r.train_seconds,
                        r.train_images_per_sec);
        }
    } catch (const oar::no_device_error& e) {
        std::printf("SKIPPED: %s\n", e.what());
        return 77;
    } catch (const oar::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
