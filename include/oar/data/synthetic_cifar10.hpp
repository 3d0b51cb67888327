// Generated CIFAR-10-shaped data that a small conv net can learn, for programs and tests that run
// where the real CIFAR-10 cannot be downloaded: class k is a bright 8x8 square whose place on the
// picture (a 5 x 2 grid) and tint depend on k, over noise. The same records serve in memory (a
// ByteImageDataset) and as files in the binary CIFAR-10 layout, so a file reader and an in-memory
// run see the same images.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t, std::uint32_t, std::uint64_t, std::int64_t
#include <span>     // std::span: the records handed to the checked parser
#include <utility>  // std::move
#include <vector>   // std::vector

#include "cifar10.hpp"  // cifar10_record_bytes, cifar10_dims, append_cifar10_records
#include "dataset.hpp"  // ByteImageDataset

namespace oar::data {

/// n records in CIFAR-10's binary layout (a label byte, then R, G and B planes of 32x32); record i
/// is of class (i * 3 + offset) % 10, so every class appears once in any 10 consecutive records.
/// `offset` and `seed` choose the noise (and, for offset, the class order): the training batches of
/// a generated set take offsets 1..5 and its test batch 0.
inline std::vector<std::uint8_t> synthetic_cifar10_records(std::size_t n, std::size_t offset,
                                                           std::uint64_t seed = 0) {
    std::vector<std::uint8_t> out;
    out.reserve(n * cifar10_record_bytes);
    auto state = static_cast<std::uint32_t>(12345u + offset * 7919u + seed * 104729u);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = (i * 3 + offset) % cifar10_classes, x0 = 2 + 6 * (k % 5), y0 = 4 + 16 * (k / 5);
        out.push_back(static_cast<std::uint8_t>(k));
        for (std::size_t c = 0; c < 3; ++c)
            for (std::size_t y = 0; y < 32; ++y)
                for (std::size_t x = 0; x < 32; ++x) {
                    state = state * 1664525u + 1013904223u;
                    const bool in = x >= x0 && x < x0 + 8 && y >= y0 && y < y0 + 8;
                    const std::size_t v = in ? 160 + (k * 37 + c * 50) % 96 : 40 + (state >> 26);  // noise 40..103
                    out.push_back(static_cast<std::uint8_t>(v));
                }
    }
    return out;
}

/// The same n records as a dataset, pixels scaled like load_cifar10's (to [0, 1] by default).
inline ByteImageDataset synthetic_cifar10(std::size_t n, std::size_t offset, std::uint64_t seed = 0,
                                          float scale = cifar10_default_scale,
                                          float shift = cifar10_default_shift) {
    std::vector<std::uint8_t> pixels;
    std::vector<std::int64_t> labels;
    if (n > 0) {
        const auto records = synthetic_cifar10_records(n, offset, seed);
        oar::detail::append_cifar10_records(std::span<const std::uint8_t>(records),
                                       oar::detail::cifar_source{"synthetic_cifar10"}, pixels, labels);
    }
    return {std::move(pixels), std::move(labels), cifar10_dims, scale, shift};
}

}  // namespace oar::data
