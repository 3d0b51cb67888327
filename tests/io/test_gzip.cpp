// Tests of include/oar/io/gzip.hpp: read_maybe_gzip on raw, gzip, empty, missing, truncated and
// corrupt files, and its size limit. Files are written here (gzip through zlib) under a unique
// temporary directory that is removed afterwards.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cstddef>     // std::size_t, std::ptrdiff_t
#include <cstdint>     // std::uint8_t, std::uint32_t
#include <filesystem>  // std::filesystem::create_directory
#include <string>      // std::string

#include <oar/io/gzip.hpp>  // under test

#include "support/errors.hpp"    // oar_test::contains: checking the error messages
#include "support/files.hpp"     // oar_test::write_raw, read_raw, write_gzip, append_gzip: the inputs
#include "support/temp_dir.hpp"  // oar_test::TempDir: where the inputs go

namespace fs = std::filesystem;

namespace {

using oar_test::append_gzip;
using oar_test::bytes;
using oar_test::contains;
using oar_test::read_raw;
using oar_test::sample_bytes;
using oar_test::TempDir;
using oar_test::write_gzip;
using oar_test::write_raw;


}  // namespace

TEST_CASE("read_maybe_gzip returns a raw file's bytes unchanged") {
    TempDir dir;
    const std::string path = dir.file("plain.bin");
    bytes data = sample_bytes(1000);
    data[0] = 0x00;  // not a gzip magic
    write_raw(path, data);
    CHECK(oar::io::read_maybe_gzip(path) == data);
}

TEST_CASE("read_maybe_gzip returns a raw file larger than its 1 MiB read chunk unchanged") {
    TempDir dir;
    const std::string path = dir.file("big.bin");
    const bytes data = sample_bytes((5u << 19) + 3);  // 2.5 MiB + 3
    write_raw(path, data);
    CHECK(oar::io::read_maybe_gzip(path) == data);
}

TEST_CASE("read_maybe_gzip decompresses a gzip file written by zlib") {
    TempDir dir;
    const std::string path = dir.file("data.gz");
    const bytes data = sample_bytes(100000, 7);
    write_gzip(path, data);
    REQUIRE(read_raw(path).size() < data.size());  // really compressed
    REQUIRE(read_raw(path)[0] == 0x1f);
    CHECK(oar::io::read_maybe_gzip(path) == data);
}

TEST_CASE("read_maybe_gzip decompresses a gzip file of several MiB") {
    TempDir dir;
    const std::string path = dir.file("big.gz");
    const bytes data = sample_bytes((7u << 19) + 11, 3);  // 3.5 MiB + 11
    write_gzip(path, data);
    CHECK(oar::io::read_maybe_gzip(path) == data);
}

TEST_CASE("read_maybe_gzip reads every member of a multi-member gzip file") {
    TempDir dir;
    const std::string path = dir.file("two.gz");
    const bytes a = sample_bytes(5000, 1), b = sample_bytes(3000, 2);
    write_gzip(path, a);
    append_gzip(path, b);
    bytes both = a;
    both.insert(both.end(), b.begin(), b.end());
    CHECK(oar::io::read_maybe_gzip(path) == both);
}

TEST_CASE("read_maybe_gzip returns nothing for an empty file or an empty gzip stream") {
    TempDir dir;
    write_raw(dir.file("empty"), {});
    CHECK(oar::io::read_maybe_gzip(dir.file("empty")).empty());
    write_gzip(dir.file("empty.gz"), {});
    REQUIRE(!read_raw(dir.file("empty.gz")).empty());  // a gzip header and trailer
    CHECK(oar::io::read_maybe_gzip(dir.file("empty.gz")).empty());
}

TEST_CASE("a missing file throws io_error naming the path") {
    TempDir dir;
    const std::string path = dir.file("does_not_exist.gz");
    CHECK_THROWS_AS(oar::io::read_maybe_gzip(path), oar::io_error);
    try {
        (void)oar::io::read_maybe_gzip(path);
    } catch (const oar::io_error& e) {
        const std::string what = e.what();
        CHECK(what.rfind("oar: ", 0) == 0);
        CHECK(contains(what, path));
    }
}

// error.hpp: io_error is "a file that cannot be opened, read or written"; format_error is for
// bytes that do not follow the format. A directory opens (open(2) allows O_RDONLY) but cannot be
// read: zlib reports Z_ERRNO, which is not a corrupt stream.
TEST_CASE("a path that opens but cannot be read (a directory) throws io_error, not format_error") {
    TempDir dir;
    const std::string path = dir.file("a_directory");
    fs::create_directory(path);
    CHECK_THROWS_AS(oar::io::read_maybe_gzip(path), oar::io_error);
    try {
        (void)oar::io::read_maybe_gzip(path);
    } catch (const oar::error& e) {
        CHECK(contains(e.what(), path));
    }
}

