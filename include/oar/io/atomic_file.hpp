// Crash-safe file replacement: write to a temporary file in the target's folder, flush and fsync
// it, rename it over the target, fsync the folder. A reader sees the old file or the new one,
// never a mix, even if the process is killed (SIGKILL) or the machine loses power mid-write.
//
//   oar::io::AtomicFile f(path);      // creates "<folder>/.<name>.tmp.<pid>.XXXXXX"
//   f.write(bytes.data(), bytes.size());
//   f.commit();                       // fflush, fsync, close, rename over path, fsync folder
//   // destroyed without commit() (an exception): the temporary file is removed, path untouched
//
// A SIGKILL cannot run the destructor, so a killed writer may leave a ".<name>.tmp.*" file behind
// (never the target); remove_stale_temporaries(path) deletes those of dead writers.
#pragma once

#include <cerrno>        // errno
#include <cstddef>       // std::size_t
#include <cstdio>        // std::FILE, std::fwrite, std::fflush, std::fclose, std::fdopen
#include <cstring>       // std::strerror
#include <filesystem>    // std::filesystem::path, directory_iterator
#include <string>        // std::string
#include <system_error>  // std::error_code: cleanup never throws
#include <utility>       // std::move
#include <vector>        // std::vector: the mkstemp template buffer

#include <fcntl.h>     // ::open, O_RDONLY, O_DIRECTORY
#include <signal.h>    // ::kill(pid, 0): is a temporary file's writer still alive?
#include <stdlib.h>    // ::mkstemp
#include <unistd.h>    // ::fsync, ::close, ::unlink, ::getpid

#include "../core/error.hpp"  // io_error

namespace oar::io {

namespace detail {
using namespace oar::detail;  // concat & co. stay visible as detail:: inside this namespace
inline std::string errno_text(int e) { return std::strerror(e); }
inline std::filesystem::path folder_of(const std::filesystem::path& p) {
    const auto parent = p.parent_path();
    return parent.empty() ? std::filesystem::path(".") : parent;
}
inline std::string temp_prefix(const std::filesystem::path& target) {
    std::string s(1, '.');  // appended piecewise: g++ 12 warns falsely (-Wrestrict) on "." + string
    s += target.filename().string();
    s += ".tmp.";
    return s;
}
/// fsyncs a folder so that a rename inside it is durable.
inline void fsync_folder(const std::filesystem::path& folder, const std::string& target) {
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) throw io_error(oar::detail::concat(target, ": cannot open folder ", folder.string(), " to sync it (", errno_text(errno), ")"));
    const int rc = ::fsync(fd);
    const int e = errno;
    ::close(fd);
    if (rc != 0 && e != EINVAL) throw io_error(oar::detail::concat(target, ": cannot sync folder ", folder.string(), " (", errno_text(e), ")"));
}
}  // namespace detail

/// A temporary file that replaces `target` atomically on commit(); see the top of this header.
class AtomicFile {
public:
    explicit AtomicFile(std::string target) : target_(std::move(target)) {
        const std::filesystem::path t(target_);
        if (t.filename().empty()) throw io_error(oar::detail::concat(target_, ": not a file name"));
        const std::string tmpl = (detail::folder_of(t) / (detail::temp_prefix(t) + std::to_string(::getpid()) + ".XXXXXX")).string();
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        const int fd = ::mkstemp(buf.data());
        if (fd < 0) throw io_error(oar::detail::concat(target_, ": cannot create a temporary file beside it (", detail::errno_text(errno), ")"));
        temp_ = buf.data();
        file_ = ::fdopen(fd, "wb");
        if (!file_) {
            const int e = errno;
            ::close(fd);
            ::unlink(temp_.c_str());
            throw io_error(oar::detail::concat(target_, ": cannot open temporary file ", temp_, " (", detail::errno_text(e), ")"));
        }
    }
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;
    ~AtomicFile() { abandon(); }

    /// Appends bytes; throws io_error naming the target and the offset on a short write.
    void write(const void* data, std::size_t size) {
        if (!file_) throw io_error(oar::detail::concat(target_, ": write after commit"));
        if (size && std::fwrite(data, 1, size, file_) != size)
            fail(oar::detail::concat("cannot write ", size, " bytes at offset ", written_));
        written_ += size;
    }
    std::size_t bytes_written() const { return written_; }
    const std::string& temporary_path() const { return temp_; }
    const std::string& target() const { return target_; }

    /// Makes the written bytes the content of the target, durably. On failure the temporary file is
    /// removed, the target keeps its previous content, and io_error says which step failed.
    void commit() {
        if (!file_) throw io_error(oar::detail::concat(target_, ": commit twice"));
        if (std::fflush(file_) != 0) fail("cannot flush");
        if (::fsync(::fileno(file_)) != 0) fail("cannot fsync");
        std::FILE* f = file_;
        file_ = nullptr;
        if (std::fclose(f) != 0) {
            const int e = errno;
            ::unlink(temp_.c_str());
            temp_.clear();
            throw io_error(oar::detail::concat(target_, ": cannot close the temporary file (", detail::errno_text(e), ")"));
        }
        if (std::rename(temp_.c_str(), target_.c_str()) != 0) {
            const int e = errno;
            ::unlink(temp_.c_str());
            temp_.clear();
            throw io_error(oar::detail::concat(target_, ": cannot rename the temporary file over it (", detail::errno_text(e), ")"));
        }
        temp_.clear();
        detail::fsync_folder(detail::folder_of(std::filesystem::path(target_)), target_);
    }

private:
    [[noreturn]] void fail(const std::string& what) {
        const int e = errno;
        abandon();
        throw io_error(oar::detail::concat(target_, ": ", what, " (", detail::errno_text(e), ")"));
    }
    void abandon() noexcept {
        if (file_) {
            std::fclose(file_);
            file_ = nullptr;
        }
        if (!temp_.empty()) {
            ::unlink(temp_.c_str());
            temp_.clear();
        }
    }

    std::string target_;
    std::string temp_;
    std::FILE* file_ = nullptr;
    std::size_t written_ = 0;
};

/// Writes `size` bytes to `path` atomically (AtomicFile + commit).
inline void write_file_atomically(const std::string& path, const void* data, std::size_t size) {
    AtomicFile f(path);
    f.write(data, size);
    f.commit();
}

/// Removes the ".<name>.tmp.<pid>.*" files a killed writer of `target` left behind (those whose
/// pid no longer runs). Returns how many were removed. Never throws.
inline std::size_t remove_stale_temporaries(const std::string& target) noexcept {
    std::size_t removed = 0;
    std::error_code ec;
    const std::filesystem::path t(target);
    const std::string prefix = detail::temp_prefix(t);
    for (std::filesystem::directory_iterator it(detail::folder_of(t), ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.rfind(prefix, 0) != 0) continue;
        const std::string rest = name.substr(prefix.size());
        const auto dot = rest.find('.');
        if (dot == std::string::npos || dot == 0) continue;
        long pid = 0;
        bool digits = true;
        for (std::size_t i = 0; i < dot; ++i) {
            if (rest[i] < '0' || rest[i] > '9' || pid > 100000000) { digits = false; break; }
            pid = pid * 10 + (rest[i] - '0');
        }
        if (!digits) continue;
        if (pid == ::getpid() || (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) continue;
        std::error_code rm;
        if (std::filesystem::remove(it->path(), rm)) ++removed;
    }
    return removed;
}

}  // namespace oar::io
