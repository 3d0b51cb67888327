// Kernel and training-step benchmarks on the CPU backend: a peak probe (FMA throughput), GEMM at
// square sizes and at the shapes the course's models use (OpenBLAS sgemm side by side when the
// build found it, and the bf16 GEMM on the path this CPU's ISA picks), every conv/pool/activation layer of the course's CNN forward and backward,
// fused softmax-cross-entropy, the Adam step, and whole training steps of the CNN and the MLP.
// Each reports GFLOP/s (a multiply-add counts 2; the memory-bound rows count their arithmetic as
// stated there) and `of_peak`, the fraction of the machine's FMA peak: threads x the FMA probe's
// rate at the active ISA's vector width and instructions (16 float lanes AVX-512, 8 AVX2, 4 SSE2;
// thread_peak_flops; /proc/cpuinfo's "cpu MHz" x lanes x 2 FMA units x 2 FLOPs when it cannot run);
// the run prints that peak first, and the peak_fma row the probe's measured rate beside it.
// `of_peak_cpu` is the same FLOPs over the process's CPU time against one thread's peak: what a
// machine shared with other work distorts least. Threads: the pool's (OAR_NUM_THREADS sets them,
// and OpenBLAS gets the same count). Times and rates are wall-clock (UseRealTime): the pool's
// threads work while the main thread waits.
//   scripts/bench.sh  (or build/release/benchmarks/bench_kernels [--benchmark_filter=gemm])
#include <benchmark/benchmark.h>  // the harness

#include <oar/models/course.hpp>  // course::CNN, course::MLP
#include <oar/oar.hpp>  // the library
#include <oar/core/simd.hpp>         // xsimd::batch, fma: the peak probe
#include <oar/core/thread_pool.hpp>  // default_pool: the probe runs on every thread
#include <oar/kernels/cpu/gemm_bf16.hpp>  // gemm_bf16: bf16 inputs, fp32 sums

#include <time.h>   // clock_gettime(CLOCK_THREAD_CPUTIME_ID / CLOCK_PROCESS_CPUTIME_ID): CPU time (POSIX)
#include <algorithm>  // std::max
#include <cstdio>     // std::fprintf: the peak's assumption
#include <fstream>    // std::ifstream: /proc/cpuinfo
#include <chrono>     // std::chrono: the pool round trip
#include <cstdint>  // std::int64_t
#include <string>   // std::string: registered benchmark names
#include <vector>   // std::vector
#if OAR_ISA_X86
#include <immintrin.h>  // the FMA probe at each x86 ISA's width (target attributes)
#endif

#if OAR_BENCH_OPENBLAS
extern "C" {  // OpenBLAS's CBLAS entry points (declared here: Debian's cblas.h is an alternative)
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
void openblas_set_num_threads(int n);
}
#endif

namespace {

using namespace oar;

/// FMA throughput of one thread: 12 independent accumulator chains of SIMD FMAs, at the vector width
/// and instructions of the ISA the kernels run on (active_vector_isa: OAR_ISA can lower it), so
/// that the peak is that ISA's on this core: a core that splits 512-bit FMAs into two 256-bit
/// halves has the same peak for AVX2 and AVX-512, one with two 512-bit units twice AVX2's. SSE2 has
/// no FMA instruction: its kernels multiply and add, and so does its probe. Returns a sum of the
/// chains (kept, so the loop is not dropped); isa_lanes() floats per vector.
#if OAR_ISA_X86
__attribute__((target("avx512f"))) double fma_probe_avx512(std::size_t iters, float seed) {
    __m512 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(seed + float(i));
    const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
    for (std::size_t it = 0; it < iters; ++it)
        for (auto& x : acc) x = _mm512_fmadd_ps(x, m, a);
    alignas(64) float lanes[16];
    __m512 s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
    _mm512_store_ps(lanes, s);
    double sum = 0;
    for (float v : lanes) sum += v;
    return sum;
}
__attribute__((target("avx2,fma"))) double fma_probe_avx2(std::size_t iters, float seed) {
    __m256 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(seed + float(i));
    const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
    for (std::size_t it = 0; it < iters; ++it)
        for (auto& x : acc) x = _mm256_fmadd_ps(x, m, a);
    alignas(32) float lanes[8];
    __m256 s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
    _mm256_store_ps(lanes, s);
    double sum = 0;
    for (float v : lanes) sum += v;
    return sum;
}
double fma_probe_sse2(std::size_t iters, float seed) {
    __m128 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm_set1_ps(seed + float(i));
    const __m128 m = _mm_set1_ps(0.999999f), a = _mm_set1_ps(1e-7f);
    for (std::size_t it = 0; it < iters; ++it)
        for (auto& x : acc) x = _mm_add_ps(_mm_mul_ps(x, m), a);
    alignas(16) float lanes[4];
    __m128 s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm_add_ps(s, acc[i]);
    _mm_store_ps(lanes, s);
    double sum = 0;
    for (float v : lanes) sum += v;
    return sum;
}
#endif

/// Float lanes of the ISA the kernels run on (oar's dispatch, not this file's -march).
double isa_lanes() {
#if OAR_ISA_X86
    switch (active_vector_isa()) {
        case cpu_isa::avx512: return 16.0;
        case cpu_isa::avx2: return 8.0;
        default: return 4.0;
    }
#else
    return double(xsimd::batch<float>::size);
#endif
}

double fma_probe_thread(std::size_t iters, float seed) {
#if OAR_ISA_X86
    switch (active_vector_isa()) {
        case cpu_isa::avx512: return fma_probe_avx512(iters, seed);
        case cpu_isa::avx2: return fma_probe_avx2(iters, seed);
        default: return fma_probe_sse2(iters, seed);
    }
#else
    using V = xsimd::batch<float>;
    V acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = V(seed + float(i));
    const V m(0.999999f), a(1e-7f);
    for (std::size_t it = 0; it < iters; ++it)
        for (auto& x : acc) x = xsimd::fma(x, m, a);
    V s(0.0f);
    for (auto& x : acc) s += x;
    return double(xsimd::hadd(s));
#endif
}

/// CPU seconds the calling thread has run (the probe's clock: other processes on the machine do not
/// lower the peak, only the benchmarks' wall-clock rates).
double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// FLOP/s of the FMA loop on every thread of the pool at once (the sum of each thread's rate over its
/// own CPU time, best of 3): the peak that `of_peak` refers to.
double measure_peak() {
    constexpr std::size_t iters = 4'000'000;
    const double flops_per_thread = double(iters) * 12.0 * 2.0 * isa_lanes();
    auto& pool = default_pool();
    std::vector<double> sink(pool.size()), rate(pool.size());
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
        pool.parallel_for(pool.size(), [&](std::size_t t) {
            const double t0 = thread_cpu_seconds();
            sink[t] = fma_probe_thread(iters, float(t));
            rate[t] = flops_per_thread / (thread_cpu_seconds() - t0);
        });
        double sum = 0;
        for (double r : rate) sum += r;
        best = std::max(best, sum);
    }
    benchmark::DoNotOptimize(sink.data());
    return best;
}

