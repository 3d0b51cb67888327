// Tests of include/oar/data/idx.hpp: IDX files written here (raw and gzip) read back exactly, and
// every malformed input rejected with an oar error that names the file and the position.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <chrono>   // std::chrono: the "throws quickly" check
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t, std::uint32_t, std::int64_t
#include <string>   // std::string
#include <vector>   // std::vector

#include <oar/data/idx.hpp>  // under test

#include "support/errors.hpp"     // oar_test::message_of, contains: checking the error messages
#include "support/files.hpp"      // oar_test::write_raw, write_gzip: the files read back
#include "support/idx_files.hpp"  // oar_test::idx_bytes: well-formed IDX bytes to write or damage
#include "support/temp_dir.hpp"   // oar_test::TempDir: where the files go

namespace {

using oar_test::bytes;
using oar_test::contains;
using oar_test::idx_bytes;
using oar_test::message_of;
using oar_test::TempDir;
using oar_test::write_gzip;
using oar_test::write_raw;

bytes counting_values(std::size_t n) {
    bytes v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>((i * 37 + 11) % 256);
    return v;
}

/// read_idx on `content` (written raw to `path`) throws format_error mentioning the path and each part.
void check_format_error(const std::string& path, const bytes& content, const std::vector<std::string>& parts) {
    write_raw(path, content);
    const std::string what = message_of<oar::format_error>([&] { (void)oar::data::read_idx(path); });
    INFO("message: ", what);
    CHECK(what.rfind("oar: ", 0) == 0);
    CHECK(contains(what, path));
    for (const auto& p : parts) CHECK(contains(what, p));
}

}  // namespace

TEST_CASE("read_idx reads back images of rank 3 and labels of rank 1, raw and gzip") {
    TempDir dir;
    const bytes pixels = counting_values(3 * 4 * 5);
    const bytes labels{0, 9, 4};
    for (bool gz : {false, true}) {
        INFO((gz ? "gzip" : "raw"));
        const std::string img = dir.file(gz ? "img.gz" : "img.idx"), lab = dir.file(gz ? "lab.gz" : "lab.idx");
        (gz ? write_gzip : write_raw)(img, idx_bytes({3, 4, 5}, pixels));
        (gz ? write_gzip : write_raw)(lab, idx_bytes({3}, labels));

        const auto a = oar::data::read_idx(img);
        CHECK(a.dims == std::vector<std::size_t>{3, 4, 5});
        CHECK(a.values == pixels);
        const auto l = oar::data::read_idx(lab);
        CHECK(l.dims == std::vector<std::size_t>{3});
        CHECK(l.values == labels);
    }
}

TEST_CASE("read_idx accepts every rank from 1 to 4 and every byte value") {
    TempDir dir;
    const std::string path = dir.file("any.idx");
    bytes all(256);
    for (std::size_t i = 0; i < 256; ++i) all[i] = static_cast<std::uint8_t>(i);
    const std::vector<std::vector<std::uint32_t>> shapes{{256}, {16, 16}, {4, 8, 8}, {2, 2, 8, 8}};
    for (const auto& dims : shapes) {
        write_raw(path, idx_bytes(dims, all));
        const auto a = oar::data::read_idx(path);
        CHECK(a.dims.size() == dims.size());
        for (std::size_t i = 0; i < dims.size(); ++i) CHECK(a.dims[i] == dims[i]);
        CHECK(a.values == all);
    }
}

TEST_CASE("read_idx_pair returns images and int64 labels that match the files") {
    TempDir dir;
    const bytes pixels = counting_values(4 * 2 * 3);
    const bytes labels{7, 0, 9, 3};
    write_gzip(dir.file("i.gz"), idx_bytes({4, 2, 3}, pixels));
    write_raw(dir.file("l.idx"), idx_bytes({4}, labels));
    const auto p = oar::data::read_idx_pair(dir.file("i.gz"), dir.file("l.idx"));
    CHECK(p.count == 4);
    CHECK(p.rows == 2);
    CHECK(p.cols == 3);
    CHECK(p.pixels == pixels);
    REQUIRE(p.labels.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) CHECK(p.labels[i] == static_cast<std::int64_t>(labels[i]));
}

