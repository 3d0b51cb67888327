// The GPU path of the main job: the course CNN trained by Network<CNN, Image, cuda, P> (P: fp32,
// or bf16_mixed for options.precision "bf16") with Adam and cross-entropy, batches uploaded from
// pinned memory on a copy stream while the previous step runs (BatchStager). Interface:
// app/gpu_train.hpp; built into the oar_gpu_train library.
#include "app/gpu_train.hpp"  // the interface implemented here

#include <oar/cuda.cuh>                // Network<..., cuda>, Adam<cuda>, CrossEntropyLoss<cuda>, BatchStager
#include <oar/kernels/cuda/runtime.cuh>       // set_device, OAR_CUDA_CHECK
#include <oar/models/course.hpp>       // course::CNN, course::Image

#include <algorithm>  // std::copy, std::min, std::swap
#include <chrono>   // std::chrono::steady_clock
#include <cstdio>   // std::printf
#include <numeric>  // std::iota
#include <vector>   // std::vector

namespace {
using CNN = oar::course::CNN;
using Image = oar::course::Image;
constexpr std::size_t pixels = 784;

void check_samples(const oar::gpu::Samples& s, const char* what) {
    if (s.count == 0 || !s.images || !s.labels)
        throw oar::value_error(oar::detail::concat("train_course_cnn: the ", what, " samples are empty"));
    for (std::size_t i = 0; i < s.count; ++i)
        if (s.labels[i] < 0 || s.labels[i] >= 10)
            throw oar::value_error(oar::detail::concat("train_course_cnn: ", what, " label ", s.labels[i], " at index ", i,
                                                       " is outside [0, 10)"));
}
}  // namespace

namespace oar::gpu {
namespace {

template <class P>
TrainResult train_course_cnn_as(const Samples& train, const Samples* eval, const TrainOptions& o) {
    const DeviceSpec spec = parse_device_spec(o.device);
    if (!spec.gpu) throw usage_error(detail::concat("train_course_cnn: device '", o.device, "' is not a GPU"));
    cuda_runtime::use_device(spec.index);
    if (o.batch_size == 0) throw value_error("train_course_cnn: batch_size must be positive");
    check_samples(train, "training");
    if (eval) check_samples(*eval, "evaluation");

    TrainResult result;
    cudaDeviceProp prop{};
    OAR_CUDA_CHECK(cudaGetDeviceProperties(&prop, spec.index));
    result.device_name = prop.name;

    Network<CNN, Image, cuda, P> net(o.seed);
    Adam<cuda> opt(net.parameters(), AdamOptions{o.learning_rate});
    CrossEntropyLoss<cuda> loss;
    BatchStager stager(o.batch_size, pixels);
    std::vector<float> batch_x(o.batch_size * pixels);
    std::vector<std::int64_t> batch_y(o.batch_size);
    std::vector<std::size_t> order(train.count);

    const std::size_t per_epoch = (train.count + o.batch_size - 1) / o.batch_size;
    auto gather = [&](std::size_t b) {  // batch b of the epoch's order into batch_x / batch_y
        const std::size_t first = b * o.batch_size, n = std::min(o.batch_size, train.count - first);
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t src = order[first + i];
            std::copy(train.images + src * pixels, train.images + (src + 1) * pixels, batch_x.data() + i * pixels);
            batch_y[i] = train.labels[src];
        }
        return n;
    };

    const CounterRng rng{o.seed};
    std::size_t images_trained = 0;
    for (std::size_t epoch = 0; epoch < o.epochs && (o.max_steps == 0 || result.steps < o.max_steps); ++epoch) {
        std::iota(order.begin(), order.end(), std::size_t{0});
        if (o.shuffle)  // Fisher-Yates from the counter-based stream of this epoch
            for (std::size_t i = order.size(); i > 1; --i)
                std::swap(order[i - 1], order[rng.below(rng_stream::shuffle + epoch, i, i)]);
        net.train();
        OAR_CUDA_CHECK(cudaDeviceSynchronize());
        const auto t0 = std::chrono::steady_clock::now();
        double loss_sum = 0;
        std::size_t loss_count = 0;
        stager.stage(batch_x.data(), batch_y.data(), gather(0));
        std::size_t b = 0;
        for (; b < per_epoch && (o.max_steps == 0 || result.steps < o.max_steps); ++b, ++result.steps) {
            const auto staged = stager.take();
            images_trained += staged.count;
            if (b + 1 < per_epoch) stager.stage(batch_x.data(), batch_y.data(), gather(b + 1));  // overlaps step b
            const auto out = net.forward_device({staged.images, staged.count, Image::dims});
            loss.forward_device(out, staged.labels);
            net.clear_grad();
            net.backward(loss.backward());
            opt.step();
            if (b % 50 == 0 || b + 1 == per_epoch) {  // reading the loss waits for the GPU: only now and then
                loss_sum += loss.loss();
                ++loss_count;
            }
        }
        OAR_CUDA_CHECK(cudaDeviceSynchronize());
        result.train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        EpochResult er;
        er.mean_loss = loss_count ? loss_sum / static_cast<double>(loss_count) : 0.0;
        if (eval) {
            net.eval();
            std::size_t correct = 0;
            for (std::size_t first = 0; first < eval->count; first += o.batch_size) {
                const std::size_t n = std::min(o.batch_size, eval->count - first);
                const auto logits = net.to_host(net.forward(TensorView(eval->images + first * pixels, n, Image::dims)));
                for (std::size_t i = 0; i < n; ++i) {
                    std::size_t best = 0;
                    for (std::size_t c = 1; c < 10; ++c)
                        if (logits[i * 10 + c] > logits[i * 10 + best]) best = c;
                    correct += static_cast<std::int64_t>(best) == eval->labels[first + i];
                }
            }
            er.eval_accuracy = static_cast<double>(correct) / static_cast<double>(eval->count);
        }
        if (o.log)
            std::printf("epoch %zu: loss %.4f%s%.4f on %s\n", epoch, er.mean_loss, eval ? ", eval accuracy " : "",
                        eval ? er.eval_accuracy : 0.0, result.device_name.c_str());
        result.epochs.push_back(er);
    }
    result.train_images_per_sec =
        result.train_seconds > 0 ? static_cast<double>(images_trained) / result.train_seconds : 0.0;
    const auto host = net.parameters().host_values();
    result.parameters.assign(host.begin(), host.end());
    return result;
}

}  // namespace

TrainResult train_course_cnn(const Samples& train, const Samples* eval, const TrainOptions& o) {
    if (o.precision == "bf16") return train_course_cnn_as<bf16_mixed>(train, eval, o);
    if (o.precision != "fp32")
        throw usage_error(detail::concat("train_course_cnn: precision must be fp32 or bf16, got '", o.precision, "'"));
    return train_course_cnn_as<fp32>(train, eval, o);
}

}  // namespace oar::gpu
