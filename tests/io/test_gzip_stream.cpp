// Tests of include/oar/io/gzip_stream.hpp: InflateThread hands out a gzip file's (or a plain
// file's) bytes in order, in blocks of any size, reports damage after the good blocks before it,
// and stops its thread when destroyed early. Inputs are written with zlib under a temporary folder.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <algorithm>   // std::equal
#include <cstddef>     // std::size_t, std::ptrdiff_t
#include <cstdint>     // std::uint8_t, std::uint32_t
#include <filesystem>  // std::filesystem::create_directory
#include <string>      // std::string
#include <vector>      // std::vector

#include <oar/io/gzip_stream.hpp>  // under test

#include "support/errors.hpp"    // oar_test::message_of, contains: checking the error messages
#include "support/files.hpp"     // oar_test::write_raw, read_raw, write_gzip, append_gzip: the inputs
#include "support/temp_dir.hpp"  // oar_test::TempDir: where the inputs go

namespace {

using oar_test::bytes;
using oar_test::contains;
using oar_test::message_of;
using oar_test::read_raw;
using oar_test::sample_bytes;
using oar_test::TempDir;
using oar_test::write_gzip;
using oar_test::write_raw;


oar::io::InflateThread::Options blocks_of(std::size_t n, std::size_t queue = 4) {
    oar::io::InflateThread::Options o;
    o.block_bytes = n;
    o.queue_blocks = queue;
    o.read_bytes = 977;  // an odd read size, so compressed reads and blocks do not line up
    return o;
}

/// Everything the stream hands out, joined; also checks that no block is empty or too large.
bytes drain(oar::io::InflateThread& in, std::size_t block_bytes, std::size_t* blocks = nullptr) {
    bytes all;
    std::vector<char> b;
    std::size_t n = 0;
    bool sizes_ok = true;
    while (in.next(b)) {
        sizes_ok = sizes_ok && !b.empty() && b.size() <= block_bytes;
        all.insert(all.end(), b.begin(), b.end());
        ++n;
    }
    CHECK(sizes_ok);
    if (blocks) *blocks = n;
    return all;
}

}  // namespace

TEST_CASE("InflateThread hands out a gzip file's bytes in order, whatever the block size") {
    TempDir dir;
    const std::string path = dir.file("data.gz");
    const bytes data = sample_bytes(300001, 5), small = sample_bytes(5001, 6);
    write_gzip(path, data);
    write_gzip(dir.file("small.gz"), small);
    {  // one byte at a time, through a queue of one: every hand-off path of the two threads
        oar::io::InflateThread in(dir.file("small.gz"), blocks_of(1, 1));
        std::size_t blocks = 0;
        CHECK(drain(in, 1, &blocks) == small);
        CHECK(blocks == small.size());
    }
    for (std::size_t block : {std::size_t{7}, std::size_t{4096}, std::size_t{65536}, std::size_t{1} << 22}) {
        INFO("block bytes ", block);
        oar::io::InflateThread in(path, blocks_of(block));
        CHECK(in.gzip());
        std::size_t blocks = 0;
        CHECK(drain(in, block, &blocks) == data);
        CHECK(blocks == (data.size() + block - 1) / block);
    }
}

TEST_CASE("InflateThread passes a file without the gzip magic through unchanged") {
    TempDir dir;
    const std::string path = dir.file("plain.txt");
    bytes data = sample_bytes(100000, 2);
    data[0] = '[';
    write_raw(path, data);
    oar::io::InflateThread in(path, blocks_of(3000));
    CHECK_FALSE(in.gzip());
    CHECK(drain(in, 3000) == data);
}

TEST_CASE("InflateThread recognises gzip even when it reads one compressed byte at a time") {
    TempDir dir;
    const bytes data = sample_bytes(20000, 3);
    write_gzip(dir.file("d.gz"), data);
    oar::io::InflateThread::Options o;
    o.read_bytes = 1;
    oar::io::InflateThread in(dir.file("d.gz"), o);
    CHECK(in.gzip());
    std::vector<char> b;
    bytes all;
    while (in.next(b)) all.insert(all.end(), b.begin(), b.end());
    CHECK(all == data);
}

TEST_CASE("InflateThread reads every member of a multi-member gzip file") {
    TempDir dir;
    const std::string path = dir.file("two.gz");
    const bytes a = sample_bytes(50000, 1), b = sample_bytes(30000, 2);
    write_gzip(path, a);
    oar_test::append_gzip(path, b);
    bytes both = a;
    both.insert(both.end(), b.begin(), b.end());
    oar::io::InflateThread in(path, blocks_of(8192));
    CHECK(drain(in, 8192) == both);
}

