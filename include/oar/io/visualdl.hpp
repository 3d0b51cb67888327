// VisualDL scalar logs: the `vdlrecords.*.log` files that VisualDL's LogReader and `visualdl --logdir`
// open, written without Python or a protobuf library. Each record is
//   uint64 little-endian length | Record protobuf
// (no checksums, unlike TensorBoard's TFRecords), and the file starts with a meta-data record, as
// visualdl.LogWriter writes it. The protobuf encoding helpers are TensorBoard's (tensorboard.hpp).
#pragma once

#include <atomic>       // std::atomic: a process-wide counter that makes file names unique
#include <cerrno>       // errno, EEXIST
#include <chrono>       // std::chrono::system_clock: wall times
#include <cstdint>      // std::int64_t, std::uint64_t
#include <cstdio>       // std::fwrite, std::fflush
#include <cstring>      // std::strerror
#include <fcntl.h>      // ::open, O_CREAT | O_EXCL: never reuse another writer's file
#include <filesystem>   // std::filesystem::path, create_directories
#include <functional>   // std::function: the wall-time clock (replaceable in tests)
#include <string>       // std::string: the reused record buffer
#include <string_view>  // std::string_view: tags
#include <system_error> // std::error_code
#include <unistd.h>     // ::getpid, ::close

#include "../core/error.hpp"  // io_error, value_error
#include "tensorboard.hpp"    // tb_detail::pb_*: protobuf wire format, host_name
#include "unique_file.hpp"    // unique_file: the FILE* closes on every path

namespace oar::io {

namespace vdl_detail {

/// Record{ values: 1 { id: 1, tag: 2, timestamp: 3, <one_value> } } around one Value's body.
/// `one_value` is the already encoded oneof field (value: 4 float, or meta_data: 10).
inline void encode_record(std::string& out, std::int64_t id, std::string_view tag, std::int64_t timestamp_ms,
                          const std::string& one_value) {
    std::string value;
    tb_detail::pb_varint(value, (1u << 3) | 0u);
    tb_detail::pb_varint(value, static_cast<std::uint64_t>(id));
    tb_detail::pb_bytes(value, 2, tag);
    tb_detail::pb_varint(value, (3u << 3) | 0u);
    tb_detail::pb_varint(value, static_cast<std::uint64_t>(timestamp_ms));
    value += one_value;
    tb_detail::pb_bytes(out, 1, value);
}

inline std::int64_t unix_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace vdl_detail

/// Writes scalars (loss, accuracy, learning rate per step or epoch) into a new file
/// `vdlrecords.<unix seconds, 10 digits>.log.<hostname>.<pid>.<n>` in `dir` (created if missing):
/// VisualDL's own name with a suffix (its LogWriter's filename_suffix), so that two writers
/// sharing a folder never share a file. `visualdl --logdir <dir>` shows it; as in VisualDL, the
/// step is the record's id and the wall time is in milliseconds.
///
/// Records go through a stdio buffer: flush() hands them to the operating system; the destructor
/// flushes and closes. Values are stored as float32, as VisualDL stores them. Not synchronised.
class VisualDLWriter {
public:
    using Clock = std::function<std::int64_t()>;  ///< milliseconds since the Unix epoch

    explicit VisualDLWriter(std::filesystem::path dir) : VisualDLWriter(std::move(dir), Clock{}) {}

    /// As above, with `clock` giving every wall time (milliseconds) this writer records.
    VisualDLWriter(std::filesystem::path dir, Clock clock) : clock_(std::move(clock)) {
        if (!clock_) clock_ = vdl_detail::unix_ms;
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec)
            throw io_error(oar::detail::concat(dir.string(), ": cannot create the log directory (", ec.message(), ")"));
        const std::int64_t now = clock_();
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(now / 1000));
        const std::string stem = oar::detail::concat("vdlrecords.", seconds, ".log.", tb_detail::host_name(), ".",
                                                     ::getpid(), ".");
        static std::atomic<unsigned> counter{0};
        for (int attempt = 0;; ++attempt) {
            path_ = dir / (stem + std::to_string(counter.fetch_add(1)));
            const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd >= 0) {
                file_.reset(::fdopen(fd, "wb"));
                if (!file_) {
                    const int err = errno;
                    ::close(fd);
                    throw io_error(
                        oar::detail::concat(path_.string(), ": cannot open for writing (", std::strerror(err), ")"));
                }
                break;
            }
            if (errno != EEXIST || attempt > 1000)
                throw io_error(oar::detail::concat(path_.string(), ": cannot create (", std::strerror(errno), ")"));
        }
        // The first record, as LogWriter writes it: meta_data (field 10) with an empty display name;
        // VisualDL's file check (is_VDLRecord_file) looks for its tag.
        std::string meta;
        tb_detail::pb_bytes(meta, 10, "");
        write_record(0, "meta_data_tag", now, meta);
        flush();
    }

    VisualDLWriter(const VisualDLWriter&) = delete;
    VisualDLWriter& operator=(const VisualDLWriter&) = delete;
    VisualDLWriter(VisualDLWriter&&) noexcept = default;
    VisualDLWriter& operator=(VisualDLWriter&&) noexcept = default;
    ~VisualDLWriter() = default;  // unique_file: fclose flushes what is buffered

    /// Records `value` under `tag` (e.g. "train/loss") at `step`, at the clock's current time.
    void add_scalar(std::string_view tag, double value, std::int64_t step) { add_scalar(tag, value, step, clock_()); }

    /// Records `value` under `tag` at `step` with an explicit wall time (milliseconds since the epoch).
    /// VisualDL refuses a '%' in a tag (its web paths), and so does this writer.
    void add_scalar(std::string_view tag, double value, std::int64_t step, std::int64_t wall_time_ms) {
        if (tag.empty()) throw value_error(oar::detail::concat(path_.string(), ": empty VisualDL tag at step ", step));
        if (tag.find('%') != std::string_view::npos)
            throw value_error(oar::detail::concat(path_.string(), ": VisualDL tag '", tag, "' contains '%'"));
        if (!file_) throw io_error("VisualDLWriter: add_scalar on a moved-from writer");
        value_.clear();
        tb_detail::pb_float(value_, 4, static_cast<float>(value));
        write_record(step, tag, wall_time_ms, value_);
    }

    /// Hands everything written so far to the operating system.
    void flush() {
        if (file_ && std::fflush(file_.get()) != 0)
            throw io_error(oar::detail::concat(path_.string(), ": cannot write (", std::strerror(errno), ")"));
    }

    /// The record file this writer appends to.
    const std::filesystem::path& path() const noexcept { return path_; }

private:
    void write_record(std::int64_t id, std::string_view tag, std::int64_t wall_time_ms, const std::string& one_value) {
        record_.assign(8, '\0');
        vdl_detail::encode_record(record_, id, tag, wall_time_ms, one_value);
        const std::uint64_t len = record_.size() - 8;
        for (int i = 0; i < 8; ++i) record_[static_cast<std::size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xFF);
        if (std::fwrite(record_.data(), 1, record_.size(), file_.get()) != record_.size())
            throw io_error(oar::detail::concat(path_.string(), ": cannot write (", std::strerror(errno), ")"));
    }

    Clock clock_;
    std::filesystem::path path_;
    unique_file file_;
    std::string record_, value_;
};

}  // namespace oar::io
