// Tests of include/oar/io/crc32c.hpp: the published CRC-32C check values (RFC 3720 appendix B.4 and
// the "123456789" check), agreement of the slice-by-8 loop with a bit-at-a-time reference on every
// length and alignment, incremental use, and TFRecord's mask (values from tensorboard's python implementation).
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <array>    // std::array: the fixed test vectors
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t, std::uint32_t
#include <string>   // std::string
#include <vector>   // std::vector: random buffers

#include <oar/io/crc32c.hpp>  // under test

namespace {

// The definition, one bit at a time: an independent reference for the table-driven code.
std::uint32_t crc32c_bitwise(const std::uint8_t* p, std::size_t n) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? 0x82F63B78u : 0u);
    }
    return ~c;
}

std::vector<std::uint8_t> pseudo_random_bytes(std::size_t n, std::uint32_t seed) {
    std::vector<std::uint8_t> v(n);
    std::uint32_t x = seed * 2654435761u + 1;
    for (auto& b : v) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b = static_cast<std::uint8_t>(x >> 24);
    }
    return v;
}

}  // namespace

TEST_CASE("crc32c of \"123456789\" is the published check value 0xE3069283") {
    CHECK(oar::io::crc32c(std::string("123456789")) == 0xE3069283u);
}

TEST_CASE("crc32c of no bytes is zero") {
    CHECK(oar::io::crc32c(nullptr, 0) == 0u);
}

TEST_CASE("crc32c matches the RFC 3720 (iSCSI) test vectors") {
    std::array<std::uint8_t, 32> zeros{}, ones{}, up{}, down{};
    for (std::size_t i = 0; i < 32; ++i) {
        ones[i] = 0xFF;
        up[i] = static_cast<std::uint8_t>(i);
        down[i] = static_cast<std::uint8_t>(31 - i);
    }
    CHECK(oar::io::crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
    CHECK(oar::io::crc32c(ones.data(), ones.size()) == 0x62A8AB43u);
    CHECK(oar::io::crc32c(up.data(), up.size()) == 0x46DD794Eu);
    CHECK(oar::io::crc32c(down.data(), down.size()) == 0x113FDB5Cu);
    // An iSCSI read command PDU.
    const std::array<std::uint8_t, 48> pdu{0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                           0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                                           0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                                           0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    CHECK(oar::io::crc32c(pdu.data(), pdu.size()) == 0xD9963A56u);
}

TEST_CASE("crc32c's slice-by-8 loop equals the bitwise definition for every length and alignment up to 300 bytes") {
    const auto buf = pseudo_random_bytes(320, 7);
    int mismatches = 0;
    for (std::size_t offset = 0; offset < 8; ++offset)
        for (std::size_t n = 0; n <= 300; ++n)
            if (oar::io::crc32c(buf.data() + offset, n) != crc32c_bitwise(buf.data() + offset, n)) ++mismatches;
    CHECK(mismatches == 0);
}

TEST_CASE("crc32c continued piece by piece equals crc32c of the whole buffer") {
    const auto buf = pseudo_random_bytes(100003, 11);
    const std::uint32_t whole = oar::io::crc32c(buf.data(), buf.size());
    CHECK(whole == crc32c_bitwise(buf.data(), buf.size()));
    for (std::size_t cut : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(4096), std::size_t(99999)}) {
        const std::uint32_t head = oar::io::crc32c(buf.data(), cut);
        CHECK(oar::io::crc32c(buf.data() + cut, buf.size() - cut, head) == whole);
    }
}

TEST_CASE("mask_crc32c rotates and offsets like TFRecord, and unmask_crc32c inverts it") {
    // TFRecord's definition: ((crc >> 15) | (crc << 17)) + 0xa282ead8, modulo 2^32.
    CHECK(oar::io::mask_crc32c(0u) == 0xA282EAD8u);
    // Values from tensorboard's own masked_crc32c (tensorflow_stub/pywrap_tensorflow.py): of
    // "123456789", and of the 8-byte little-endian length 24 that heads a TFRecord.
    CHECK(oar::io::mask_crc32c(oar::io::crc32c(std::string("123456789"))) == 0xC78AB0E5u);
    const std::array<std::uint8_t, 8> len24{24, 0, 0, 0, 0, 0, 0, 0};
    CHECK(oar::io::mask_crc32c(oar::io::crc32c(len24.data(), len24.size())) == 0x224B7FA3u);
    const auto buf = pseudo_random_bytes(64, 3);
    for (std::size_t i = 0; i + 4 <= buf.size(); i += 4) {
        const std::uint32_t c = oar::io::crc32c(buf.data(), i);
        CHECK(oar::io::unmask_crc32c(oar::io::mask_crc32c(c)) == c);
        CHECK(oar::io::mask_crc32c(c) != c);
    }
    static_assert(oar::io::unmask_crc32c(oar::io::mask_crc32c(0x12345678u)) == 0x12345678u);
}
