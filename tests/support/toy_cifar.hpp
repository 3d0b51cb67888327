// A learnable toy set in CIFAR-10's binary layout (3073-byte records: a label byte, then R, G and
// B planes of 32x32), for running train_cifar10 end to end: class k is a bright 8x8 square whose
// place on the picture (a 5 x 2 grid) and tint depend on k, over noise.
#pragma once

#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint8_t, std::uint32_t
#include <filesystem>  // std::filesystem::path

#include "files.hpp"  // write_raw, bytes

namespace oar_test {

/// n records of the toy set, the i-th of class (i * 3 + offset) % 10.
inline bytes toy_cifar_records(std::size_t n, std::size_t offset) {
    bytes out;
    std::uint32_t state = 12345u + static_cast<std::uint32_t>(offset) * 7919u;
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = (i * 3 + offset) % 10, x0 = 2 + 6 * (k % 5), y0 = 4 + 16 * (k / 5);
        out.push_back(static_cast<std::uint8_t>(k));
        for (std::size_t c = 0; c < 3; ++c)
            for (std::size_t y = 0; y < 32; ++y)
                for (std::size_t x = 0; x < 32; ++x) {
                    state = state * 1664525u + 1013904223u;
                    const int noise = static_cast<int>(state >> 26);  // 0..63
                    const bool in = x >= x0 && x < x0 + 8 && y >= y0 && y < y0 + 8;
                    const int v = in ? 160 + static_cast<int>((k * 37 + c * 50) % 96) : 40 + noise;
                    out.push_back(static_cast<std::uint8_t>(v));
                }
    }
    return out;
}

/// DIR/data_batch_1.bin .. data_batch_5.bin (per_batch records each) and DIR/test_batch.bin (test records).
inline void write_toy_cifar(const std::filesystem::path& dir, std::size_t per_batch, std::size_t test) {
    std::filesystem::create_directories(dir);
    for (std::size_t b = 1; b <= 5; ++b)
        write_raw(dir / ("data_batch_" + std::to_string(b) + ".bin"), toy_cifar_records(per_batch, b));
    write_raw(dir / "test_batch.bin", toy_cifar_records(test, 0));
}

}  // namespace oar_test
