// Tests of include/oar/data/mnist_json.hpp: the course's mnist.json(.gz) read back exactly (any
// split sizes, gzip or plain, any spacing, cut into blocks of any size), one split by mode, the
// converter's writer round-tripping an IDX folder, and every kind of bad input rejected with an
// oar error naming the file, the split, the sample and the byte offset. Files are written here.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <array>        // std::array
#include <cstddef>      // std::size_t, std::ptrdiff_t
#include <cstdint>      // std::int64_t, std::uint8_t, std::uint32_t
#include <cstring>      // std::memcmp: bitwise float comparison
#include <filesystem>   // std::filesystem::exists: no temporary file is left behind
#include <string>       // std::string
#include <vector>       // std::vector

#include <oar/data/mnist_json.hpp>  // under test
#include <oar/oar.hpp>             // after it: its private names must not shadow oar::detail (regression)

#include "support/errors.hpp"     // oar_test::message_of, contains: checking the error messages
#include "support/files.hpp"      // oar_test::write_raw, write_gzip, read_raw: the inputs
#include "support/idx_files.hpp"  // oar_test::idx_bytes: the IDX folder of the round trip
#include "support/temp_dir.hpp"   // oar_test::TempDir: where the inputs go

namespace {

using oar::data::MnistJsonOptions;
using oar::data::read_mnist_json;
using oar_test::bytes;
using oar_test::contains;
using oar_test::message_of;
using oar_test::TempDir;

constexpr std::size_t px = 784;

/// Value k of image i of split s: a course-style float (x / 127.5 - 1 of some byte x).
float pixel(std::size_t s, std::size_t i, std::size_t k) {
    return static_cast<float>((s * 31 + i * 7 + k * 13) % 256) * (1.0f / 127.5f) - 1.0f;
}
std::int64_t label_of(std::size_t s, std::size_t i) { return static_cast<std::int64_t>((s * 3 + i) % 10); }

/// A course file as editable pieces: each image's and each label's JSON text.
struct Doc {
    std::array<std::vector<std::string>, 3> images, labels;
    std::string sep = ", ";  // between values and elements, as Python's json.dump writes

    std::string text() const {
        std::string t = "[";
        for (std::size_t s = 0; s < 3; ++s) {
            t += s ? sep + "[[" : "[[";
            for (std::size_t i = 0; i < images[s].size(); ++i) t += (i ? sep : "") + images[s][i];
            t += "]" + sep + "[";
            for (std::size_t i = 0; i < labels[s].size(); ++i) t += (i ? sep : "") + labels[s][i];
            t += "]]";
        }
        return t + "]";
    }
};

std::string image_text(std::size_t s, std::size_t i, std::size_t values = px, const std::string& sep = ", ") {
    std::string t = "[";
    for (std::size_t k = 0; k < values; ++k) {
        if (k) t += sep;
        oar::data::json_detail::append_course_float(t, pixel(s, i, k));
    }
    return t + "]";
}

Doc make_doc(std::array<std::size_t, 3> counts = {3, 2, 2}) {
    Doc d;
    for (std::size_t s = 0; s < 3; ++s)
        for (std::size_t i = 0; i < counts[s]; ++i) {
            d.images[s].push_back(image_text(s, i));
            d.labels[s].push_back(std::to_string(label_of(s, i)));
        }
    return d;
}

bytes to_bytes(const std::string& s) { return bytes(s.begin(), s.end()); }

void write_gz(const std::string& path, const std::string& text) { oar_test::write_gzip(path, to_bytes(text)); }

/// Checks that `set` holds exactly the values pixel(s, i, k) and labels label_of(s, i).
void check_split(const oar::data::InMemoryDataset& set, std::size_t s, std::size_t count) {
    REQUIRE(set.size() == count);
    CHECK(set.dims() == oar::make_dims(1, 28, 28));
    bool same = true;
    for (std::size_t i = 0; i < count; ++i) {
        CHECK(set.labels()[i] == label_of(s, i));
        for (std::size_t k = 0; k < px; ++k) {
            const float want = pixel(s, i, k);
            same = same && std::memcmp(&set.images()[i * px + k], &want, sizeof want) == 0;
        }
    }
    CHECK(same);
}

/// read_mnist_json of `text` (gzip-compressed) throws format_error whose message names the file and
/// every one of `parts`; returns the message. Checked with the default blocks and with small ones.
std::string bad_json(const std::string& text, const std::vector<std::string>& parts) {
    TempDir dir;
    const std::string path = dir.file("bad.json.gz");
    write_gz(path, text);
    std::string first;
    for (std::size_t block : {std::size_t{4} << 20, std::size_t{97}}) {
        MnistJsonOptions opt;
        opt.block_bytes = block;
        const std::string what = message_of<oar::format_error>([&] { (void)read_mnist_json(path, opt); });
        INFO("block bytes ", block, ", message: ", what);
        CHECK(what.rfind("oar: ", 0) == 0);
        CHECK(contains(what, path));
        for (const auto& p : parts) CHECK(contains(what, p));
        if (first.empty()) first = what;
    }
    return first;
}

}  // namespace

