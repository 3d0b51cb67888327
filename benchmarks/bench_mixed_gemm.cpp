// The MLP's training-step GEMMs (batch 100: Linear<784,512> and Linear<512,10>, the shapes and
// transposes Linear calls) through the fp32 GEMM and through the bf16_mixed policy's
// precision_gemm (float operands rounded to bf16 while packing, on the CPU's bf16 units where it
// has them), microseconds per call; on an AMX or AVX512-BF16 CPU also that body's packing of each
// operand alone (one thread). Prints figures only (docs/BENCHMARKS.md records them with the machine).
//
//   bench_mixed_gemm [THREADS]      # default 2; OAR_ISA picks the path (amx, avx512bf16, ...)
#include <oar/core/thread_pool.hpp>        // set_num_threads
#include <oar/kernels/cpu/gemm_bf16.hpp>  // precision_gemm<bf16_mixed>, the AMX body's packing

#include <algorithm>  // std::min
#include <chrono>     // std::chrono::steady_clock
#include <cstdio>     // std::printf
#include <cstdlib>    // std::strtoul
#include <random>     // std::mt19937
#include <string>     // std::string
#include <vector>     // std::vector

namespace {

using namespace oar;

struct Shape {
    Trans ta, tb;
    std::size_t M, N, K;
    float beta;
    const char* what;
};

/// Mean microseconds per call of f over reps calls, after two warm-up calls.
template <class F>
double time_us(F&& f, int reps) {
    f();
    f();
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) f();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t threads = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2;
    set_num_threads(threads == 0 ? 1 : threads);
    const Shape shapes[] = {
        {Trans::no, Trans::no, 100, 512, 784, 0, "L1 forward"},  // x (100,784) W (784,512)
        {Trans::yes, Trans::no, 784, 512, 100, 1, "L1 dW"},      // dW += x^T dy
        {Trans::no, Trans::no, 100, 10, 512, 0, "L2 forward"},
        {Trans::yes, Trans::no, 512, 10, 100, 1, "L2 dW"},
        {Trans::no, Trans::yes, 100, 512, 10, 0, "L2 dx"},  // dx = dy W^T
    };
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> uniform(-1, 1);
    const cpu_isa isa = active_cpu_isa();
    std::printf("isa %s, %zu threads\n", std::string(cpu_isa_name(isa)).c_str(), default_pool().size());
    for (const Shape& s : shapes) {
        std::vector<float> a(s.M * s.K), b(s.K * s.N), c(s.M * s.N);
        for (float& v : a) v = uniform(rng);
        for (float& v : b) v = uniform(rng);
        const std::size_t lda = s.ta == Trans::no ? s.K : s.M, ldb = s.tb == Trans::no ? s.N : s.K;
        constexpr int reps = 400;
        const double fp32 = time_us(
            [&] {
                kernel<op::gemm, cpu>::run(s.ta, s.tb, s.M, s.N, s.K, 1.0f, a.data(), lda, b.data(), ldb, s.beta, c.data(),
                                           s.N);
            },
            reps);
        const double mixed = time_us(
            [&] {
                precision_gemm<bf16_mixed>::run(s.ta, s.tb, s.M, s.N, s.K, 1.0f, a.data(), lda, b.data(), ldb, s.beta,
                                                c.data(), s.N);
            },
            reps);
        std::printf("%-10s M=%4zu N=%4zu K=%4zu: fp32 %8.1f us, bf16_mixed %8.1f us (%.2fx)", s.what, s.M, s.N, s.K, fp32,
                    mixed, fp32 / mixed);
#if OAR_ISA_X86 && OAR_ISA_COMPILED(2)
        const std::size_t ai = s.ta == Trans::no ? lda : 1, ak = s.ta == Trans::no ? 1 : lda;
        const std::size_t bk = s.tb == Trans::no ? ldb : 1, bj = s.tb == Trans::no ? 1 : ldb;
        if (isa == cpu_isa::amx) {  // the AMX body's packing of the whole of each operand, on one thread
            const std::size_t kc_pad = (s.K + 31) / 32 * 32, strips = (s.N + 31) / 32;
            std::vector<std::uint16_t> apack((s.M + 31) / 32 * 32 * kc_pad), bpack(strips * kc_pad * 32);
            const double pa = time_us(
                [&] {
                    for (std::size_t i = 0; i < s.M; i += cpu_detail::gemm_bf16_mc)
                        cpu_detail::bf16_amx::pack_a(std::min(cpu_detail::gemm_bf16_mc, s.M - i), s.K, kc_pad,
                                                     a.data() + i * ai, ai, ak, apack.data());
                },
                reps);
            const double pb = time_us(
                [&] {
                    for (std::size_t t = 0; t < strips; ++t)
                        cpu_detail::bf16_amx::pack_b_bf16(s.K, kc_pad, std::min<std::size_t>(32, s.N - t * 32),
                                                          b.data() + t * 32 * bj, bk, bj, bpack.data() + t * kc_pad * 32);
                },
                reps);
            std::printf(", packing A %.1f us, B %.1f us", pa, pb);
        } else if (isa == cpu_isa::avx512_bf16) {  // the AVX512-BF16 body's packing, K blocks as gemm_block takes them
            constexpr std::size_t KC = cpu_detail::gemm_bf16_kc, MC = cpu_detail::gemm_bf16_mc, NR = cpu_detail::gemm_bf16_nr;
            const std::size_t strips = (s.N + NR - 1) / NR;
            std::vector<std::uint16_t> apack(MC * KC), bpack(strips * KC * NR);
            const double pa = time_us(
                [&] {
                    for (std::size_t pc = 0; pc < s.K; pc += KC) {
                        const std::size_t kc = std::min(KC, s.K - pc), kc_pad = (kc + 1) / 2 * 2;
                        for (std::size_t i = 0; i < s.M; i += MC)
                            cpu_detail::bf16_avx512::pack_a(std::min(MC, s.M - i), kc, kc_pad, a.data() + i * ai + pc * ak,
                                                            ai, ak, apack.data());
                    }
                },
                reps);
            const double pb = time_us(
                [&] {
                    for (std::size_t pc = 0; pc < s.K; pc += KC) {
                        const std::size_t kc = std::min(KC, s.K - pc), kc_pad = (kc + 1) / 2 * 2;
                        for (std::size_t t = 0; t < strips; ++t)
                            cpu_detail::bf16_avx512::pack_b_bf16(kc, kc_pad, std::min(NR, s.N - t * NR),
                                                                 b.data() + pc * bk + t * NR * bj, bk, bj,
                                                                 bpack.data() + t * kc_pad * NR);
                    }
                },
                reps);
            std::printf(", packing A %.1f us, B %.1f us", pa, pb);
        }
#endif
        std::printf("\n");
    }
}
