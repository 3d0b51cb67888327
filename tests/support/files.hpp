// Writing and reading test input files byte for byte, raw or gzip-compressed through zlib;
// every write is REQUIREd to succeed.
#pragma once

#include <doctest/doctest.h>  // REQUIRE

#include <algorithm>   // std::min
#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint8_t
#include <filesystem>  // std::filesystem::path
#include <fstream>     // std::ofstream, std::ifstream
#include <iterator>    // std::istreambuf_iterator
#include <string>      // std::string: read_text
#include <vector>      // std::vector

#include <zlib.h>  // gzopen, gzwrite, gzclose: writing the gzip inputs

namespace oar_test {

using bytes = std::vector<std::uint8_t>;

/// Writes `data` to `path` as it is.
inline void write_raw(const std::filesystem::path& path, const bytes& data) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    REQUIRE(f.good());
}

/// The bytes of the file at `path` (empty if it cannot be read).
inline bytes read_raw(const std::filesystem::path& path) {
    std::ifstream f(path, std::ios::binary);
    return bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

/// The text of the file at `path` (empty if it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
    const bytes b = read_raw(path);
    return std::string(b.begin(), b.end());
}

namespace detail {
/// `data` gzip-compressed by zlib into `path`, opened with `mode` ("wb" or "ab"), in chunks of at
/// most 1 MiB (gzwrite takes an unsigned count).
inline void gzip_to(const std::filesystem::path& path, const bytes& data, const char* mode) {
    gzFile f = gzopen(path.c_str(), mode);
    REQUIRE(f != nullptr);
    std::size_t done = 0;
    while (done < data.size()) {
        const unsigned n = static_cast<unsigned>(std::min<std::size_t>(data.size() - done, 1u << 20));
        REQUIRE(gzwrite(f, data.data() + done, n) == static_cast<int>(n));
        done += n;
    }
    REQUIRE(gzclose(f) == Z_OK);
}
}  // namespace detail

/// Writes `data` gzip-compressed (one gzip member) to `path`, replacing the file.
inline void write_gzip(const std::filesystem::path& path, const bytes& data) { detail::gzip_to(path, data, "wb"); }

/// Appends `data` to `path` as another gzip member.
inline void append_gzip(const std::filesystem::path& path, const bytes& data) { detail::gzip_to(path, data, "ab"); }

/// Deterministic bytes that compress somewhat (so the deflate stream has real structure).
inline bytes sample_bytes(std::size_t n, std::uint32_t seed = 1) {
    bytes b(n);
    std::uint32_t s = seed;
    for (std::size_t i = 0; i < n; ++i) {
        s = s * 1664525u + 1013904223u;
        b[i] = static_cast<std::uint8_t>((s >> 24) % 23 + (i % 7));
    }
    return b;
}

}  // namespace oar_test
