// Shared by the libFuzzer targets: the parsers take file paths, so each input is written to one
// file in a per-process folder under /dev/shm (memory-backed, reused for every input, removed at
// exit), optionally gzip-compressed first so that the fuzzer's mutations reach the format inside.
#pragma once

#include <cstddef>       // std::size_t
#include <cstdint>       // std::uint8_t
#include <cstdio>        // std::FILE, std::fopen, std::fwrite, std::fprintf
#include <cstdlib>       // std::abort, std::getenv
#include <exception>     // std::exception: a rejection's message
#include <filesystem>    // std::filesystem: the per-process folder
#include <string>        // std::string
#include <system_error>  // std::error_code: cleanup never throws

#include <unistd.h>  // ::getpid: one folder per fuzzing process (-jobs/-workers run several)
#include <zlib.h>    // gzopen, gzwrite, gzclose: the gzip-compressed variant of an input

namespace oar_fuzz {

/// The per-process scratch folder, created on first use and removed when the process exits.
class Scratch {
public:
    Scratch() {
        std::error_code ec;
        const std::filesystem::path shm = "/dev/shm";
        const std::filesystem::path base = std::filesystem::is_directory(shm, ec) ? shm : std::filesystem::temp_directory_path();
        dir_ = base / ("oar-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir_, ec);
    }
    ~Scratch() {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    std::string file(const char* name) const { return (dir_ / name).string(); }

private:
    std::filesystem::path dir_;
};

inline const Scratch& scratch() {
    static const Scratch s;
    return s;
}

/// Writes data[0, size) to `path` as it is; aborts on failure (a harness fault, not a finding).
inline void write_raw(const std::string& path, const std::uint8_t* data, std::size_t size) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    if (std::fclose(f) != 0) std::abort();
}

/// Writes data[0, size) gzip-compressed (level 1: fast, the bytes inside matter, not the ratio).
inline void write_gzip(const std::string& path, const std::uint8_t* data, std::size_t size) {
    gzFile f = gzopen(path.c_str(), "wb1");
    if (!f) std::abort();
    if (size && gzwrite(f, data, static_cast<unsigned>(size)) != static_cast<int>(size)) std::abort();
    if (gzclose(f) != Z_OK) std::abort();
}

/// Writes the payload raw or gzip-compressed.
inline void write_input(const std::string& path, const std::uint8_t* data, std::size_t size, bool gzip) {
    if (gzip) write_gzip(path, data, size);
    else write_raw(path, data, size);
}

/// Prints an expected rejection's message when OAR_FUZZ_VERBOSE is set (to check the seeds:
/// `OAR_FUZZ_VERBOSE=1 build/fuzz/fuzz/fuzz_idx fuzz/corpus/fuzz_idx/*`); silent otherwise.
inline void rejected(const std::exception& e) {
    static const bool verbose = std::getenv("OAR_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "rejected: %s\n", e.what());
}

/// A property every successful parse must have; a violation is a finding, reported as a crash.
inline void require(bool ok) {
    if (!ok) __builtin_trap();
}

}  // namespace oar_fuzz