/// The FMA probe's rate on all threads (FLOP/s, measured once).
double probe_flops() {
    static const double peak = measure_peak();
    return peak;
}

/// The first "cpu MHz" of /proc/cpuinfo in Hz, 0 when there is none.
double cpuinfo_hz() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("cpu MHz", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) return std::stod(line.substr(colon + 1)) * 1e6;
        }
    return 0.0;
}

/// One thread's peak in FLOP/s: the FMA probe's rate per thread at the active ISA (over its own CPU
/// time, so other processes on the machine do not lower it); when the probe cannot run, /proc/cpuinfo's
/// "cpu MHz" x the ISA's lanes x 2 FMA units x 2 FLOPs (a virtual machine's "cpu MHz" is often the
/// base clock, below the one the cores run FMAs at). Printed once: the rate as lanes x 2 FLOPs x
/// vector FMAs per second, with /proc/cpuinfo's clock beside it.
double thread_peak_flops() {
    static const double peak = [] {
        const double info = cpuinfo_hz(), lanes = isa_lanes();
        double p = probe_flops() / double(default_pool().size());
        const char* source = "the FMA probe";
        if (!(p > 0)) {
            p = lanes * 2.0 * 2.0 * info;
            source = "/proc/cpuinfo cpu MHz x 2 FMA units";
        }
        std::fprintf(stderr,
                     "of_peak against %s at the active ISA (%s, %.0f float lanes): %.1f GFLOP/s a thread = %.0f lanes x "
                     "2 FLOPs x %.0f M vector FMAs/s (/proc/cpuinfo cpu MHz: %.0f) x %zu threads = %.1f GFLOP/s\n",
                     source, std::string(cpu_isa_name(active_vector_isa())).c_str(), lanes, p / 1e9, lanes,
                     p / (2.0 * lanes) / 1e6, info / 1e6, default_pool().size(), p * double(default_pool().size()) / 1e9);
        return p;
    }();
    return peak;
}

double peak_flops() { return thread_peak_flops() * double(default_pool().size()); }

/// CPU seconds of the whole process (every thread) so far.
double process_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// Taken right before a benchmark's timed loop: the process's CPU time then, for of_peak_cpu.
struct CpuStart {
    double t = (thread_peak_flops(), process_cpu_seconds());  // the peak first: its print is not timed
};

