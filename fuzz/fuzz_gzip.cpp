// libFuzzer target for include/oar/io/gzip.hpp (read_maybe_gzip, zlib's gzread) and
// io/gzip_stream.hpp (InflateThread, zlib's inflate on a thread): the same bytes through both.
// Input: a mode byte, then the payload, written as it is.
//   bits 0-1: InflateThread block size 1, 3, 64 or 65536 bytes
//   bits 2-3: InflateThread compressed read size 1, 2, 17 or 4096 bytes
// Each reader must either return bytes or throw an oar::error; when both return, the bytes must
// be the same (they may disagree on what is an error: gzread ignores trailing garbage after the
// last member, InflateThread rejects it).
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t
#include <vector>   // std::vector

#include <oar/core/error.hpp>      // oar::error: the expected rejection
#include <oar/io/gzip.hpp>         // under test: read_maybe_gzip
#include <oar/io/gzip_stream.hpp>  // under test: InflateThread

#include "fuzz_common.hpp"  // oar_fuzz::scratch, write_raw, require

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const unsigned mode = data[0];
    ++data;
    --size;
    static constexpr std::size_t blocks[4] = {1, 3, 64, 65536};
    static constexpr std::size_t reads[4] = {1, 2, 17, 4096};
    const std::string path = oar_fuzz::scratch().file("input.gz");
    oar_fuzz::write_raw(path, data, size);

    std::vector<std::uint8_t> whole;
    bool whole_ok = false;
    try {
        whole = oar::io::read_maybe_gzip(path, std::size_t(64) << 20);
        whole_ok = true;
    } catch (const oar::error& e) {
        oar_fuzz::rejected(e);
    }

    std::vector<std::uint8_t> streamed;
    bool streamed_ok = false;
    try {
        oar::io::InflateThread::Options opt;
        opt.block_bytes = blocks[mode & 3];
        opt.read_bytes = reads[(mode >> 2) & 3];
        opt.queue_blocks = 2;
        oar::io::InflateThread in(path, opt);
        std::vector<char> block;
        streamed_ok = true;
        while (in.next(block)) {
            oar_fuzz::require(!block.empty() && block.size() <= opt.block_bytes);
            streamed.insert(streamed.end(), block.begin(), block.end());
            if (streamed.size() > (std::size_t(64) << 20)) {  // as read_maybe_gzip's limit: stop early
                streamed_ok = false;
                break;
            }
        }
    } catch (const oar::error& e) {
        oar_fuzz::rejected(e);
        streamed_ok = false;
    }

    if (whole_ok && streamed_ok) oar_fuzz::require(whole == streamed);
    return 0;
}
