// Winograd F(2x2, 5x5) and F(4x4, 3x3): a stride-1 5x5 (3x3) convolution over many channels with
// 36 multiplications per 2x2 (4x4) output tile and (input, output) channel pair (a 6x6 input tile
// gives the outputs) instead of 100 (144): about 2.8 (4) times fewer multiply-adds than the direct
// kernel, for the transforms' cost. Used by conv.hpp (winograd_applies) for float convolutions of
// at least 8 input and 8 output channels: the course's second convolution, MyNet's and ResNet8's
// 3x3 ones; forward and input gradient (the same kernel on dy with the flipped weights). The weight
// gradient (winograd_dw_batch, the forward's adjoint) is here too; conv.hpp takes it only for 3x3
// on outputs wide enough (winograd_dw_applies: from 13 wide with AVX-512's 16 images a group, from
// 29 with AVX2's 8): on narrower ones and 5x5 the direct weight gradient measures faster
// (docs/BENCHMARKS.md), as an image has few tiles a row and the per-block partial sums cost as much
// as the multiply-adds saved. Interpolation points 0, 1, -1, 2, -2 and infinity for both (Lavin and
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): one input
// transform B^T; the output transform A^T has entries 0, +-1, +-2 (2x2 tiles) or up to +-8 (4x4 tiles).
//   Y = A^T [ (G w G^T) (.) (B^T d B) ] A      for each (output channel, output tile), summed over c.
// Images are the SIMD lanes: each group of L images (16 with AVX-512, 8 with AVX2, 4 with SSE2: the
// kernels are compiled for each, isa/winograd_body.inc, and the CPU's best runs) is interleaved
// (C, Hq, Wq, L) with its zero padding, so every transform is plain vector arithmetic; the sum
// over channels is, for each of the 36 points, a small GEMM (M x C) x (C x tiles*L) on
// micro-tiles. Work is split by (group, band of tile rows) on the default pool, each task
// interleaving its band's input rows itself; every output is computed by one task in a fixed
// order, so the bits do not depend on the thread count.
// Rounding: the weight transform is done in double and rounded once; the input and output
// transforms add at most a few ulps of the largest input times 25 (|B^T| <= 5 per pass), times the
// output transform's gain (up to 18 per pass for 4x4 tiles, whose outputs therefore carry larger
// errors than the 2x2 tiles' or the direct kernel's).
// tests/kernels/cpu/test_winograd.cpp holds it to the direct convolution in double.
#pragma once

#include <algorithm>    // std::min, std::fill
#include <array>        // std::array: the micro-tiles by shape
#include <cstddef>      // std::size_t
#include <type_traits>  // std::is_same_v
#include <utility>      // std::index_sequence


#include "../../config.hpp"            // OAR_ALWAYS_INLINE
#include "../../core/bf16.hpp"         // round_to_bf16: operands rounded as they are interleaved
#include "../../core/switch.hpp"       // env_flag, detail::lazy_switch: OAR_WINOGRAD and the switch
#include "../../core/thread_pool.hpp"  // default_pool
#include "gemm.hpp"                    // cpu_detail::scratch
#include "isa/dispatch.hpp"             // OAR_ISA_X86, active_cpu_isa, <immintrin.h> for the AVX-512 transposes