// ---- reading good files ----

TEST_CASE("read_mnist_json reads three splits of any size back exactly, gzip-compressed or plain") {
    TempDir dir;
    for (const std::array<std::size_t, 3> counts : {std::array<std::size_t, 3>{3, 2, 2}, {1, 0, 5}, {0, 0, 0}, {40, 1, 1}}) {
        INFO("splits ", counts[0], "/", counts[1], "/", counts[2]);
        const std::string text = make_doc(counts).text();
        write_gz(dir.file("m.json.gz"), text);
        oar_test::write_raw(dir.file("m.json"), to_bytes(text));
        for (const char* name : {"m.json.gz", "m.json"}) {
            INFO(name);
            const oar::data::MnistJson m = read_mnist_json(dir.file(name));
            check_split(m.train, 0, counts[0]);
            check_split(m.valid, 1, counts[1]);
            check_split(m.test, 2, counts[2]);
        }
    }
}

TEST_CASE("read_mnist_json gives the same result whatever block size cuts the text") {
    TempDir dir;
    const std::string path = dir.file("m.json.gz");
    write_gz(path, make_doc({5, 3, 2}).text());
    for (std::size_t block : {std::size_t{7}, std::size_t{13}, std::size_t{1000}, std::size_t{9999}, std::size_t{65536}}) {
        INFO("block bytes ", block);
        MnistJsonOptions opt;
        opt.block_bytes = block;
        const auto m = read_mnist_json(path, opt);
        check_split(m.train, 0, 5);
        check_split(m.valid, 1, 3);
        check_split(m.test, 2, 2);
    }
}

TEST_CASE("blocks of 1, 2 or 3 bytes give the same small-image result as one block") {
    TempDir dir;
    const std::string path = dir.file("tiny.json.gz");
    write_gz(path, "[[[[0.5, -1.0, 1, 2], [3, 4, 5, 6]], [1, 2]], [[], []],\n [[[7, 8e-1, 9, 0]], [9]]]");
    MnistJsonOptions opt;
    opt.dims = oar::make_dims(1, 2, 2);
    for (std::size_t block : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{1} << 20}) {
        INFO("block bytes ", block);
        opt.block_bytes = block;
        const auto m = read_mnist_json(path, opt);
        REQUIRE(m.train.size() == 2);
        CHECK(m.valid.size() == 0);
        REQUIRE(m.test.size() == 1);
        CHECK(std::vector<float>(m.train.images().begin(), m.train.images().end()) ==
              std::vector<float>{0.5f, -1.0f, 1, 2, 3, 4, 5, 6});
        CHECK(std::vector<float>(m.test.images().begin(), m.test.images().end()) == std::vector<float>{7, 0.8f, 9, 0});
        CHECK(m.train.labels()[1] == 2);
        CHECK(m.test.labels()[0] == 9);
        CHECK(m.test.dims() == oar::make_dims(1, 2, 2));
    }
}

