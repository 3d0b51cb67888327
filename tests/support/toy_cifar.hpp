// A learnable toy set written as CIFAR-10's binary files (oar/data/synthetic_cifar10.hpp's records:
// class k is a bright 8x8 square whose place and tint depend on k, over noise), for running
// train_cifar10 and resnet_cifar end to end from files.
#pragma once

#include <cstddef>     // std::size_t
#include <filesystem>  // std::filesystem::path

#include <oar/data/synthetic_cifar10.hpp>  // synthetic_cifar10_records

#include "files.hpp"  // write_raw

namespace oar_test {

/// DIR/data_batch_1.bin .. data_batch_5.bin (per_batch records each) and DIR/test_batch.bin (test records).
inline void write_toy_cifar(const std::filesystem::path& dir, std::size_t per_batch, std::size_t test) {
    std::filesystem::create_directories(dir);
    for (std::size_t b = 1; b <= 5; ++b)
        write_raw(dir / ("data_batch_" + std::to_string(b) + ".bin"), oar::data::synthetic_cifar10_records(per_batch, b));
    write_raw(dir / "test_batch.bin", oar::data::synthetic_cifar10_records(test, 0));
}

}  // namespace oar_test