/// Adds GFLOP/s, of_peak and of_peak_cpu counters for `flops` per iteration, the timed loop having
/// started at `start`.
void flop_counters(benchmark::State& state, double flops, const CpuStart& start) {
    const double total = flops * double(state.iterations()), cpu = process_cpu_seconds() - start.t;
    state.counters["GFLOP/s"] = benchmark::Counter(total, benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
    state.counters["of_peak"] = benchmark::Counter(total / peak_flops(), benchmark::Counter::kIsRate);
    state.counters["of_peak_cpu"] = cpu > 0 ? total / (cpu * thread_peak_flops()) : 0.0;
}

void peak_fma(benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(peak_flops());
    state.counters["peak_GFLOP/s"] = peak_flops() / 1e9;
    state.counters["probe_GFLOP/s"] = probe_flops() / 1e9;
    state.counters["threads"] = double(default_pool().size());
}
BENCHMARK(peak_fma)->Iterations(1);

/// One parallel_for of one tiny task per thread after `gap` microseconds of serial work on the
/// caller (as between a training step's kernels): the pool's wake-up and completion round trip.
/// Reported per call, the gap excluded (`round_trip_us`).
void pool_round_trip(benchmark::State& state) {
    auto& pool = default_pool();
    const auto gap = std::chrono::microseconds(state.range(0));
    std::vector<double> sink(pool.size());
    double in_calls = 0;
    for (auto _ : state) {
        const auto until = std::chrono::steady_clock::now() + gap;
        while (std::chrono::steady_clock::now() < until) {
        }
        const auto t0 = std::chrono::steady_clock::now();
        pool.parallel_for(pool.size(), [&](std::size_t t) { sink[t] += 1.0; });
        in_calls += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    benchmark::DoNotOptimize(sink.data());
    state.counters["round_trip_us"] = in_calls / double(state.iterations());
    state.counters["threads"] = double(pool.size());
}
BENCHMARK(pool_round_trip)->Arg(0)->Arg(50)->Arg(500)->Unit(benchmark::kMicrosecond)->UseRealTime();

void fill(float* p, std::size_t n, std::uint64_t seed) {
    const CounterRng rng{seed};
    for (std::size_t i = 0; i < n; ++i) p[i] = 2.0f * rng.uniform(0, i) - 1.0f;
}

/// beta of a GEMM benchmark: its fourth argument when it has one (the models' weight gradients
/// accumulate, beta 1), else 0.
float bench_beta(const benchmark::State& state) { return state.range(3) != 0 ? 1.0f : 0.0f; }

void gemm_bench(benchmark::State& state, Trans ta, Trans tb) {
    const auto M = static_cast<std::size_t>(state.range(0)), N = static_cast<std::size_t>(state.range(1)),
               K = static_cast<std::size_t>(state.range(2));
    const float beta = bench_beta(state);
    std::vector<float> a(M * K), b(K * N), c(M * N);
    fill(a.data(), a.size(), 1);
    fill(b.data(), b.size(), 2);
    fill(c.data(), c.size(), 3);
    const CpuStart start;
    for (auto _ : state) {
        gemm(ta, tb, M, N, K, 1.0f, a.data(), b.data(), beta, c.data());
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    flop_counters(state, 2.0 * double(M) * double(N) * double(K), start);
}

/// The bf16 GEMM at the same shape and values (rounded to bf16), on the active ISA's path.
void gemm_bf16_bench(benchmark::State& state, Trans ta, Trans tb) {
    const auto M = static_cast<std::size_t>(state.range(0)), N = static_cast<std::size_t>(state.range(1)),
               K = static_cast<std::size_t>(state.range(2));
    const float beta = bench_beta(state);
    std::vector<float> a(M * K), b(K * N), c(M * N);
    fill(a.data(), a.size(), 1);
    fill(b.data(), b.size(), 2);
    fill(c.data(), c.size(), 3);
    std::vector<bf16> ah(a.size()), bh(b.size());
    to_bf16(a.data(), ah.data(), a.size());
    to_bf16(b.data(), bh.data(), b.size());
    const CpuStart start;
    for (auto _ : state) {
        gemm_bf16(ta, tb, M, N, K, 1.0f, ah.data(), bh.data(), beta, c.data());
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    flop_counters(state, 2.0 * double(M) * double(N) * double(K), start);
    state.SetLabel(std::string(cpu_isa_name(active_cpu_isa())));
}

#if OAR_BENCH_OPENBLAS
void openblas_bench(benchmark::State& state, Trans ta, Trans tb) {
    const auto M = static_cast<int>(state.range(0)), N = static_cast<int>(state.range(1)),
               K = static_cast<int>(state.range(2));
    const float beta = bench_beta(state);
    std::vector<float> a(std::size_t(M) * K), b(std::size_t(K) * N), c(std::size_t(M) * N);
    fill(a.data(), a.size(), 1);
    fill(b.data(), b.size(), 2);
    fill(c.data(), c.size(), 3);
    openblas_set_num_threads(static_cast<int>(default_pool().size()));
    constexpr int row_major = 101, no_trans = 111, trans = 112;
    const CpuStart start;
    for (auto _ : state) {
        cblas_sgemm(row_major, ta == Trans::no ? no_trans : trans, tb == Trans::no ? no_trans : trans, M, N, K, 1.0f,
                    a.data(), ta == Trans::no ? K : M, b.data(), tb == Trans::no ? N : K, beta, c.data(), N);
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    flop_counters(state, 2.0 * double(M) * double(N) * double(K), start);
}
#endif

/// A GEMM benchmark shape: (M, N, K) of op(A) (M,K) x op(B) (K,N), beta 0 or 1, and the few
/// iterations the largest sizes get (0: Google Benchmark decides).
struct GemmShape {
    Trans ta, tb;
    std::int64_t M, N, K, beta;
    std::int64_t iterations = 0;
};

// Square sizes, then every (ta, tb, M, N, K, beta) the course's models call in a training step at
// batch 100 (listed by instrumenting a step of each; stride-1 convolutions use conv.hpp's implicit
// GEMM, not this one, so the CNN's only GEMMs are its classifier's; the MLP's first layer gets no
// input gradient). Each is called once per step.
constexpr GemmShape gemm_shapes[] = {
    {Trans::no, Trans::no, 256, 256, 256, 0},
    {Trans::no, Trans::no, 512, 512, 512, 0},
    {Trans::no, Trans::no, 1024, 1024, 1024, 0},
    {Trans::no, Trans::no, 2048, 2048, 2048, 0},
    {Trans::no, Trans::no, 4096, 4096, 4096, 0, 3},  // ~1.4 s a call on one thread
    {Trans::no, Trans::yes, 512, 512, 512, 0},
    {Trans::yes, Trans::no, 512, 512, 512, 0},
    {Trans::no, Trans::no, 100, 10, 980, 0},     // CNN Linear<980,10> forward: x (100,980) W (980,10)
    {Trans::yes, Trans::no, 980, 10, 100, 1},    // CNN Linear<980,10> weight gradient: dW += x^T dy
    {Trans::no, Trans::yes, 100, 980, 10, 0},    // CNN Linear<980,10> input gradient: dx = dy W^T
    {Trans::no, Trans::no, 100, 512, 784, 0},    // MLP Linear<784,512> forward
    {Trans::yes, Trans::no, 784, 512, 100, 1},   // MLP Linear<784,512> weight gradient
    {Trans::no, Trans::no, 100, 10, 512, 0},     // MLP Linear<512,10> forward
    {Trans::yes, Trans::no, 512, 10, 100, 1},    // MLP Linear<512,10> weight gradient
    {Trans::no, Trans::yes, 100, 512, 10, 0},    // MLP Linear<512,10> input gradient
};

/// Registers oar's GEMM and, right after it at the same shape, OpenBLAS's (when the build has it)
/// and oar's bf16 GEMM (labelled with the ISA whose path ran; not at the 4096 size):
/// gemm_nn/M/N/K/beta, openblas_nn/M/N/K/beta, gemm_bf16_nn/M/N/K/beta. On a shared machine compare them with
/// --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true, so that load swings hit
/// both alike.
const bool gemm_registered = [] {
    for (const GemmShape& s : gemm_shapes) {
        const std::string form = std::string(s.ta == Trans::no ? "n" : "t") + (s.tb == Trans::no ? "n" : "t");
        const std::vector<std::int64_t> args{s.M, s.N, s.K, s.beta};
        auto* g = benchmark::RegisterBenchmark(("gemm_" + form).c_str(),
                                               [s](benchmark::State& st) { gemm_bench(st, s.ta, s.tb); });
        g->Args(args)->ArgNames({"M", "N", "K", "beta"})->Unit(benchmark::kMicrosecond)->UseRealTime();
        if (s.iterations) g->Iterations(s.iterations);
#if OAR_BENCH_OPENBLAS
        auto* o = benchmark::RegisterBenchmark(("openblas_" + form).c_str(),
                                               [s](benchmark::State& st) { openblas_bench(st, s.ta, s.tb); });
        o->Args(args)->ArgNames({"M", "N", "K", "beta"})->Unit(benchmark::kMicrosecond)->UseRealTime();
        if (s.iterations) o->Iterations(s.iterations);
#endif
        if (s.iterations) continue;
        benchmark::RegisterBenchmark(("gemm_bf16_" + form).c_str(),
                                     [s](benchmark::State& st) { gemm_bf16_bench(st, s.ta, s.tb); })
            ->Args(args)
            ->ArgNames({"M", "N", "K", "beta"})
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
    }
    return true;
}();

/// One layer bound alone, batch Batch (100 unless given): forward, or forward + backward (with input gradient). With
/// Winograd false, the convolutions that would take the Winograd kernel run the direct one (the
/// *_direct rows): GFLOP/s counts the direct convolution's FLOPs either way, so Winograd's is an
/// effective rate and may pass the peak.
template <class L, class In, bool Backward, bool Winograd = true, std::size_t Batch = 100>
void layer_bench(benchmark::State& state) {
    const bool was = conv_winograd();
    set_conv_winograd(Winograd);
    using Single = Network<Sequential<L>, In>;  // backward with dx, so the input gradient is timed too
    Single net(1);
    Tensor x(Batch, In::dims);
    fill(x.data(), x.size(), 3);
    auto y = net.forward(x);
    Tensor dy(Batch, y.dims()), dx(Batch, In::dims);
    fill(dy.data(), dy.size(), 4);
    const CpuStart start;
    for (auto _ : state) {
        net.forward(x);
        if constexpr (Backward) net.backward(dy, dx);
        benchmark::ClobberMemory();
    }
    flop_counters(state, double(Single::info::total_flops) * double(Batch) * (Backward ? 3.0 : 1.0), start);
    // Bytes of the activations read and written (x, y; with backward also dy, dx): for the
    // memory-bound layers.
    const double bytes = 4.0 * double(Batch) * double(In::dims.size() + Single::info::dims[1].size()) * (Backward ? 2.5 : 1.0);
    state.counters["GB/s"] = benchmark::Counter(bytes * double(state.iterations()), benchmark::Counter::kIsRate,
                                                benchmark::Counter::kIs1000);
    set_conv_winograd(was);
}

BENCHMARK(layer_bench<Conv2D<1, 20, 5, 1, 2>, Shape<1, 28, 28>, false>)->Name("conv1_forward")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_bench<Conv2D<1, 20, 5, 1, 2>, Shape<1, 28, 28>, true>)->Name("conv1_fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_bench<Conv2D<20, 20, 5, 1, 2>, Shape<20, 14, 14>, false>)->Name("conv2_forward")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_bench<Conv2D<20, 20, 5, 1, 2>, Shape<20, 14, 14>, true>)->Name("conv2_fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_bench<Conv2D<20, 20, 5, 1, 2>, Shape<20, 14, 14>, false, false>)->Name("conv2_forward_direct")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_bench<Conv2D<20, 20, 5, 1, 2>, Shape<20, 14, 14>, true, false>)->Name("conv2_fwd_bwd_direct")->Unit(benchmark::kMillisecond)->UseRealTime();
// The 3x3 stride-1 convolutions of MyNet (models/course.hpp: 32 -> 64 channels on 15 x 15, 64 -> 64
// on 6 x 6, no padding) and ResNet8 (models/resnet.hpp: 16 channels on 32 x 32, 32 on 16 x 16,
// padding 1), at batch 128 and 32; the *_direct rows run the implicit GEMM instead of Winograd.
#define OAR_BENCH_CONV3(name, L, In, B)                                                                            \
    BENCHMARK(layer_bench<L, In, false, true, B>)->Name(name "_forward")->Unit(benchmark::kMillisecond)->UseRealTime(); \
    BENCHMARK(layer_bench<L, In, true, true, B>)->Name(name "_fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();  \
    BENCHMARK(layer_bench<L, In, false, false, B>)                                                                   \
        ->Name(name "_forward_direct")                                                                               \
        ->Unit(benchmark::kMillisecond)                                                                              \
        ->UseRealTime();                                                                                             \
    BENCHMARK(layer_bench<L, In, true, false, B>)->Name(name "_fwd_bwd_direct")->Unit(benchmark::kMillisecond)->UseRealTime();
using MyNetConv2 = Conv2D<32, 64, 3>;
using MyNetConv2In = Shape<32, 15, 15>;
using MyNetConv3 = Conv2D<64, 64, 3>;
using MyNetConv3In = Shape<64, 6, 6>;
using ResNetConv16 = Conv2D<16, 16, 3, 1, 1>;
using ResNetConv16In = Shape<16, 32, 32>;
using ResNetConv32 = Conv2D<32, 32, 3, 1, 1>;
using ResNetConv32In = Shape<32, 16, 16>;
OAR_BENCH_CONV3("mynet_conv2_b128", MyNetConv2, MyNetConv2In, 128)
OAR_BENCH_CONV3("mynet_conv3_b128", MyNetConv3, MyNetConv3In, 128)
OAR_BENCH_CONV3("mynet_conv2_b32", MyNetConv2, MyNetConv2In, 32)
OAR_BENCH_CONV3("mynet_conv3_b32", MyNetConv3, MyNetConv3In, 32)
OAR_BENCH_CONV3("resnet_conv16_b128", ResNetConv16, ResNetConv16In, 128)
OAR_BENCH_CONV3("resnet_conv32_b128", ResNetConv32, ResNetConv32In, 128)
#undef OAR_BENCH_CONV3
// The strided convolutions of ResNet8's projection block (models/resnet.hpp: 16 -> 32 channels,
// 32 x 32 -> 16 x 16) and of its 32 -> 64 form on 16 x 16 (a ResNet8<32>), the 3x3 and the 1x1
// shortcut, both on the phase layout; and a 1x1 stride-1 convolution (the pointwise GEMMs, as in
// InceptionNet's branches) at batch 128.
#define OAR_BENCH_CONVS(name, L, In, B)                                                                            \
    BENCHMARK(layer_bench<L, In, false, true, B>)->Name(name "_forward")->Unit(benchmark::kMillisecond)->UseRealTime(); \
    BENCHMARK(layer_bench<L, In, true, true, B>)->Name(name "_fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();
using ResNetDown16 = Conv2D<16, 32, 3, 2, 1, Bias::no>;
using ResNetProj16 = Conv2D<16, 32, 1, 2, 0, Bias::no>;
using ResNetDown32 = Conv2D<32, 64, 3, 2, 1, Bias::no>;
using ResNetProj32 = Conv2D<32, 64, 1, 2, 0, Bias::no>;
using Pointwise32 = Conv2D<32, 32, 1>;
OAR_BENCH_CONVS("resnet_down3x3_16_b128", ResNetDown16, ResNetConv16In, 128)
OAR_BENCH_CONVS("resnet_down3x3_16_b32", ResNetDown16, ResNetConv16In, 32)
OAR_BENCH_CONVS("resnet_proj1x1_16_b128", ResNetProj16, ResNetConv16In, 128)
OAR_BENCH_CONVS("resnet_down3x3_32_b128", ResNetDown32, ResNetConv32In, 128)
OAR_BENCH_CONVS("resnet_proj1x1_32_b128", ResNetProj32, ResNetConv32In, 128)
OAR_BENCH_CONVS("pointwise_32_16x16_b128", Pointwise32, ResNetConv32In, 128)
// MyNet's first convolution (3 -> 32 channels, 32 x 32, no padding: too few input channels for
// Winograd) runs the implicit GEMM's register tiles (isa/conv_body.inc conv_tile) at every batch;
// at batch 1 its second and third do too (Winograd takes only whole groups of lanes), the input
// gradient included (the same tiles on dy with the flipped weights). The first layer's fwd_bwd row
// also times its input gradient (im2col's path with 3 channels), which training skips.
using MyNetConv1 = Conv2D<3, 32, 3>;
OAR_BENCH_CONVS("mynet_conv1_b128", MyNetConv1, course::CifarImage, 128)
OAR_BENCH_CONVS("mynet_conv1_b32", MyNetConv1, course::CifarImage, 32)
OAR_BENCH_CONVS("mynet_conv1_b1", MyNetConv1, course::CifarImage, 1)
OAR_BENCH_CONVS("mynet_conv2_b1", MyNetConv2, MyNetConv2In, 1)
OAR_BENCH_CONVS("mynet_conv3_b1", MyNetConv3, MyNetConv3In, 1)
#undef OAR_BENCH_CONVS
/// One stride-1 3x3 convolution's forward kernel alone, C -> M channels on H x H with padding pad,
/// batch B, by the tile of its last argument: 0 the implicit GEMM (kernel<op::conv2d_forward> with
/// Winograd off), 4 Winograd F(4x4, 3x3) (cpu_detail::winograd_conv_batch on all B samples, also
/// below 8 channels, where conv.hpp does not take it). The input gradient of a stride-1 convolution is this kernel on dy with the flipped
/// weights and padding 2 - pad (conv.hpp), so the rows with M and C swapped on the output size
/// (MyNet's 13 x 13 and 4 x 4, padding 2) time it. GFLOP/s counts the direct convolution's
/// multiply-adds (2 B M C 9 OH OW): Winograd's is an effective rate. Compare the tiles of one
/// shape with --benchmark_enable_random_interleaving and the CPU time (OAR_NUM_THREADS=1) on a
/// shared machine.
void conv3_tile_bench(benchmark::State& state) {
    const auto C = static_cast<std::size_t>(state.range(0)), H = static_cast<std::size_t>(state.range(1));
    const auto pad = static_cast<std::size_t>(state.range(2)), M = static_cast<std::size_t>(state.range(3));
    const auto B = static_cast<std::size_t>(state.range(4)), tile = static_cast<std::size_t>(state.range(5));
    const ConvGeometry g{C, H, H, 3, 1, pad};
    const std::size_t P = g.col_cols();
    std::vector<float> x(B * C * H * H), w(M * C * 9), b(M), y(B * M * P);
    fill(x.data(), x.size(), 5);
    fill(w.data(), w.size(), 6);
    fill(b.data(), b.size(), 7);
    const bool was = conv_winograd();
    set_conv_winograd(false);
    const CpuStart start;
    for (auto _ : state) {
        if (tile == 0)
            kernel<op::conv2d_forward, cpu>::run(g, M, B, x.data(), w.data(), b.data(), y.data());
        else
            cpu_detail::winograd_conv_batch<false>(3, C, H, H, pad, M, B, x.data(), w.data(), b.data(), y.data());
        benchmark::ClobberMemory();
    }
    flop_counters(state, 2.0 * double(B * M * C * 9 * P), start);
    set_conv_winograd(was);
}
/// The batch weight gradient alone of a stride-1 3x3 convolution of C -> M channels on H x H with
/// padding pad, batch B: tile 0 is kernel<op::conv2d_backward> without dx (the direct weight
/// gradient, conv_dw_gemm from 8 input channels, and the bias gradient), 4 Winograd F(4x4, 3x3)'s
/// (cpu_detail::winograd_dw_batch, which conv.hpp does not take for 3x3; no bias gradient).
/// GFLOP/s counts the direct weight gradient's multiply-adds (2 B M C 9 OH OW).
void conv3_dw_bench(benchmark::State& state) {
    const auto C = static_cast<std::size_t>(state.range(0)), H = static_cast<std::size_t>(state.range(1));
    const auto pad = static_cast<std::size_t>(state.range(2)), M = static_cast<std::size_t>(state.range(3));
    const auto B = static_cast<std::size_t>(state.range(4)), tile = static_cast<std::size_t>(state.range(5));
    const ConvGeometry g{C, H, H, 3, 1, pad};
    const std::size_t P = g.col_cols();
    std::vector<float> x(B * C * H * H), w(M * C * 9), dy(B * M * P), dw(M * C * 9), db(M);
    fill(x.data(), x.size(), 5);
    fill(w.data(), w.size(), 6);
    fill(dy.data(), dy.size(), 7);
    const bool was = conv_winograd();
    set_conv_winograd(false);
    const CpuStart start;
    for (auto _ : state) {
        if (tile == 0)
            kernel<op::conv2d_backward, cpu>::run(g, M, B, x.data(), w.data(), dy.data(), dw.data(), db.data(),
                                                  static_cast<float*>(nullptr));
        else
            cpu_detail::winograd_dw_batch(3, C, H, H, pad, M, B, x.data(), dy.data(), dw.data());
        benchmark::ClobberMemory();
    }
    flop_counters(state, 2.0 * double(B * M * C * 9 * P), start);
    set_conv_winograd(was);
}
/// The stride-1 3x3 shapes (C, H, pad, M) of MyNet (models/course.hpp: 3 -> 32 on 32 x 32, 32 -> 64
/// on 15 x 15, 64 -> 64 on 6 x 6, no padding) and ResNet8 (models/resnet.hpp: 3 -> 16 on 32 x 32,
/// then 16, 32, 64 channels on 32, 16, 8, padding 1), and the input gradients of MyNet's two
/// Winograd ones (64 -> 32 on 13 x 13 and 64 -> 64 on 4 x 4, padding 2; ResNet8's are their own
/// shapes), each at batch 32 and 128, direct (tile 0) and Winograd F(4x4, 3x3) (tile 4).
const bool conv3_registered = [] {
    constexpr std::int64_t fwd[][4] = {{3, 32, 0, 32}, {32, 15, 0, 64}, {64, 6, 0, 64}, {64, 13, 2, 32}, {64, 4, 2, 64},
                                       {3, 32, 1, 16}, {16, 32, 1, 16}, {32, 16, 1, 32}, {64, 8, 1, 64}};
    constexpr std::int64_t dw[][4] = {{3, 32, 0, 32},  {32, 15, 0, 64}, {64, 6, 0, 64},
                                      {16, 32, 1, 16}, {32, 16, 1, 32}, {64, 8, 1, 64}};
    for (std::int64_t batch : {32, 128})
        for (std::int64_t tile : {0, 4}) {
            for (const auto& s : fwd)
                benchmark::RegisterBenchmark("conv3_tile", conv3_tile_bench)
                    ->Args({s[0], s[1], s[2], s[3], batch, tile})
                    ->ArgNames({"C", "H", "pad", "M", "B", "tile"})
                    ->Unit(benchmark::kMillisecond)
                    ->UseRealTime();
            for (const auto& s : dw)
                benchmark::RegisterBenchmark("conv3_dw", conv3_dw_bench)
                    ->Args({s[0], s[1], s[2], s[3], batch, tile})
                    ->ArgNames({"C", "H", "pad", "M", "B", "tile"})
                    ->Unit(benchmark::kMillisecond)
                    ->UseRealTime();
        }
    return true;
}();
BENCHMARK(layer_bench<MaxPool2D<2, 2>, Shape<20, 28, 28>, false>)->Name("pool1_forward")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_bench<MaxPool2D<2, 2>, Shape<20, 28, 28>, true>)->Name("pool1_fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_bench<MaxPool2D<2, 2>, Shape<20, 14, 14>, false>)->Name("pool2_forward")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_bench<MaxPool2D<2, 2>, Shape<20, 14, 14>, true>)->Name("pool2_fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_bench<ReLU, Shape<20, 28, 28>, true>)->Name("relu1_fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_bench<ReLU, Shape<20, 14, 14>, true>)->Name("relu2_fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_bench<Linear<980, 10>, Shape<980>, true>)->Name("fc_fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();

/// Observes nothing but, attached, makes a pass run its layers one by one (no fusion).
struct one_by_one {
    void on_forward(const LayerEvent&) {}
    void on_backward(const LayerEvent&) {}
};

/// LeakyReLU, Hardswish, Tanh on conv1's output size, batch 100, forward + backward with the input
/// gradient: one expr::chain pass each way, or (Fused false) the three layers one by one. GB/s
/// counts the arrays each way reads and writes: 2 + 4 fused, 3 * (2 + 4) one by one.
template <bool Fused>
void activation_chain(benchmark::State& state) {
    using Net = Network<Sequential<LeakyReLU, Hardswish, Tanh>, Shape<20, 28, 28>>;
    static_assert(Net::chain_length(0) == 3);
    Net net(1);
    Tensor x(100, Net::input_shape::dims), dy(100, Net::input_shape::dims), dx(100, Net::input_shape::dims);
    fill(x.data(), x.size(), 3);
    fill(dy.data(), dy.size(), 4);
    const CpuStart start;
    for (auto _ : state) {
        if constexpr (Fused) {
            net.forward(x);
            net.backward(dy, dx);
        } else {
            net.forward(x, one_by_one{});
            net.backward(dy, dx, one_by_one{});
        }
        benchmark::ClobberMemory();
    }
    state.counters["GB/s"] = benchmark::Counter(4.0 * 100.0 * 20 * 28 * 28 * (Fused ? 6.0 : 18.0) * double(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
    flop_counters(state, 3.0 * double(Net::info::total_flops) * 100.0, start);  // the layers' counts, backward as 2 forwards
}
BENCHMARK(activation_chain<true>)->Name("chain3_fwd_bwd")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(activation_chain<false>)->Name("chain3_fwd_bwd_one_by_one")->Unit(benchmark::kMillisecond)->UseRealTime();

/// Fused softmax-cross-entropy (loss and d/d logits) on (batch, classes) logits.
void softmax_xent(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0)), k = static_cast<std::size_t>(state.range(1));
    Tensor logits(n, make_dims(k));
    fill(logits.data(), logits.size(), 6);
    std::vector<std::int64_t> y(n);
    for (std::size_t i = 0; i < n; ++i) y[i] = static_cast<std::int64_t>(i % k);
    CrossEntropyLoss<> ce;
    const CpuStart start;
    for (auto _ : state) {
        benchmark::DoNotOptimize(ce(logits, y));
        benchmark::ClobberMemory();
    }
    // logits read, gradient written
    state.counters["GB/s"] = benchmark::Counter(8.0 * double(n * k) * double(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
    // 5 per logit: the max, the shift, exp (counted as one), the sum, the gradient's scale
    flop_counters(state, 5.0 * double(n * k), start);
}
BENCHMARK(softmax_xent)->Args({100, 10})->Args({1000, 10})->Unit(benchmark::kMicrosecond)->UseRealTime();

/// One Adam step (with L2Decay) over the parameters of a model: p, g, m, v read, p, m, v written.
template <class Seq>
void adam_step(benchmark::State& state) {
    Network<Seq, Shape<1, 28, 28>> net(1);
    auto& ps = net.parameters();
    fill(ps.grads().data(), ps.grads().size(), 7);
    Adam opt(ps, {.learning_rate = 1e-3f, .weight_decay = L2Decay(1e-5f)});
    const CpuStart start;
    for (auto _ : state) {
        opt.step();
        benchmark::ClobberMemory();
    }
    state.counters["GB/s"] = benchmark::Counter(4.0 * 7.0 * double(ps.values().size()) * double(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
    // 14 per parameter: the decay (2), m (3), v (4), the step (sqrt, add, divide, scale, subtract)
    flop_counters(state, 14.0 * double(ps.values().size()), start);
}

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
    const CpuStart start;
    for (auto _ : state) {
        auto out = net.forward(x);
        benchmark::DoNotOptimize(ce(out, y));
        net.backward(ce.backward());
        opt.step();
        opt.clear_grad();
    }
    flop_counters(state, 3.0 * double(Network<Seq, Shape<1, 28, 28>>::info::total_flops) * 100.0, start);
    state.counters["img/s"] = benchmark::Counter(100.0 * double(state.iterations()), benchmark::Counter::kIsRate);
}

using CNN = course::CNN;
using MLP = course::MLP;
BENCHMARK(adam_step<CNN>)->Name("adam_step_cnn")->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(adam_step<MLP>)->Name("adam_step_mlp")->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(train_step<CNN>)->Name("train_step_cnn_b100")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(train_step<MLP>)->Name("train_step_mlp_b100")->Unit(benchmark::kMillisecond)->UseRealTime();

/// Inference (eval mode, forward only) at batch 100.
template <class Seq>
void infer_step(benchmark::State& state) {
    Network<Seq, Shape<1, 28, 28>> net(1);
    net.eval();
    Tensor x(100, make_dims(1, 28, 28));
    fill(x.data(), x.size(), 5);
    const CpuStart start;
    for (auto _ : state) {
        benchmark::DoNotOptimize(net.forward(x).data());
        benchmark::ClobberMemory();
    }
    state.counters["img/s"] = benchmark::Counter(100.0 * double(state.iterations()), benchmark::Counter::kIsRate);
    flop_counters(state, double(Network<Seq, Shape<1, 28, 28>>::info::total_flops) * 100.0, start);
}
BENCHMARK(infer_step<CNN>)->Name("infer_cnn_b100")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(infer_step<MLP>)->Name("infer_mlp_b100")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
