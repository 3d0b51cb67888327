// One side-by-side job in oar: train or infer the course's CNN or MLP on synthetic MNIST-shaped
// data, or MyNet / ResNet8 on synthetic CIFAR-shaped data, and print images/s and the peak RSS.
// benchmarks/side_by_side.sh runs the CNN and MLP beside the same job in libtorch (sbs_torch.cpp)
// and PaddlePaddle (sbs_paddle.py).
//   sbs_oar <cnn|mlp|mynet|resnet8> <train|infer> <threads> <batch> <steps> [fp32|bf16]
//   -> "img_per_sec=<best of 3 rounds> cpu_us_per_img=<least of 3 rounds> peak_rss_mb=<ru_maxrss>"
// cpu_us_per_img is the process's user + system CPU time (all threads) per image: on a loaded
// machine it moves far less than the wall-clock images/s. The last argument picks the network's
// precision policy (core/precision.hpp): fp32 (the default) or bf16 mixed precision.
#include <oar/models/course.hpp>     // course::CNN, course::MLP, course::MyNet
#include <oar/models/resnet.hpp>     // models::ResNet8
#include <oar/oar.hpp>               // the library
#include <oar/core/thread_pool.hpp>  // set_num_threads
#include <oar/kernels/cpu/gemm_bf16.hpp>  // the bf16_mixed policy's kernels

#include <sys/resource.h>  // getrusage: peak RSS, CPU time per round

#include <algorithm>  // std::max, std::min
#include <chrono>   // std::chrono::steady_clock
#include <cstdint>  // std::int64_t
#include <cstdio>   // std::printf, std::fprintf
#include <cstdlib>  // std::strtoul
#include <string>   // std::string
#include <vector>   // std::vector

namespace {

using namespace oar;

using CNN = course::CNN;
using MLP = course::MLP;

/// User + system CPU seconds of the whole process so far.
double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

struct Result {
    double img_per_sec = 0;      // best round
    double cpu_us_per_img = 1e300;  // least round
};

template <class Seq, class In, class P>
Result run(bool train, std::size_t batch, std::size_t steps) {
    Network<Seq, In, cpu, P> net(1);
    Adam opt(net.parameters(), {.learning_rate = 1e-3f});
    CrossEntropyLoss<> ce;
    Tensor x(batch, In::dims);
    const CounterRng rng{5};
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = rng.uniform(0, i);  // pixels in [0, 1)
    std::vector<std::int64_t> y(batch);
    for (std::size_t i = 0; i < batch; ++i) y[i] = static_cast<std::int64_t>(i % 10);
    if (!train) net.eval();
    auto step = [&] {
        auto out = net.forward(x);
        if (train) {
            ce(out, y);
            net.backward(ce.backward());
            opt.step();
            opt.clear_grad();
        }
    };
    for (int i = 0; i < 3; ++i) step();  // warm-up: arena, scratch, threads
    Result best;
    for (int round = 0; round < 3; ++round) {
        const auto t0 = std::chrono::steady_clock::now();
        const double c0 = cpu_seconds();
        for (std::size_t i = 0; i < steps; ++i) step();
        const double c = cpu_seconds() - c0;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best.img_per_sec = std::max(best.img_per_sec, double(batch * steps) / s);
        best.cpu_us_per_img = std::min(best.cpu_us_per_img, 1e6 * c / double(batch * steps));
    }
    return best;
}

template <class P>
Result run_model(const std::string& model, bool train, std::size_t batch, std::size_t steps) {
    using Mnist = Shape<1, 28, 28>;
    return model == "cnn"     ? run<CNN, Mnist, P>(train, batch, steps)
           : model == "mlp"   ? run<MLP, Mnist, P>(train, batch, steps)
           : model == "mynet" ? run<course::MyNet, course::CifarImage, P>(train, batch, steps)
                              : run<models::ResNet8<>, course::CifarImage, P>(train, batch, steps);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 6 && argc != 7) {
        std::fprintf(stderr, "usage: sbs_oar <cnn|mlp|mynet|resnet8> <train|infer> <threads> <batch> <steps> [fp32|bf16]\n");
        return 2;
    }
    const std::string model = argv[1], mode = argv[2], precision = argc == 7 ? argv[6] : "fp32";
    const std::size_t threads = std::strtoul(argv[3], nullptr, 10), batch = std::strtoul(argv[4], nullptr, 10),
                      steps = std::strtoul(argv[5], nullptr, 10);
    if ((model != "cnn" && model != "mlp" && model != "mynet" && model != "resnet8") || (mode != "train" && mode != "infer") || threads == 0 || batch == 0 ||
        steps == 0 || (precision != "fp32" && precision != "bf16")) {
        std::fprintf(stderr, "sbs_oar: bad arguments\n");
        return 2;
    }
    set_num_threads(threads);
    const bool train = mode == "train";
    const Result r = precision == "bf16" ? run_model<bf16_mixed>(model, train, batch, steps)
                                         : run_model<fp32>(model, train, batch, steps);
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("img_per_sec=%.0f cpu_us_per_img=%.1f peak_rss_mb=%.1f\n", r.img_per_sec, r.cpu_us_per_img,
                double(ru.ru_maxrss) / 1024.0);
}