TEST_CASE("read_idx_pair checks labels against num_classes") {
    TempDir dir;
    write_raw(dir.file("i.idx"), idx_bytes({3, 1, 1}, {1, 2, 3}));
    write_raw(dir.file("ok.idx"), idx_bytes({3}, {0, 9, 5}));
    CHECK(oar::data::read_idx_pair(dir.file("i.idx"), dir.file("ok.idx"), 10).labels[1] == 9);

    write_raw(dir.file("ten.idx"), idx_bytes({3}, {0, 9, 10}));
    const std::string what = message_of<oar::format_error>(
        [&] { (void)oar::data::read_idx_pair(dir.file("i.idx"), dir.file("ten.idx"), 10); });
    INFO(what);
    CHECK(contains(what, dir.file("ten.idx")));
    CHECK(contains(what, "label 10"));
    CHECK(contains(what, "index 2"));
    CHECK(contains(what, "offset 10"));  // 8-byte header + index 2
    CHECK(contains(what, "below 10"));

    // The same labels pass with 11 classes and fail with 6 at the first label >= 6.
    CHECK(oar::data::read_idx_pair(dir.file("i.idx"), dir.file("ten.idx"), 11).labels[2] == 10);
    const std::string six = message_of<oar::format_error>(
        [&] { (void)oar::data::read_idx_pair(dir.file("i.idx"), dir.file("ten.idx"), 6); });
    CHECK(contains(six, "label 9 at index 1 (offset 9)"));
}

TEST_CASE("read_idx_pair refuses images and labels of different counts, naming both files") {
    TempDir dir;
    write_raw(dir.file("i.idx"), idx_bytes({3, 2, 2}, counting_values(12)));
    write_raw(dir.file("l.idx"), idx_bytes({4}, {1, 2, 3, 4}));
    const std::string what =
        message_of<oar::format_error>([&] { (void)oar::data::read_idx_pair(dir.file("i.idx"), dir.file("l.idx")); });
    INFO(what);
    CHECK(contains(what, dir.file("i.idx")));
    CHECK(contains(what, dir.file("l.idx")));
    CHECK(contains(what, "3 images"));
    CHECK(contains(what, "4 labels"));
}

TEST_CASE("read_idx_pair refuses images that are not rank 3 and labels that are not rank 1") {
    TempDir dir;
    write_raw(dir.file("flat.idx"), idx_bytes({3, 4}, counting_values(12)));
    write_raw(dir.file("img.idx"), idx_bytes({3, 2, 2}, counting_values(12)));
    write_raw(dir.file("lab.idx"), idx_bytes({3}, {1, 2, 3}));
    write_raw(dir.file("lab2.idx"), idx_bytes({3, 1}, {1, 2, 3}));
    std::string what =
        message_of<oar::format_error>([&] { (void)oar::data::read_idx_pair(dir.file("flat.idx"), dir.file("lab.idx")); });
    CHECK(contains(what, dir.file("flat.idx")));
    CHECK(contains(what, "rank 3"));
    CHECK(contains(what, "got rank 2"));
    what = message_of<oar::format_error>([&] { (void)oar::data::read_idx_pair(dir.file("img.idx"), dir.file("lab2.idx")); });
    CHECK(contains(what, dir.file("lab2.idx")));
    CHECK(contains(what, "got rank 2"));
}

TEST_CASE("a wrong magic number is a format_error at offset 0") {
    TempDir dir;
    bytes b = idx_bytes({2}, {1, 2});
    b[0] = 0x1f;
    check_format_error(dir.file("magic0"), b, {"magic", "offset 0"});
    b = idx_bytes({2}, {1, 2});
    b[1] = 0x01;
    check_format_error(dir.file("magic1"), b, {"magic", "offset 0"});
}

