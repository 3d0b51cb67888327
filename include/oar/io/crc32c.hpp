// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord files such as
// TensorBoard's event files, plus TFRecord's "masked" form of it. Slice-by-8 over tables built at
// compile time: no CPU-specific instructions, so it is the same on every machine and backend.
#pragma once

#include <array>        // std::array: the lookup tables
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint32_t, std::uint8_t
#include <string_view>  // std::string_view overload

namespace oar::io {

namespace crc_detail {

/// tables[k][b]: the CRC of byte b followed by k zero bytes; tables[0] is the classic byte table.
constexpr std::array<std::array<std::uint32_t, 256>, 8> make_crc32c_tables() {
    std::array<std::array<std::uint32_t, 256>, 8> t{};
    for (std::uint32_t b = 0; b < 256; ++b) {
        std::uint32_t c = b;
        for (int i = 0; i < 8; ++i) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : (c >> 1);
        t[0][b] = c;
    }
    for (std::size_t k = 1; k < 8; ++k)
        for (std::size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
    return t;
}

inline constexpr auto crc32c_tables = make_crc32c_tables();

}  // namespace crc_detail

/// CRC-32C of `n` bytes at `data`, continuing from `crc` (the value returned for the bytes before;
/// 0 to start). crc32c("123456789") == 0xE3069283.
inline std::uint32_t crc32c(const void* data, std::size_t n, std::uint32_t crc = 0) noexcept {
    const auto& t = crc_detail::crc32c_tables;
    const auto* p = static_cast<const std::uint8_t*>(data);
    std::uint32_t c = ~crc;
    // Eight bytes per step: the low four are folded into the running CRC, the high four looked up
    // directly; bytes are combined explicitly so the result does not depend on the host's endianness.
    while (n >= 8) {
        const std::uint32_t lo = c ^ (std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
                                      std::uint32_t(p[3]) << 24);
        c = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^ t[3][p[4]] ^
            t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFFu];
    return ~c;
}

inline std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc = 0) noexcept {
    return crc32c(bytes.data(), bytes.size(), crc);
}

/// TFRecord's masked CRC (rotate right by 15, add a constant): stored after each record's length
/// and payload, so that a CRC of data that itself holds CRCs is not trivially zero.
constexpr std::uint32_t mask_crc32c(std::uint32_t crc) noexcept {
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

/// The inverse of mask_crc32c.
constexpr std::uint32_t unmask_crc32c(std::uint32_t masked) noexcept {
    const std::uint32_t rot = masked - 0xA282EAD8u;
    return (rot >> 17) | (rot << 15);
}

}  // namespace oar::io
