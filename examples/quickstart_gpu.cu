// The course's training loop on the GPU, written directly against the CUDA backend (what
// `paddle.set_device('gpu')` gives in the course): the same network type with oar::cuda as its
// backend, Adam and cross-entropy on the device, a few steps on random data.
// Run: build/release/quickstart_gpu [gpu:N]   (exits 77 without a GPU)
#include <oar/cuda.cuh>                // Network<..., cuda>, Adam<cuda>, CrossEntropyLoss<cuda>
#include <oar/kernels/cuda/runtime.cuh>       // set_device, no_device_error
#include <oar/models/course.hpp>       // course::CNN, course::Image (layer headers only: nvcc-clean)

#include <cstdint>  // std::int64_t
#include <cstdio>   // std::printf
#include <vector>   // std::vector

using CNN = oar::course::CNN;
using Image = oar::course::Image;

int main(int argc, char** argv) {
    try {
        oar::cuda_runtime::set_device(argc > 1 ? argv[1] : "gpu:0");
        oar::Network<CNN, Image, oar::cuda> net(/*seed=*/0);
        oar::Adam<oar::cuda> opt(net.parameters(), {.learning_rate = 0.001f});
        oar::CrossEntropyLoss<oar::cuda> loss_fn;
        const std::size_t batch = 100;
        std::vector<float> x(batch * 784);
        std::vector<std::int64_t> y(batch);
        for (std::size_t i = 0; i < batch; ++i) {  // class c: pixel row c lit
            y[i] = static_cast<std::int64_t>(i % 10);
            for (std::size_t k = 0; k < 28; ++k) x[i * 784 + static_cast<std::size_t>(y[i]) * 28 + k] = 1.0f;
        }
        for (int step = 0; step < 50; ++step) {
            const auto logits = net(oar::TensorView(x.data(), batch, Image::dims));  // device memory
            const float loss = loss_fn(logits, y);
            net.clear_grad();
            net.backward(loss_fn.backward());
            opt.step();
            if (step % 10 == 0) std::printf("step %d: loss %.4f\n", step, loss);
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
