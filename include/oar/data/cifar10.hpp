// CIFAR-10, binary version: data_batch_1..5.bin (training) and test_batch.bin, each a run of
// 3073-byte records (a label byte, then a 3x32x32 image as R, G and B planes of 32x32 row-major
// bytes). Read from a folder or straight from cifar-10-binary.tar.gz (zlib + a minimal tar reader).
#pragma once

#include <algorithm>     // std::min, std::all_of
#include <array>         // std::array: the batch names, the mean and std
#include <cstddef>       // std::size_t
#include <cstdint>       // std::uint8_t, std::int64_t, std::uint64_t
#include <filesystem>    // std::filesystem::is_directory, exists: finding the batches
#include <span>          // std::span: the records of one batch
#include <string>        // std::string
#include <string_view>   // std::string_view: tar names
#include <system_error>  // std::error_code: filesystem queries that must not throw
#include <utility>       // std::move
#include <vector>        // std::vector

#include <zlib.h>  // gzopen, gzread, gzerror: streaming the (possibly compressed) archive

#include "../core/error.hpp"  // format_error, io_error
#include "../core/shape.hpp"  // Dims, make_dims
#include "../io/gzip.hpp"     // read_maybe_gzip: one batch file
#include "dataset.hpp"        // ByteImageDataset

namespace oar::data {

inline constexpr std::size_t cifar10_classes = 10;
inline constexpr std::size_t cifar10_image_bytes = 3 * 32 * 32;              // R, G, B planes of 32x32
inline constexpr std::size_t cifar10_record_bytes = 1 + cifar10_image_bytes;  // label byte + image
inline constexpr Dims cifar10_dims = make_dims(3, 32, 32);
/// The most bytes one batch (file or tar member) may hold: 1 GiB, 35 times a real batch's
/// 30,730,000. Larger ones are refused before they are read, so a gzip bomb is never inflated.
inline constexpr std::size_t cifar10_max_batch_bytes = std::size_t(1) << 30;

/// The batch files in the order their records are concatenated: train = 1..5, then test.
inline constexpr std::array<const char*, 6> cifar10_batch_files{"data_batch_1.bin", "data_batch_2.bin",
                                                                 "data_batch_3.bin", "data_batch_4.bin",
                                                                 "data_batch_5.bin", "test_batch.bin"};

/// Per-channel (R, G, B) mean and standard deviation of the 50,000 training images, over every
/// pixel, at the [0, 1] scale load_cifar10 gives by default: use them as
/// `Normalize(cifar10_mean, cifar10_std)` (transforms.hpp). (The often quoted std 0.2023, 0.1994,
/// 0.2010 is not the pixels' standard deviation.)
inline constexpr std::array<float, 3> cifar10_mean{0.4914f, 0.4822f, 0.4465f};
inline constexpr std::array<float, 3> cifar10_std{0.2470f, 0.2435f, 0.2616f};

/// The default pixel scaling of load_cifar10: x * (1 / 255) + 0, i.e. [0, 1] as paddle's ToTensor.
inline constexpr float cifar10_default_scale = 1.0f / 255.0f;
inline constexpr float cifar10_default_shift = 0.0f;

/// The training set (batches 1-5, in that order) and the test set, dims [3, 32, 32], labels 0..9.
struct Cifar10Splits {
    ByteImageDataset train, test;
};

}  // namespace oar::data

// Helpers live in oar::detail, and oar::data code names them fully qualified: an
// oar::data::detail (declared by another header) would hide oar::detail from a plain detail::.
namespace oar::detail {

/// Where a batch's bytes came from, for messages: a file, or a tar member whose data starts at
/// `base` in the decompressed archive.
struct cifar_source {
    std::string name;  ///< "path", or "archive: member cifar-10-batches-bin/data_batch_1.bin"
    bool in_archive = false;
    std::uint64_t base = 0;

