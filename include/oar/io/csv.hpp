// CSV training logs (one row per step or epoch) that spreadsheets, pandas and python's csv module
// read: a fixed header of column names, RFC 4180 quoting, numbers printed so that they read back
// to the same value, and every row flushed to the operating system as it is written, so a crash or
// kill loses at most the row being written. Append mode continues the log of a resumed run.
#pragma once

#include <cerrno>        // errno
#include <charconv>      // std::to_chars: shortest round-trip numbers, no locale
#include <concepts>      // std::integral, std::floating_point, std::same_as
#include <cstdint>       // std::int64_t, std::uint64_t
#include <cstdio>        // std::FILE, std::fopen, std::fwrite, std::fflush, std::fread
#include <cstring>       // std::strerror
#include <filesystem>    // std::filesystem::path, exists, file_size, resize_file, create_directories
#include <initializer_list>  // row_fields({...})
#include <memory>        // std::unique_ptr: the FILE* closes on every path
#include <span>          // std::span: rows of run-time length
#include <string>        // std::string: the reused row buffer
#include <string_view>   // std::string_view
#include <system_error>  // std::error_code
#include <type_traits>   // std::remove_cvref_t
#include <utility>       // std::move
#include <variant>       // std::variant: one field
#include <vector>        // std::vector: the column names

#include "unique_file.hpp"   // unique_file: the FILE* closes on every path
#include "../core/error.hpp"  // io_error, format_error, value_error

namespace oar::io {

namespace csv_detail {

/// Appends `s` as one RFC 4180 field: quoted when it holds a comma, quote, CR or LF (inner quotes
/// doubled), and when it is empty, so that a one-column row of "" is not read as an empty line.
inline void append_field(std::string& out, std::string_view s) {
    if (!s.empty() && s.find_first_of(",\"\r\n") == std::string_view::npos) {
        out.append(s);
        return;
    }
    out.push_back('"');
    for (char c : s) {
        if (c == '"') out.push_back('"');
        out.push_back(c);
    }
    out.push_back('"');
}

inline std::string join_header(const std::vector<std::string>& columns) {
    std::string s;
    for (std::size_t i = 0; i < columns.size(); ++i) {
        if (i) s.push_back(',');
        append_field(s, columns[i]);
    }
    return s;
}

/// Parses one CSV record (without its line end) into fields.
inline std::vector<std::string> split_record(std::string_view line) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                fields.back().push_back('"');
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                fields.back().push_back(c);
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            fields.emplace_back();
        } else {
            fields.back().push_back(c);
        }
    }
    return fields;
}

}  // namespace csv_detail

namespace csv_detail {

/// Appends a number's CSV text: integers exactly, doubles and floats as the shortest text that
/// reads back to the same double / float (std::to_chars; "nan", "inf", "-inf" for non-finite
/// values, which python's float() and pandas read).
template <class T>
void append_number(std::string& out, T v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

}  // namespace csv_detail

/// One value of a row built at run time: an integer, a floating-point number or text (copied, so
/// a field made from a temporary string stays valid). Converts implicitly, so
/// `writer.row_fields({epoch, loss, "adam"})` works; bool and character types are refused (print
/// them as text or numbers explicitly).
class CsvField {
public:
    template <std::integral T>
        requires(!std::same_as<T, bool> && !std::same_as<T, char> && !std::same_as<T, wchar_t> &&
                 !std::same_as<T, char8_t> && !std::same_as<T, char16_t> && !std::same_as<T, char32_t>)
    CsvField(T v) {  // NOLINT: implicit on purpose
        if constexpr (std::is_signed_v<T>) value_ = static_cast<std::int64_t>(v);
        else value_ = static_cast<std::uint64_t>(v);
    }
    CsvField(double v) : value_(v) {}  // NOLINT
    CsvField(float v) : value_(v) {}   // NOLINT
    CsvField(std::string_view v) : value_(std::string(v)) {}  // NOLINT
    CsvField(const char* v) : value_(std::string(v)) {}        // NOLINT
    CsvField(std::string v) : value_(std::move(v)) {}          // NOLINT

