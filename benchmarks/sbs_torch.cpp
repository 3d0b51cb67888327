// One side-by-side job in libtorch's C++ frontend (Debian's libtorch-dev 1.13): the same models,
// data shapes, optimizer and timing as sbs_oar.cpp. Built with g++ by benchmarks/side_by_side.sh.
//   sbs_torch <cnn|mlp|mynet|resnet8> <train|infer> <threads> <batch> <steps>
//   -> "img_per_sec=<best of 3 rounds> peak_rss_mb=<ru_maxrss>"
#include <torch/torch.h>  // the C++ frontend

#include <sys/resource.h>  // getrusage: peak RSS

#include <algorithm>  // std::max
#include <chrono>     // std::chrono::steady_clock
#include <cstdio>     // std::printf
#include <cstdlib>    // std::strtoul
#include <string>     // std::string

namespace {

/// body(x) + shortcut(x), the shortcut being the identity when it is empty (oar's Residual block).
struct ResidualImpl : torch::nn::Module {
    ResidualImpl(torch::nn::Sequential b, torch::nn::Sequential s)
        : body(register_module("body", b)), shortcut(register_module("shortcut", s)) {}
    torch::Tensor forward(const torch::Tensor& x) { return body->forward(x) + (shortcut->size() ? shortcut->forward(x) : x); }
    torch::nn::Sequential body, shortcut;
};
TORCH_MODULE(Residual);

torch::nn::Conv2d conv3x3(long in, long out, long stride = 1) {
    return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

Residual basic_block(long c) {
    namespace nn = torch::nn;
    return Residual(nn::Sequential(conv3x3(c, c), nn::BatchNorm2d(c), nn::ReLU(), conv3x3(c, c), nn::BatchNorm2d(c)),
                    nn::Sequential());
}

Residual down_block(long in, long out) {
    namespace nn = torch::nn;
    return Residual(nn::Sequential(conv3x3(in, out, 2), nn::BatchNorm2d(out), nn::ReLU(), conv3x3(out, out),
                                   nn::BatchNorm2d(out)),
                    nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(2).bias(false)), nn::BatchNorm2d(out)));
}

torch::nn::Sequential make_model(const std::string& model) {
    namespace nn = torch::nn;
    if (model == "cnn")  // course::CNN
        return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 20, 5).padding(2)), nn::ReLU(),
                              nn::MaxPool2d(nn::MaxPool2dOptions(2)),
                              nn::Conv2d(nn::Conv2dOptions(20, 20, 5).padding(2)), nn::ReLU(),
                              nn::MaxPool2d(nn::MaxPool2dOptions(2)), nn::Flatten(), nn::Linear(980, 10));
    if (model == "mynet")  // course::MyNet
        return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 32, 3)), nn::ReLU(), nn::MaxPool2d(nn::MaxPool2dOptions(2)),
                              nn::Conv2d(nn::Conv2dOptions(32, 64, 3)), nn::ReLU(), nn::MaxPool2d(nn::MaxPool2dOptions(2)),
                              nn::Conv2d(nn::Conv2dOptions(64, 64, 3)), nn::ReLU(), nn::Flatten(), nn::Linear(1024, 64),
                              nn::ReLU(), nn::Linear(64, 10));
    if (model == "resnet8")  // models::ResNet8<16>
        return nn::Sequential(conv3x3(3, 16), nn::BatchNorm2d(16), nn::ReLU(), basic_block(16), nn::ReLU(),
                              basic_block(16), nn::ReLU(), down_block(16, 32), nn::ReLU(),
                              nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)), nn::Flatten(), nn::Linear(32, 10));
    return nn::Sequential(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Dropout(0.2), nn::Linear(512, 10));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: sbs_torch <cnn|mlp|mynet|resnet8> <train|infer> <threads> <batch> <steps>\n");
        return 2;
    }
    const std::string model = argv[1], mode = argv[2];
    const int threads = static_cast<int>(std::strtoul(argv[3], nullptr, 10));
    const long batch = static_cast<long>(std::strtoul(argv[4], nullptr, 10));
    const long steps = static_cast<long>(std::strtoul(argv[5], nullptr, 10));
    torch::set_num_threads(threads);
    torch::manual_seed(1);
    auto net = make_model(model);
    torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-3));
    const bool cifar = model == "mynet" || model == "resnet8";
    const auto x = cifar ? torch::rand({batch, 3, 32, 32}) : torch::rand({batch, 1, 28, 28});
    const auto y = torch::arange(batch, torch::kLong).remainder(10);
    const bool train = mode == "train";
    if (!train) net->eval();
    auto step = [&] {
        if (train) {
            opt.zero_grad();
            auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
            loss.backward();
            opt.step();
        } else {
            torch::NoGradGuard no_grad;
            auto out = net->forward(x);
        }
    };
    for (int i = 0; i < 3; ++i) step();
    double best = 0;
    for (int round = 0; round < 3; ++round) {
        const auto t0 = std::chrono::steady_clock::now();
        for (long i = 0; i < steps; ++i) step();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, double(batch * steps) / s);
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("img_per_sec=%.0f peak_rss_mb=%.1f\n", best, double(ru.ru_maxrss) / 1024.0);
}
