// Plain types that kernels of every backend take: the geometry of a convolution or pooling window,
// and GEMM's transpose flags. Backend-neutral: g++ and nvcc compile it, nothing here runs.
#pragma once

#include <cstddef>  // std::size_t

#include "../config.hpp"  // OAR_HOST_DEVICE

namespace oar {

/// Whether a GEMM operand is used transposed.
enum class Trans : bool { no = false, yes = true };

/// Geometry of a 2-D convolution or pooling window over one (C,H,W) sample. kernel, stride and pad
/// are the window's along the height; along the width they are kernel_w, stride_w and pad_w, or the
/// same as along the height where those are left `same` (a square window: `{C, H, W, K, S, P}`).
struct ConvGeometry {
    static constexpr std::size_t same = ~std::size_t(0);
    std::size_t channels, height, width, kernel, stride, pad;
    std::size_t kernel_w = same, stride_w = same, pad_w = same;
    /// The CPU's float convolution kernels read x and dy rounded to bf16 (nearest, ties to even), as
    /// they copy them into their own layouts (or a sample's or group's copy at a time): bf16 mixed
    /// precision's operands without a batch-sized rounded copy. The bits of the same kernel on
    /// rounded copies. Other kernels ignore it.
    bool round_bf16 = false;

    OAR_HOST_DEVICE constexpr std::size_t kh() const { return kernel; }
    OAR_HOST_DEVICE constexpr std::size_t kw() const { return kernel_w == same ? kernel : kernel_w; }
    OAR_HOST_DEVICE constexpr std::size_t sh() const { return stride; }
    OAR_HOST_DEVICE constexpr std::size_t sw() const { return stride_w == same ? stride : stride_w; }
    OAR_HOST_DEVICE constexpr std::size_t ph() const { return pad; }
    OAR_HOST_DEVICE constexpr std::size_t pw() const { return pad_w == same ? pad : pad_w; }
    /// Same kernel size, stride and padding along both axes (what the specialised paths need).
    OAR_HOST_DEVICE constexpr bool square() const { return kw() == kernel && sw() == stride && pw() == pad; }
    OAR_HOST_DEVICE constexpr std::size_t out_height() const { return (height + 2 * pad - kernel) / stride + 1; }
    OAR_HOST_DEVICE constexpr std::size_t out_width() const { return (width + 2 * pw() - kw()) / sw() + 1; }
    OAR_HOST_DEVICE constexpr std::size_t col_rows() const { return channels * kernel * kw(); }
    OAR_HOST_DEVICE constexpr std::size_t col_cols() const { return out_height() * out_width(); }
};

/// Geometry of adaptive pooling over one (C,H,W) sample to (C, out_height, out_width): output i
/// along an axis of input size `in` averages [floor(i in / out), ceil((i + 1) in / out)), PyTorch's
/// and Paddle's windows (rows.hpp: adaptive_window).
struct AdaptiveGeometry {
    std::size_t channels, height, width, out_height, out_width;
};

}  // namespace oar
