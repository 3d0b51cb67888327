// Plain types that kernels of every backend take: the geometry of a convolution or pooling window,
// and GEMM's transpose flags. Backend-neutral: g++ and nvcc compile it, nothing here runs.
#pragma once

#include <cstddef>  // std::size_t

#include "../config.hpp"  // OAR_HOST_DEVICE

namespace oar {

/// Whether a GEMM operand is used transposed.
enum class Trans : bool { no = false, yes = true };

/// Geometry of a 2-D convolution or pooling window over one (C,H,W) sample.
struct ConvGeometry {
    std::size_t channels, height, width, kernel, stride, pad;
    OAR_HOST_DEVICE constexpr std::size_t out_height() const { return (height + 2 * pad - kernel) / stride + 1; }
    OAR_HOST_DEVICE constexpr std::size_t out_width() const { return (width + 2 * pad - kernel) / stride + 1; }
    OAR_HOST_DEVICE constexpr std::size_t col_rows() const { return channels * kernel * kernel; }
    OAR_HOST_DEVICE constexpr std::size_t col_cols() const { return out_height() * out_width(); }
};

/// Geometry of adaptive pooling over one (C,H,W) sample to (C, out_height, out_width): output i
/// along an axis of input size `in` averages [floor(i in / out), ceil((i + 1) in / out)), PyTorch's
/// and Paddle's windows (rows.hpp: adaptive_window).
struct AdaptiveGeometry {
    std::size_t channels, height, width, out_height, out_width;
};

}  // namespace oar