TEST_CASE("read_mnist_json reads a file larger than several 4 MiB blocks") {
    TempDir dir;
    const std::string path = dir.file("big.json.gz");
    const std::string text = make_doc({1200, 300, 200}).text();
    REQUIRE(text.size() > (std::size_t{12} << 20));
    write_gz(path, text);
    const auto m = read_mnist_json(path);
    check_split(m.train, 0, 1200);
    check_split(m.valid, 1, 300);
    check_split(m.test, 2, 200);
}

TEST_CASE("any JSON spacing is accepted: compact, pretty-printed with newlines and tabs") {
    TempDir dir;
    for (const std::string sep : {",", ",\n\t ", " ,\r\n"}) {
        Doc d = make_doc({2, 1, 1});
        d.sep = sep;
        for (std::size_t s = 0; s < 3; ++s)
            for (std::size_t i = 0; i < d.images[s].size(); ++i) d.images[s][i] = image_text(s, i, px, sep);
        const std::string path = dir.file("spaced.json.gz");
        write_gz(path, "\n  " + d.text() + "\n\n");
        const auto m = read_mnist_json(path);
        check_split(m.train, 0, 2);
        check_split(m.test, 2, 1);
    }
}

TEST_CASE("integer pixel values 0-255 are kept as they are, and labels may be written 7.0") {
    TempDir dir;
    Doc d = make_doc({2, 1, 1});
    for (std::size_t s = 0; s < 3; ++s)
        for (std::size_t i = 0; i < d.images[s].size(); ++i) {
            std::string t = "[";
            for (std::size_t k = 0; k < px; ++k) t += (k ? ", " : "") + std::to_string((i + k) % 256);
            d.images[s][i] = t + "]";
        }
    d.labels[0][1] = "7.0";
    const std::string path = dir.file("ints.json.gz");
    write_gz(path, d.text());
    const auto m = read_mnist_json(path);
    REQUIRE(m.train.size() == 2);
    CHECK(m.train.images()[px + 255] == 0.0f);    // (1 + 255) % 256
    CHECK(m.train.images()[px + 254] == 255.0f);  // (1 + 254) % 256
    CHECK(m.train.labels()[1] == 7);
}

TEST_CASE("load_mnist_json returns the split its mode names, test being an alias of eval") {
    TempDir dir;
    const std::string path = dir.file("m.json.gz");
    write_gz(path, make_doc({4, 3, 2}).text());
    check_split(oar::data::load_mnist_json(path, "train"), 0, 4);
    check_split(oar::data::load_mnist_json(path, "valid"), 1, 3);
    check_split(oar::data::load_mnist_json(path, "eval"), 2, 2);
    check_split(oar::data::load_mnist_json(path, "test"), 2, 2);
    const std::string what = message_of<oar::value_error>([&] { (void)oar::data::load_mnist_json(path, "validation"); });
    CHECK(contains(what, "'validation' is not train, valid, eval or test"));
}

TEST_CASE("load_mnist_json still checks the splits it does not keep") {
    TempDir dir;
    Doc d = make_doc({2, 2, 2});
    d.labels[0][1] = "12";
    const std::string path = dir.file("m.json.gz");
    write_gz(path, d.text());
    const std::string what = message_of<oar::format_error>([&] { (void)oar::data::load_mnist_json(path, "eval"); });
    CHECK(contains(what, "split 0 (train), label 1"));
}