TEST_CASE("InflateThread gives no blocks for an empty file or an empty gzip stream") {
    TempDir dir;
    write_raw(dir.file("empty"), {});
    write_gzip(dir.file("empty.gz"), {});
    for (const char* name : {"empty", "empty.gz"}) {
        INFO(name);
        oar::io::InflateThread in(dir.file(name));
        std::vector<char> b;
        CHECK_FALSE(in.next(b));
        CHECK_FALSE(in.next(b));  // stays at the end
    }
}

TEST_CASE("a missing file or a directory throws io_error naming the path") {
    TempDir dir;
    const std::string missing = dir.file("does_not_exist.gz");
    CHECK(contains(message_of<oar::io_error>([&] { oar::io::InflateThread in(missing); }), missing));
    const std::string folder = dir.file("a_directory");
    std::filesystem::create_directory(folder);
    CHECK(contains(message_of<oar::io_error>([&] { oar::io::InflateThread in(folder); }), folder));
}

TEST_CASE("a truncated gzip file hands out its intact bytes, then throws format_error naming the file") {
    TempDir dir;
    const std::string full = dir.file("full.gz"), cut = dir.file("cut.gz");
    const bytes data = sample_bytes(200000, 9);
    write_gzip(full, data);
    const bytes gz = read_raw(full);
    for (std::size_t keep : {gz.size() / 2, gz.size() - 4, std::size_t{12}, std::size_t{2}}) {
        INFO("kept ", keep, " of ", gz.size(), " compressed bytes");
        write_raw(cut, bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(keep)));
        oar::io::InflateThread in(cut, blocks_of(1000));
        bytes got;
        const std::string what = message_of<oar::format_error>([&] {
            std::vector<char> b;
            while (in.next(b)) got.insert(got.end(), b.begin(), b.end());
        });
        CHECK(contains(what, cut));
        CHECK(contains(what, "truncated"));
        CHECK(contains(what, "compressed byte"));
        CHECK(got.size() <= data.size());
        CHECK(bytes(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(got.size())) == got);
    }
}

TEST_CASE("corrupt gzip data, a wrong checksum and trailing garbage throw format_error") {
    TempDir dir;
    const std::string good = dir.file("good.gz"), bad = dir.file("bad.gz");
    write_gzip(good, sample_bytes(50000, 4));
    const bytes gz = read_raw(good);

    bytes invalid_block = gz;
    invalid_block[10] = 0xff;  // first deflate block header: BTYPE 11 is reserved
    bytes bad_crc = gz;
    bad_crc[gz.size() - 6] ^= 0x55;  // inside the CRC-32 of the trailer
    bytes garbage = gz;
    garbage.insert(garbage.end(), {'x', 'y', 'z'});

    struct Case {
        const char* name;
        const bytes* content;
        const char* part;
    };
    for (const Case& c : {Case{"invalid block type", &invalid_block, "corrupt gzip data"},
                          Case{"wrong CRC", &bad_crc, "corrupt gzip data"},
                          Case{"trailing garbage", &garbage, "not another gzip member"}}) {
        INFO(c.name);
        write_raw(bad, *c.content);
        oar::io::InflateThread in(bad, blocks_of(4096));
        const std::string what = message_of<oar::format_error>([&] { (void)drain(in, 4096); });
        CHECK(what.rfind("oar: ", 0) == 0);
        CHECK(contains(what, bad));
        CHECK(contains(what, c.part));
        CHECK(contains(what, "compressed byte"));
    }
}

TEST_CASE("destroying an InflateThread before the end stops its thread without hanging") {
    TempDir dir;
    const std::string path = dir.file("big.gz");
    const bytes data = sample_bytes(3000000, 8);
    write_gzip(path, data);
    int destroyed = 0;
    for (int taken : {0, 1, 5}) {
        {
            oar::io::InflateThread in(path, blocks_of(1024, 1));  // the producer soon waits on a full queue
            bytes got;
            std::vector<char> b;
            for (int i = 0; i < taken; ++i) {
                REQUIRE(in.next(b));
                CHECK(!b.empty());
                got.insert(got.end(), b.begin(), b.end());
            }
            // What was taken before the early destruction is the file's beginning, in order.
            REQUIRE(got.size() <= data.size());
            CHECK(std::equal(got.begin(), got.end(), data.begin()));
        }  // the destructor must stop the producer blocked on its full queue, join it and return
        ++destroyed;
    }
    CHECK(destroyed == 3);
}
