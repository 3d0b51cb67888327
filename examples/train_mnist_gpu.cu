// train_mnist --device gpu[:N]: the main job's training run on the GPU. The run itself is
// app/mnist_job.hpp's, the CPU run's code, instantiated with Network<..., oar::cuda>: validation
// every epoch, checkpoints and --resume, the LR schedule, the same lines. What is here is only what
// differs: the GPU is made current and named, and under a launcher the ranks form an NCCL group
// (the unique id travels over MPI) that DataParallel averages the device gradients over.
// nvcc-compiled (train_mnist.cpp is g++: simdjson); interface app/gpu_mnist_job.hpp.
#include "app/gpu_mnist_job.hpp"  // the interface implemented here

#include <cstddef>  // std::size_t
#include <limits>   // std::numeric_limits: the largest CUDA device index
#include <string>   // std::string

#include <oar/cuda.cuh>                  // oar::cuda: storage and kernels
#include <oar/dist/local_comm.hpp>       // LocalComm: one process
#include <oar/dist/nccl_comm.hpp>        // NcclComm: data parallel on GPUs
#include <oar/kernels/cuda/runtime.cuh>  // use_device, OAR_CUDA_CHECK
#include <oar/models/course.hpp>         // oar::course::CNN, oar::course::MLP

#include "app/mnist_job.hpp"  // mnist_job::run_model: the training run, shared with the CPU

namespace {

template <class P, class D, class Comm>
int run_as(const oar::TrainOptions& c, const mnist_job::Run& run, const mnist_job::Splits<D>& data, Comm& comm) {
    if (c.model == "mlp") return mnist_job::run_model<oar::course::MLP, oar::cuda, P>(c, run, data, comm);
    return mnist_job::run_model<oar::course::CNN, oar::cuda, P>(c, run, data, comm);
}
/// --precision: fp32, or bf16 (Network<..., cuda, bf16_mixed>: cuBLAS bf16 GEMMs, fp32 master weights).
template <class D, class Comm>
int run_on(const oar::TrainOptions& c, const mnist_job::Run& run, const mnist_job::Splits<D>& data, Comm& comm) {
    if (c.precision == "bf16") return run_as<oar::bf16_mixed>(c, run, data, comm);
    return run_as<oar::fp32>(c, run, data, comm);
}

template <class D>
int run(const oar::gpu::MnistJob& job, const mnist_job::Splits<D>& data) {
    if (!job.options) throw oar::value_error("train_mnist on the GPU: no options");
    const oar::TrainOptions& c = *job.options;
    if (c.model != "cnn" && c.model != "mlp")
        throw oar::usage_error(oar::detail::concat("--model ", c.model, " --device gpu: the regressors' MSE loss has no "
                                                   "GPU version yet; use --model cnn or mlp on the GPU, or --device cpu"));
    const std::string name = oar::gpu::use_gpu(c.device.index);
    lines::out.log = job.log;
    lines::say("device: gpu:%zu (%s)%s\n", c.device.index, name.c_str(),
               job.run.env.distributed() ? oar::detail::concat(", rank ", job.run.env.rank, " of ",
                                                                job.run.env.world_size, " over NCCL").c_str()
                                         : "");
    if (!job.run.env.distributed()) {
        oar::dist::LocalComm local;
        return run_on(c, job.run, data, local);
    }
#if OAR_HAS_NCCL && OAR_HAS_MPI
    oar::dist::MpiComm world(MPI_COMM_WORLD);
    oar::dist::NcclComm nccl = oar::dist::NcclComm::from_mpi(world, static_cast<int>(c.device.index));
    return run_on(c, job.run, data, nccl);
#else
    throw oar::usage_error("--device gpu under a launcher: this train_mnist was built without NCCL or MPI, which "
                           "data-parallel training on GPUs needs (install libnccl-dev and Open MPI, rebuild)");
#endif
}

}  // namespace

namespace oar::gpu {

std::string use_gpu(std::size_t index) {
    if (index > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw no_device_error(detail::concat("no CUDA device gpu:", index, " (not a CUDA device index)"));
    cuda_runtime::use_device(static_cast<int>(index));
    cudaDeviceProp prop{};
    OAR_CUDA_CHECK(cudaGetDeviceProperties(&prop, static_cast<int>(index)));
    return prop.name;
}

int train_mnist(const MnistJob& job, const mnist_job::Splits<data::ByteImageDataset>& data) { return run(job, data); }

int train_mnist(const MnistJob& job, const mnist_job::Splits<data::InMemoryDataset>& data) { return run(job, data); }

}  // namespace oar::gpu
