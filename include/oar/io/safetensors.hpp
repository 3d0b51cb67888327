// The safetensors format (huggingface/safetensors): an 8-byte little-endian header length N, a
// JSON header of N bytes, then the tensors' bytes back to back. Written atomically (AtomicFile),
// read with a small strict parser of our own (no simdjson: CUDA translation units include this).
//
// API (namespace oar::io):
//   enum class Dtype { F32, F64, I64, I32, U8 };   dtype_name(d) -> "F32", dtype_size(d) -> 4
//   TensorRef::of(name, shape, std::span<const T>)  a tensor to write (a view, nothing copied)
//   write_safetensors(path, std::vector<TensorRef>, std::map<string,string> metadata = {})
//       atomic: the file at `path` is the old one or the complete new one, never a mix.
//   SafeTensors read_safetensors(path)             reads and validates the whole file
//   SafeTensors parse_safetensors(bytes, source)   the same on bytes in memory (`source` names them)
//   SafeTensors: tensors() in data order (TensorInfo: name, dtype, shape, begin, end, elements()),
//       find(name) -> const TensorInfo* or nullptr, at(name) (throws naming the key),
//       bytes(info) -> std::span<const std::byte>, values<T>(name) -> std::vector<T> (dtype checked),
//       metadata() -> std::map<string,string>, source() -> the file name.
// Validation (format_error naming the file, the key and the byte offset): header length within
// the file and at most max_header_bytes; strict JSON (no trailing commas, no duplicate keys, valid
// UTF-8, no unknown fields); names non-empty without control characters; dtype known and supported
// (others refused naming the key and dtype); offsets contiguous from 0 and covering the data
// exactly; product(shape) x dtype size == end - begin (overflow checked). io_error when the file
// cannot be opened or read. Nothing is allocated before the size it depends on is checked.
#pragma once

#include <algorithm>    // std::sort
#include <cerrno>       // errno
#include <bit>          // std::endian
#include <cstddef>      // std::size_t, std::byte
#include <cstdint>      // std::uint64_t, std::int64_t, std::int32_t, std::uint8_t
#include <cstdio>       // std::FILE, std::fopen, std::fread, std::fclose, std::fseek
#include <cstring>      // std::memcpy
#include <filesystem>   // std::filesystem::is_directory
#include <map>          // std::map: metadata, duplicate detection
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <type_traits>  // std::is_same_v
#include <utility>      // std::move
#include <vector>       // std::vector

#include "../core/error.hpp"  // format_error, io_error, value_error
#include "atomic_file.hpp"    // AtomicFile: temp file, fsync, rename

namespace oar::io {

static_assert(std::endian::native == std::endian::little,
              "oar: safetensors stores little-endian data; big-endian hosts are not supported");

/// Element types oar reads and writes. Other safetensors dtypes (F16, BF16, BOOL, ...) are refused.
enum class Dtype { F32, F64, I64, I32, U8 };

constexpr std::string_view dtype_name(Dtype d) {
    switch (d) {
        case Dtype::F32: return "F32";
        case Dtype::F64: return "F64";
        case Dtype::I64: return "I64";
        case Dtype::I32: return "I32";
        case Dtype::U8: return "U8";
    }
    return "?";
}
constexpr std::size_t dtype_size(Dtype d) {
    switch (d) {
        case Dtype::F32: return 4;
        case Dtype::F64: return 8;
        case Dtype::I64: return 8;
        case Dtype::I32: return 4;
        case Dtype::U8: return 1;
    }
    return 0;
}

/// The Dtype of a C++ element type (float -> F32, ...).
template <class T>
constexpr Dtype dtype_of() {
    if constexpr (std::is_same_v<T, float>) return Dtype::F32;
    else if constexpr (std::is_same_v<T, double>) return Dtype::F64;
    else if constexpr (std::is_same_v<T, std::int64_t>) return Dtype::I64;
    else if constexpr (std::is_same_v<T, std::int32_t>) return Dtype::I32;
    else if constexpr (std::is_same_v<T, std::uint8_t>) return Dtype::U8;
    else {
        static_assert(sizeof(T) == 0, "oar: safetensors element types are float, double, int64_t, int32_t, uint8_t");
        return Dtype::U8;  // not reached; keeps the diagnostic to the one line above
    }
}

/// Headers larger than this are refused before anything is allocated (safetensors' own limit).
inline constexpr std::uint64_t max_header_bytes = 100'000'000;

/// A tensor to write: a view of its bytes (the caller keeps them alive during the write).
struct TensorRef {
    std::string name;
    Dtype dtype = Dtype::F32;
    std::vector<std::uint64_t> shape;
    std::span<const std::byte> data;