    std::string at(std::uint64_t offset) const {
        if (!in_archive) return concat("offset ", offset);
        return concat("offset ", offset, " of the member (offset ", base + offset, " of the tar stream)");
    }
};

/// Checks every record of one batch, then appends its images and labels.
inline void append_cifar10_records(std::span<const std::uint8_t> bytes, const cifar_source& src,
                                   std::vector<std::uint8_t>& pixels, std::vector<std::int64_t>& labels) {
    constexpr std::size_t rec = data::cifar10_record_bytes;
    if (bytes.empty())
        throw format_error(concat(src.name, ": empty (no data at ", src.at(0), "); a CIFAR-10 batch holds ", rec,
                                  "-byte records"));
    if (bytes.size() % rec != 0) {
        const std::size_t last = bytes.size() / rec * rec;
        throw format_error(concat(src.name, ": ", bytes.size(), " bytes are not a whole number of ", rec,
                                  "-byte CIFAR-10 records: the record at ", src.at(last), " is truncated (",
                                  bytes.size() - last, " of ", rec, " bytes)"));
    }
    const std::size_t n = bytes.size() / rec;
    for (std::size_t r = 0; r < n; ++r)
        if (bytes[r * rec] >= data::cifar10_classes)
            throw format_error(concat(src.name, ": label ", int{bytes[r * rec]}, " of record ", r, " at ",
                                      src.at(r * rec), " is not below ", data::cifar10_classes));
    pixels.reserve(pixels.size() + n * data::cifar10_image_bytes);
    labels.reserve(labels.size() + n);
    for (std::size_t r = 0; r < n; ++r) {
        const std::uint8_t* record = bytes.data() + r * rec;
        labels.push_back(record[0]);
        pixels.insert(pixels.end(), record + 1, record + rec);
    }
}

/// A file read front to back through zlib (gzip, or plain bytes passed through), counting the
/// decompressed offset. Corrupt or truncated compressed data is a format_error naming the file.
class cifar_gz_stream {
public:
    explicit cifar_gz_stream(const std::string& path) : path_(path), f_(gzopen(path.c_str(), "rb")) {
        if (!f_) throw io_error(concat(path, ": cannot open"));
        gzbuffer(f_, 1 << 17);
    }
    ~cifar_gz_stream() { gzclose(f_); }
    cifar_gz_stream(const cifar_gz_stream&) = delete;
    cifar_gz_stream& operator=(const cifar_gz_stream&) = delete;

    /// Reads up to n bytes into dst; fewer only where the data ends. `where` goes into messages.
    std::size_t read(std::uint8_t* dst, std::size_t n, const std::string& where) {
        std::size_t done = 0;
        while (done < n) {
            const unsigned want = static_cast<unsigned>(std::min<std::size_t>(n - done, std::size_t(1) << 30));
            const int got = gzread(f_, dst + done, want);
            if (got < 0) fail(offset_ + done, where);
            if (got == 0) break;
            done += static_cast<std::size_t>(got);
        }
        if (done < n) {  // the end of the data, or a truncated or corrupt compressed stream
            int code = 0;
            (void)gzerror(f_, &code);
            if (code != Z_OK && code != Z_STREAM_END) fail(offset_ + done, where);
        }
        offset_ += done;
        return done;
    }

    std::uint64_t offset() const { return offset_; }

private:
    [[noreturn]] void fail(std::uint64_t at, const std::string& where) {
        int code = 0;
        const std::string msg = gzerror(f_, &code);
        if (code == Z_ERRNO) throw io_error(concat(path_, ": cannot read (", msg, ") at offset ", at, where));
        throw format_error(concat(path_, ": truncated or corrupt gzip data after ", at, " decompressed bytes", where,
                                  " (", msg, ")"));
    }

