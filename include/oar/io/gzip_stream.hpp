// Streaming decompression on a background thread: a gzip file (one or more members) is inflated
// with zlib into fixed-size blocks that the caller takes in order while the next ones are being
// inflated, so a parser can work concurrently with zlib. Memory is bounded by the block pool,
// never by what the file's headers claim; a file without the gzip magic is passed through as is.
#pragma once

#include <algorithm>           // std::min, std::max, std::copy
#include <condition_variable>  // std::condition_variable: the producer/consumer hand-off
#include <cstddef>             // std::size_t
#include <cstdint>             // std::uint64_t
#include <cstdio>              // std::FILE, std::fopen, std::fread: reading the compressed file
#include <deque>               // std::deque: filled blocks waiting for the consumer
#include <exception>           // std::exception_ptr: the producer's error, rethrown in stream order
#include <mutex>               // std::mutex, std::unique_lock
#include <string>              // std::string
#include <thread>              // std::thread: the inflating thread
#include <utility>             // std::move
#include <vector>              // std::vector<char>: the blocks

#include <zlib.h>  // inflateInit2, inflate, inflateReset, inflateEnd

#include "../core/error.hpp"  // io_error, format_error

namespace oar::io {

/// Decompresses `path` on its own thread into blocks of at most `block_bytes`; `next()` hands them
/// out in order. At most `queue_blocks` filled blocks wait ahead of the consumer, so memory stays
/// near (queue_blocks + 2) * block_bytes however large the data is.
///
/// Errors: the constructor throws io_error when the file cannot be opened. A corrupt or truncated
/// gzip stream, trailing bytes that are not another gzip member, or a read failure surface from
/// `next()` as format_error / io_error naming the file, the compressed offset and the number of
/// bytes decompressed so far, after every good block before the damage has been handed out.
/// Destroying the object early (e.g. because the consumer found an error) stops and joins the thread.
class InflateThread {
public:
    struct Options {
        std::size_t block_bytes = std::size_t(4) << 20;  ///< decompressed bytes per block
        std::size_t queue_blocks = 4;                    ///< filled blocks allowed to wait
        std::size_t read_bytes = std::size_t(1) << 18;   ///< compressed bytes per fread
    };

    explicit InflateThread(std::string path) : InflateThread(std::move(path), Options{}) {}
    InflateThread(std::string path, Options opt) : path_(std::move(path)), opt_(opt) {
        if (opt_.block_bytes == 0) opt_.block_bytes = 1;
        if (opt_.queue_blocks == 0) opt_.queue_blocks = 1;
        if (opt_.read_bytes == 0) opt_.read_bytes = 1;
        file_ = std::fopen(path_.c_str(), "rb");
        if (!file_) throw io_error(detail::concat(path_, ": cannot open"));
        // The first two bytes decide between gzip and a plain file; they stay in the input buffer.
        in_.resize(std::max<std::size_t>(opt_.read_bytes, 2));
        in_len_ = std::fread(in_.data(), 1, in_.size(), file_);
        if (std::ferror(file_)) {
            std::fclose(file_);
            throw io_error(detail::concat(path_, ": cannot read"));
        }
        gzip_ = in_len_ >= 2 && static_cast<unsigned char>(in_[0]) == 0x1f && static_cast<unsigned char>(in_[1]) == 0x8b;
        try {
            worker_ = std::thread([this] { run(); });
        } catch (...) {
            std::fclose(file_);
            throw;
        }
    }

    InflateThread(const InflateThread&) = delete;
    InflateThread& operator=(const InflateThread&) = delete;

    ~InflateThread() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        worker_.join();
        std::fclose(file_);
    }

    /// Replaces `block` with the next block of decompressed bytes (never empty) and recycles the
    /// buffer it held. Returns false at the end of the data; rethrows the decompressor's error
    /// once the blocks before it are consumed.
    bool next(std::vector<char>& block) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (block.capacity() >= opt_.block_bytes) {  // not cleared: resizing it back would zero 4 MiB
            free_.push_back(std::move(block));
            block = std::vector<char>();
            cv_.notify_all();
        }
        cv_.wait(lock, [this] { return !ready_.empty() || done_; });
        if (!ready_.empty()) {
            block = std::move(ready_.front());
            ready_.pop_front();
            cv_.notify_all();
            return true;
        }
        if (error_) std::rethrow_exception(error_);
        return false;
    }

    /// Whether the file starts with the gzip magic 1f 8b (otherwise its bytes pass through).
    bool gzip() const { return gzip_; }
    const std::string& path() const { return path_; }