TEST_CASE("the converter's writer round-trips an IDX folder to the floats ByteImageDataset makes") {
    TempDir dir;
    auto write_pair = [&](const std::string& prefix, std::uint32_t n) {
        bytes pixels, labels;
        for (std::uint32_t i = 0; i < n; ++i) {
            for (std::uint32_t k = 0; k < px; ++k) pixels.push_back(static_cast<std::uint8_t>((i * 37 + k * 11) % 256));
            labels.push_back(static_cast<std::uint8_t>((i * 3) % 10));
        }
        oar_test::write_gzip(dir.path / (prefix + "-images-idx3-ubyte.gz"), oar_test::idx_bytes({n, 28, 28}, pixels));
        oar_test::write_gzip(dir.path / (prefix + "-labels-idx1-ubyte.gz"), oar_test::idx_bytes({n}, labels));
    };
    write_pair("train", 30);
    write_pair("t10k", 6);
    const oar::data::MnistSplits idx = oar::data::load_mnist(dir.path.string(), 10);  // 20 / 10 / 6
    const std::string path = dir.file("out.json.gz");
    oar::data::write_mnist_json(path, oar::data::mnist_json_from_idx(idx));
    CHECK_FALSE(std::filesystem::exists(path + ".tmp"));

    const auto m = read_mnist_json(path);
    const oar::data::LabeledImages* sets[3] = {&idx.train, &idx.valid, &idx.test};
    const oar::data::InMemoryDataset* got[3] = {&m.train, &m.valid, &m.test};
    for (std::size_t s = 0; s < 3; ++s) {
        INFO("split ", s);
        const oar::data::ByteImageDataset want(sets[s]->pixels, sets[s]->labels, oar::make_dims(1, 28, 28));
        REQUIRE(got[s]->size() == want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
            const oar::data::Sample a = got[s]->get(i), b = want.get(i);
            CHECK(a.label == b.label);
            CHECK(std::memcmp(a.image.data(), b.image.data(), px * sizeof(float)) == 0);
        }
    }
    // The course's number style: -1.0 for a zero pixel, Python's repr of the float32 otherwise.
    const std::string head(reinterpret_cast<const char*>(oar_test::read_raw(path).data()), 2);
    CHECK(head == "\x1f\x8b");
    std::string one;
    oar::data::json_detail::append_course_float(one, -1.0f);
    oar::data::json_detail::append_course_float(one, 60 * (1.0f / 127.5f) - 1.0f);
    CHECK(one == "-1.0-0.5294117331504822");
}

// ---- bad input: each throws an oar error naming the file and the position ----

TEST_CASE("a missing file throws io_error naming the path") {
    TempDir dir;
    const std::string path = dir.file("missing.json.gz");
    const std::string what = message_of<oar::io_error>([&] { (void)read_mnist_json(path); });
    CHECK(contains(what, path));
    CHECK(contains(what, "cannot open"));
}

TEST_CASE("an empty file and gzip of nothing are format errors") {
    TempDir dir;
    oar_test::write_raw(dir.file("empty.json.gz"), {});
    CHECK(contains(message_of<oar::format_error>([&] { (void)read_mnist_json(dir.file("empty.json.gz")); }), "the file is empty"));
    oar_test::write_gzip(dir.file("nothing.json.gz"), {});
    CHECK(contains(message_of<oar::format_error>([&] { (void)read_mnist_json(dir.file("nothing.json.gz")); }),
                   "decompresses to 0 bytes"));
}

TEST_CASE("a truncated gzip file names the gzip damage and where the JSON reader was") {
    TempDir dir;
    const std::string full = dir.file("full.json.gz"), cut = dir.file("cut.json.gz");
    write_gz(full, make_doc({300, 10, 10}).text());
    const bytes gz = oar_test::read_raw(full);
    oar_test::write_raw(cut, bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2)));
    MnistJsonOptions opt;
    opt.block_bytes = 4096;
    const std::string what = message_of<oar::format_error>([&] { (void)read_mnist_json(cut, opt); });
    CHECK(contains(what, cut));
    CHECK(contains(what, "truncated gzip data"));
    CHECK(contains(what, "split 0 (train), image "));
    CHECK(contains(what, "of the decompressed JSON"));
}

