// Tests of include/oar/io/atomic_file.hpp: commit replaces the target whole, an abandoned or failed
// write leaves the previous file and no temporary file, and stale temporaries of dead writers are
// removed while a live writer's are kept.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <filesystem>  // std::filesystem: listing the folder
#include <fstream>     // std::ifstream, std::ofstream
#include <stdexcept>   // std::runtime_error: an interrupted write
#include <string>      // std::string
#include <csignal>      // ::signal, SIGXFSZ: the file size limit fails writes instead of killing
#include <sys/resource.h>  // ::setrlimit, RLIMIT_FSIZE: a write that fails midway
#include <sys/wait.h>  // ::waitpid: a pid that no longer runs
#include <unistd.h>    // ::fork, ::_exit, ::getpid

#include <oar/io/atomic_file.hpp>  // under test

#include "support/errors.hpp"    // oar_test::message_of, contains
#include "support/temp_dir.hpp"  // oar_test::TempDir

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
std::size_t entries(const fs::path& dir) {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
    return n;
}

}  // namespace

TEST_CASE("commit replaces the target with exactly the bytes written and leaves no temporary file") {
    oar_test::TempDir dir;
    const std::string path = dir.file("f.bin");
    std::ofstream(path) << "old content";
    {
        oar::io::AtomicFile f(path);
        CHECK(fs::path(f.temporary_path()).parent_path() == dir.path);
        f.write("new ", 4);
        f.write("bytes", 5);
        CHECK(f.bytes_written() == 9);
        CHECK(slurp(path) == "old content");  // not visible before commit
        f.commit();
        CHECK_THROWS_AS(f.write("x", 1), oar::io_error);
    }
    CHECK(slurp(path) == "new bytes");
    CHECK(entries(dir.path) == 1);
    oar::io::write_file_atomically(path, "third", 5);
    CHECK(slurp(path) == "third");
    CHECK(entries(dir.path) == 1);
}

TEST_CASE("a write abandoned before commit keeps the previous file and removes its temporary file") {
    oar_test::TempDir dir;
    const std::string path = dir.file("f.bin");
    std::ofstream(path) << "keep me";
    try {
        oar::io::AtomicFile f(path);
        f.write("partial", 7);
        throw std::runtime_error("interrupted");
    } catch (const std::runtime_error&) {
    }
    CHECK(slurp(path) == "keep me");
    CHECK(entries(dir.path) == 1);
}

TEST_CASE("a target in a missing folder or a target that is a folder is an io_error naming it") {
    oar_test::TempDir dir;
    const std::string missing = dir.file("no/such/f.bin");
    CHECK(oar_test::contains(oar_test::message_of<oar::io_error>([&] { oar::io::write_file_atomically(missing, "x", 1); }), missing));
    fs::create_directory(dir.path / "sub");
    fs::path target = dir.path / "sub";
    const std::string msg = oar_test::message_of<oar::io_error>([&] { oar::io::write_file_atomically(target.string(), "x", 1); });
    CHECK(oar_test::contains(msg, "cannot rename"));
    CHECK(entries(dir.path) == 1);  // only "sub": the temporary file is gone
}

TEST_CASE("stale temporary files of dead writers are removed, a live writer's are kept") {
    oar_test::TempDir dir;
    const std::string path = dir.file("w.safetensors");
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) ::_exit(0);
    ::waitpid(child, nullptr, 0);  // a pid that no longer runs
    std::ofstream(dir.file(".w.safetensors.tmp." + std::to_string(child) + ".abc123")) << "junk";
    std::ofstream(dir.file(".w.safetensors.tmp." + std::to_string(::getpid()) + ".def456")) << "mine";
    std::ofstream(dir.file(".other.tmp.1.x")) << "not ours";
    CHECK(oar::io::remove_stale_temporaries(path) == 1);
    CHECK_FALSE(fs::exists(dir.file(".w.safetensors.tmp." + std::to_string(child) + ".abc123")));
    CHECK(fs::exists(dir.file(".w.safetensors.tmp." + std::to_string(::getpid()) + ".def456")));
    CHECK(fs::exists(dir.file(".other.tmp.1.x")));
}

TEST_CASE("a write that fails midway (file size limit) is an io_error, keeps the previous file and removes the temporary") {
    oar_test::TempDir dir;
    const std::string path = dir.file("big.bin");
    std::ofstream(path) << "previous";
    // In a child process: RLIMIT_FSIZE makes writes beyond 64 KiB fail with EFBIG (SIGXFSZ ignored),
    // as a full disk would. Exit status: 0 all as promised, 1 no error, 2 wrong state, 3 wrong error.
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::signal(SIGXFSZ, SIG_IGN);
        const rlimit lim{65536, 65536};
        ::setrlimit(RLIMIT_FSIZE, &lim);
        const std::string data(1 << 20, 'x');
        try {
            oar::io::write_file_atomically(path, data.data(), data.size());
        } catch (const oar::io_error& e) {
            const std::string msg = e.what();
            if (msg.find(path) == std::string::npos || msg.find("cannot") == std::string::npos) ::_exit(3);
            ::_exit(slurp(path) == "previous" && entries(dir.path) == 1 ? 0 : 2);
        } catch (...) {
            ::_exit(3);
        }
        ::_exit(1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(slurp(path) == "previous");
    CHECK(entries(dir.path) == 1);
}
