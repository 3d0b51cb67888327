// Faults for the write-error tests: a full disk (RLIMIT_FSIZE) and a count of open file
// descriptors (error paths must not leak any). Shared by the io writers' tests.
#pragma once

#include <csignal>     // std::signal, SIGXFSZ
#include <filesystem>  // std::filesystem::directory_iterator over /proc/self/fd

#include <sys/resource.h>  // getrlimit, setrlimit, RLIMIT_FSIZE

namespace oar_test {

/// Open file descriptors of this process: error paths must not leak any.
inline int open_fds() {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

/// While alive, regular files cannot grow past `bytes` (writes fail with EFBIG, SIGXFSZ ignored):
/// a full disk, for the write-error paths.
struct FileSizeLimit {
    rlimit old{};
    explicit FileSizeLimit(rlim_t bytes) {
        ::getrlimit(RLIMIT_FSIZE, &old);
        std::signal(SIGXFSZ, SIG_IGN);
        rlimit r = old;
        r.rlim_cur = bytes;
        ::setrlimit(RLIMIT_FSIZE, &r);
    }
    ~FileSizeLimit() { ::setrlimit(RLIMIT_FSIZE, &old); }
    FileSizeLimit(const FileSizeLimit&) = delete;
    FileSizeLimit& operator=(const FileSizeLimit&) = delete;
};

}  // namespace oar_test
