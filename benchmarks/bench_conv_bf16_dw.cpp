// The weight gradients of the conv models' stride-1 convolutions (MyNet's three, the course CNN's
// two, ResNet8's 3x3 stages) through the fp32 kernels (kernel<op::conv2d_backward>
// without dx: conv_body.inc's direct or Winograd weight gradient) and through conv2d_bf16_dw
// (kernels/cpu/conv_bf16.hpp: pairs of output positions on vdpbf16ps), on bf16-valued inputs,
// microseconds per call and GFLOP/s of the direct count (2 * n * OH*OW * out_c * C*K*K), and
// whether a bf16_mixed Conv2D takes the bf16 one (conv_bf16_dw_applies). Needs AVX512-BF16 (AMX
// CPUs have it); prints figures only (docs/BENCHMARKS.md records them with the machine).
//
//   bench_conv_bf16_dw [THREADS]    # default 2
#include <oar/core/bf16.hpp>               // round_to_bf16
#include <oar/core/cpu_isa.hpp>            // cpu_supports
#include <oar/core/thread_pool.hpp>        // set_num_threads
#include <oar/kernels/cpu/gemm_bf16.hpp>  // conv2d_bf16_dw (conv_bf16.hpp), the AVX512-BF16 body

#include <chrono>   // std::chrono::steady_clock
#include <cstdio>   // std::printf
#include <cstdlib>  // std::strtoul
#include <random>   // std::mt19937
#include <vector>   // std::vector

int main(int argc, char** argv) {
    using namespace oar;
    const std::size_t threads = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2;
    set_num_threads(threads);
#if OAR_ISA_X86 && OAR_ISA_COMPILED(2)
    if (!cpu_supports(cpu_isa::avx512_bf16)) {
        std::printf("bench_conv_bf16_dw: %s\n", cpu_isa_unsupported_reason(cpu_isa::avx512_bf16).c_str());
        return 0;
    }
    struct Case {
        ConvGeometry g;
        std::size_t out_c, n;
        const char* what;
    };
    const Case cases[] = {{{3, 32, 32, 3, 1, 0}, 32, 32, "MyNet conv1 3->32 32x32, b32"},
                          {{3, 32, 32, 3, 1, 0}, 32, 128, "MyNet conv1 3->32 32x32, b128"},
                          {{1, 28, 28, 5, 1, 2}, 20, 100, "CNN conv1 1->20 5x5 28x28, b100"},
                          {{3, 32, 32, 3, 1, 1}, 16, 128, "ResNet8 stem 3->16 32x32, b128"},
                          {{32, 15, 15, 3, 1, 0}, 64, 32, "MyNet conv2 32->64 15x15, b32"},
                          {{32, 15, 15, 3, 1, 0}, 64, 128, "MyNet conv2 32->64 15x15, b128"},
                          {{64, 6, 6, 3, 1, 0}, 64, 32, "MyNet conv3 64->64 6x6, b32"},
                          {{64, 6, 6, 3, 1, 0}, 64, 128, "MyNet conv3 64->64 6x6, b128"},
                          {{20, 14, 14, 5, 1, 2}, 20, 100, "CNN conv2 20->20 5x5 14x14, b100"},
                          {{16, 32, 32, 3, 1, 1}, 16, 128, "ResNet8 16->16 32x32, b128"},
                          {{32, 16, 16, 3, 1, 1}, 32, 128, "ResNet8 32->32 16x16, b128"},
                          {{64, 8, 8, 3, 1, 1}, 64, 128, "ResNet8 64->64 8x8, b128"}};
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    std::printf("%zu thread(s); microseconds per call (GFLOP/s of the direct count)\n", threads);
    std::printf("%-34s %20s %20s %7s %s\n", "weight gradient", "fp32 kernels", "conv2d_bf16_dw", "ratio", "Conv2D takes");
    for (const Case& c : cases) {
        const std::size_t P = c.g.col_cols(), ckk = c.g.col_rows();
        std::vector<float> x(c.n * c.g.channels * c.g.height * c.g.width), dy(c.n * c.out_c * P), w(c.out_c * ckk),
            dw(c.out_c * ckk), db(c.out_c);
        for (float& v : x) v = round_to_bf16(normal(rng));
        for (float& v : dy) v = round_to_bf16(normal(rng));
        for (float& v : w) v = normal(rng);
        const auto time_us = [](auto&& f) {
            f();
            f();
            const auto t0 = std::chrono::steady_clock::now();
            int reps = 0;
            double seconds = 0;
            do {
                f();
                ++reps;
                seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            } while (seconds < 0.5);
            return seconds / reps * 1e6;
        };
        const double fp32 = time_us([&] {
            kernel<op::conv2d_backward, cpu>::run(c.g, c.out_c, c.n, x.data(), w.data(), dy.data(), dw.data(),
                                                  db.data(), nullptr);
        });
        const double bf16 = time_us([&] {
            conv2d_bf16_dw(c.g, c.out_c, c.n, x.data(), dy.data(), dw.data(), db.data(),
                           {&cpu_detail::bf16_avx512::dw_pack, &cpu_detail::bf16_avx512::dw_tile_rows});
        });
        const double flop = 2.0 * double(c.n) * double(P) * double(c.out_c) * double(ckk);
        std::printf("%-34s %9.1f (%6.1f) %12.1f (%6.1f) %6.2fx %s\n", c.what, fp32, flop / fp32 / 1e3, bf16,
                    flop / bf16 / 1e3, fp32 / bf16, conv_bf16_dw_applies(c.g, c.out_c) ? "bf16" : "fp32");
    }
#else
    std::printf("bench_conv_bf16_dw: built without the AVX512-BF16 body\n");
#endif
    return 0;
}
