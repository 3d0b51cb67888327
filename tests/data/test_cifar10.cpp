// Tests of include/oar/data/cifar10.hpp: small CIFAR-10 batches generated here (3-7 records each)
// read back exactly from a folder, a .tar.gz and a .tar (written here by an independent tar
// writer), and every malformed input rejected with an error naming the file, member and offset.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <algorithm>   // std::copy, std::fill
#include <array>       // std::array
#include <cmath>       // std::abs
#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint8_t, std::uint64_t, std::int64_t
#include <filesystem>  // std::filesystem::create_directories
#include <string>      // std::string
#include <vector>      // std::vector

#include <oar/data/cifar10.hpp>  // under test

#include "support/errors.hpp"    // oar_test::message_of, contains: checking the error messages
#include "support/files.hpp"     // oar_test::write_raw, write_gzip, read_raw: the files read back
#include "support/temp_dir.hpp"  // oar_test::TempDir: where the files go

namespace {

using oar_test::bytes;
using oar_test::contains;
using oar_test::message_of;
using oar_test::TempDir;
using oar_test::write_gzip;
using oar_test::write_raw;
namespace data = oar::data;

constexpr std::size_t rec = 3073;
const std::array<std::string, 6> batch_names{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                             "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
constexpr std::array<std::size_t, 6> counts{3, 5, 2, 4, 6, 7};  // records per batch; train = 20

/// Pixel k (0..3071, plane c = k / 1024) of record r of batch b: a pattern that differs between
/// batches, records and planes.
std::uint8_t pixel_of(std::size_t b, std::size_t r, std::size_t k) {
    return static_cast<std::uint8_t>((b * 53 + r * 31 + k * 7 + (k / 1024) * 101) % 256);
}
std::uint8_t cifar_label_of(std::size_t b, std::size_t r) { return static_cast<std::uint8_t>((b * 3 + r * 7) % 10); }

/// The bytes of batch b: `counts[b]` records of label byte + 3072 pixels.
bytes batch_bytes(std::size_t b, std::size_t records) {
    bytes out;
    for (std::size_t r = 0; r < records; ++r) {
        out.push_back(cifar_label_of(b, r));
        for (std::size_t k = 0; k < 3072; ++k) out.push_back(pixel_of(b, r, k));
    }
    return out;
}

void write_batches(const TempDir& dir, const std::string& sub = "") {
    const std::string base = sub.empty() ? dir.path.string() : dir.file(sub);
    std::filesystem::create_directories(base);
    for (std::size_t b = 0; b < 6; ++b) write_raw(base + "/" + batch_names[b], batch_bytes(b, counts[b]));
}

// --- an independent tar writer (POSIX.1-1988 ustar / GNU headers) -------------------------------

std::string octal(std::uint64_t v, std::size_t digits) {
    std::string s(digits, '0');
    for (std::size_t i = digits; i-- > 0; v >>= 3) s[i] = static_cast<char>('0' + (v & 7));
    return s;
}

/// A 512-byte header for a member of `size` bytes; `gnu` writes GNU's "ustar  " magic.
bytes tar_header(const std::string& name, std::uint64_t size, char type = '0', bool gnu = false,
                 const std::string& prefix = "") {
    bytes h(512, 0);
    auto put = [&](std::size_t off, const std::string& s) {
        std::copy(s.begin(), s.end(), h.begin() + static_cast<std::ptrdiff_t>(off));
    };
    put(0, name.substr(0, 100));
    put(100, octal(0644, 7));
    put(108, octal(1000, 7));
    put(116, octal(1000, 7));
    put(124, octal(size, 11));
    put(136, octal(1234567890, 11));
    h[156] = static_cast<std::uint8_t>(type);
    if (gnu) {
        put(257, "ustar  ");  // and the NUL at 264
    } else {
        put(257, "ustar");  // NUL at 262
        put(263, "00");
    }
    put(265, "oar");
    put(297, "oar");
    put(345, prefix);
    std::fill(h.begin() + 148, h.begin() + 156, std::uint8_t{' '});
    unsigned sum = 0;
    for (std::uint8_t b : h) sum += b;
    put(148, octal(sum, 6));
    h[154] = 0;
    h[155] = ' ';
    return h;
}

/// Header, data, zero padding to a whole block.
bytes tar_member(const std::string& name, const bytes& content, char type = '0', bool gnu = false,
                 const std::string& prefix = "") {
    bytes out = tar_header(name, content.size(), type, gnu, prefix);
    out.insert(out.end(), content.begin(), content.end());
    out.resize((out.size() + 511) / 512 * 512, 0);
    return out;
}

void append(bytes& to, const bytes& more) { to.insert(to.end(), more.begin(), more.end()); }

/// The six batches in a shuffled order, plus a directory entry and two other files.
bytes cifar_tar() {
    bytes t;
    append(t, tar_member("cifar-10-batches-bin/", {}, '5'));
    append(t, tar_member("cifar-10-batches-bin/data_batch_3.bin", batch_bytes(2, counts[2])));
    append(t, tar_member("cifar-10-batches-bin/batches.meta.txt", bytes(61, 'x')));
    for (std::size_t b : {0, 5, 4, 1, 3})
        append(t, tar_member("cifar-10-batches-bin/" + batch_names[b], batch_bytes(b, counts[b])));
    append(t, tar_member("cifar-10-batches-bin/readme.html", bytes(88, 'y')));
    append(t, bytes(1024, 0));  // end of archive
    return t;
}

/// Every value and label of `d` equals the generated batches `first..last` scaled by x * scale + shift.
void check_matches(const data::ByteImageDataset& d, std::size_t first, std::size_t last, double scale = 1.0 / 255.0,
                   double shift = 0.0) {
    std::size_t n = 0;
    for (std::size_t b = first; b <= last; ++b) n += counts[b];
    REQUIRE(d.size() == n);
    CHECK(d.dims() == oar::make_dims(3, 32, 32));
    std::vector<float> img(3072);
    std::size_t i = 0, bad = 0;
    for (std::size_t b = first; b <= last; ++b)
        for (std::size_t r = 0; r < counts[b]; ++r, ++i) {
            CHECK(d.load(i, img) == cifar_label_of(b, r));
            CHECK(d.labels()[i] == cifar_label_of(b, r));
            for (std::size_t k = 0; k < 3072; ++k) {
                const double expect = pixel_of(b, r, k) * scale + shift;
                if (d.pixels()[i * 3072 + k] != pixel_of(b, r, k) || std::abs(img[k] - expect) > 1e-6) ++bad;
            }
        }
    CHECK(bad == 0);
}

/// The message of a format_error thrown by f; it must start with "oar: ".
template <class E = oar::format_error, class F>
std::string error_of(F&& f) {
    const std::string what = message_of<E>(f);
    CHECK(what.rfind("oar: ", 0) == 0);
    return what;
}

}  // namespace

TEST_CASE("load_cifar10_dir reads every label and pixel back, as R, G, B planes scaled to [0, 1]") {
    TempDir dir;
    write_batches(dir);
    const auto s = data::load_cifar10_dir(dir.path.string());
    check_matches(s.train, 0, 4);
    check_matches(s.test, 5, 5);
    // Record 1 of batch 2 is training sample 3 + 1: its green plane starts at value 1024.
    std::vector<float> img(3072);
    s.train.load(4, img);
    CHECK(img[1024 + 5 * 32 + 7] == doctest::Approx(pixel_of(1, 1, 1024 + 5 * 32 + 7) / 255.0).epsilon(1e-6));
    CHECK(img[0] >= 0.0f);
    const auto g = s.test.get(6);
    CHECK(g.dims == data::cifar10_dims);
    CHECK(g.label == cifar_label_of(5, 6));
}

TEST_CASE("the scale and shift given to the loader are applied on load") {
    TempDir dir;
    write_batches(dir);
    const auto s = data::load_cifar10_dir(dir.path.string(), 1.0f / 127.5f, -1.0f);
    check_matches(s.train, 0, 4, 1.0 / 127.5, -1.0);
    check_matches(s.test, 5, 5, 1.0 / 127.5, -1.0);
}

TEST_CASE("read_cifar10_batch reads one batch file as a dataset") {
    TempDir dir;
    write_raw(dir.file("b.bin"), batch_bytes(3, counts[3]));
    check_matches(data::read_cifar10_batch(dir.file("b.bin")), 3, 3);
    write_gzip(dir.file("b.bin.gz"), batch_bytes(3, counts[3]));  // gzip passes through too
    check_matches(data::read_cifar10_batch(dir.file("b.bin.gz")), 3, 3);
}

TEST_CASE("load_cifar10_archive reads a tar.gz with batches in any order and other members skipped") {
    TempDir dir;
    write_gzip(dir.file("cifar-10-binary.tar.gz"), cifar_tar());
    const auto s = data::load_cifar10_archive(dir.file("cifar-10-binary.tar.gz"));
    check_matches(s.train, 0, 4);
    check_matches(s.test, 5, 5);
}

TEST_CASE("an uncompressed tar, and one without end-of-archive blocks, read the same") {
    TempDir dir;
    bytes t = cifar_tar();
    write_raw(dir.file("c.tar"), t);
    check_matches(data::load_cifar10_archive(dir.file("c.tar")).train, 0, 4);
    t.resize(t.size() - 1024);
    write_gzip(dir.file("noend.tar.gz"), t);
    check_matches(data::load_cifar10_archive(dir.file("noend.tar.gz")).test, 5, 5);
}

TEST_CASE("ustar prefix fields, GNU long names and pax path records all name members") {
    TempDir dir;
    bytes t;
    // POSIX ustar: name split into prefix + name.
    append(t, tar_member("data_batch_1.bin", batch_bytes(0, counts[0]), '0', false, "cifar-10-batches-bin"));
    // GNU: a ././@LongLink 'L' member holds the next member's name; its own header name is a stub.
    const std::string long_name = std::string(120, 'd') + "/data_batch_2.bin";
    bytes name_data(long_name.begin(), long_name.end());
    name_data.push_back(0);
    append(t, tar_member("././@LongLink", name_data, 'L', true));
    append(t, tar_member("stub_not_a_batch", batch_bytes(1, counts[1]), '0', true));
    // pax: an 'x' member whose "path" record renames the next member.
    const std::string path = "cifar-10-batches-bin/data_batch_3.bin";
    const std::string record = " path=" + path + "\n";
    const std::string pax = std::to_string(record.size() + 2) + record;  // the length counts its own 2 digits
    REQUIRE(pax.size() == record.size() + 2);
    append(t, tar_member("PaxHeaders/x", bytes(pax.begin(), pax.end()), 'x'));
    append(t, tar_member("truncated_name", batch_bytes(2, counts[2])));
    for (std::size_t b : {3, 4, 5})
        append(t, tar_member("cifar-10-batches-bin/" + batch_names[b], batch_bytes(b, counts[b])));
    append(t, bytes(1024, 0));
    write_gzip(dir.file("v.tar.gz"), t);
    const auto s = data::load_cifar10_archive(dir.file("v.tar.gz"));
    check_matches(s.train, 0, 4);
    check_matches(s.test, 5, 5);
}

TEST_CASE("load_cifar10 finds the batches in a folder, a batches subfolder, a tar.gz in a folder, or an archive path") {
    TempDir flat, nested, packed;
    write_batches(flat);
    write_batches(nested, "cifar-10-batches-bin");
    write_gzip(packed.file("cifar-10-binary.tar.gz"), cifar_tar());
    CHECK(data::is_cifar10_dir(flat.path.string()));
    CHECK_FALSE(data::is_cifar10_dir(nested.path.string()));
    for (const std::string& p : {flat.path.string(), nested.path.string(), packed.path.string(),
                                 packed.file("cifar-10-binary.tar.gz")}) {
        INFO(p);
        const auto s = data::load_cifar10(p);
        check_matches(s.train, 0, 4);
        check_matches(s.test, 5, 5);
    }
    TempDir empty;
    const std::string what = error_of<oar::io_error>([&] { (void)data::load_cifar10(empty.path.string()); });
    CHECK(contains(what, empty.path.string()));
    CHECK(contains(what, "cifar-10-binary.tar.gz"));
    CHECK(contains(error_of<oar::io_error>([&] { (void)data::load_cifar10(empty.file("nope.tar.gz")); }),
                   empty.file("nope.tar.gz")));
}

TEST_CASE("a batch file whose size is not a whole number of records is a format_error at the truncated record") {
    TempDir dir;
    write_batches(dir);
    bytes b = batch_bytes(1, 2);
    b.resize(b.size() + 100, 7);  // 2 records and 100 bytes of a third
    write_raw(dir.file("data_batch_2.bin"), b);
    const std::string what = error_of([&] { (void)data::load_cifar10_dir(dir.path.string()); });
    INFO(what);
    CHECK(contains(what, dir.file("data_batch_2.bin")));
    CHECK(contains(what, "offset 6146"));
    CHECK(contains(what, "100 of 3073 bytes"));
}

TEST_CASE("a label byte above 9 is a format_error naming the record and its offset") {
    TempDir dir;
    write_batches(dir);
    bytes b = batch_bytes(5, 4);
    b[2 * rec] = 10;
    write_raw(dir.file("test_batch.bin"), b);
    const std::string what = error_of([&] { (void)data::load_cifar10_dir(dir.path.string()); });
    INFO(what);
    CHECK(contains(what, dir.file("test_batch.bin")));
    CHECK(contains(what, "label 10 of record 2 at offset 6146"));
    b[2 * rec] = 255;
    write_raw(dir.file("one.bin"), b);
    CHECK(contains(error_of([&] { (void)data::read_cifar10_batch(dir.file("one.bin")); }), "label 255"));
}

TEST_CASE("missing batch files are an io_error naming the folder and each missing file") {
    TempDir dir;
    write_batches(dir);
    std::filesystem::remove(dir.file("data_batch_3.bin"));
    std::filesystem::remove(dir.file("test_batch.bin"));
    CHECK_FALSE(data::is_cifar10_dir(dir.path.string()));
    const std::string what = error_of<oar::io_error>([&] { (void)data::load_cifar10(dir.path.string()); });
    INFO(what);
    CHECK(contains(what, dir.path.string()));
    CHECK(contains(what, "data_batch_3.bin, test_batch.bin"));
    CHECK_FALSE(contains(what, "data_batch_1.bin"));
}

TEST_CASE("an empty batch file is a format_error at offset 0") {
    TempDir dir;
    write_batches(dir);
    write_raw(dir.file("data_batch_4.bin"), {});
    const std::string what = error_of([&] { (void)data::load_cifar10_dir(dir.path.string()); });
    INFO(what);
    CHECK(contains(what, dir.file("data_batch_4.bin")));
    CHECK(contains(what, "empty"));
    CHECK(contains(what, "offset 0"));
}

TEST_CASE("a tar member cut short is a format_error naming the archive, the member and the offsets") {
    TempDir dir;
    const bytes full = cifar_tar();
    // Cut inside the data of the second member (data_batch_3.bin, header at 512, data from 1024).
    write_gzip(dir.file("cut.tar.gz"), bytes(full.begin(), full.begin() + 1024 + 5000));
    const std::string what = error_of([&] { (void)data::load_cifar10_archive(dir.file("cut.tar.gz")); });
    INFO(what);
    CHECK(contains(what, dir.file("cut.tar.gz")));
    CHECK(contains(what, "truncated tar"));
    CHECK(contains(what, "cifar-10-batches-bin/data_batch_3.bin"));
    CHECK(contains(what, "header at offset 512"));
    CHECK(contains(what, "claims 6146 bytes"));
    CHECK(contains(what, "ends at offset 6024"));
}

TEST_CASE("a tar header cut short is a format_error at the header's offset") {
    TempDir dir;
    const bytes full = cifar_tar();
    write_raw(dir.file("cut.tar"), bytes(full.begin(), full.begin() + 512 + 100));
    const std::string what = error_of([&] { (void)data::load_cifar10_archive(dir.file("cut.tar")); });
    INFO(what);
    CHECK(contains(what, dir.file("cut.tar")));
    CHECK(contains(what, "header at offset 512 has 100 of 512 bytes"));
}

TEST_CASE("a bad tar header checksum is a format_error at the header's offset") {
    TempDir dir;
    bytes t = cifar_tar();
    t[512 + 20] ^= 0x01;  // a byte of the second header's name
    write_gzip(dir.file("sum.tar.gz"), t);
    const std::string what = error_of([&] { (void)data::load_cifar10_archive(dir.file("sum.tar.gz")); });
    INFO(what);
    CHECK(contains(what, dir.file("sum.tar.gz")));
    CHECK(contains(what, "checksum at offset 512"));
    // A batch file is not a tar archive: its first "header" fails the checksum.
    write_raw(dir.file("b.bin"), batch_bytes(0, 1));
    CHECK(contains(error_of([&] { (void)data::load_cifar10_archive(dir.file("b.bin")); }), "checksum at offset 0"));
}

TEST_CASE("a tar member that claims more bytes than the archive holds fails without allocating them") {
    TempDir dir;
    bytes t = tar_header("cifar-10-batches-bin/data_batch_1.bin", 1000000000ull);  // under the 1 GiB cap
    append(t, batch_bytes(0, 2));
    write_gzip(dir.file("big.tar.gz"), t);
    const std::string what = error_of([&] { (void)data::load_cifar10_archive(dir.file("big.tar.gz")); });
    INFO(what);
    CHECK(contains(what, dir.file("big.tar.gz")));
    CHECK(contains(what, "cifar-10-batches-bin/data_batch_1.bin"));
    CHECK(contains(what, "claims 1000000000 bytes of data from offset 512"));
    CHECK(contains(what, "ends at offset 6658"));
    // A batch member above cifar10_max_batch_bytes is refused from its size field alone.
    t = tar_header("cifar-10-batches-bin/data_batch_1.bin", 077777777777ull);  // 8 GiB - 1
    append(t, batch_bytes(0, 2));
    write_gzip(dir.file("huge.tar.gz"), t);
    const std::string huge = error_of([&] { (void)data::load_cifar10_archive(dir.file("huge.tar.gz")); });
    CHECK(contains(huge, "claims 8589934591 bytes, more than the 1073741824 a CIFAR-10 batch may hold"));
    // The same for a member that is skipped.
    t = tar_header("other.bin", 077777777777ull);
    append(t, bytes(1000, 1));
    write_raw(dir.file("big2.tar"), t);
    CHECK(contains(error_of([&] { (void)data::load_cifar10_archive(dir.file("big2.tar")); }),
                   "member other.bin (header at offset 0) claims 8589934591 bytes"));
}

TEST_CASE("a bad tar size field is a format_error at the field's offset") {
    TempDir dir;
    bytes t = tar_member("x.txt", bytes(10, 'a'));
    t[124 + 3] = '9';  // not octal
    std::fill(t.begin() + 148, t.begin() + 156, std::uint8_t{' '});
    unsigned sum = 0;
    for (std::size_t i = 0; i < 512; ++i) sum += t[i];
    const std::string s = octal(sum, 6);
    std::copy(s.begin(), s.end(), t.begin() + 148);
    t[154] = 0;
    write_raw(dir.file("size.tar"), t);
    const std::string what = error_of([&] { (void)data::load_cifar10_archive(dir.file("size.tar")); });
    INFO(what);
    CHECK(contains(what, dir.file("size.tar")));
    CHECK(contains(what, "size field at offset 124"));
}

TEST_CASE("a missing or duplicated batch member is a format_error naming it") {
    TempDir dir;
    bytes t;
    for (std::size_t b : {0, 1, 2, 4})
        append(t, tar_member("cifar-10-batches-bin/" + batch_names[b], batch_bytes(b, 2)));
    append(t, bytes(1024, 0));
    write_gzip(dir.file("missing.tar.gz"), t);
    std::string what = error_of([&] { (void)data::load_cifar10_archive(dir.file("missing.tar.gz")); });
    INFO(what);
    CHECK(contains(what, dir.file("missing.tar.gz")));
    CHECK(contains(what, "data_batch_4.bin, test_batch.bin"));
    CHECK(contains(what, "offset " + std::to_string(4 * (512 + 6656))));  // where the end blocks start

    bytes dup;
    append(dup, tar_member("a/data_batch_1.bin", batch_bytes(0, 1)));
    append(dup, tar_member("b/data_batch_1.bin", batch_bytes(0, 1)));
    write_raw(dir.file("dup.tar"), dup);
    what = error_of([&] { (void)data::load_cifar10_archive(dir.file("dup.tar")); });
    CHECK(contains(what, "a/data_batch_1.bin and b/data_batch_1.bin (header at offset 4096)"));
}

TEST_CASE("a malformed batch inside the archive names the archive, the member and both offsets") {
    TempDir dir;
    bytes t;
    append(t, tar_member("cifar-10-batches-bin/data_batch_1.bin", batch_bytes(0, 1)));  // header 0, data 512..
    bytes b = batch_bytes(1, 3);
    b[rec] = 42;  // label of record 1
    append(t, tar_member("cifar-10-batches-bin/data_batch_2.bin", b));  // header at 4096, data from 4608
    write_gzip(dir.file("label.tar.gz"), t);
    std::string what = error_of([&] { (void)data::load_cifar10_archive(dir.file("label.tar.gz")); });
    INFO(what);
    CHECK(contains(what, dir.file("label.tar.gz") + ": member cifar-10-batches-bin/data_batch_2.bin"));
    CHECK(contains(what, "label 42 of record 1 at offset 3073 of the member (offset 7681 of the tar stream)"));

    t = tar_member("cifar-10-batches-bin/test_batch.bin", bytes(rec + 10, 1));
    write_gzip(dir.file("partial.tar.gz"), t);
    what = error_of([&] { (void)data::load_cifar10_archive(dir.file("partial.tar.gz")); });
    CHECK(contains(what, "member cifar-10-batches-bin/test_batch.bin"));
    CHECK(contains(what, "offset 3073 of the member (offset 3585 of the tar stream) is truncated (10 of 3073 bytes)"));

    t = tar_member("cifar-10-batches-bin/data_batch_5.bin", {});
    write_gzip(dir.file("emptymember.tar.gz"), t);
    what = error_of([&] { (void)data::load_cifar10_archive(dir.file("emptymember.tar.gz")); });
    CHECK(contains(what, "member cifar-10-batches-bin/data_batch_5.bin: empty"));
}

TEST_CASE("an empty archive, a corrupt gzip stream and a missing archive are errors naming the file") {
    TempDir dir;
    write_raw(dir.file("empty.tar.gz"), {});
    std::string what = error_of([&] { (void)data::load_cifar10_archive(dir.file("empty.tar.gz")); });
    CHECK(contains(what, dir.file("empty.tar.gz")));
    CHECK(contains(what, "empty"));
    CHECK(contains(what, "offset 0"));

    // A gzip stream cut in the middle: zlib reports it, with the decompressed offset reached.
    write_gzip(dir.file("full.tar.gz"), cifar_tar());
    const bytes gz = oar_test::read_raw(dir.file("full.tar.gz"));
    write_raw(dir.file("cut.tar.gz"), bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2)));
    what = error_of([&] { (void)data::load_cifar10_archive(dir.file("cut.tar.gz")); });
    INFO(what);
    CHECK(contains(what, dir.file("cut.tar.gz")));
    CHECK(contains(what, "gzip"));
    CHECK(contains(what, "decompressed bytes"));

    CHECK(contains(error_of<oar::io_error>([&] { (void)data::load_cifar10_archive(dir.file("none.tar.gz")); }),
                   dir.file("none.tar.gz")));
}