    /// Appends the field's CSV text to `out` (numbers as csv_detail::append_number, text quoted
    /// per RFC 4180 when needed).
    void append_to(std::string& out) const {
        switch (value_.index()) {
            case 0: csv_detail::append_number(out, std::get<0>(value_)); break;
            case 1: csv_detail::append_number(out, std::get<1>(value_)); break;
            case 2: csv_detail::append_number(out, std::get<2>(value_)); break;
            case 3: csv_detail::append_number(out, std::get<3>(value_)); break;
            default: csv_detail::append_field(out, std::get<4>(value_));
        }
    }

private:
    std::variant<std::int64_t, std::uint64_t, double, float, std::string> value_;
};

/// Whether `T` can be one field of CsvWriter::row: float, double, integers other than bool and
/// character types, and anything that converts to std::string_view.
template <class T>
concept csv_field = std::same_as<T, float> || std::same_as<T, double> || std::is_convertible_v<const T&, std::string_view> ||
                    (std::integral<T> && std::constructible_from<CsvField, T>);

/// How CsvWriter opens an existing file.
enum class CsvMode {
    truncate,  ///< start a new log (the file is replaced)
    append,    ///< continue a log (resumed run): the file's header must equal the columns
};

/// A CSV log with a fixed header:
///
///   oar::io::CsvWriter csv(log_dir / "log.csv", {"epoch", "train_loss", "train_acc"});
///   csv.row(1, 0.31f, 0.912);  // one value per column, flushed before row() returns
///
/// Lines end in "\n" (python's csv, pandas and spreadsheets read it). In append mode an existing
/// non-empty file must start with the same header (else format_error naming the file and both
/// headers); a last row cut short by a crash is dropped before appending. The parent folder is
/// created if missing. One row buffer is reused, so a row allocates nothing once the longest row
/// has been seen.
class CsvWriter {
public:
    CsvWriter(std::filesystem::path path, std::vector<std::string> columns, CsvMode mode = CsvMode::truncate)
        : path_(std::move(path)), columns_(std::move(columns)) {
        if (columns_.empty()) throw value_error(oar::detail::concat(path_.string(), ": a CSV log needs at least one column"));
        for (std::size_t i = 0; i < columns_.size(); ++i)
            for (std::size_t j = 0; j < i; ++j)
                if (columns_[i] == columns_[j])
                    throw value_error(oar::detail::concat(path_.string(), ": column \"", columns_[i], "\" appears twice (",
                                                          j, " and ", i, ")"));
        if (path_.has_parent_path()) {
            std::error_code ec;
            std::filesystem::create_directories(path_.parent_path(), ec);
            if (ec)
                throw io_error(oar::detail::concat(path_.string(), ": cannot create its folder (", ec.message(), ")"));
        }
        bool write_header = true;
        if (mode == CsvMode::append) write_header = !continue_existing();
        file_.reset(std::fopen(path_.c_str(), write_header ? "wb" : "ab"));
        if (!file_) throw io_error(oar::detail::concat(path_.string(), ": cannot open for writing (", std::strerror(errno), ")"));
        if (write_header) {
            buffer_ = csv_detail::join_header(columns_);
            buffer_.push_back('\n');
            write_buffer();
        }
    }

    CsvWriter(const CsvWriter&) = delete;
    CsvWriter& operator=(const CsvWriter&) = delete;
    CsvWriter(CsvWriter&&) noexcept = default;
    CsvWriter& operator=(CsvWriter&&) noexcept = default;
    ~CsvWriter() = default;

    /// Writes one row, one value per column, and flushes it.
    template <class... Ts>
    void row(const Ts&... values) {
        static_assert((csv_field<Ts> && ...),
                      "oar: CsvWriter::row takes numbers (integers, float, double) and strings; convert bool and char first");
        if (sizeof...(Ts) != columns_.size()) throw count_error(sizeof...(Ts));
        buffer_.clear();
        bool first = true;
        ((append_value(values, first)), ...);
        buffer_.push_back('\n');
        write_buffer();
    }

    /// Writes one row whose length is known at run time (e.g. a metric per column).
    void row_fields(std::span<const CsvField> fields) {
        if (fields.size() != columns_.size()) throw count_error(fields.size());
        buffer_.clear();
        bool first = true;
        for (const auto& f : fields) append_one(f, first);
        buffer_.push_back('\n');
        write_buffer();
    }
    void row_fields(std::initializer_list<CsvField> fields) { row_fields(std::span<const CsvField>(fields.begin(), fields.size())); }

