// Reading a whole file that may be gzip-compressed (zlib's gzread passes plain files through).
// The buffer grows with the bytes actually read, so a file never makes us allocate more than
// about twice its real content, whatever its headers claim.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t
#include <string>   // std::string
#include <vector>   // std::vector

#include <zlib.h>  // gzopen, gzread, gzerror

#include "../core/error.hpp"  // io_error, format_error

namespace oar::io {

/// All bytes of `path`, decompressed if it is gzip. Throws io_error when it cannot be opened and
/// format_error (naming the file and the offset reached) when the compressed stream is corrupt or
/// truncated, or when it holds more than `limit` bytes (reading stops there: a gzip bomb is never
/// inflated past the limit; `why` says in the message where the limit came from).
inline std::vector<std::uint8_t> read_maybe_gzip(const std::string& path, std::size_t limit = std::size_t(1) << 34,
                                                 const char* why = nullptr) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) throw io_error(detail::concat(path, ": cannot open"));
    gzbuffer(f, 1 << 17);
    std::vector<std::uint8_t> out;
    constexpr std::size_t chunk = 1 << 20;
    for (;;) {
        const std::size_t old = out.size();
        out.resize(old + chunk);
        const int got = gzread(f, out.data() + old, static_cast<unsigned>(chunk));
        if (got < 0) {
            int code = 0;
            const std::string msg = gzerror(f, &code);
            gzclose(f);
            if (code == Z_ERRNO) throw io_error(detail::concat(path, ": cannot read (", msg, ")"));
            throw format_error(detail::concat(path, ": corrupt gzip data after ", old, " decompressed bytes (", msg, ")"));
        }
        out.resize(old + static_cast<std::size_t>(got));
        if (out.size() > limit) {
            gzclose(f);
            throw format_error(detail::concat(path, ": more than ", limit, " bytes of data", why ? " (" : "",
                                              why ? why : "", why ? ")" : ""));
        }
        if (got == 0) break;
    }
    int code = 0;
    const std::string msg = gzerror(f, &code);
    gzclose(f);
    if (code != Z_OK && code != Z_STREAM_END)
        throw format_error(detail::concat(path, ": truncated or corrupt gzip data after ", out.size(),
                                          " decompressed bytes (", msg, ")"));
    out.shrink_to_fit();
    return out;
}

/// The first `n` bytes of `path` (all of it when shorter), decompressed if it is gzip: a header,
/// read without inflating the rest. Errors as read_maybe_gzip's.
inline std::vector<std::uint8_t> read_maybe_gzip_prefix(const std::string& path, std::size_t n) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) throw io_error(detail::concat(path, ": cannot open"));
    std::vector<std::uint8_t> out(n);
    std::size_t have = 0;
    while (have < n) {
        const int got = gzread(f, out.data() + have, static_cast<unsigned>(n - have));
        if (got < 0) {
            int code = 0;
            const std::string msg = gzerror(f, &code);
            gzclose(f);
            if (code == Z_ERRNO) throw io_error(detail::concat(path, ": cannot read (", msg, ")"));
            throw format_error(detail::concat(path, ": corrupt gzip data after ", have, " decompressed bytes (", msg, ")"));
        }
        if (got == 0) break;
        have += static_cast<std::size_t>(got);
    }
    gzclose(f);
    out.resize(have);
    return out;
}

}  // namespace oar::io
