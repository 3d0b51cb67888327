// libFuzzer target for include/oar/data/mnist_json.hpp (read_mnist_json) and the streaming
// inflate thread of io/gzip_stream.hpp it reads through.
// Input: a mode byte, then the payload (JSON text, or gzip bytes).
//   bit 0:    gzip-compress the payload in the harness (else write it as it is; the reader detects gzip)
//   bits 1-2: block size of the inflate thread: 1, 7, 64 or 4096 bytes, so every cut of the text
//             between blocks is tried
//   bit 3:    images of 4 values (1x2x2), else of 1 value (1x1x1): small, so the fuzzer can write
//             whole valid files
// Memory is bounded by small options (max_element_bytes 4 KiB). oar::error is the expected
// rejection; any other exception, a crash, a leak or a sanitizer report is a finding. A successful
// parse must be self-consistent.
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t
#include <cmath>    // std::isfinite

#include <oar/core/error.hpp>       // oar::error: the expected rejection
#include <oar/data/mnist_json.hpp>  // under test

#include "fuzz_common.hpp"  // oar_fuzz::scratch, write_input, require

namespace {

void check(const oar::data::InMemoryDataset& d, std::size_t values) {
    oar_fuzz::require(d.dims().size() == values);
    oar_fuzz::require(d.images().size() == d.size() * values);
    oar_fuzz::require(d.labels().size() == d.size());
    for (const float x : d.images()) oar_fuzz::require(std::isfinite(x));
    for (const auto y : d.labels()) oar_fuzz::require(y >= 0 && y < 10);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const unsigned mode = data[0];
    ++data;
    --size;
    static constexpr std::size_t blocks[4] = {1, 7, 64, 4096};
    oar::data::MnistJsonOptions opt;
    opt.dims = (mode & 8) ? oar::make_dims(1, 2, 2) : oar::make_dims(1, 1, 1);
    opt.num_classes = 10;
    opt.max_element_bytes = 4096;
    opt.block_bytes = blocks[(mode >> 1) & 3];
    const std::string path = oar_fuzz::scratch().file("mnist.json.gz");
    oar_fuzz::write_input(path, data, size, (mode & 1) != 0);
    try {
        const oar::data::MnistJson j = oar::data::read_mnist_json(path, opt);
        check(j.train, opt.dims.size());
        check(j.valid, opt.dims.size());
        check(j.test, opt.dims.size());
    } catch (const oar::error& e) {
        oar_fuzz::rejected(e);  // the expected outcome for malformed input
    }
    return 0;
}
