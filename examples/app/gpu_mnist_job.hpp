// train_mnist's `--device gpu[:N]` as a plain C++ interface. The main job (examples/train_mnist.cpp)
// is compiled by g++ (it includes simdjson), so its GPU run lives in an nvcc-compiled translation
// unit, examples/train_mnist_gpu.cu (library `oar_train_mnist_gpu`, built when nvcc is found): the
// same oar::Model fit / evaluate, with Network<..., oar::cuda> and the same callbacks and lines.
// Plain C++: nothing here needs the CUDA toolkit. Application code (examples/app/, not installed).
#pragma once

#include <chrono>   // std::chrono::steady_clock: the run's start, for the result line
#include <cstddef>  // std::size_t
#include <cstdio>   // std::FILE: the log file the lines also go to
#include <string>   // std::string

#include <oar/data/dataset.hpp>  // ByteImageDataset, InMemoryDataset

#include "train_options.hpp"  // TrainOptions: the parsed flags

namespace oar::gpu {

/// What the GPU run needs besides the data: the parsed flags, the dataset's name for the result
/// line, the file (or null) that gets a copy of every line (--log-dir's workerlog.0), the start.
struct MnistJob {
    const TrainOptions* options = nullptr;
    std::string dataset;
    std::FILE* log = nullptr;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

/// The name of GPU `index` (cudaDeviceProp::name); makes it the current device. Throws
/// oar::no_device_error ("no CUDA device: ...") where there is no usable GPU or no such index.
std::string use_gpu(std::size_t index);

/// Trains options->model on the GPU options->device.index through oar::Model, validating every
/// epoch, tests on `test` and prints the same lines as the CPU run, the result line last. Returns
/// the exit status (0; a SIGINT/SIGTERM stop returns 0 without testing). Throws usage_error for
/// what the GPU run does not support (a regressor model, --checkpoint-dir, --resume),
/// no_device_error without a GPU.
int train_mnist(const MnistJob& job, const data::ByteImageDataset& train, const data::ByteImageDataset& valid,
                const data::ByteImageDataset& test);
int train_mnist(const MnistJob& job, const data::InMemoryDataset& train, const data::InMemoryDataset& valid,
                const data::InMemoryDataset& test);

}  // namespace oar::gpu