TEST_CASE("a data type other than unsigned byte is a format_error at offset 2") {
    TempDir dir;
    for (std::uint8_t type : {std::uint8_t{0x09}, std::uint8_t{0x0B}, std::uint8_t{0x0D}, std::uint8_t{0x00}}) {
        bytes b = idx_bytes({2}, {1, 2});
        b[2] = type;
        check_format_error(dir.file("type"), b, {"type", "offset 2"});
    }
}

TEST_CASE("rank 0 and rank 5 are format_errors at offset 3") {
    TempDir dir;
    check_format_error(dir.file("rank0"), bytes{0, 0, 8, 0}, {"rank 0", "offset 3"});
    check_format_error(dir.file("rank5"), idx_bytes({1, 1, 1, 1, 1}, {7}), {"rank 5", "offset 3"});
    check_format_error(dir.file("rank255"), bytes{0, 0, 8, 255, 0, 0, 0, 1}, {"rank 255", "offset 3"});
}

TEST_CASE("an empty file and a file shorter than its header are format_errors") {
    TempDir dir;
    check_format_error(dir.file("empty"), {}, {"0 bytes", "offset 0"});
    check_format_error(dir.file("three"), bytes{0, 0, 8}, {"3 bytes", "offset 0"});
    // Rank 3 needs a 16-byte header; the file ends after 10 bytes.
    check_format_error(dir.file("short"), bytes{0, 0, 8, 3, 0, 0, 0, 1, 0, 0}, {"byte 10", "16-byte"});
}

TEST_CASE("a header claiming 10^9 images throws quickly instead of allocating") {
    TempDir dir;
    const std::string path = dir.file("huge.idx");
    write_raw(path, idx_bytes({1000000000u, 28, 28}, counting_values(784)));
    const auto start = std::chrono::steady_clock::now();
    const std::string what = message_of<oar::format_error>([&] { (void)oar::data::read_idx(path); });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO(what);
    // The claim is refused before any allocation: a format_error, not bad_alloc (limits.huge_headers
    // proves it under `ulimit -v`). The bound only catches a hang (zeroing 784 GB), not slowness.
    CHECK(seconds < 60.0);
    CHECK(contains(what, path));
    CHECK(contains(what, "1000000000"));
    CHECK(contains(what, "offset 4"));
}

TEST_CASE("65535 x 65535 pixels in a small file is a format_error naming the dimension's offset") {
    TempDir dir;
    const std::string path = dir.file("wide.idx");
    write_raw(path, idx_bytes({1, 65535, 65535}, counting_values(1000)));
    const std::string what = message_of<oar::format_error>([&] { (void)oar::data::read_idx(path); });
    INFO(what);
    CHECK(contains(what, path));
    CHECK(contains(what, "65535"));
    CHECK(contains(what, "offset 8"));
    // The product of all dimensions would overflow 32 bits: checked without multiplying.
    write_raw(path, idx_bytes({65535, 65535, 65535, 65535}, counting_values(10)));
    CHECK(contains(message_of<oar::format_error>([&] { (void)oar::data::read_idx(path); }), "offset 4"));
}

TEST_CASE("a zero dimension is a format_error naming the dimension's offset") {
    TempDir dir;
    check_format_error(dir.file("zero0"), idx_bytes({0, 28, 28}, {}), {"dimension 0", "offset 4", "is 0"});
    check_format_error(dir.file("zero1"), idx_bytes({2, 0, 3}, counting_values(6)), {"dimension 1", "offset 8", "is 0"});
}

