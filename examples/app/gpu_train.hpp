// The GPU training entry point as a plain C++ interface: a .cpp translation unit (the main job,
// examples/train_mnist.cpp, which includes simdjson and so must not be compiled by nvcc) parses
// its data and calls train_course_cnn; the implementation is examples/gpu_train.cu, compiled by
// nvcc into the `oar_gpu_train` library (link it when the target exists, i.e. nvcc was found).
// Plain C++: nothing here needs the CUDA toolkit. Application code (examples/app/, not installed).
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t, std::uint64_t
#include <string>   // std::string
#include <vector>   // std::vector

namespace oar::gpu {

/// Samples in host memory: images (count, 1, 28, 28) already normalised as the CPU path feeds
/// them, labels (count) in [0, 10).
struct Samples {
    const float* images = nullptr;
    const std::int64_t* labels = nullptr;
    std::size_t count = 0;
};

struct TrainOptions {
    std::string device = "gpu:0";  ///< "gpu" or "gpu:N" (parse errors are oar::usage_error)
    std::size_t batch_size = 100;
    std::size_t epochs = 1;
    float learning_rate = 0.001f;  ///< Adam, Paddle's defaults otherwise
    std::uint64_t seed = 0;        ///< weights as Network<CNN, Image, cpu>(seed)
    bool shuffle = true;           ///< a seeded shuffle per epoch
    std::size_t max_steps = 0;     ///< stop after this many steps (0: all epochs), for benchmarks
    bool log = true;               ///< one line per epoch on stdout
    /// "fp32" or "bf16": Network<CNN, Image, cuda, bf16_mixed> (core/precision.hpp: cuBLAS bf16
    /// GEMMs with fp32 compute, fp32 master weights); anything else is an oar::usage_error.
    std::string precision = "fp32";
};

struct EpochResult {
    double mean_loss = 0;         ///< over the epoch's batches
    double eval_accuracy = -1;    ///< on the eval samples, -1 without
};

struct TrainResult {
    std::vector<EpochResult> epochs;
    double train_seconds = 0;           ///< training steps only (no eval), GPU work included
    double train_images_per_sec = 0;
    std::size_t steps = 0;
    std::string device_name;            ///< cudaDeviceProp::name
    std::vector<float> parameters;      ///< the trained flat parameter buffer (CPU layout)
};

/// Trains the course CNN (oar/models/course.hpp, oar::course::CNN) with Adam and cross-entropy on the GPU,
/// under the precision policy options.precision names.
/// Throws oar::no_device_error without a usable GPU, oar::usage_error for a bad device string or
/// precision, oar::value_error / shape_error for bad samples.
TrainResult train_course_cnn(const Samples& train, const Samples* eval, const TrainOptions& options);

}  // namespace oar::gpu
