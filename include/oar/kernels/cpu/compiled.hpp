// The compiled-kernels mode's implementation (config.hpp: OAR_EXTERN_KERNELS): explicit
// instantiations of the dispatched CPU kernels that the headers only declare in that mode (the
// GEMM, the batch convolutions, the Winograd kernels and BatchNorm's channel loops, every ISA's
// copy, float and double).
// Include it in exactly one translation unit, after defining OAR_KERNELS_IMPLEMENTATION, and link
// that file into the program; CMake's oar::kernels target is such a library (src/kernels.cpp).
// Every other file of the program is compiled with OAR_EXTERN_KERNELS=1 (oar::kernels sets it).
#pragma once

#if !defined(OAR_KERNELS_IMPLEMENTATION)
#error "oar: kernels/cpu/compiled.hpp is the oar::kernels library's implementation: define OAR_KERNELS_IMPLEMENTATION before including it, in one file only"
#else

#include <cstddef>  // std::size_t

#include "batch_norm.hpp"  // batch_norm_forward_channels, batch_norm_backward_channels, batch_norm_fold_channels
#include "conv.hpp"      // conv2d_forward_batch, conv2d_backward_batch
#include "gemm.hpp"      // gemm_at_active_isa
#include "winograd.hpp"  // winograd_lanes, winograd_images, winograd_conv_batch, winograd_dw_batch

namespace oar::cpu_detail {

#define OAR_INSTANTIATE_KERNELS(T)                                                                                  \
    template void gemm_at_active_isa<T>(Trans, Trans, std::size_t, std::size_t, std::size_t, T, const T*,           \
                                        std::size_t, const T*, std::size_t, T, T*, std::size_t);                    \
    template void gemm_prepacked_at_active_isa<T>(Trans, Trans, std::size_t, std::size_t, std::size_t, T, const T*, \
                                                  std::size_t, const T*, std::size_t, T, T*, std::size_t, const T*);   \
    template std::size_t gemm_packed_b_size_at_active_isa<T>(std::size_t, std::size_t);                             \
    template void gemm_pack_b_at_active_isa<T>(Trans, std::size_t, std::size_t, const T*, std::size_t, T*);          \
    template void conv2d_forward_batch<false, T>(const ConvGeometry&, std::size_t, std::size_t, const T*, const T*, \
                                                 const T*, T*, sample_post);                                        \
    template void conv2d_forward_batch<true, T>(const ConvGeometry&, std::size_t, std::size_t, const T*, const T*,  \
                                                const T*, T*, sample_post);                                         \
    template void conv2d_backward_batch<false, T>(const ConvGeometry&, std::size_t, std::size_t, const T*,          \
                                                  const T*, const T*, T*, const T*, T*, T*, T*);                    \
    template void conv2d_backward_batch<true, T>(const ConvGeometry&, std::size_t, std::size_t, const T*, const T*, \
                                                 const T*, T*, const T*, T*, T*, T*);                               \
    template std::size_t winograd_lanes<T>();                                                                       \
    template std::size_t winograd_images<T>(std::size_t);                                                           \
    template void winograd_conv_batch<false, T>(std::size_t, std::size_t, std::size_t, std::size_t, std::size_t,    \
                                                std::size_t, std::size_t, const T*, const T*, const T*, T*, bool);  \
    template void winograd_conv_batch<true, T>(std::size_t, std::size_t, std::size_t, std::size_t, std::size_t,     \
                                               std::size_t, std::size_t, const T*, const T*, const T*, T*, bool);   \
    template void winograd_dw_batch<T>(std::size_t, std::size_t, std::size_t, std::size_t, std::size_t,             \
                                       std::size_t, std::size_t, const T*, const T*, T*, bool, bool);       \
    template void batch_norm_forward_channels<T>(std::size_t, std::size_t, std::size_t, std::size_t, std::size_t,   \
                                                 const T*, const T*, const T*, T*, T*, bool, float, float, T*,      \
                                                 bool, double*);                                                    \
    template void batch_norm_backward_channels<T>(std::size_t, std::size_t, std::size_t, std::size_t, std::size_t,  \
                                                  const T*, const T*, const T*, const T*, bool, float, const T*,    \
                                                  T*, T*, T*, const T*, T*, const double*);                         \
    template void batch_norm_fold_channels<T>(std::size_t, const T*, const T*, const T*, const T*, float, T*, T*);

OAR_INSTANTIATE_KERNELS(float)
OAR_INSTANTIATE_KERNELS(double)
#undef OAR_INSTANTIATE_KERNELS

}  // namespace oar::cpu_detail

#endif  // OAR_KERNELS_IMPLEMENTATION