TEST_CASE("a truncated gzip file throws format_error naming the file and the bytes reached") {
    TempDir dir;
    const std::string full = dir.file("full.gz"), cut = dir.file("cut.gz");
    const bytes data = sample_bytes(200000, 9);
    write_gzip(full, data);
    const bytes gz = read_raw(full);
    for (std::size_t keep : {gz.size() / 2, gz.size() - 4, std::size_t{12}}) {
        INFO("kept ", keep, " of ", gz.size(), " compressed bytes");
        write_raw(cut, bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(keep)));
        CHECK_THROWS_AS(oar::io::read_maybe_gzip(cut), oar::format_error);
        try {
            (void)oar::io::read_maybe_gzip(cut);
        } catch (const oar::format_error& e) {
            const std::string what = e.what();
            CHECK(contains(what, cut));
            CHECK(contains(what, "decompressed bytes"));
        }
    }
}

TEST_CASE("a gzip file with flipped bytes in its deflate stream throws format_error") {
    TempDir dir;
    const std::string path = dir.file("corrupt.gz");
    const bytes data = sample_bytes(200000, 4);
    write_gzip(path, data);
    bytes gz = read_raw(path);
    REQUIRE(gz.size() > 100);
    for (std::size_t i = gz.size() / 2; i < gz.size() / 2 + 16; ++i) gz[i] ^= 0xA5;
    write_raw(path, gz);
    CHECK_THROWS_AS(oar::io::read_maybe_gzip(path), oar::format_error);
    try {
        (void)oar::io::read_maybe_gzip(path);
    } catch (const oar::format_error& e) {
        CHECK(contains(e.what(), path));
        CHECK(contains(e.what(), "corrupt"));
    }
}

TEST_CASE("a gzip file with a wrong CRC throws format_error") {
    TempDir dir;
    const std::string path = dir.file("crc.gz");
    write_gzip(path, sample_bytes(5000, 5));
    bytes gz = read_raw(path);
    gz[gz.size() - 8] ^= 0x01;  // the trailer: CRC32 then ISIZE, 4 bytes each
    write_raw(path, gz);
    CHECK_THROWS_AS(oar::io::read_maybe_gzip(path), oar::format_error);
}

TEST_CASE("read_maybe_gzip refuses data beyond its limit") {
    TempDir dir;
    const bytes data = sample_bytes(3000);
    write_raw(dir.file("raw"), data);
    write_gzip(dir.file("gz"), data);
    for (const char* name : {"raw", "gz"}) {
        const std::string path = dir.file(name);
        INFO(path);
        CHECK(oar::io::read_maybe_gzip(path, 3001) == data);
        CHECK(oar::io::read_maybe_gzip(path, 1u << 30) == data);
        CHECK_THROWS_AS(oar::io::read_maybe_gzip(path, 2999), oar::format_error);
        CHECK_THROWS_AS(oar::io::read_maybe_gzip(path, 10), oar::format_error);
        try {
            (void)oar::io::read_maybe_gzip(path, 10);
        } catch (const oar::format_error& e) {
            CHECK(contains(e.what(), path));
            CHECK(contains(e.what(), "10"));
        }
    }
}

// The documented contract: format_error "when it holds more than `limit` bytes". A file of exactly
// `limit` bytes holds no more than the limit and must be read.
TEST_CASE("read_maybe_gzip accepts a file of exactly limit bytes") {
    TempDir dir;
    const bytes data = sample_bytes(3000);
    write_raw(dir.file("raw"), data);
    write_raw(dir.file("empty"), {});
    CHECK_NOTHROW((void)oar::io::read_maybe_gzip(dir.file("raw"), 3000));
    CHECK_NOTHROW((void)oar::io::read_maybe_gzip(dir.file("empty"), 0));
}

TEST_CASE("read_maybe_gzip_prefix returns the first n bytes of a raw or gzip file without reading the rest") {
    TempDir dir;
    const bytes data = sample_bytes(5000);
    write_raw(dir.file("raw"), data);
    write_gzip(dir.file("gz"), data);
    for (const char* name : {"raw", "gz"}) {
        const std::string path = dir.file(name);
        INFO(path);
        CHECK(oar::io::read_maybe_gzip_prefix(path, 20) == bytes(data.begin(), data.begin() + 20));
        CHECK(oar::io::read_maybe_gzip_prefix(path, 0).empty());
        CHECK(oar::io::read_maybe_gzip_prefix(path, 9000) == data);  // shorter file: all of it
    }
    CHECK_THROWS_AS((void)oar::io::read_maybe_gzip_prefix(dir.file("missing"), 4), oar::io_error);
}

TEST_CASE("the limit message says where the limit came from") {
    TempDir dir;
    write_raw(dir.file("raw"), sample_bytes(100));
    try {
        (void)oar::io::read_maybe_gzip(dir.file("raw"), 10, "the header promised 10");
        FAIL("accepted 100 bytes with a limit of 10");
    } catch (const oar::format_error& e) {
        CHECK(contains(e.what(), "the header promised 10"));
    }
}