    std::string path_;
    gzFile f_;
    std::uint64_t offset_ = 0;
};

/// A numeric tar header field: octal digits (leading spaces allowed, ended by NUL or space), or
/// GNU's base-256 form (first byte has 0x80 set). format_error naming `what` and its offset.
inline std::uint64_t tar_number(const std::uint8_t* field, std::size_t len, const std::string& archive,
                                const char* what, std::uint64_t offset) {
    auto bad = [&]() -> format_error {
        return format_error(concat(archive, ": bad tar ", what, " field at offset ", offset, " (not an octal number)"));
    };
    auto overflow = [&]() -> format_error {
        return format_error(concat(archive, ": tar ", what, " field at offset ", offset, " overflows 64 bits"));
    };
    std::uint64_t v = 0;
    if (field[0] & 0x80) {  // base-256, big-endian, positive only
        if (field[0] & 0x40) throw bad();
        v = field[0] & 0x3Fu;
        for (std::size_t i = 1; i < len; ++i) {
            if (v >> 55) throw overflow();
            v = (v << 8) | field[i];
        }
        return v;
    }
    std::size_t i = 0;
    while (i < len && field[i] == ' ') ++i;
    for (; i < len && field[i] >= '0' && field[i] <= '7'; ++i) {
        if (v >> 60) throw overflow();
        v = v * 8 + (field[i] - '0');
    }
    for (; i < len; ++i)
        if (field[i] != 0 && field[i] != ' ') throw bad();
    return v;
}

/// The path a POSIX ustar or GNU tar header names (ustar's prefix field joined on).
inline std::string tar_header_name(const std::uint8_t* h) {
    auto field = [&](std::size_t off, std::size_t len) {
        std::size_t n = 0;
        while (n < len && h[off + n] != 0) ++n;
        return std::string(reinterpret_cast<const char*>(h + off), n);
    };
    std::string name = field(0, 100);
    // POSIX ustar ("ustar\0" "00") has a prefix; GNU ("ustar  \0") keeps other data there.
    const bool posix = std::string_view(reinterpret_cast<const char*>(h + 257), 6) == std::string_view("ustar\0", 6);
    if (posix) {
        const std::string prefix = field(345, 155);
        if (!prefix.empty()) name = prefix + "/" + name;
    }
    return name;
}

/// The "path" record of a pax extended header ("LEN key=value\n" records), or "" if it has none.
inline std::string tar_pax_path(std::string_view data) {
    std::string path;
    while (!data.empty()) {
        std::size_t len = 0, i = 0;
        for (; i < data.size() && i < 20 && data[i] >= '0' && data[i] <= '9'; ++i)
            len = len * 10 + std::size_t(data[i] - '0');
        if (i == 0 || i >= data.size() || data[i] != ' ' || len <= i + 1 || len > data.size())
            break;  // malformed: ignore the rest
        const std::string_view record = data.substr(i + 1, len - i - 1);  // "key=value\n"
        const std::size_t eq = record.find('=');
        if (eq != std::string_view::npos && record.substr(0, eq) == "path" && record.back() == '\n')
            path = std::string(record.substr(eq + 1, record.size() - eq - 2));
        data.remove_prefix(len);
    }
    return path;
}

/// Index of the CIFAR-10 batch a tar member holds (by its last path component), or -1.
inline int cifar10_batch_index(std::string_view member) {
    const std::size_t slash = member.rfind('/');
    const std::string_view base = slash == std::string_view::npos ? member : member.substr(slash + 1);
    for (std::size_t k = 0; k < data::cifar10_batch_files.size(); ++k)
        if (base == data::cifar10_batch_files[k]) return static_cast<int>(k);
    return -1;
}

}  // namespace oar::detail

