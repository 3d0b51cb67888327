// What a layer's forward/backward sees besides its tensors: train/eval mode, the seeded random
// streams, which forward pass this is (for dropout masks), its own index, views of its
// parameters and gradients in the network's flat buffers, a scratch workspace and, for blocks,
// their region of the activation arena.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t

#include "../kernels/types.hpp"  // Trans, ConvGeometry: mixed_gemm's and mixed_conv's arguments
#include "backend.hpp"  // Backend, cpu
#include "rng.hpp"      // CounterRng

namespace oar {

enum class Mode { train, eval };

template <class T>
class gemm_pack_cache;  // kernels/cpu/gemm.hpp

template <Backend B>
struct Context {
    using backend = B;
    using value_type = typename B::value_type;
    Mode mode = Mode::train;
    CounterRng rng{};
    std::uint64_t step = 0;          ///< training forward passes so far (a dropout mask is a function of it)
    std::size_t layer_index = 0;     ///< position of the running layer in its Sequential
    const value_type* params = nullptr;  ///< the running layer's parameter block (see ParametricLayer)
    value_type* grads = nullptr;         ///< its gradient block, same layout
    value_type* buffers = nullptr;       ///< its block of non-trainable state (see BufferedLayer)
    value_type* workspace = nullptr;     ///< scratch of at least the layer's `workspace(in)` values
    /// the running layer's region of the network's activation arena, n * arena_floats(in) values
    /// kept from forward to its backward (a block's inner activations; see Layer)
    value_type* saved = nullptr;
    std::size_t workspace_size = 0;
    /// On the CPU in evaluation mode (set by Network): where layers keep packed copies of their
    /// weights between forwards, valid while param_version (the parameter buffer's count of
    /// writes, basic_parameter_set::version) stays the same; null otherwise.
    gemm_pack_cache<value_type>* packed_weights = nullptr;
    std::uint64_t param_version = 0;
    /// Under a mixed-precision policy (core/precision.hpp; set by Network from its type): the GEMM
    /// that Linear runs instead of kernel<op::gemm> (float operands, rounded to bf16 inside: the
    /// CPU's precision_gemm, a Bf16Backend's kernel<op::gemm_bf16>), and the sign for Conv2D to
    /// round its operands (on the CPU) or call its kernels' bf16_mixed overloads; null under fp32.
    using mixed_gemm_fn = void (*)(Trans, Trans, std::size_t, std::size_t, std::size_t, float, const float*,
                                   std::size_t, const float*, std::size_t, float, float*, std::size_t);
    mixed_gemm_fn mixed_gemm = nullptr;
    /// Under bf16_mixed on the CPU (set by Network): mixed_gemm with op(B) taken from the packed
    /// weights' cache (packed_weights, param_version): Linear's evaluation-mode forward.
    using mixed_gemm_cached_fn = void (*)(gemm_pack_cache<value_type>&, std::uint64_t, Trans, Trans, std::size_t,
                                          std::size_t, std::size_t, float, const float*, std::size_t, const float*,
                                          std::size_t, float, float*, std::size_t);
    mixed_gemm_cached_fn mixed_gemm_cached = nullptr;
    /// Under bf16_mixed on the CPU (set by Network, kernels/cpu/conv_bf16.hpp): Conv2D's forward and
    /// backward with bf16 products, which Conv2D runs where the CPU has AVX512-BF16 or AMX
    /// (conv_bf16_applies); null otherwise.
    using mixed_conv_forward_fn = void (*)(const ConvGeometry&, std::size_t, std::size_t, const float*, const float*,
                                           const float*, float*);
    using mixed_conv_backward_fn = void (*)(const ConvGeometry&, std::size_t, std::size_t, const float*,
                                            const float*, const float*, float*, float*, float*);
    mixed_conv_forward_fn mixed_conv_forward = nullptr;
    mixed_conv_backward_fn mixed_conv_backward = nullptr;
    /// Under bf16_mixed on the CPU (set by Network, kernels/cpu/conv_bf16.hpp): whether a
    /// convolution's weight gradient runs on the bf16 units (conv_bf16_dw_applies), and that
    /// gradient (conv2d_bf16_dw: dw and db added to, from x and the rounded dy), which Conv2D then
    /// computes apart from its input gradient; null otherwise.
    using mixed_conv_dw_applies_fn = bool (*)(const ConvGeometry&, std::size_t);
    using mixed_conv_dw_fn = void (*)(const ConvGeometry&, std::size_t, std::size_t, const float*, const float*,
                                      float*, float*);
    mixed_conv_dw_applies_fn mixed_conv_dw_applies = nullptr;
    mixed_conv_dw_fn mixed_conv_dw = nullptr;
};

}  // namespace oar
