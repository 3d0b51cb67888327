// libFuzzer target for include/oar/data/cifar10.hpp: one batch file and the tar / tar.gz archive.
// Input: a mode byte, then the payload.
//   mode % 4 == 0: read_cifar10_batch of the payload as it is (raw, or gzip the reader detects)
//   mode % 4 == 1: load_cifar10 of the payload as an archive, as it is (.tar, or .tar.gz bytes)
//   mode % 4 == 2: the same, the payload gzip-compressed by the harness (a .tar.gz)
//   mode % 4 == 3: the payload as a .tar whose header checksums the harness recomputes first, so
//                  mutations of names, sizes and types get past the checksum to the code behind it
// oar::error is the expected rejection; any other exception, a crash, a leak or a sanitizer
// report is a finding. A successful load must be self-consistent.
#include <algorithm>  // std::min
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint8_t, std::uint64_t
#include <cstdio>     // std::snprintf: writing the recomputed checksum
#include <vector>     // std::vector: the payload with fixed checksums

#include <oar/core/error.hpp>     // oar::error: the expected rejection
#include <oar/data/cifar10.hpp>   // under test

#include "fuzz_common.hpp"  // oar_fuzz::scratch, write_input, require

namespace {

/// A lenient octal read of a tar size field (the harness only needs to find the next header).
std::uint64_t octal(const std::uint8_t* f, std::size_t len) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < len && f[i] >= '0' && f[i] <= '7' && v < (std::uint64_t(1) << 40); ++i) v = v * 8 + (f[i] - '0');
    return v;
}

/// Recomputes the checksum of every header the reader would visit, until a zero block or the end.
void fix_checksums(std::vector<std::uint8_t>& t) {
    std::size_t at = 0;
    while (at + 512 <= t.size()) {
        std::uint8_t* h = t.data() + at;
        bool zero = true;
        for (std::size_t i = 0; i < 512 && zero; ++i) zero = h[i] == 0;
        if (zero) return;
        unsigned sum = 0;
        for (std::size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
        char field[9];
        std::snprintf(field, sizeof field, "%06o", sum & 0777777u);
        std::copy(field, field + 6, h + 148);
        h[154] = 0;
        h[155] = ' ';
        const std::uint64_t size = octal(h + 124, 12);
        if (size > t.size()) return;
        at += 512 + static_cast<std::size_t>((size + 511) / 512 * 512);
    }
}

/// A loaded set: [3, 32, 32] images, one label per image (the count agrees with the pixels), and
/// every label a class, 0..9.
void check(const oar::data::ByteImageDataset& d) {
    oar_fuzz::require(d.dims().size() == oar::data::cifar10_image_bytes);
    oar_fuzz::require(d.labels().size() == d.size());
    oar_fuzz::require(d.pixels().size() == d.size() * oar::data::cifar10_image_bytes);
    for (const std::int64_t label : d.labels())
        oar_fuzz::require(label >= 0 && label < static_cast<std::int64_t>(oar::data::cifar10_classes));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const unsigned mode = data[0] % 4;
    ++data;
    --size;
    const auto& dir = oar_fuzz::scratch();
    try {
        if (mode == 0) {
            const std::string path = dir.file("data_batch_1.bin");
            oar_fuzz::write_input(path, data, size, false);
            const oar::data::ByteImageDataset d = oar::data::read_cifar10_batch(path);
            check(d);
            // A raw (not gzip) batch is whole records: the count is the payload's size / 3073.
            if (size < 2 || data[0] != 0x1f || data[1] != 0x8b)
                oar_fuzz::require(d.size() * oar::data::cifar10_record_bytes == size);
            return 0;
        }
        const std::string path = dir.file("cifar-10-binary.tar.gz");
        if (mode == 3) {
            std::vector<std::uint8_t> t(data, data + size);
            fix_checksums(t);
            oar_fuzz::write_input(path, t.data(), t.size(), false);
        } else {
            oar_fuzz::write_input(path, data, size, mode == 2);
        }
        const oar::data::Cifar10Splits s = oar::data::load_cifar10(path);
        check(s.train);
        check(s.test);
    } catch (const oar::error& e) {
        oar_fuzz::rejected(e);  // the expected outcome for malformed input
    }
    return 0;
}
