// The bytes of IDX files (MNIST's format) for the data-loading tests: a big-endian header of
// unsigned-byte type, then the values. Write them with files.hpp.
#pragma once

#include <cstdint>  // std::uint8_t, std::uint32_t
#include <vector>   // std::vector

#include "files.hpp"  // bytes: the byte vectors built here

namespace oar_test {

/// Appends v to b as 4 big-endian bytes.
inline void put_be32(bytes& b, std::uint32_t v) {
    b.push_back(static_cast<std::uint8_t>(v >> 24));
    b.push_back(static_cast<std::uint8_t>(v >> 16));
    b.push_back(static_cast<std::uint8_t>(v >> 8));
    b.push_back(static_cast<std::uint8_t>(v));
}

/// An IDX file of unsigned bytes: 00 00 08 rank, big-endian dims, then `values`.
inline bytes idx_bytes(const std::vector<std::uint32_t>& dims, const bytes& values) {
    bytes b{0x00, 0x00, 0x08, static_cast<std::uint8_t>(dims.size())};
    for (std::uint32_t d : dims) put_be32(b, d);
    b.insert(b.end(), values.begin(), values.end());
    return b;
}

}  // namespace oar_test