TEST_CASE("a truncated body is a format_error naming the first dimension that does not fit") {
    TempDir dir;
    // 2 x 3 x 3 = 18 values promised, 17 present: 2 x 3 fit, the last 3 (at offset 12) does not.
    const bytes b = idx_bytes({2, 3, 3}, counting_values(17));
    check_format_error(dir.file("cut.idx"), b, {"dimension 2", "offset 12", "17 data bytes"});
    check_format_error(dir.file("nobody.idx"), idx_bytes({5}, {}), {"dimension 0", "offset 4", "0 data bytes"});
    // The same through gzip.
    write_gzip(dir.file("cut.gz"), b);
    const std::string what = message_of<oar::format_error>([&] { (void)oar::data::read_idx(dir.file("cut.gz")); });
    CHECK(contains(what, dir.file("cut.gz")));
    CHECK(contains(what, "17 data bytes"));
}

TEST_CASE("extra trailing bytes are a format_error too") {
    TempDir dir;
    check_format_error(dir.file("long.idx"), idx_bytes({2, 3, 3}, counting_values(19)), {"18", "19 data bytes", "offset 16"});
    check_format_error(dir.file("long1.idx"), idx_bytes({3}, {1, 2, 3, 4}), {"3 values", "4 data bytes", "offset 8"});
}

TEST_CASE("a missing file is an io_error naming the path") {
    TempDir dir;
    const std::string path = dir.file("missing-images.idx.gz");
    const std::string what = message_of<oar::io_error>([&] { (void)oar::data::read_idx(path); });
    CHECK(contains(what, path));
    write_raw(dir.file("l.idx"), idx_bytes({1}, {1}));
    const std::string pair =
        message_of<oar::io_error>([&] { (void)oar::data::read_idx_pair(path, dir.file("l.idx")); });
    CHECK(contains(pair, path));
    const std::string pair2 =
        message_of<oar::io_error>([&] { (void)oar::data::read_idx_pair(dir.file("l.idx"), path); });
    CHECK(contains(pair2, path));
}

TEST_CASE("a corrupt gzip IDX file is a format_error naming the file") {
    TempDir dir;
    const std::string path = dir.file("bad.gz");
    write_gzip(path, idx_bytes({1000}, counting_values(1000)));
    std::ifstream in(path, std::ios::binary);
    bytes gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    gz[gz.size() - 5] ^= 0xFF;  // inside the CRC32 trailer
    write_raw(path, gz);
    CHECK(contains(message_of<oar::format_error>([&] { (void)oar::data::read_idx(path); }), path));
}

TEST_CASE("a gzip bomb behind a small IDX header is cut at the promised size plus 1 MiB") {
    TempDir dir;
    // The header promises 2 x 3 x 3 = 18 values; 8 MiB of zeros follow (a few KiB compressed).
    bytes b = idx_bytes({2, 3, 3}, counting_values(18));
    b.resize(b.size() + (std::size_t(8) << 20), 0);
    const std::string path = dir.file("bomb.idx.gz");
    write_gzip(path, b);
    const std::string what = message_of<oar::format_error>([&] { (void)oar::data::read_idx(path); });
    INFO(what);
    CHECK(contains(what, path));
    CHECK(contains(what, "gzip bomb"));
    CHECK(contains(what, std::to_string(16 + 18 + (1u << 20))));  // where reading stopped
    // Within the slack, trailing bytes are still counted and named as before.
    bytes small = idx_bytes({2, 3, 3}, counting_values(18));
    small.resize(small.size() + 1000, 0);
    write_gzip(dir.file("tail.idx.gz"), small);
    CHECK(contains(message_of<oar::format_error>([&] { (void)oar::data::read_idx(dir.file("tail.idx.gz")); }),
                   "1018 data bytes"));
}

TEST_CASE("read_idx never reads more than max_bytes, whatever the header claims") {
    TempDir dir;
    const std::string path = dir.file("big.idx.gz");
    write_gzip(path, idx_bytes({4000}, counting_values(4000)));
    CHECK(oar::data::read_idx(path, 4008).values.size() == 4000);
    const std::string what = message_of<oar::format_error>([&] { (void)oar::data::read_idx(path, 4007); });
    CHECK(contains(what, path));
    CHECK(contains(what, "4007"));
}