namespace oar {

/// The default of conv_winograd: OAR_WINOGRAD when set ("0": off, "1": on), else on; any other
/// value throws value_error (env_flag), as a malformed OAR_NUM_THREADS does.
inline bool default_conv_winograd() { return env_flag("OAR_WINOGRAD", true); }

/// Whether float stride-1 5x5 and 3x3 convolutions of >= 8 input and output channels use the Winograd
/// kernel (the default) or the direct implicit GEMM: for comparisons and benchmarks. Starts as
/// default_conv_winograd() (OAR_WINOGRAD=0 turns it off; a malformed value throws oar::value_error
/// from the first convolution that asks). Set it between passes, not during one.
inline void set_conv_winograd(bool on) { detail::lazy_switch<&default_conv_winograd>::set(on); }
inline bool conv_winograd() { return detail::lazy_switch<&default_conv_winograd>::get(); }

namespace cpu_detail {

/// Whether conv.hpp takes the Winograd kernel for a convolution of C input and M output channels.
template <class T>
bool winograd_applies(std::size_t C, std::size_t M, std::size_t kernel, std::size_t stride) {
    return std::is_same_v<T, float> && (kernel == 5 || kernel == 3) && stride == 1 && C >= 8 && M >= 8 &&
           conv_winograd();
}


/// Outputs at least this wide: winograd_dw_batch's 3x3 weight gradient (a row of 8 or more 4x4 tiles,
/// which its tile blocks take whole) measured faster than the direct one on every body, and than the
/// bf16 units' (ResNet8's 16 -> 16 on 32 x 32; docs/BENCHMARKS.md).
inline constexpr std::size_t winograd_dw_wide = 29;

/// The narrowest 3x3 output whose weight gradient conv.hpp gives winograd_dw_batch, on a body of
/// `lanes` images per group: with AVX-512's 16 it measured faster than the direct GEMM from 13 wide
/// (MyNet's 32 -> 64 on 13 x 13, ResNet8's 32 -> 32 on 16 x 16) and slower at 8 and 4 wide; with
/// AVX2's 8 only from winograd_dw_wide (32 -> 32 on 16 x 16 was slower there).
constexpr std::size_t winograd_dw_min_width(std::size_t lanes) { return lanes >= 16 ? 12 : winograd_dw_wide; }

/// Whether winograd_dw_batch computes the weight gradient of such a convolution: 3x3 on outputs at
/// least min_width wide (conv.hpp: winograd_dw_min_width of its body's lanes; the bf16 units defer to
/// it from winograd_dw_wide); 5x5 measured slower (docs/BENCHMARKS.md).
template <class T>
bool winograd_dw_applies(std::size_t C, std::size_t M, std::size_t kernel, std::size_t stride, std::size_t out_width,
                         std::size_t min_width) {
    return kernel == 3 && out_width >= min_width && winograd_applies<T>(C, M, kernel, stride);
}

/// The per-ISA kernels (isa/winograd_body.inc), called through the dispatchers below; with
/// OAR_EXTERN_KERNELS (config.hpp) the dispatchers are only declared here and the oar::kernels
/// library holds them (kernels/cpu/compiled.hpp).
}  // namespace cpu_detail
}  // namespace oar

#if !OAR_EXTERN_KERNELS
#define OAR_ISA_BODY "winograd_body.inc"
#include "isa/every_isa.inc"
#endif

namespace oar {
namespace cpu_detail {
#if OAR_EXTERN_KERNELS
template <class T>
std::size_t winograd_lanes();
template <class T>
std::size_t winograd_images(std::size_t n);
template <bool Relu, class T>
void winograd_conv_batch(std::size_t K, std::size_t C, std::size_t H, std::size_t W, std::size_t pad, std::size_t M,
                         std::size_t n, const T* x, const T* w, const T* bias, T* y, bool round_x = false);
template <class T>
void winograd_dw_batch(std::size_t K, std::size_t C, std::size_t H, std::size_t W, std::size_t pad, std::size_t M,
                       std::size_t n, const T* x, const T* dy, T* dw, bool round_x = false, bool round_dy = false);
#else

/// Images per group (the SIMD lanes) at the active ISA: 16 (avx512), 8 (avx2), 4 (sse2) floats.
template <class T>
std::size_t winograd_lanes() {
    switch (active_vector_isa()) {
#if OAR_ISA_X86
        case cpu_isa::avx512: return isa_avx512::simd::batch<T>::size;
        case cpu_isa::avx2: return isa_avx2::simd::batch<T>::size;
#endif
        default: return isa_sse2::simd::batch<T>::size;
    }
}

/// How many of a batch's n images conv.hpp gives the Winograd kernel at the active ISA
/// (isa/winograd_body.inc winograd_images).
template <class T>
std::size_t winograd_images(std::size_t n) {
    OAR_ISA_DISPATCH(winograd_images<T>, n)
}

/// y (n, M, OH, OW) = conv(x, w) + bias, stride 1, K x K (K = 5 or 3), padding pad, at the active ISA;
/// round_x: x read rounded to bf16 (round_to_bf16).
template <bool Relu, class T>
void winograd_conv_batch(std::size_t K, std::size_t C, std::size_t H, std::size_t W, std::size_t pad, std::size_t M,
                         std::size_t n, const T* x, const T* w, const T* bias, T* y, bool round_x = false) {
    OAR_ISA_DISPATCH(winograd_conv_batch<Relu>, K, C, H, W, pad, M, n, x, w, bias, y, round_x)
}

/// dw (M, C, K, K) += the weight gradient of the stride-1 K x K convolution (K = 5 or 3), at the
/// active ISA; round_x, round_dy: that operand read rounded to bf16.
template <class T>
void winograd_dw_batch(std::size_t K, std::size_t C, std::size_t H, std::size_t W, std::size_t pad, std::size_t M,
                       std::size_t n, const T* x, const T* dy, T* dw, bool round_x = false, bool round_dy = false) {
    OAR_ISA_DISPATCH(winograd_dw_batch, K, C, H, W, pad, M, n, x, dy, dw, round_x, round_dy)
}
#endif  // OAR_EXTERN_KERNELS

}  // namespace cpu_detail
}  // namespace oar
