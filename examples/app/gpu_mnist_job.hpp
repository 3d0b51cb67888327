// train_mnist's `--device gpu[:N]` as a plain C++ interface. The main job (examples/train_mnist.cpp)
// is compiled by g++ (it includes simdjson), so its GPU run lives in an nvcc-compiled translation
// unit, examples/train_mnist_gpu.cu (library `oar_train_mnist_gpu`, built when nvcc is found): the
// same oar::Model fit / evaluate, with Network<..., oar::cuda> and the same callbacks and lines.
// Plain C++: nothing here needs the CUDA toolkit. Application code (examples/app/, not installed).
#pragma once

#include <cstddef>  // std::size_t
#include <cstdio>   // std::FILE: the log file the lines also go to
#include <string>   // std::string

#include <oar/data/dataset.hpp>  // ByteImageDataset, InMemoryDataset

#include "mnist_splits.hpp"   // Splits
#include "train_options.hpp"  // TrainOptions: the parsed flags

namespace mnist_job {
struct Run;
}

namespace oar::gpu {

/// What the GPU run needs besides the data: the parsed flags (device.index: this rank's GPU), the
/// run (dataset name, this process's place in the job, the start), and the file (or null) that
/// gets a copy of every line (--log-dir's workerlog.<rank>).
struct MnistJob {
    const TrainOptions* options = nullptr;
    const mnist_job::Run& run;
    std::FILE* log = nullptr;
};

/// The name of GPU `index` (cudaDeviceProp::name); makes it the current device. Throws
/// oar::no_device_error ("no CUDA device: ...") where there is no usable GPU or no such index.
std::string use_gpu(std::size_t index);

/// Trains options->model on GPU options->device.index: mnist_job::run_model with oar::cuda, the
/// CPU run's code (validation every epoch, checkpoints, --resume, the same lines, the result line
/// last). Under a launcher the ranks form an NCCL group (its id sent over MPI) and train
/// data-parallel. Returns the exit status. Throws usage_error for what the GPU run does not
/// support (the regressors' MSE loss), no_device_error without a GPU.
int train_mnist(const MnistJob& job, const mnist_job::Splits<data::ByteImageDataset>& data);
int train_mnist(const MnistJob& job, const mnist_job::Splits<data::InMemoryDataset>& data);

}  // namespace oar::gpu
