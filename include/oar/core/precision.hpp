// Precision policies of a Network (its fourth template argument, nn/network.hpp):
// - fp32 (the default): every kernel takes and returns float.
// - bf16_mixed: bf16 mixed precision. Parameters, their gradients, optimizer state, activations,
//   the loss, softmax and normalisation statistics stay float; the matrix products of Linear and
//   Conv2D (forward, input gradient, weight gradient) take their operands (weights, the layer's
//   input, the output gradient) rounded to bfloat16 (core/bf16.hpp, nearest, ties to even) and sum
//   them in fp32. Where the CPU has AVX512-BF16 or AMX, Linear's products run on those units
//   (kernels/cpu/gemm_bf16.hpp), and Conv2D's too when conv_bf16_units() says so (otherwise its
//   weight gradient alone, where the fp32 kernels take a direct one: conv_bf16_dw_applies);
//   elsewhere the rounded operands go to the fp32 kernels, so the values
//   depend on the host only through the order of the fp32 sums. Checkpoints hold the fp32 parameters
//   and load into a network of either policy. On oar::cuda the same products run as cuBLAS bf16
//   GEMMs with fp32 compute (kernel<op::gemm_bf16, cuda>, on operands packed to bf16 by a kernel
//   that rounds as core/bf16.hpp does); everything else is the fp32 path.
#pragma once

#include <concepts>  // std::same_as
#include <cstddef>   // std::size_t

#include "switch.hpp"  // env_flag, detail::lazy_switch: the bf16 convolution switch

namespace oar {

/// fp32 everywhere (the default policy).
struct fp32 {
    static constexpr const char* name = "fp32";
};
/// bf16 operands for the GEMMs and convolutions, fp32 master weights, sums and everything else.
struct bf16_mixed {
    static constexpr const char* name = "bf16";
};

/// Under bf16_mixed, the most values of an activation that the CPU rounds into a copy at once:
/// Linear's forward rows (rounded and multiplied chunk by chunk, each chunk as its own product), so
/// that a large evaluation batch keeps no batch-sized rounded copy (Conv2D's kernels round x and dy
/// a sample or a group of samples at a time: ConvGeometry::round_bf16).
inline constexpr std::size_t bf16_chunk_values = std::size_t(1) << 18;

template <class P>
concept Precision = std::same_as<P, fp32> || std::same_as<P, bf16_mixed>;

/// The GEMM a policy's Linear layers run on the CPU: run(ta, tb, M, N, K, alpha, A, lda, B, ldb,
/// beta, C, ldc) with float operands, as kernel<op::gemm, cpu>. Defined for bf16_mixed by
/// kernels/cpu/gemm_bf16.hpp (so code that uses only fp32 never compiles the bf16 kernels).
template <class P>
struct precision_gemm;

/// A backend other than the CPU that runs bf16_mixed: it declares `bf16_kernels = true` and has
/// kernel<op::gemm_bf16, B> and the Conv2D kernels' overloads that take a trailing bf16_mixed{}
/// (oar::cuda; kernels/cuda/kernels.cuh).
template <class B>
concept Bf16Backend = requires { requires B::bf16_kernels; };

/// The convolution a policy's Conv2D layers run on the CPU where it has bf16 units: forward(g,
/// out_c, n, x, w, b, y) and backward(g, out_c, n, x, w, dy, dw, db, dx) as conv2d_bf16_forward /
/// conv2d_bf16_backward. Defined for bf16_mixed by kernels/cpu/conv_bf16.hpp (which gemm_bf16.hpp
/// brings).
template <class P>
struct precision_conv;

/// The default of conv_bf16_units: OAR_BF16_CONV_UNITS when set ("0": off, "1": on), else off; any
/// other value throws value_error (env_flag).
inline bool default_conv_bf16_units() { return env_flag("OAR_BF16_CONV_UNITS", false); }

/// Whether a bf16_mixed network's Conv2D layers run their products on the CPU's bf16 units where it
/// has them (AVX512-BF16 or AMX: precision_conv, kernels/cpu/conv_bf16.hpp's im2col route), or the
/// fp32 convolution kernels (Winograd, implicit GEMM) on bf16-rounded copies, as on every other CPU.
/// Off by default: on the AMX host measured (docs/BENCHMARKS.md) the route is slower than the fp32
/// kernels on rounded copies. Both compute exact products of the same bf16 values summed in fp32
/// (Winograd: transformed in fp32 first), so the switch changes speed and the order of sums.
/// Starts as default_conv_bf16_units(); set it between passes, not during one.
inline void set_conv_bf16_units(bool on) { detail::lazy_switch<&default_conv_bf16_units>::set(on); }
inline bool conv_bf16_units() { return detail::lazy_switch<&default_conv_bf16_units>::get(); }

}  // namespace oar
