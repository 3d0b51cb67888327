// A learnable toy set in MNIST's IDX layout, for running the programs end to end: digit d is a
// bright vertical bar at columns 2 + 2d and 3 + 2d over a faint pattern.
#pragma once

#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint8_t, std::uint32_t
#include <filesystem>  // std::filesystem::path
#include <string>      // std::string

#include "files.hpp"      // write_gzip, bytes
#include "idx_files.hpp"  // idx_bytes

namespace oar_test {

/// Writes DIR/PREFIX-images-idx3-ubyte.gz and DIR/PREFIX-labels-idx1-ubyte.gz with n samples.
inline void write_toy_mnist_set(const std::filesystem::path& dir, const std::string& prefix, std::uint32_t n) {
    bytes images, labels;
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t d = (i * 7) % 10;
        for (std::size_t y = 0; y < 28; ++y)
            for (std::size_t x = 0; x < 28; ++x)
                images.push_back(x == 2 + 2 * d || x == 3 + 2 * d ? 255 : static_cast<std::uint8_t>((x * y + i) % 17));
        labels.push_back(static_cast<std::uint8_t>(d));
    }
    write_gzip(dir / (prefix + "-images-idx3-ubyte.gz"), idx_bytes({n, 28, 28}, images));
    write_gzip(dir / (prefix + "-labels-idx1-ubyte.gz"), idx_bytes({n}, labels));
}

}  // namespace oar_test