namespace oar::data {

/// Appends the records of one batch file (raw, or gzip-compressed) to pixels and labels. Every
/// record is checked first: format_error naming the file and the offset for an empty file, a
/// size that is not a multiple of 3073 bytes, or a label above 9; io_error if it cannot be read.
inline void read_cifar10_batch(const std::string& path, std::vector<std::uint8_t>& pixels,
                               std::vector<std::int64_t>& labels) {
    const std::vector<std::uint8_t> bytes =
        io::read_maybe_gzip(path, cifar10_max_batch_bytes, "oar::data::cifar10_max_batch_bytes; a real batch has 30730000");
    oar::detail::append_cifar10_records(bytes, oar::detail::cifar_source{path}, pixels, labels);
}

/// One batch file as a dataset: dims [3, 32, 32], values x * scale + shift ([0, 1] by default).
inline ByteImageDataset read_cifar10_batch(const std::string& path, float scale = cifar10_default_scale,
                                           float shift = cifar10_default_shift) {
    std::vector<std::uint8_t> pixels;
    std::vector<std::int64_t> labels;
    read_cifar10_batch(path, pixels, labels);
    return ByteImageDataset(std::move(pixels), std::move(labels), cifar10_dims, scale, shift);
}

/// True when `dir` holds all six batch files.
inline bool is_cifar10_dir(const std::string& dir) {
    std::error_code ec;
    for (const char* f : cifar10_batch_files)
        if (!std::filesystem::is_regular_file(dir + "/" + f, ec)) return false;
    return true;
}

/// Loads the six batch files of `dir` (cifar-10-batches-bin as extracted). io_error naming the
/// folder and every missing file; the errors of read_cifar10_batch for a malformed one.
inline Cifar10Splits load_cifar10_dir(const std::string& dir, float scale = cifar10_default_scale,
                                      float shift = cifar10_default_shift) {
    std::string missing;
    std::error_code ec;
    for (const char* f : cifar10_batch_files)
        if (!std::filesystem::exists(dir + "/" + f, ec)) missing += (missing.empty() ? "" : ", ") + std::string(f);
    if (!missing.empty()) throw io_error(oar::detail::concat(dir, ": missing CIFAR-10 batch file(s) ", missing));
    std::vector<std::uint8_t> train_px, test_px;
    std::vector<std::int64_t> train_lab, test_lab;
    for (std::size_t k = 0; k < 5; ++k) read_cifar10_batch(dir + "/" + cifar10_batch_files[k], train_px, train_lab);
    read_cifar10_batch(dir + "/" + cifar10_batch_files[5], test_px, test_lab);
    return {ByteImageDataset(std::move(train_px), std::move(train_lab), cifar10_dims, scale, shift),
            ByteImageDataset(std::move(test_px), std::move(test_lab), cifar10_dims, scale, shift)};
}

/// Loads the batches from a tar archive, gzip-compressed (cifar-10-binary.tar.gz) or not, in one
/// pass without extracting it. Members are matched by their last path component
/// ("cifar-10-batches-bin/data_batch_1.bin"), in any order; others are skipped. Reads ustar and
/// GNU headers, GNU long names ('L') and pax "path" records. A member's buffer grows with the
/// bytes actually read, never to the size its header claims. format_error naming the archive, the
/// member and the offset for: an empty file, a truncated header or member, a bad header checksum
/// or size field, a missing or duplicated batch, and every malformed batch (see read_cifar10_batch).
inline Cifar10Splits load_cifar10_archive(const std::string& archive, float scale = cifar10_default_scale,
                                          float shift = cifar10_default_shift) {
    using oar::detail::concat;
    oar::detail::cifar_gz_stream in(archive);
    std::array<std::vector<std::uint8_t>, 6> pixels;
    std::array<std::vector<std::int64_t>, 6> labels;
    std::array<std::string, 6> found;  // member name of each batch, "" until seen
    std::array<std::uint8_t, 512> h{};
    std::vector<std::uint8_t> skip(std::size_t(1) << 16);
    std::string next_name;  // from a GNU 'L' or pax 'x' header, for the member that follows
    bool have_next_name = false;

    // Reads (into `dst`, or nowhere) the `size` data bytes of the member whose header is at
    // `header_at`, then its padding to the next 512-byte block.
    auto read_data = [&](std::uint64_t size, const std::string& name, std::uint64_t header_at,
                         std::vector<std::uint8_t>* dst) {
        const std::string where = concat(" (in tar member ", name, ")");
        const std::uint64_t padded = (size + 511) / 512 * 512;
        std::uint64_t done = 0;
        while (done < padded) {
            const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(padded - done, skip.size()));
            std::uint8_t* target = skip.data();
            if (dst && done < size) {  // grow with the data present, a block of at most 64 KiB at a time
                const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(size - done, want));
                dst->resize(dst->size() + take);
                target = dst->data() + dst->size() - take;
                const std::size_t got = in.read(target, take, where);
                if (got < take) dst->resize(dst->size() - (take - got));
                done += got;
                if (got < take) break;
                continue;
            }
            const std::size_t got = in.read(target, want, where);
            done += got;
            if (got < want) break;
        }
        if (done < padded)
            throw format_error(concat(archive, ": truncated tar: member ", name, " (header at offset ", header_at,
                                      ") claims ", size, " bytes of data from offset ", header_at + 512,
                                      " but the archive ends at offset ", in.offset()));
    };

    std::uint64_t end_at = 0;  // where the end-of-archive blocks start (or the data stops)
    for (;;) {
        const std::uint64_t at = end_at = in.offset();
        const std::size_t got = in.read(h.data(), h.size(), concat(" (in the tar header at offset ", at, ")"));
        if (got == 0) {
            if (at == 0) throw format_error(concat(archive, ": empty (no tar header at offset 0)"));
            break;  // no end-of-archive blocks: tolerated, the batches present decide
        }
        if (got < h.size())
            throw format_error(concat(archive, ": truncated tar: the header at offset ", at, " has ", got,
                                      " of 512 bytes"));
        if (std::all_of(h.begin(), h.end(), [](std::uint8_t b) { return b == 0; })) break;  // end of archive

        std::uint64_t stored = 0;
        try {
            stored = oar::detail::tar_number(h.data() + 148, 8, archive, "header checksum", at + 148);
        } catch (const format_error&) {  // a checksum field that is no number: the same verdict
            throw format_error(concat(archive, ": bad tar header checksum at offset ", at, ": the checksum field is ",
                                      "not an octal number (not a tar archive, or a damaged one)"));
        }
        std::uint64_t sum = 0;
        std::int64_t signed_sum = 0;  // some old writers summed signed chars
        for (std::size_t i = 0; i < h.size(); ++i) {
            const std::uint8_t b = (i >= 148 && i < 156) ? std::uint8_t{' '} : h[i];
            sum += b;
            signed_sum += static_cast<signed char>(b);
        }
        if (stored != sum && static_cast<std::int64_t>(stored) != signed_sum)
            throw format_error(concat(archive, ": bad tar header checksum at offset ", at, ": stored ", stored,
                                      ", computed ", sum, " (not a tar archive, or a damaged one)"));
        const std::uint64_t size = oar::detail::tar_number(h.data() + 124, 12, archive, "size", at + 124);
        const char type = static_cast<char>(h[156]);
        const std::string name = have_next_name ? next_name : oar::detail::tar_header_name(h.data());
        have_next_name = false;

        if (type == 'L' || type == 'x') {  // the next member's name; bounded, a name is not megabytes
            constexpr std::uint64_t max_name_data = std::uint64_t(1) << 20;
            std::vector<std::uint8_t> data;
            read_data(size, name, at, size <= max_name_data ? &data : nullptr);
            const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
            next_name = type == 'L' ? std::string(text.substr(0, text.find('\0'))) : oar::detail::tar_pax_path(text);
            have_next_name = type == 'L' || !next_name.empty();
            if (size > max_name_data) next_name.clear();  // unknown: matches no batch
            continue;
        }
        const int k = (type == '0' || type == '\0' || type == '7') ? oar::detail::cifar10_batch_index(name) : -1;
        if (k < 0) {
            read_data(size, name, at, nullptr);
            continue;
        }
        if (!found[k].empty())
            throw format_error(concat(archive, ": tar members ", found[k], " and ", name, " (header at offset ", at,
                                      ") both hold ", cifar10_batch_files[k]));
        found[k] = name;
        if (size > cifar10_max_batch_bytes)
            throw format_error(concat(archive, ": tar member ", name, " (header at offset ", at, ") claims ", size,
                                      " bytes, more than the ", cifar10_max_batch_bytes,
                                      " a CIFAR-10 batch may hold (a real one has 30730000)"));
        std::vector<std::uint8_t> data;
        read_data(size, name, at, &data);
        const oar::detail::cifar_source source{concat(archive, ": member ", name), true, at + 512};
        oar::detail::append_cifar10_records(data, source, pixels[k], labels[k]);
    }

    std::string missing;
    for (std::size_t k = 0; k < found.size(); ++k)
        if (found[k].empty()) missing += (missing.empty() ? "" : ", ") + std::string(cifar10_batch_files[k]);
    if (!missing.empty())
        throw format_error(concat(archive, ": no tar member for CIFAR-10 batch(es) ", missing,
                                  " (e.g. cifar-10-batches-bin/", cifar10_batch_files[0], ") before the end at offset ",
                                  end_at));

    // Batches 1..5 in order, each freed once copied.
    std::size_t train_count = 0;
    for (std::size_t k = 0; k < 5; ++k) train_count += labels[k].size();
    std::vector<std::uint8_t> train_px;
    std::vector<std::int64_t> train_lab;
    train_px.reserve(train_count * cifar10_image_bytes);
    train_lab.reserve(train_count);
    for (std::size_t k = 0; k < 5; ++k) {
        train_px.insert(train_px.end(), pixels[k].begin(), pixels[k].end());
        train_lab.insert(train_lab.end(), labels[k].begin(), labels[k].end());
        std::vector<std::uint8_t>().swap(pixels[k]);
    }
    return {ByteImageDataset(std::move(train_px), std::move(train_lab), cifar10_dims, scale, shift),
            ByteImageDataset(std::move(pixels[5]), std::move(labels[5]), cifar10_dims, scale, shift)};
}

