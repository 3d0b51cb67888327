// A fresh, uniquely named directory under the system's temporary directory, removed with
// everything in it when the TempDir goes out of scope: where the file-reading tests write inputs.
#pragma once

#include <chrono>        // std::chrono::steady_clock: part of the unique name
#include <cstdint>       // std::uint64_t
#include <filesystem>    // std::filesystem
#include <random>        // std::random_device: part of the unique name
#include <string>        // std::string
#include <system_error>  // std::error_code: removal never throws from the destructor
#include <unistd.h>      // ::getpid: part of the unique name (test executables run in parallel)

namespace oar_test {

class TempDir {
public:
    std::filesystem::path path;

    TempDir() {
        const auto tick = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        path = std::filesystem::temp_directory_path() /
               ("oar_test_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()) + "_" +
                std::to_string(tick));
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    /// The path of `name` inside the directory, as a string.
    std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace oar_test
