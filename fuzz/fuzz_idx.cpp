// libFuzzer target for include/oar/data/idx.hpp (read_idx, read_idx_pair) and io/gzip.hpp.
// Input: a mode byte, then the payload.
//   mode % 4 == 0: the payload is one IDX file as it is (the reader detects gzip itself)
//   mode % 4 == 1: the payload gzip-compressed by the harness, so mutations reach the IDX header
//   mode % 4 == 2, 3: read_idx_pair: the payload split into images and labels files at the offset
//                  given by the next two bytes (little-endian, modulo the payload's size); 3
//                  gzip-compresses both
// oar::error is the expected rejection; any other exception, a crash, a leak or a sanitizer
// report is a finding. A successful parse must be self-consistent.
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t

#include <oar/core/error.hpp>  // oar::error: the expected rejection
#include <oar/data/idx.hpp>    // under test

#include "fuzz_common.hpp"  // oar_fuzz::scratch, write_input, require

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const unsigned mode = data[0] % 4;
    ++data;
    --size;
    const auto& dir = oar_fuzz::scratch();
    try {
        if (mode < 2) {
            const std::string path = dir.file("input.idx");
            oar_fuzz::write_input(path, data, size, mode == 1);
            const oar::data::IdxArray a = oar::data::read_idx(path);
            std::size_t count = 1;
            oar_fuzz::require(!a.dims.empty() && a.dims.size() <= 4);
            for (std::size_t d : a.dims) {
                oar_fuzz::require(d > 0);
                count *= d;
            }
            oar_fuzz::require(count == a.values.size());
            return 0;
        }
        if (size < 2) return 0;
        const std::size_t cut = size > 2 ? (std::size_t{data[0]} | std::size_t{data[1]} << 8) % (size - 2) : 0;
        data += 2;
        size -= 2;
        const std::string images = dir.file("images.idx"), labels = dir.file("labels.idx");
        oar_fuzz::write_input(images, data, cut, mode == 3);
        oar_fuzz::write_input(labels, data + cut, size - cut, mode == 3);
        const oar::data::LabeledImages p = oar::data::read_idx_pair(images, labels, 10);
        oar_fuzz::require(p.pixels.size() == p.count * p.rows * p.cols);
        oar_fuzz::require(p.labels.size() == p.count);
        for (const auto y : p.labels) oar_fuzz::require(y >= 0 && y < 10);
    } catch (const oar::error& e) {
        oar_fuzz::rejected(e);  // the expected outcome for malformed input
    }
    return 0;
}
