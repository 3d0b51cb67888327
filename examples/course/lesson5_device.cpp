// Lesson 5 of the course, devices: `paddle.device.set_device("cpu" | "gpu" | "gpu:N")` picks where
// the same program trains. Here the device string is the program's argument; it is parsed as
// set_device parses it (oar::parse_device_spec), and the course's CNN trains there (Adam 1e-3,
// Paddle's initialisation, the course's lines, validation every epoch, a test at the end) on
// generated digits (class c a bright column at x = 2 + 2c over noise), or with `--data DIR` on the
// first 2,000 / 200 / 200 images of the real MNIST's splits in the IDX folder DIR: on the CPU with
// Network<..., oar::cpu>, on GPU N with Network<..., oar::cuda> (the main job's nvcc-compiled run,
// examples/train_mnist_gpu.cu, in a build with CUDA). A malformed string, or a GPU this machine or
// this build does not have, is an oar::error saying so, and the exit status is 2.
// Usage: course_lesson5_device [cpu | gpu | gpu:N] [EPOCHS] [--data DIR]   (default cpu, 4 epochs)
#include <cstdio>   // std::printf
#include <string>   // std::string
#include <utility>  // std::move
#include <vector>   // std::vector

#include <oar/dist/env.hpp>             // init_parallel_env: one process, its communicator
#include <oar/kernels/cuda/device.hpp>  // parse_device_spec, no_device_error (plain C++: no toolkit)
#include <oar/oar.hpp>                  // the CPU API

#include "app/mnist_job.hpp"      // mnist_job::run_model: the training run, CPU and GPU alike
#include "app/train_options.hpp"  // parse_train_options: the course's recipe
#include "digits.hpp"               // course::load_sets, parse_args

#if OAR_HAS_GPU_TRAIN
#include "app/gpu_mnist_job.hpp"  // oar::gpu::use_gpu, oar::gpu::train_mnist (nvcc-compiled)
#endif

namespace {

/// Digits as a dataset.
oar::data::InMemoryDataset dataset(const course::Digits& d) {
    return {std::vector<float>(d.images.data(), d.images.data() + d.images.size()), d.labels, oar::make_dims(1, 28, 28)};
}

}  // namespace

int main(int argc, char** argv) try {
    const course::Args args = course::parse_args(argc, argv, {"--data"}, 2);
    const std::string device = args.at(0, "cpu");
    const oar::DeviceSpec spec = oar::parse_device_spec(device);  // paddle.device.set_device(device)
    // The course's setup (Paddle init, Adam 1e-3, constant rate, no L2) and its lines.
    oar::TrainOptions c = *oar::parse_train_options(
        std::vector<std::string>{"--recipe", "course", "--epochs", args.at(1, "4"), "--batch-size", "100",
                                 "--log-every", "2", "--log-style", "course"});
    // The device first: a GPU this machine or this build does not have is refused before any data is read.
    if (spec.gpu) {
        c.device = {oar::DeviceOption::Kind::gpu, static_cast<std::size_t>(spec.index)};
#if OAR_HAS_GPU_TRAIN
        const std::string name = oar::gpu::use_gpu(c.device.index);  // no_device_error without that GPU
        std::printf("device: gpu:%d (%s)\n", spec.index, name.c_str());
#else
        throw oar::no_device_error(oar::detail::concat("device '", device,
                                                       "': this program was built without CUDA (no nvcc, or "
                                                       "OAR_BUILD_CUDA=OFF); use cpu"));
#endif
    } else {
        std::printf("device: cpu\n");
    }
    const std::size_t n_train = args.flag("--data").empty() ? 600 : 2000;  // real digits take more steps
    const course::Sets sets = course::load_sets(args.flag("--data"), n_train, 200, 200, {41, 42, 43});
    const mnist_job::Splits<oar::data::InMemoryDataset> data{dataset(sets.train), dataset(sets.valid),
                                                             dataset(sets.test)};
    const mnist_job::Run job{.dataset = sets.name};
#if OAR_HAS_GPU_TRAIN
    if (spec.gpu) return oar::gpu::train_mnist({.options = &c, .run = job, .log = nullptr}, data);
#endif
    oar::dist::ParallelContext par = oar::dist::init_parallel_env();
    return mnist_job::run_model<oar::course::CNN, oar::cpu>(c, job, data, par.comm());
} catch (const oar::error& e) {
    std::fprintf(stderr, "course_lesson5_device: %s\n", e.what());
    return 2;
}