    const std::filesystem::path& path() const noexcept { return path_; }
    const std::vector<std::string>& columns() const noexcept { return columns_; }

private:
    /// The variadic row's fields, appended without copying text.
    template <class T>
    void append_value(const T& v, bool& first) {
        if (!first) buffer_.push_back(',');
        first = false;
        if constexpr (std::is_convertible_v<const T&, std::string_view>) csv_detail::append_field(buffer_, std::string_view(v));
        else if constexpr (std::is_floating_point_v<T>) csv_detail::append_number(buffer_, v);
        else if constexpr (std::is_signed_v<T>) csv_detail::append_number(buffer_, static_cast<std::int64_t>(v));
        else csv_detail::append_number(buffer_, static_cast<std::uint64_t>(v));
    }

    void append_one(const CsvField& f, bool& first) {
        if (!first) buffer_.push_back(',');
        first = false;
        f.append_to(buffer_);
    }

    value_error count_error(std::size_t got) const {
        return value_error(oar::detail::concat(path_.string(), ": a row of ", got, " values for ", columns_.size(),
                                               " columns (", csv_detail::join_header(columns_), ")"));
    }

    void write_buffer() {
        if (!file_) throw io_error(oar::detail::concat(path_.string(), ": write to a moved-from CsvWriter"));
        if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_.get()) != buffer_.size() || std::fflush(file_.get()) != 0)
            throw io_error(oar::detail::concat(path_.string(), ": cannot write (", std::strerror(errno), ")"));
    }

    /// Append mode on an existing file: checks its header and drops a last row cut short. Returns
    /// whether the file already holds the header (false: missing or nothing complete in it).
    bool continue_existing() {
        std::error_code ec;
        if (!std::filesystem::exists(path_, ec)) return false;
        unique_file in(std::fopen(path_.c_str(), "rb"));
        if (!in) throw io_error(oar::detail::concat(path_.string(), ": cannot open to append (", std::strerror(errno), ")"));
        // Walk the file once in chunks: collect the first record (the header, at most 1 MiB) and
        // find where the last complete record ends (a LF outside quotes).
        constexpr std::size_t header_limit = std::size_t(1) << 20;
        std::string header;
        bool header_done = false, quoted = false;
        std::uint64_t offset = 0, complete = 0;
        char chunk[65536];
        for (;;) {
            const std::size_t got = std::fread(chunk, 1, sizeof chunk, in.get());
            for (std::size_t i = 0; i < got; ++i) {
                const char c = chunk[i];
                if (c == '"') quoted = !quoted;  // an inner "" toggles twice
                if (c == '\n' && !quoted) {
                    complete = offset + i + 1;
                    header_done = true;
                } else if (!header_done) {
                    if (header.size() >= header_limit)
                        throw format_error(oar::detail::concat(path_.string(), ": no header line in its first ", header_limit, " bytes"));
                    header.push_back(c);
                }
            }
            offset += got;
            if (got < sizeof chunk) break;
        }
        if (std::ferror(in.get())) throw io_error(oar::detail::concat(path_.string(), ": cannot read (", std::strerror(errno), ")"));
        in.reset();
        if (!header_done) {  // empty, or cut inside the header: start over
            return false;
        }
        if (!header.empty() && header.back() == '\r') header.pop_back();
        if (csv_detail::split_record(header) != columns_)
            throw format_error(oar::detail::concat(path_.string(), ": cannot append, its header is \"", header,
                                                   "\" but this log's columns are \"", csv_detail::join_header(columns_), "\""));
        if (complete != offset) {
            std::filesystem::resize_file(path_, complete, ec);
            if (ec)
                throw io_error(oar::detail::concat(path_.string(), ": cannot drop the incomplete last row at byte ", complete,
                                                   " (", ec.message(), ")"));
        }
        return true;
    }

    std::filesystem::path path_;
    std::vector<std::string> columns_;
    unique_file file_;
    std::string buffer_;
};

}  // namespace oar::io
