// Kernel and training-step benchmarks on the CPU backend: GEMM at square sizes and at the shapes
// the course's models use, every layer of the course's CNN forward and backward, and whole
// training steps of the CNN and the MLP. Each reports GFLOP/s (a multiply-add counts 2) or images/s.
//   build/release/benchmarks/bench_kernels [--benchmark_filter=gemm]
#include <benchmark/benchmark.h>  // the harness

#include <oar/oar.hpp>  // the library

#include <cstdint>  // std::int64_t
#include <vector>   // std::vector

namespace {

using namespace oar;

void fill(float* p, std::size_t n, std::uint64_t seed) {
    const CounterRng rng{seed};
    for (std::size_t i = 0; i < n; ++i) p[i] = 2.0f * rng.uniform(0, i) - 1.0f;
}

void gemm_bench(benchmark::State& state, Trans ta, Trans tb) {
    const auto M = static_cast<std::size_t>(state.range(0)), N = static_cast<std::size_t>(state.range(1)),
               K = static_cast<std::size_t>(state.range(2));
    std::vector<float> a(M * K), b(K * N), c(M * N);
    fill(a.data(), a.size(), 1);
    fill(b.data(), b.size(), 2);
    for (auto _ : state) {
        gemm(ta, tb, M, N, K, 1.0f, a.data(), b.data(), 0.0f, c.data());
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    state.counters["GFLOP/s"] =
        benchmark::Counter(2.0 * double(M) * double(N) * double(K) * double(state.iterations()),
                           benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void gemm_nn(benchmark::State& s) { gemm_bench(s, Trans::no, Trans::no); }
void gemm_nt(benchmark::State& s) { gemm_bench(s, Trans::no, Trans::yes); }
void gemm_tn(benchmark::State& s) { gemm_bench(s, Trans::yes, Trans::no); }

// Square sizes, then (M, N, K) of the course models: conv2 forward per sample, Linear 784x512
// forward at batch 100, conv2 weight gradient, conv2 input gradient.
BENCHMARK(gemm_nn)->Args({256, 256, 256})->Args({512, 512, 512})->Args({1024, 1024, 1024})->Args({20, 196, 500})
    ->Args({100, 512, 784})->Unit(benchmark::kMicrosecond);
BENCHMARK(gemm_nt)->Args({512, 512, 512})->Args({20, 500, 196})->Args({100, 784, 512})->Unit(benchmark::kMicrosecond);
BENCHMARK(gemm_tn)->Args({512, 512, 512})->Args({500, 196, 20})->Args({784, 512, 100})->Unit(benchmark::kMicrosecond);

/// One layer bound alone, batch 100: forward, or forward + backward (with input gradient).
template <class L, class In, bool Backward>
void layer_bench(benchmark::State& state) {
    using Single = Network<Sequential<L>, In>;  // backward with dx, so the input gradient is timed too
    Single net(1);
    Tensor x(100, In::dims);
    fill(x.data(), x.size(), 3);
    auto y = net.forward(x);
    Tensor dy(100, y.dims()), dx(100, In::dims);
    fill(dy.data(), dy.size(), 4);
    for (auto _ : state) {
        net.forward(x);
        if constexpr (Backward) net.backward(dy, dx);
        benchmark::ClobberMemory();
    }
    const double flops = double(Single::info::total_flops) * 100.0 * (Backward ? 3.0 : 1.0);
    state.counters["GFLOP/s"] = benchmark::Counter(flops * double(state.iterations()), benchmark::Counter::kIsRate,
                                                   benchmark::Counter::kIs1000);
}

BENCHMARK(layer_bench<Conv2D<1, 20, 5, 1, 2>, Shape<1, 28, 28>, false>)->Name("conv1_forward")->Unit(benchmark::kMillisecond);
BENCHMARK(layer_bench<Conv2D<1, 20, 5, 1, 2>, Shape<1, 28, 28>, true>)->Name("conv1_fwd_bwd")->Unit(benchmark::kMillisecond);
BENCHMARK(layer_bench<Conv2D<20, 20, 5, 1, 2>, Shape<20, 14, 14>, false>)->Name("conv2_forward")->Unit(benchmark::kMillisecond);
BENCHMARK(layer_bench<Conv2D<20, 20, 5, 1, 2>, Shape<20, 14, 14>, true>)->Name("conv2_fwd_bwd")->Unit(benchmark::kMillisecond);
BENCHMARK(layer_bench<MaxPool2D<2, 2>, Shape<20, 28, 28>, true>)->Name("pool1_fwd_bwd")->Unit(benchmark::kMillisecond);
BENCHMARK(layer_bench<ReLU, Shape<20, 28, 28>, true>)->Name("relu1_fwd_bwd")->Unit(benchmark::kMillisecond);
BENCHMARK(layer_bench<Linear<980, 10>, Shape<980>, true>)->Name("fc_fwd_bwd")->Unit(benchmark::kMillisecond);

/// A whole training step (forward, cross-entropy, backward, Adam with L2Decay) at batch 100.
template <class Seq>
void train_step(benchmark::State& state) {
    Network<Seq, Shape<1, 28, 28>> net(1);
    Adam opt(net.parameters(), {.learning_rate = 1e-3f, .weight_decay = L2Decay(1e-5f)});
    CrossEntropyLoss<> ce;
    Tensor x(100, make_dims(1, 28, 28));
    fill(x.data(), x.size(), 5);
    std::vector<std::int64_t> y(100);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int64_t>(i % 10);
    for (auto _ : state) {
        auto out = net.forward(x);
        benchmark::DoNotOptimize(ce(out, y));
        net.backward(ce.backward());
        opt.step();
        opt.clear_grad();
    }
    state.counters["img/s"] = benchmark::Counter(100.0 * double(state.iterations()), benchmark::Counter::kIsRate);
}

using CNN = Sequential<Conv2D<1, 20, 5, 1, 2>, ReLU, MaxPool2D<2, 2>, Conv2D<20, 20, 5, 1, 2>, ReLU, MaxPool2D<2, 2>,
                       Flatten, Linear<980, 10>>;
using MLP = Sequential<Flatten, Linear<784, 512>, ReLU, Dropout<20>, Linear<512, 10>>;
BENCHMARK(train_step<CNN>)->Name("train_step_cnn_b100")->Unit(benchmark::kMillisecond);
BENCHMARK(train_step<MLP>)->Name("train_step_mlp_b100")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