TEST_CASE("corrupt gzip data, or a checksum that fails after complete JSON, is a format error") {
    TempDir dir;
    const std::string good = dir.file("good.json.gz"), bad = dir.file("bad.json.gz");
    write_gz(good, make_doc({3, 1, 1}).text());
    const bytes gz = oar_test::read_raw(good);
    bytes broken = gz;
    broken[10] = 0xff;  // a reserved deflate block type
    oar_test::write_raw(bad, broken);
    std::string what = message_of<oar::format_error>([&] { (void)read_mnist_json(bad); });
    CHECK(contains(what, bad));
    CHECK(contains(what, "corrupt gzip data"));
    CHECK(contains(what, "split 0 (train)"));

    bytes bad_crc = gz;
    bad_crc[gz.size() - 7] ^= 0x01;
    oar_test::write_raw(bad, bad_crc);
    what = message_of<oar::format_error>([&] { (void)read_mnist_json(bad); });
    CHECK(contains(what, "incorrect data check"));
    CHECK(contains(what, bad));
}

TEST_CASE("plain text and gzip-compressed text that are not JSON are format errors at byte 0") {
    TempDir dir;
    oar_test::write_raw(dir.file("text.json.gz"), to_bytes("hello, world\n"));
    std::string what = message_of<oar::format_error>([&] { (void)read_mnist_json(dir.file("text.json.gz")); });
    CHECK(contains(what, dir.file("text.json.gz")));
    CHECK(contains(what, "at byte 0: expected '['"));
    CHECK(contains(what, "got 'h'"));
    CHECK(contains(what, "neither gzip-compressed"));
    bad_json("hello, world\n", {"at byte 0 of the decompressed JSON: expected '['", "got 'h'"});
}

TEST_CASE("wrong nesting is named: two splits, four splits, objects instead of arrays") {
    Doc two = make_doc({1, 1, 1});
    std::string text = two.text();
    const std::size_t third = text.rfind(", [[");
    text = text.substr(0, third) + "]";
    bad_json(text, {"the file holds 2 splits, expected 3"});

    bad_json(make_doc({1, 1, 1}).text().insert(1, "[[], []], "), {"more than 3 splits"});
    bad_json("{\"train\": []}", {"at byte 0", "got '{'"});
    bad_json("[{\"images\": []}]", {"at byte 1", "expected '[' opening [images, labels], got '{'"});
    Doc obj = make_doc({2, 1, 1});
    obj.images[0][1] = "{\"pixels\": 1}";
    bad_json(obj.text(), {"split 0 (train), image 1", "expected '[' starting an image (784 numbers), got '{'"});
    Doc extra = make_doc({1, 1, 1});
    extra.labels[1].back() += "], [3";
    bad_json(extra.text(), {"split 1 (valid)", "expected ']' closing [images, labels]"});
    bad_json(make_doc({1, 1, 1}).text() + " []", {"after the end of the JSON"});
}

TEST_CASE("an image of 783 or 785 values is named with its split and index") {
    Doc d = make_doc({3, 2, 2});
    d.images[1][1] = image_text(1, 1, 783);
    bad_json(d.text(), {"split 1 (valid), image 1 at byte ", "the image has 783 values, expected 784 ([1, 28, 28])"});
    d = make_doc({3, 2, 2});
    d.images[2][0] = image_text(2, 0, 785);
    bad_json(d.text(), {"split 2 (test), image 0 at byte ", "more than 784 values"});
    d = make_doc({3, 2, 2});
    d.images[0][2] = "[]";
    bad_json(d.text(), {"split 0 (train), image 2", "the image has 0 values"});
}