/// Loads CIFAR-10 from `path`: a folder holding the six batch files, a folder holding
/// cifar-10-batches-bin/ or cifar-10-binary.tar.gz, or the archive itself (.tar.gz or .tar).
/// Values are x * scale + shift, [0, 1] by default; follow with Normalize(cifar10_mean, cifar10_std).
inline Cifar10Splits load_cifar10(const std::string& path, float scale = cifar10_default_scale,
                                  float shift = cifar10_default_shift) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        for (const char* f : cifar10_batch_files)
            if (fs::exists(path + "/" + f, ec)) return load_cifar10_dir(path, scale, shift);
        if (fs::is_directory(path + "/cifar-10-batches-bin", ec))
            return load_cifar10_dir(path + "/cifar-10-batches-bin", scale, shift);
        if (fs::exists(path + "/cifar-10-binary.tar.gz", ec))
            return load_cifar10_archive(path + "/cifar-10-binary.tar.gz", scale, shift);
        throw io_error(oar::detail::concat(path, ": no CIFAR-10 batch files (data_batch_1.bin .. test_batch.bin), no ",
                                      "cifar-10-batches-bin folder and no cifar-10-binary.tar.gz"));
    }
    if (!fs::exists(path, ec)) throw io_error(oar::detail::concat(path, ": no such file or folder"));
    return load_cifar10_archive(path, scale, shift);
}

}  // namespace oar::data