    template <class T>
    static TensorRef of(std::string name, std::vector<std::uint64_t> shape, std::span<const T> values) {
        return {std::move(name), dtype_of<T>(), std::move(shape), std::as_bytes(values)};
    }
};

/// One tensor of a file that was read: where its bytes are in the data section.
struct TensorInfo {
    std::string name;
    Dtype dtype = Dtype::F32;
    std::vector<std::uint64_t> shape;
    std::uint64_t begin = 0, end = 0;  ///< data_offsets, relative to the start of the data section
    std::uint64_t elements() const {
        std::uint64_t n = 1;
        for (auto d : shape) n *= d;
        return n;
    }
};

/// "[2, 3]"
inline std::string shape_string(const std::vector<std::uint64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

namespace detail {
using namespace oar::detail;  // concat & co. stay visible as detail:: inside this namespace

using oar::detail::concat;

inline bool is_name_char_ok(unsigned char c) { return c >= 0x20 && c != 0x7f; }

/// Appends `s` as a JSON string (quotes, escapes for '"', '\\' and control characters).
inline void json_string(std::string& out, std::string_view s) {
    out += '"';
    for (unsigned char c : s) {
        if (c == '"') out += "\\\"";
        else if (c == '\\') out += "\\\\";
        else if (c < 0x20 || c == 0x7f) {
            static constexpr char hex[] = "0123456789abcdef";
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else out += static_cast<char>(c);
    }
    out += '"';
}

/// Valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF)? Returns the index of the first bad
/// byte, or s.size() when all is well.
inline std::size_t utf8_error_at(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t n = 0;
        std::uint32_t cp = 0, min = 0;
        if (c < 0x80) { ++i; continue; }
        if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; min = 0x10000; }
        else return i;
        for (std::size_t k = 1; k <= n; ++k) {
            if (i + k >= s.size()) return i;
            const auto d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (d & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += n + 1;
    }
    return s.size();
}

/// A strict parser for the one JSON shape a safetensors header has. Offsets in messages are byte
/// offsets in the file (the header starts at byte 8).
class HeaderParser {
public:
    HeaderParser(std::string_view text, std::string_view source) : s_(text), source_(source) {}

    struct Parsed {
        std::vector<TensorInfo> tensors;
        std::map<std::string, std::string> metadata;
    };

    Parsed parse() {
        Parsed out;
        const std::size_t bad = utf8_error_at(s_);
        if (bad != s_.size()) fail(bad, "the header is not valid UTF-8");
        skip_ws();
        expect('{', "the header must be a JSON object");
        std::map<std::string, std::size_t> seen;
        bool have_metadata = false;
        skip_ws();
        if (peek() == '}') {
            ++i_;
        } else {
            for (;;) {
                skip_ws();
                const std::size_t key_at = i_;
                std::string key = string_value();
                if (!seen.emplace(key, key_at).second && key != "__metadata__")
                    fail(key_at, concat("tensor '", key, "' appears twice"));
                skip_ws();
                expect(':', "expected ':' after a key");
                skip_ws();
                if (key == "__metadata__") {
                    if (have_metadata) fail(key_at, "'__metadata__' appears twice");
                    have_metadata = true;
                    out.metadata = metadata_object();
                } else {
                    check_name(key, key_at);
                    out.tensors.push_back(tensor_object(std::move(key)));
                }
                skip_ws();
                if (peek() == ',') { ++i_; continue; }
                expect('}', "expected ',' or '}' after a header entry");
                break;
            }
        }
        skip_ws();
        if (i_ != s_.size()) fail(i_, "unexpected bytes after the header's JSON object");
        return out;
    }

private:
    [[noreturn]] void fail(std::size_t at, const std::string& what) const {
        throw format_error(concat(source_, ": safetensors header byte ", at + 8, ": ", what));
    }
    char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
    bool at_end() const { return i_ >= s_.size(); }
    void skip_ws() {
        while (!at_end() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
    }
    void expect(char c, const char* what) {
        if (at_end()) fail(i_, concat(what, " (the header ends here)"));
        if (s_[i_] != c) fail(i_, concat(what, ", got '", s_[i_], "'"));
        ++i_;
    }
    void check_name(const std::string& key, std::size_t at) const {
        if (key.empty()) fail(at, "a tensor name is empty");
        for (unsigned char c : key)
            if (!is_name_char_ok(c)) fail(at, concat("tensor name '", key, "' contains a control character"));
    }

    static int hex_digit(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }
    std::uint32_t hex4() {
        if (s_.size() - i_ < 4) fail(i_, "a \\u escape needs four hex digits");
        std::uint32_t v = 0;
        for (int k = 0; k < 4; ++k) {
            const int d = hex_digit(s_[i_ + static_cast<std::size_t>(k)]);
            if (d < 0) fail(i_, "a \\u escape needs four hex digits");
            v = v * 16 + static_cast<std::uint32_t>(d);
        }
        i_ += 4;
        return v;
    }
    static void put_utf8(std::string& out, std::uint32_t cp) {
        if (cp < 0x80) out += static_cast<char>(cp);
        else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    std::string string_value() {
        if (peek() != '"') fail(i_, at_end() ? "expected a string (the header ends here)" : "expected a string");
        ++i_;
        std::string out;
        for (;;) {
            if (at_end()) fail(i_, "unterminated string");
            const auto c = static_cast<unsigned char>(s_[i_]);
            if (c == '"') { ++i_; return out; }
            if (c < 0x20) fail(i_, "a raw control character inside a string");
            if (c != '\\') { out += static_cast<char>(c); ++i_; continue; }
            const std::size_t esc_at = i_;
            ++i_;
            if (at_end()) fail(i_, "unterminated escape");
            const char e = s_[i_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    std::uint32_t cp = hex4();
                    if (cp >= 0xDC00 && cp <= 0xDFFF) fail(esc_at, "a lone low surrogate in a \\u escape");
                    if (cp >= 0xD800 && cp <= 0xDBFF) {
                        if (s_.size() - i_ < 2 || s_[i_] != '\\' || s_[i_ + 1] != 'u')
                            fail(esc_at, "a high surrogate without its low surrogate");
                        i_ += 2;
                        const std::uint32_t lo = hex4();
                        if (lo < 0xDC00 || lo > 0xDFFF) fail(esc_at, "a high surrogate without its low surrogate");
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    }
                    put_utf8(out, cp);
                    break;
                }
                default: fail(esc_at, concat("unknown escape '\\", e, "'"));
            }
        }
    }

    std::uint64_t integer() {
        const std::size_t at = i_;
        if (at_end() || s_[i_] < '0' || s_[i_] > '9') fail(at, "expected a non-negative integer");
        if (s_[i_] == '0' && i_ + 1 < s_.size() && s_[i_ + 1] >= '0' && s_[i_ + 1] <= '9')
            fail(at, "an integer with a leading zero");
        std::uint64_t v = 0;
        while (!at_end() && s_[i_] >= '0' && s_[i_] <= '9') {
            const auto d = static_cast<std::uint64_t>(s_[i_] - '0');
            if (v > (UINT64_MAX - d) / 10) fail(at, "an integer larger than 2^64 - 1");
            v = v * 10 + d;
            ++i_;
        }
        if (!at_end() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) fail(at, "expected an integer, got a fraction");
        return v;
    }

    std::vector<std::uint64_t> integer_array(std::size_t max_len, const char* what) {
        expect('[', concat("expected '[' to start ", what).c_str());
        std::vector<std::uint64_t> v;
        skip_ws();
        if (peek() == ']') { ++i_; return v; }
        for (;;) {
            skip_ws();
            if (v.size() == max_len) fail(i_, concat(what, " has more than ", max_len, " entries"));
            v.push_back(integer());
            skip_ws();
            if (peek() == ',') { ++i_; continue; }
            expect(']', concat("expected ',' or ']' in ", what).c_str());
            return v;
        }
    }

    TensorInfo tensor_object(std::string name) {
        const std::size_t at = i_;
        expect('{', concat("tensor '", name, "': expected an object").c_str());
        TensorInfo t;
        t.name = std::move(name);
        bool have_dtype = false, have_shape = false, have_offsets = false;
        skip_ws();
        if (peek() == '}') fail(i_, concat("tensor '", t.name, "': empty entry (needs dtype, shape, data_offsets)"));
        for (;;) {
            skip_ws();
            const std::size_t field_at = i_;
            const std::string field = string_value();
            skip_ws();
            expect(':', "expected ':' after a key");
            skip_ws();
            auto once = [&](bool& have) {
                if (have) fail(field_at, concat("tensor '", t.name, "': field '", field, "' appears twice"));
                have = true;
            };
            if (field == "dtype") {
                once(have_dtype);
                const std::size_t dt_at = i_;
                const std::string d = string_value();
                if (d == "F32") t.dtype = Dtype::F32;
                else if (d == "F64") t.dtype = Dtype::F64;
                else if (d == "I64") t.dtype = Dtype::I64;
                else if (d == "I32") t.dtype = Dtype::I32;
                else if (d == "U8") t.dtype = Dtype::U8;
                else fail(dt_at, concat("tensor '", t.name, "': dtype '", d, "' is not supported (oar reads F32, F64, I64, I32, U8)"));
            } else if (field == "shape") {
                once(have_shape);
                t.shape = integer_array(16, concat("tensor '", t.name, "' shape").c_str());
            } else if (field == "data_offsets") {
                once(have_offsets);
                const std::size_t off_at = i_;
                const auto o = integer_array(2, concat("tensor '", t.name, "' data_offsets").c_str());
                if (o.size() != 2) fail(off_at, concat("tensor '", t.name, "': data_offsets needs two integers, got ", o.size()));
                t.begin = o[0];
                t.end = o[1];
                if (t.end < t.begin) fail(off_at, concat("tensor '", t.name, "': data_offsets [", t.begin, ", ", t.end, "] end before they begin"));
            } else {
                fail(field_at, concat("tensor '", t.name, "': unknown field '", field, "'"));
            }
            skip_ws();
            if (peek() == ',') { ++i_; continue; }
            expect('}', concat("tensor '", t.name, "': expected ',' or '}'").c_str());
            break;
        }
        if (!have_dtype || !have_shape || !have_offsets)
            fail(at, concat("tensor '", t.name, "': missing ", !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets"));
        return t;
    }

    std::map<std::string, std::string> metadata_object() {
        expect('{', "'__metadata__' must be an object of strings");
        std::map<std::string, std::string> m;
        skip_ws();
        if (peek() == '}') { ++i_; return m; }
        for (;;) {
            skip_ws();
            const std::size_t key_at = i_;
            std::string k = string_value();
            skip_ws();
            expect(':', "expected ':' after a key");
            skip_ws();
            if (peek() != '"') fail(i_, concat("'__metadata__' value of '", k, "' must be a string"));
            std::string v = string_value();
            if (!m.emplace(std::move(k), std::move(v)).second) fail(key_at, "a '__metadata__' key appears twice");
            skip_ws();
            if (peek() == ',') { ++i_; continue; }
            expect('}', "expected ',' or '}' in '__metadata__'");
            return m;
        }
    }

    std::string_view s_;
    std::string_view source_;
    std::size_t i_ = 0;
};

}  // namespace detail

/// A validated safetensors file in memory.
class SafeTensors {
public:
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const std::string& source() const { return source_; }

    const TensorInfo* find(std::string_view name) const {
        for (const auto& t : tensors_)
            if (t.name == name) return &t;
        return nullptr;
    }
    const TensorInfo& at(std::string_view name) const {
        if (const TensorInfo* t = find(name)) return *t;
        throw value_error(detail::concat(source_, ": no tensor named '", name, "'"));
    }
    std::span<const std::byte> bytes(const TensorInfo& t) const {
        return {data_.data() + data_start_ + t.begin, static_cast<std::size_t>(t.end - t.begin)};
    }
    /// A copy of tensor `name`'s values; throws value_error naming the key if its dtype is not T's.
    template <class T>
    std::vector<T> values(std::string_view name) const {
        const TensorInfo& t = at(name);
        if (t.dtype != dtype_of<T>())
            throw value_error(detail::concat(source_, ": tensor '", name, "' is ", dtype_name(t.dtype), ", asked for ",
                                             dtype_name(dtype_of<T>())));
        std::vector<T> out(static_cast<std::size_t>(t.elements()));
        const auto b = bytes(t);
        if (!b.empty()) std::memcpy(out.data(), b.data(), b.size());
        return out;
    }

private:
    friend SafeTensors parse_safetensors(std::vector<std::byte> file, std::string source);
    std::vector<std::byte> data_;
    std::size_t data_start_ = 0;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, std::string> metadata_;
    std::string source_;
};

/// Validates a whole safetensors file held in `file`; `source` names it in errors.
inline SafeTensors parse_safetensors(std::vector<std::byte> file, std::string source) {
    using detail::concat;
    if (file.size() < 8)
        throw format_error(concat(source, ": ", file.size(), " bytes, too short for the 8-byte safetensors header length"));
    std::uint64_t n = 0;
    std::memcpy(&n, file.data(), 8);
    if (n > max_header_bytes)
        throw format_error(concat(source, ": byte 0: the header claims ", n, " bytes, more than the limit of ", max_header_bytes));
    if (n > file.size() - 8)
        throw format_error(concat(source, ": byte 0: the header claims ", n, " bytes but the file has only ", file.size() - 8,
                                  " after the length (truncated?)"));
    if (n < 2) throw format_error(concat(source, ": byte 8: a header of ", n, " bytes cannot be a JSON object"));
    const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), static_cast<std::size_t>(n));
    auto parsed = detail::HeaderParser(text, source).parse();

    const std::uint64_t data_size = file.size() - 8 - n;
    std::vector<TensorInfo*> order;
    order.reserve(parsed.tensors.size());
    for (auto& t : parsed.tensors) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    std::uint64_t expected_begin = 0;
    for (const TensorInfo* t : order) {
        if (t->begin != expected_begin)
            throw format_error(concat(source, ": tensor '", t->name, "': data_offsets [", t->begin, ", ", t->end, "] ",
                                      t->begin < expected_begin ? "overlap the previous tensor" : "leave a hole after the previous tensor",
                                      " (expected it to begin at data byte ", expected_begin, ", file byte ", 8 + n + expected_begin, ")"));
        std::uint64_t elems = 1;
        for (auto d : t->shape) {
            if (d != 0 && elems > UINT64_MAX / d)
                throw format_error(concat(source, ": tensor '", t->name, "': shape ", shape_string(t->shape), " overflows"));
            elems *= d;
        }
        const std::uint64_t es = dtype_size(t->dtype);
        if (elems > UINT64_MAX / es)
            throw format_error(concat(source, ": tensor '", t->name, "': shape ", shape_string(t->shape), " overflows"));
        if (elems * es != t->end - t->begin)
            throw format_error(concat(source, ": tensor '", t->name, "': shape ", shape_string(t->shape), " of ",
                                      dtype_name(t->dtype), " needs ", elems * es, " bytes, data_offsets [", t->begin, ", ",
                                      t->end, "] hold ", t->end - t->begin));
        if (t->end > data_size)
            throw format_error(concat(source, ": tensor '", t->name, "': data_offsets [", t->begin, ", ", t->end,
                                      "] reach past the end of the file (the data section has ", data_size,
                                      " bytes; file byte ", 8 + n + t->end, " of ", file.size(), ", truncated?)"));
        expected_begin = t->end;
    }
    if (expected_begin != data_size)
        throw format_error(concat(source, ": byte ", 8 + n + expected_begin, ": ", data_size - expected_begin,
                                  " bytes after the last tensor's data belong to no tensor"));

    SafeTensors st;
    st.data_ = std::move(file);
    st.data_start_ = static_cast<std::size_t>(8 + n);
    st.tensors_.reserve(order.size());
    for (TensorInfo* t : order) st.tensors_.push_back(std::move(*t));
    st.metadata_ = std::move(parsed.metadata);
    st.source_ = std::move(source);
    return st;
}

/// Reads and validates the safetensors file at `path` (see the top of this header).
inline SafeTensors read_safetensors(const std::string& path) {
    using detail::concat;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw io_error(concat(path, ": is a folder, not a safetensors file"));
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw io_error(concat(path, ": cannot open (", detail::errno_text(errno), ")"));
    struct Closer {
        std::FILE* f;
        ~Closer() { std::fclose(f); }
    } closer{f};
    if (std::fseek(f, 0, SEEK_END) != 0) throw io_error(concat(path, ": cannot seek"));
    const long end = std::ftell(f);
    if (end < 0) throw io_error(concat(path, ": cannot tell its size"));
    std::rewind(f);
    // The buffer is the file's real size (checked, not claimed); the header length is checked in
    // parse_safetensors against it and against max_header_bytes.
    std::vector<std::byte> bytes(static_cast<std::size_t>(end));
    if (!bytes.empty() && std::fread(bytes.data(), 1, bytes.size(), f) != bytes.size())
        throw io_error(concat(path, ": cannot read ", bytes.size(), " bytes (changed while reading?)"));
    return parse_safetensors(std::move(bytes), path);
}

/// The header text write_safetensors puts before the data (JSON padded with spaces so that the
/// data starts at a multiple of 8), with each tensor's data_offsets in the order given.
inline std::string safetensors_header(const std::vector<TensorRef>& tensors, const std::map<std::string, std::string>& metadata) {
    using detail::concat;
    std::string h = "{";
    bool first = true;
    if (!metadata.empty()) {
        h += "\"__metadata__\":{";
        for (const auto& [k, v] : metadata) {
            if (!first) h += ',';
            first = false;
            detail::json_string(h, k);
            h += ':';
            detail::json_string(h, v);
        }
        h += '}';
        first = false;
    }
    std::map<std::string_view, int> names;
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        if (t.name.empty() || t.name == "__metadata__") throw value_error(concat("write_safetensors: bad tensor name '", t.name, "'"));
        for (unsigned char c : t.name)
            if (!detail::is_name_char_ok(c)) throw value_error(concat("write_safetensors: tensor name '", t.name, "' contains a control character"));
        if (detail::utf8_error_at(t.name) != t.name.size())
            throw value_error(concat("write_safetensors: tensor name '", t.name, "' is not valid UTF-8"));
        if (!names.emplace(t.name, 0).second) throw value_error(concat("write_safetensors: tensor '", t.name, "' given twice"));
        std::uint64_t elems = 1;
        for (auto d : t.shape) elems *= d;
        if (elems * dtype_size(t.dtype) != t.data.size())
            throw value_error(concat("write_safetensors: tensor '", t.name, "' has shape ", shape_string(t.shape), " of ",
                                     dtype_name(t.dtype), " (", elems * dtype_size(t.dtype), " bytes) but ", t.data.size(),
                                     " bytes of data"));
        if (!first) h += ',';
        first = false;
        detail::json_string(h, t.name);
        h += concat(":{\"dtype\":\"", dtype_name(t.dtype), "\",\"shape\":", shape_string(t.shape), ",\"data_offsets\":[",
                    offset, ",", offset + t.data.size(), "]}");
        offset += t.data.size();
    }
    h += '}';
    while (h.size() % 8) h += ' ';
    return h;
}

/// Writes `tensors` (in that order) and `metadata` to `path` atomically. Throws value_error for a
/// bad name or a shape that does not match the bytes, io_error when the file cannot be written
/// (the previous file at `path`, if any, is then left as it was).
inline void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                              const std::map<std::string, std::string>& metadata = {}) {
    const std::string header = safetensors_header(tensors, metadata);
    const std::uint64_t n = header.size();
    AtomicFile f(path);
    f.write(&n, 8);
    f.write(header.data(), header.size());
    for (const auto& t : tensors) f.write(t.data.data(), t.data.size());
    f.commit();
}

}  // namespace oar::io