TEST_CASE("a string, NaN, 1e999 or a number beyond float range as a pixel is named down to the value") {
    auto with_value = [](std::size_t k, const std::string& v) {
        Doc d = make_doc({3, 2, 2});
        std::string img = "[";
        for (std::size_t j = 0; j < px; ++j) {
            if (j) img += ", ";
            if (j == k) img += v;
            else oar::data::json_detail::append_course_float(img, pixel(0, 2, j));
        }
        d.images[0][2] = img + "]";
        return d.text();
    };
    bad_json(with_value(5, "\"0.5\""), {"split 0 (train), image 2, value 5 at byte ", "\"0.5\" is a string, expected a number"});
    bad_json(with_value(5, "\"a]b\""), {"split 0 (train), image 2", "invalid JSON"});
    bad_json(with_value(700, "NaN"), {"split 0 (train), image 2, value 700", "NaN is not a JSON number"});
    bad_json(with_value(0, "1e999"), {"image 2, value 0", "1e999 is not a valid finite JSON number"});
    bad_json(with_value(783, "-1e300"), {"image 2, value 783", "-1e300 does not fit a float"});
    bad_json(with_value(1, "true"), {"image 2, value 1", "true is a boolean"});
    bad_json(with_value(1, "[0]"), {"image 2, value 1", "expected a number, got an array"});
    bad_json(with_value(1, "01"), {"image 2, value 1", "01 is not a valid finite JSON number"});
}

TEST_CASE("a label of 10, -1, 1.5, a string or a missing label is named with its split and index") {
    struct Case {
        std::string label;
        std::string part;
    };
    for (const Case& c : {Case{"10", "label 10 is not in [0, 10)"}, Case{"-1", "label -1 is not in [0, 10)"},
                          Case{"1.5", "1.5 is not an integer class in [0, 10)"}, Case{"\"3\"", "\"3\" is a string"},
                          Case{"1e400", "1e400 is not a valid finite JSON number"}}) {
        INFO("label ", c.label);
        Doc d = make_doc({3, 4, 2});
        d.labels[1][2] = c.label;
        bad_json(d.text(), {"split 1 (valid), label 2 at byte ", c.part});
    }
    Doc d = make_doc({3, 4, 2});
    d.labels[1][3] = "";  // "..., 7, ]"
    bad_json(d.text(), {"split 1 (valid), label 3", "expected a"});
    d = make_doc({3, 4, 2});
    d.labels[1][0] = "";  // "[, 4, ..."
    bad_json(d.text(), {"split 1 (valid), label 0", "expected a"});
}

TEST_CASE("text simdjson rejects before parsing (unclosed string, bad UTF-8) is still named down to the sample") {
    Doc d = make_doc({3, 4, 2});
    d.labels[1][2] = "\"3, 4";  // an unclosed string holding a comma
    bad_json(d.text(), {"split 1 (valid), label 2 at byte ", "invalid JSON in this label", "never closed"});
    d = make_doc({3, 4, 2});
    d.images[2][1].insert(5, "\xff");
    bad_json(d.text(), {"split 2 (test), image 1 at byte ", "invalid JSON in this image", "UTF-8"});
}

TEST_CASE("images and labels of different counts are named with the split") {
    Doc d = make_doc({3, 2, 2});
    d.labels[2].pop_back();
    bad_json(d.text(), {"split 2 (test) at byte ", "the split has 2 images but 1 labels"});
    d = make_doc({3, 2, 2});
    d.images[0].pop_back();
    bad_json(d.text(), {"split 0 (train)", "the split has 2 images but 3 labels"});
}

