// TensorBoard scalar logs: event files in the TFRecord format that TensorBoard's own reader
// (EventAccumulator) opens, written without TensorFlow or a protobuf library. Each record is
//   uint64 length | uint32 masked CRC-32C(length) | Event protobuf | uint32 masked CRC-32C(Event)
// and the Event messages are encoded by hand (a handful of fields, see encode_* below).
#pragma once

#include <atomic>       // std::atomic: a process-wide counter that makes file names unique
#include <cerrno>       // errno, EEXIST
#include <chrono>       // std::chrono::system_clock: wall times
#include <cstdint>      // std::int64_t, std::uint32_t, std::uint64_t
#include <cstdio>       // std::FILE, std::fwrite, std::fflush, std::fclose
#include <cstring>      // std::memcpy, std::strerror
#include <fcntl.h>      // ::open, O_CREAT | O_EXCL: never reuse another writer's file
#include <filesystem>   // std::filesystem::path, create_directories
#include <functional>   // std::function: the wall-time clock (replaceable in tests)
#include <memory>       // std::unique_ptr: the FILE* closes on every path
#include <string>       // std::string: the reused record buffer
#include <string_view>  // std::string_view: tags
#include <system_error> // std::error_code
#include <unistd.h>     // ::gethostname, ::getpid, ::close

#include "unique_file.hpp"   // unique_file: the FILE* closes on every path
#include "../core/error.hpp"  // io_error, value_error
#include "crc32c.hpp"         // crc32c, mask_crc32c: TFRecord checksums

namespace oar::io {

namespace tb_detail {

// Protobuf wire format: a key is (field << 3) | wire type; 0 varint, 1 fixed64, 2 length-delimited,
// 5 fixed32. Multi-byte fixed values are little-endian.
inline void pb_varint(std::string& out, std::uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<char>((v & 0x7F) | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<char>(v));
}
inline void pb_fixed32(std::string& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void pb_fixed64(std::string& out, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void pb_double(std::string& out, unsigned field, double d) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    pb_varint(out, (field << 3) | 1u);
    pb_fixed64(out, bits);
}
inline void pb_float(std::string& out, unsigned field, float f) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    pb_varint(out, (field << 3) | 5u);
    pb_fixed32(out, bits);
}
inline void pb_bytes(std::string& out, unsigned field, std::string_view s) {
    pb_varint(out, (field << 3) | 2u);
    pb_varint(out, s.size());
    out.append(s);
}
inline std::size_t pb_varint_size(std::uint64_t v) {
    std::size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}

/// Event{ wall_time: 1, file_version: 3 } — the first record of every event file.
inline void encode_file_version_event(std::string& out, double wall_time) {
    pb_double(out, 1, wall_time);
    pb_bytes(out, 3, "brain.Event:2");
}

/// Event{ wall_time: 1, step: 2, summary: 5 { value: 1 { tag: 1, simple_value: 2 } } }
inline void encode_scalar_event(std::string& out, double wall_time, std::int64_t step, std::string_view tag,
                                float value) {
    const std::size_t value_size = 1 + pb_varint_size(tag.size()) + tag.size() + 1 + 4;  // tag, simple_value
    const std::size_t summary_size = 1 + pb_varint_size(value_size) + value_size;        // one Value
    pb_double(out, 1, wall_time);
    pb_varint(out, (2u << 3) | 0u);
    pb_varint(out, static_cast<std::uint64_t>(step));  // int64: negative steps take ten bytes
    pb_varint(out, (5u << 3) | 2u);
    pb_varint(out, summary_size);
    pb_varint(out, (1u << 3) | 2u);
    pb_varint(out, value_size);
    pb_bytes(out, 1, tag);
    pb_float(out, 2, value);
}

/// Wraps `payload` (already in `record` from offset 12) into a TFRecord in place: fills the
/// 12-byte header and appends the payload's CRC.
inline void finish_tfrecord(std::string& record) {
    const std::uint64_t len = record.size() - 12;
    char header[8];
    for (int i = 0; i < 8; ++i) header[i] = static_cast<char>((len >> (8 * i)) & 0xFF);
    const std::uint32_t len_crc = mask_crc32c(crc32c(header, 8));
    const std::uint32_t data_crc = mask_crc32c(crc32c(record.data() + 12, record.size() - 12));
    std::memcpy(record.data(), header, 8);
    for (int i = 0; i < 4; ++i) record[8 + i] = static_cast<char>((len_crc >> (8 * i)) & 0xFF);
    pb_fixed32(record, data_crc);
}

inline std::string host_name() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
    std::string s(buf);
    for (char& c : s)
        if (c == '/' || c == '\\') c = '_';  // never a path separator inside the file name
    return s;
}

inline double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace tb_detail

/// Writes scalar summaries (loss, accuracy, learning rate, ... per step or epoch) into a new event
/// file `events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>` in `dir` (created if missing),
/// named like PyTorch's SummaryWriter; the file is created exclusively, so two writers sharing a
/// folder, in one process or several, never share a file. `tensorboard --logdir <dir>` shows it.
///
/// Records go through a stdio buffer: call flush() (e.g. at the end of each epoch) to make them
/// visible to a running TensorBoard; the destructor flushes and closes. One reused buffer encodes
/// every record, so logging a scalar allocates nothing once the longest tag has been seen.
/// Values are stored as float32 (TensorBoard's simple_value); NaN and infinities pass through.
/// Not synchronised: use one writer per thread, or lock around it.
class TensorBoardWriter {
public:
    using Clock = std::function<double()>;  ///< seconds since the Unix epoch

