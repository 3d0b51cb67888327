// The IDX format of MNIST and Fashion-MNIST (raw or .gz): a big-endian header (magic 0x0000 08 R:
// unsigned bytes, R dimensions), R sizes, then the data. Header and sizes are checked against the
// bytes actually present before any tensor is made.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t, std::uint32_t, std::int64_t
#include <string>   // std::string
#include <utility>  // std::move
#include <vector>   // std::vector

#include "../core/error.hpp"  // format_error
#include "../io/gzip.hpp"     // read_maybe_gzip

namespace oar::data {

/// An unsigned-byte IDX array: dims (e.g. {60000, 28, 28}) and the values, row-major.
struct IdxArray {
    std::vector<std::size_t> dims;
    std::vector<std::uint8_t> values;
};

/// The most bytes read_idx reads by default: 16 GiB, far above any image set that fits in memory.
inline constexpr std::size_t idx_max_bytes = std::size_t(1) << 34;

/// How much of an IDX file to read: the size its header promises plus 1 MiB (so that trailing
/// bytes are still counted and named), at most `max_bytes`. A gzip bomb behind a small header is
/// cut there instead of being inflated whole; a malformed header reads up to `max_bytes`, where
/// read_idx's checks name the problem.
inline std::size_t idx_read_limit(const std::vector<std::uint8_t>& head, std::size_t max_bytes) {
    if (head.size() < 4 || head[3] < 1 || head[3] > 4 || head.size() < 4u + 4u * head[3]) return max_bytes;
    const std::size_t header = 4u + 4u * head[3];
    std::size_t claimed = 1;
    for (std::size_t i = 4; i < header; i += 4) {
        const std::size_t d = (std::size_t{head[i]} << 24) | (std::size_t{head[i + 1]} << 16) |
                              (std::size_t{head[i + 2]} << 8) | std::size_t{head[i + 3]};
        if (d != 0 && claimed > max_bytes / d) return max_bytes;  // the checks below name the dimension
        claimed *= d;
    }
    const std::size_t slack = std::size_t(1) << 20;
    if (max_bytes < header + slack || claimed > max_bytes - header - slack) return max_bytes;
    return header + claimed + slack;
}

/// Reads an IDX file of unsigned bytes (type 0x08) with rank 1..4, raw or gzip-compressed, reading
/// no more than its header promises (plus 1 MiB) and never more than `max_bytes`.
inline IdxArray read_idx(const std::string& path, std::size_t max_bytes = idx_max_bytes) {
    const std::vector<std::uint8_t> bytes =
        io::read_maybe_gzip(path, idx_read_limit(io::read_maybe_gzip_prefix(path, 20), max_bytes),
                            "more than the IDX header promises plus 1 MiB: trailing data, or a gzip bomb");
    if (bytes.size() < 4)
        throw format_error(detail::concat(path, ": ", bytes.size(), " bytes, too short for an IDX header (offset 0)"));
    auto be32 = [&](std::size_t off) {
        return (std::uint32_t{bytes[off]} << 24) | (std::uint32_t{bytes[off + 1]} << 16) |
               (std::uint32_t{bytes[off + 2]} << 8) | std::uint32_t{bytes[off + 3]};
    };
    if (bytes[0] != 0 || bytes[1] != 0)
        throw format_error(detail::concat(path, ": bad IDX magic 0x", std::hex, be32(0), " at offset 0 (expected 0x0000080R)"));
    if (bytes[2] != 0x08)
        throw format_error(detail::concat(path, ": IDX data type 0x", std::hex, int{bytes[2]},
                                          " at offset 2 is not unsigned byte (0x08)"));
    const std::size_t rank = bytes[3];
    if (rank < 1 || rank > 4) throw format_error(detail::concat(path, ": IDX rank ", rank, " at offset 3 is not 1..4"));
    const std::size_t header = 4 + 4 * rank;
    if (bytes.size() < header)
        throw format_error(detail::concat(path, ": file ends at byte ", bytes.size(), " inside the ", header,
                                          "-byte IDX header"));
    IdxArray a;
    std::size_t count = 1;
    for (std::size_t i = 0; i < rank; ++i) {
        const std::size_t d = be32(4 + 4 * i);
        if (d == 0) throw format_error(detail::concat(path, ": IDX dimension ", i, " (offset ", 4 + 4 * i, ") is 0"));
        a.dims.push_back(d);
        if (d > (bytes.size() - header) / count)  // checked before multiplying: no overflow, no huge allocation
            throw format_error(detail::concat(path, ": IDX header claims ", d, " at dimension ", i, " (offset ",
                                              4 + 4 * i, "), more values than the file's ", bytes.size() - header,
                                              " data bytes"));
        count *= d;
    }
    if (bytes.size() - header != count)
        throw format_error(detail::concat(path, ": IDX header (dims ", a.dims.size(), ") promises ", count,
                                          " values but the file has ", bytes.size() - header, " data bytes after offset ",
                                          header));
    a.values.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
    return a;
}

/// Images (N, rows, cols) and labels (N) of one IDX pair, checked against each other.
struct LabeledImages {
    std::size_t count = 0, rows = 0, cols = 0;
    std::vector<std::uint8_t> pixels;   ///< (count, rows, cols)
    std::vector<std::int64_t> labels;   ///< (count)
};

inline LabeledImages read_idx_pair(const std::string& images_path, const std::string& labels_path,
                                   std::size_t num_classes = 10) {
    IdxArray img = read_idx(images_path);
    IdxArray lab = read_idx(labels_path);
    if (img.dims.size() != 3)
        throw format_error(detail::concat(images_path, ": images must have rank 3 (N, rows, cols), got rank ",
                                          img.dims.size()));
    if (lab.dims.size() != 1)
        throw format_error(detail::concat(labels_path, ": labels must have rank 1, got rank ", lab.dims.size()));
    if (img.dims[0] != lab.dims[0])
        throw format_error(detail::concat(images_path, " has ", img.dims[0], " images but ", labels_path, " has ",
                                          lab.dims[0], " labels"));
    LabeledImages out;
    out.count = img.dims[0];
    out.rows = img.dims[1];
    out.cols = img.dims[2];
    out.pixels = std::move(img.values);
    out.labels.resize(out.count);
    for (std::size_t i = 0; i < out.count; ++i) {
        if (lab.values[i] >= num_classes)
            throw format_error(detail::concat(labels_path, ": label ", int{lab.values[i]}, " at index ", i, " (offset ",
                                              8 + i, ") is not below ", num_classes));
        out.labels[i] = lab.values[i];
    }
    return out;
}

}  // namespace oar::data