private:
    // ---- producer side (worker thread) ----

    /// A block to fill: a recycled one, or a new one while the pool is below its bound; waits
    /// otherwise. Returns false when asked to stop.
    bool take_free(std::vector<char>& out) {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || !free_.empty() || allocated_ < opt_.queue_blocks + 2; });
        if (stop_) return false;
        if (!free_.empty()) {
            out = std::move(free_.back());
            free_.pop_back();
        } else {
            ++allocated_;
            lock.unlock();
            out.reserve(opt_.block_bytes);
        }
        out.resize(opt_.block_bytes);
        return true;
    }

    /// Queues a filled block (trimmed to `used`), waiting while the queue is full.
    bool push(std::vector<char>& b, std::size_t used) {
        b.resize(used);
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || ready_.size() < opt_.queue_blocks; });
        if (stop_) return false;
        ready_.push_back(std::move(b));
        b = std::vector<char>();
        cv_.notify_all();
        return true;
    }

    /// Refills the input buffer; false at the end of the file.
    bool read_more() {
        in_pos_ = 0;
        in_len_ = std::fread(in_.data(), 1, in_.size(), file_);
        if (in_len_ == 0 && std::ferror(file_))
            throw io_error(detail::concat(path_, ": read error after ", in_offset_, " compressed bytes"));
        return in_len_ > 0;
    }

    std::string where() const {
        return detail::concat("compressed byte ", in_offset_ + in_pos_, " (", out_total_, " bytes decompressed)");
    }

    void run_plain() {
        std::vector<char> b;
        while (true) {
            if (!take_free(b)) return;
            std::size_t used = 0;
            while (used < b.size()) {
                if (in_pos_ == in_len_) {
                    in_offset_ += in_len_;
                    if (!read_more()) break;
                }
                const std::size_t n = std::min(b.size() - used, in_len_ - in_pos_);
                std::copy(in_.data() + in_pos_, in_.data() + in_pos_ + n, b.data() + used);
                in_pos_ += n;
                used += n;
            }
            out_total_ += used;
            if (used == 0) return;
            if (!push(b, used)) return;
            if (used < opt_.block_bytes) return;
        }
    }

    void run_gzip() {
        z_stream zs{};
        if (inflateInit2(&zs, 15 + 16) != Z_OK)  // 15-bit window, gzip wrapper only
            throw format_error(detail::concat(path_, ": zlib cannot start inflating"));
        struct Guard {
            z_stream* z;
            ~Guard() { inflateEnd(z); }
        } guard{&zs};
        std::vector<char> b;
        bool in_member = true;  // inside a gzip member (another may follow each stream end)
        bool at_eof = false;
        while (true) {
            if (!take_free(b)) return;
            std::size_t used = 0;
            while (used < b.size()) {
                if (in_pos_ == in_len_ && !at_eof) {
                    in_offset_ += in_len_;
                    if (!read_more()) at_eof = true;
                }
                if (!in_member) {
                    if (in_pos_ == in_len_) break;  // clean end of the file between members
                    // Another member must follow, starting with the gzip magic.
                    if (static_cast<unsigned char>(in_[in_pos_]) != 0x1f)
                        throw format_error(detail::concat(path_, ": bytes after the end of the gzip data at ", where(),
                                                          " are not another gzip member"));
                    inflateReset(&zs);
                    in_member = true;
                }
                // With no input left, inflate may still flush output it holds; no progress then
                // means the member was cut short.
                zs.next_in = reinterpret_cast<Bytef*>(in_.data() + in_pos_);
                zs.avail_in = static_cast<uInt>(in_len_ - in_pos_);
                zs.next_out = reinterpret_cast<Bytef*>(b.data() + used);
                zs.avail_out = static_cast<uInt>(b.size() - used);
                const int rc = inflate(&zs, Z_NO_FLUSH);
                const std::size_t consumed = (in_len_ - in_pos_) - zs.avail_in;
                const std::size_t produced = (b.size() - used) - zs.avail_out;
                in_pos_ += consumed;
                used += produced;
                out_total_ += produced;
                if (rc == Z_STREAM_END) {
                    in_member = false;
                } else if (rc == Z_OK || rc == Z_BUF_ERROR) {
                    if (consumed == 0 && produced == 0) {
                        if (at_eof)
                            throw format_error(detail::concat(path_, ": truncated gzip data: the file ends at ", where(),
                                                              " inside a gzip member"));
                        if (in_pos_ < in_len_)
                            throw format_error(detail::concat(path_, ": zlib made no progress at ", where()));
                    }
                } else {
                    const char* why = zs.msg ? zs.msg : (rc == Z_MEM_ERROR ? "out of memory" : "invalid data");
                    throw format_error(detail::concat(path_, ": corrupt gzip data at ", where(), ": ", why));
                }
            }
            if (used > 0 && !push(b, used)) return;
            if (used < opt_.block_bytes) return;  // the loop only stops short at the clean end
        }
    }

    void run() {
        try {
            if (gzip_) run_gzip();
            else run_plain();
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex_);
            error_ = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
        }
        cv_.notify_all();
    }

    std::string path_;
    Options opt_;
    std::FILE* file_ = nullptr;
    bool gzip_ = false;

    // Worker-only state.
    std::vector<char> in_;
    std::size_t in_pos_ = 0, in_len_ = 0;
    std::uint64_t in_offset_ = 0;  // compressed offset of in_[0]
    std::uint64_t out_total_ = 0;  // decompressed bytes so far

    // Shared state, guarded by mutex_.
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::vector<char>> ready_;
    std::vector<std::vector<char>> free_;
    std::size_t allocated_ = 0;
    bool stop_ = false, done_ = false;
    std::exception_ptr error_;
    std::thread worker_;  // last: started once everything above exists
};

}  // namespace oar::io