    explicit TensorBoardWriter(std::filesystem::path dir) : TensorBoardWriter(std::move(dir), Clock{}) {}

    /// As above, with `clock` giving every wall time this writer records (tests pin it).
    TensorBoardWriter(std::filesystem::path dir, Clock clock) : clock_(std::move(clock)) {
        if (!clock_) clock_ = tb_detail::unix_now;
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec) throw io_error(oar::detail::concat(dir.string(), ": cannot create the log directory (", ec.message(), ")"));
        const double now = clock_();
        const std::string stem = oar::detail::concat("events.out.tfevents.", static_cast<std::int64_t>(now), ".",
                                                tb_detail::host_name(), ".", ::getpid(), ".");
        static std::atomic<unsigned> counter{0};
        for (int attempt = 0;; ++attempt) {
            path_ = dir / (stem + std::to_string(counter.fetch_add(1)));
            const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd >= 0) {
                file_.reset(::fdopen(fd, "wb"));
                if (!file_) {
                    const int err = errno;
                    ::close(fd);
                    throw io_error(oar::detail::concat(path_.string(), ": cannot open for writing (", std::strerror(err), ")"));
                }
                break;
            }
            if (errno != EEXIST || attempt > 1000)
                throw io_error(oar::detail::concat(path_.string(), ": cannot create (", std::strerror(errno), ")"));
        }
        begin_record();
        tb_detail::encode_file_version_event(record_, now);
        write_record();
        flush();
    }

    TensorBoardWriter(const TensorBoardWriter&) = delete;
    TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;
    TensorBoardWriter(TensorBoardWriter&&) noexcept = default;
    TensorBoardWriter& operator=(TensorBoardWriter&&) noexcept = default;
    ~TensorBoardWriter() = default;  // unique_file: fclose flushes what is buffered

    /// Records `value` under `tag` (e.g. "train/loss") at `step`, at the clock's current time.
    void add_scalar(std::string_view tag, double value, std::int64_t step) { add_scalar(tag, value, step, clock_()); }

    /// Records `value` under `tag` at `step` with an explicit wall time (seconds since the epoch).
    void add_scalar(std::string_view tag, double value, std::int64_t step, double wall_time) {
        if (tag.empty()) throw value_error(oar::detail::concat(path_.string(), ": empty TensorBoard tag at step ", step));
        if (!file_) throw io_error("TensorBoardWriter: add_scalar on a moved-from writer");
        begin_record();
        tb_detail::encode_scalar_event(record_, wall_time, step, tag, static_cast<float>(value));
        write_record();
    }

    /// Hands everything written so far to the operating system.
    void flush() {
        if (file_ && std::fflush(file_.get()) != 0)
            throw io_error(oar::detail::concat(path_.string(), ": cannot write (", std::strerror(errno), ")"));
    }

    /// The event file this writer appends to.
    const std::filesystem::path& path() const noexcept { return path_; }

private:
    void begin_record() {
        record_.clear();
        record_.append(12, '\0');  // length + its CRC, filled by finish_tfrecord
    }
    void write_record() {
        tb_detail::finish_tfrecord(record_);
        if (std::fwrite(record_.data(), 1, record_.size(), file_.get()) != record_.size())
            throw io_error(oar::detail::concat(path_.string(), ": cannot write (", std::strerror(errno), ")"));
    }

    Clock clock_;
    std::filesystem::path path_;
    unique_file file_;
    std::string record_;
};

}  // namespace oar::io