TEST_CASE("text cut off anywhere is a format error, never a crash or a hang") {
    TempDir dir;
    MnistJsonOptions opt;
    opt.dims = oar::make_dims(1, 2, 2);  // small images, so every prefix is quick
    const std::string text = "[[[[0.5, -1.0, 1, 2], [3, 4, 5, 6]], [1, 2]], [[], []], [[[7, 8, 9, 0]], [9]]]";
    const std::string path = dir.file("cut.json");
    oar_test::write_raw(path, to_bytes(text));
    REQUIRE(read_mnist_json(path, opt).train.size() == 2);
    for (std::size_t n = 1; n < text.size(); ++n) {
        INFO("first ", n, " bytes: ", text.substr(0, n));
        for (std::size_t block : {std::size_t{1}, std::size_t{7}, std::size_t{1} << 20}) {
            opt.block_bytes = block;
            oar_test::write_raw(path, to_bytes(text.substr(0, n)));
            const std::string what = message_of<oar::format_error>([&] { (void)read_mnist_json(path, opt); });
            CHECK(contains(what, path));
            CHECK(contains(what, "byte "));
        }
    }
}

TEST_CASE("any one byte replaced gives either the right data or an oar error") {
    TempDir dir;
    MnistJsonOptions opt;
    opt.dims = oar::make_dims(2);
    opt.block_bytes = 3;
    const std::string text = "[[[[0.5, -1.0], [3, 4]], [1, 2]], [[], []], [[[7, 8e-1]], [9]]]";
    const std::string path = dir.file("mutated.json");
    std::size_t errors = 0, fine = 0;
    for (std::size_t i = 0; i < text.size(); ++i)
        for (const char c : std::string("[]{},\"-.0e 9xN\n\\")) {
            std::string t = text;
            t[i] = c;
            oar_test::write_raw(path, to_bytes(t));
            try {
                const auto m = read_mnist_json(path, opt);
                CHECK(m.train.size() + m.valid.size() + m.test.size() <= 4);
                ++fine;
            } catch (const oar::format_error& e) {
                CHECK(contains(e.what(), path));
                ++errors;
            }
        }
    CHECK(errors > fine);
}

TEST_CASE("an image that never closes stops at max_element_bytes instead of filling memory") {
    TempDir dir;
    std::string text = "[[[[";
    while (text.size() < (std::size_t{3} << 20)) text += "0.25, ";
    const std::string path = dir.file("endless.json.gz");
    write_gz(path, text);
    MnistJsonOptions opt;
    opt.max_element_bytes = std::size_t{1} << 20;
    opt.block_bytes = std::size_t{1} << 16;
    const std::string what = message_of<oar::format_error>([&] { (void)read_mnist_json(path, opt); });
    CHECK(contains(what, "split 0 (train), image 0"));
    CHECK(contains(what, "longer than 1048576 bytes"));
}

TEST_CASE("a split with more images or labels than max_images is refused, bounding memory on a gzip bomb") {
    TempDir dir;
    write_gz(dir.file("m.json.gz"), make_doc({5, 1, 1}).text());
    MnistJsonOptions opt;
    opt.max_images = 5;
    CHECK(read_mnist_json(dir.file("m.json.gz"), opt).train.size() == 5);  // exactly the limit is fine
    opt.max_images = 4;
    const std::string what = message_of<oar::format_error>([&] { (void)read_mnist_json(dir.file("m.json.gz"), opt); });
    CHECK(contains(what, "split 0 (train), image 4"));
    CHECK(contains(what, "more than 4 images"));
    // Labels alone: 5 labels after 4 images (the count mismatch would be found later, the limit first).
    Doc d = make_doc({4, 1, 1});
    d.labels[0].push_back("3");
    write_gz(dir.file("l.json.gz"), d.text());
    const std::string labels = message_of<oar::format_error>([&] { (void)read_mnist_json(dir.file("l.json.gz"), opt); });
    CHECK(contains(labels, "split 0 (train), label 4"));
    CHECK(contains(labels, "more than 4 labels"));
}

TEST_CASE("options without values or classes are value errors") {
    MnistJsonOptions opt;
    opt.num_classes = 0;
    CHECK_THROWS_AS((void)read_mnist_json("unused.json.gz", opt), oar::value_error);
    opt = MnistJsonOptions{};
    opt.dims = oar::Dims{};
    CHECK_THROWS_AS((void)read_mnist_json("unused.json.gz", opt), oar::value_error);
}
