// oar/io/image.hpp: PNG and JPEG of every kind read as Pillow reads them (pictures and Pillow's
// grey readings written by tests/io/pictures_reference.py), area resampling against its
// definition and an independent integral-image computation, and bad files (missing, empty, not a
// picture, truncated, corrupt, huge claims) refused with an oar::error naming the file.
#include <doctest/doctest.h>

#if OAR_HAS_IMAGE

#include <algorithm>   // std::max
#include <chrono>      // std::chrono::steady_clock: a huge claim is refused at once
#include <cmath>       // std::abs
#include <cstdint>     // std::uint8_t, std::uint32_t
#include <cstring>     // std::memcpy: the reference doubles
#include <filesystem>  // std::filesystem
#include <string>      // std::string
#include <utility>     // std::pair
#include <vector>      // std::vector

#include <zlib.h>  // crc32: forging PNG chunks

#include <oar/io/image.hpp>  // under test

#include "support/errors.hpp"    // message_of, contains
#include "support/files.hpp"     // write_raw, read_raw
#include "support/pictures.hpp"  // encode_png, encode_jpeg
#include "support/process.hpp"   // run_command: Pillow
#include "support/skip.hpp"      // skip: no Pillow
#include "support/temp_dir.hpp"  // TempDir

namespace {

using oar_test::bytes;
namespace fs = std::filesystem;

/// A w x h test picture: smooth gradients (compress well, still not flat), `channels` per pixel.
std::vector<std::uint8_t> pattern(std::size_t w, std::size_t h, int channels) {
    std::vector<std::uint8_t> px(w * h * static_cast<std::size_t>(channels));
    for (std::size_t y = 0; y < h; ++y)
        for (std::size_t x = 0; x < w; ++x)
            for (int c = 0; c < channels; ++c)
                px[(y * w + x) * static_cast<std::size_t>(channels) + static_cast<std::size_t>(c)] =
                    static_cast<std::uint8_t>((x * 7 + y * 3 + static_cast<std::size_t>(c) * 50) % 256);
    return px;
}

void put_be32(bytes& b, std::size_t at, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}

/// Appends a PNG chunk (length, type, data, CRC).
void chunk(bytes& b, const char* type, const bytes& data) {
    const std::size_t at = b.size();
    b.resize(at + 8 + data.size() + 4);
    put_be32(b, at, static_cast<std::uint32_t>(data.size()));
    std::memcpy(b.data() + at + 4, type, 4);
    std::copy(data.begin(), data.end(), b.begin() + static_cast<long>(at + 8));
    put_be32(b, at + 8 + data.size(), static_cast<std::uint32_t>(crc32(0, b.data() + at + 4, static_cast<uInt>(4 + data.size()))));
}

/// A PNG whose IHDR claims w x h grey 8-bit pixels, then a few bytes of image data (valid CRCs).
bytes forged_png(std::uint32_t w, std::uint32_t h) {
    bytes b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    bytes ihdr(13, 0);
    put_be32(ihdr, 0, w);
    put_be32(ihdr, 4, h);
    ihdr[8] = 8;  // bit depth; colour type 0 (grey), compression, filter, interlace 0
    chunk(b, "IHDR", ihdr);
    chunk(b, "IDAT", {0x78, 0x9c, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01});
    chunk(b, "IEND", {});
    return b;
}

/// The position of the JPEG's SOF0 (baseline) or SOF2 (progressive) marker.
std::size_t sof_at(const bytes& j) {
    for (std::size_t i = 2; i + 9 < j.size(); ++i)
        if (j[i] == 0xFF && (j[i + 1] == 0xC0 || j[i + 1] == 0xC2)) return i;
    FAIL("no SOF marker");
    return 0;
}

oar::io::GreyImage decode(const bytes& b, const std::string& name = "picture") { return oar::io::decode_image(b, name); }

}  // namespace

TEST_CASE("read_image reads PNG and JPEG of every colour type as Pillow does") {
    oar_test::TempDir dir;
    const auto r = oar_test::run_command(std::string(OAR_PYTHON) + " -c 'import PIL, numpy' 2>&1");
    if (r.status != 0) {
        oar_test::skip("Pillow or numpy is not importable by " + std::string(OAR_PYTHON) + " (scripts/setup.sh installs them): " + r.output);
        return;
    }
    const auto made = oar_test::run_command(std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR +
                                            "/tests/io/pictures_reference.py " + dir.path.string() + " 2>&1");
    REQUIRE_MESSAGE(made.status == 0, made.output);
    const std::vector<std::pair<std::string, int>> files = {  // name, largest difference allowed
        {"grey.png", 0},   {"grey_alpha.png", 1}, {"rgb.png", 0},     {"rgba.png", 1},
        {"palette.png", 0}, {"grey16.png", 0},    {"grey.jpg", 0},    {"rgb420.jpg", 1},
        {"rgb444.jpg", 1}, {"progressive.jpg", 1}, {"cmyk.jpg", 1}};
    for (const auto& [name, tolerance] : files) {
        CAPTURE(name);
        const oar::io::GreyImage img = oar::io::read_image((dir.path / name).string());
        const bytes want = oar_test::read_raw(dir.path / (name + ".grey"));
        CHECK(img.width == 37);
        CHECK(img.height == 45);
        REQUIRE(img.pixels.size() == want.size());
        int worst = 0;
        for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(int{img.pixels[i]} - int{want[i]}));
        CHECK(worst <= tolerance);
    }
    // The area resampling of grey.png to 28x28 against the script's integral-image computation.
    const oar::io::GreyImage g = oar::io::read_image((dir.path / "grey.png").string());
    const std::vector<float> area = oar::io::resize_area(g, 28, 28);
    const bytes raw = oar_test::read_raw(dir.path / "grey.png.area28");
    REQUIRE(raw.size() == 28 * 28 * sizeof(double));
    double worst = 0;
    for (std::size_t i = 0; i < 28 * 28; ++i) {
        double want = 0;
        std::memcpy(&want, raw.data() + i * sizeof(double), sizeof(double));
        worst = std::max(worst, std::abs(static_cast<double>(area[i]) - want));
    }
    CHECK(worst < 1e-3);
}

TEST_CASE("PNG and JPEG written by libpng and libjpeg read back: grey exactly, colour as luma") {
    const std::size_t w = 19, h = 11;
    const auto grey = pattern(w, h, 1), rgb = pattern(w, h, 3), rgba = pattern(w, h, 4);
    const oar::io::GreyImage a = decode(oar_test::encode_png(grey, w, h, 1));
    CHECK(a.width == w);
    CHECK(a.height == h);
    CHECK(a.pixels == grey);
    const oar::io::GreyImage c = decode(oar_test::encode_png(rgb, w, h, 3));
    for (std::size_t i = 0; i < w * h; ++i) {
        const double l = 0.299 * rgb[3 * i] + 0.587 * rgb[3 * i + 1] + 0.114 * rgb[3 * i + 2];
        REQUIRE(std::abs(c.pixels[i] - l) <= 0.5 + 1e-3);
    }
    // Transparent pixels over white: alpha 0 is white whatever the colour underneath.
    auto clear = rgba;
    for (std::size_t i = 0; i < w * h; ++i) clear[4 * i + 3] = 0;
    const oar::io::GreyImage t = decode(oar_test::encode_png(clear, w, h, 4));
    CHECK(t.pixels == std::vector<std::uint8_t>(w * h, 255));
    // Flat grey JPEGs (baseline and progressive) decode to their level exactly.
    const std::vector<std::uint8_t> flat(64 * 40, 77);
    CHECK(decode(oar_test::encode_jpeg(flat, 64, 40, 1)).pixels == flat);
    CHECK(decode(oar_test::encode_jpeg(flat, 64, 40, 1, 90, true)).pixels == flat);
}

TEST_CASE("an Adam7-interlaced PNG reads as the picture its passes make") {
    // fuzz/make_corpus.py writes it: 12x9 grey pixels (20 x + 7 y) mod 256 in the seven passes.
    const std::string path = std::string(OAR_SOURCE_DIR) + "/fuzz/corpus/fuzz_image/png_interlaced";
    const oar::io::GreyImage img = oar::io::read_image(path);
    REQUIRE(img.width == 12);
    REQUIRE(img.height == 9);
    for (std::size_t y = 0; y < 9; ++y)
        for (std::size_t x = 0; x < 12; ++x) REQUIRE(img.pixels[y * 12 + x] == (x * 20 + y * 7) % 256);
}

TEST_CASE("resize_area averages exactly the area each output pixel covers") {
    oar::io::GreyImage img{56, 84, {}};
    for (std::size_t i = 0; i < 56 * 84; ++i) img.pixels.push_back(static_cast<std::uint8_t>((i * 37 + i / 56 * 11) % 256));
    // Whole factors (2 across, 3 down): each output is the plain mean of its 2x3 block.
    const std::vector<float> v = oar::io::resize_area(img, 28, 28);
    for (std::size_t y = 0; y < 28; ++y)
        for (std::size_t x = 0; x < 28; ++x) {
            double s = 0;
            for (std::size_t dy = 0; dy < 3; ++dy)
                for (std::size_t dx = 0; dx < 2; ++dx) s += img.pixels[(3 * y + dy) * 56 + 2 * x + dx];
            REQUIRE(std::abs(v[y * 28 + x] - s / 6) < 1e-4);
        }
    // Any factor keeps the mean (the areas tile the picture) and a flat picture flat.
    for (const auto& [W, H] : {std::pair<std::size_t, std::size_t>{28, 28}, {13, 40}, {100, 7}}) {
        const std::vector<float> r = oar::io::resize_area(img, W, H);
        double in = 0, out = 0;
        for (auto p : img.pixels) in += p;
        for (auto p : r) out += p;
        CHECK(std::abs(in / static_cast<double>(img.pixels.size()) - out / static_cast<double>(r.size())) < 1e-3);
    }
    const oar::io::GreyImage flat{33, 17, std::vector<std::uint8_t>(33 * 17, 200)};
    for (const float p : oar::io::resize_area(flat, 28, 28)) REQUIRE(std::abs(p - 200.0f) < 1e-4);
    CHECK(oar::io::border_mean(oar::io::resize_area(flat, 28, 28), 28, 28) == doctest::Approx(200.0));
}

TEST_CASE("bad picture files are refused with an oar::error naming the file") {
    oar_test::TempDir dir;
    using oar_test::contains;
    using oar_test::message_of;
    const std::string missing = (dir.path / "missing.png").string();
    CHECK(contains(message_of<oar::io_error>([&] { oar::io::read_image(missing); }), missing));
    CHECK(contains(message_of<oar::io_error>([&] { oar::io::read_image(dir.path.string()); }), "is a folder"));

    auto refused = [&](const bytes& b, const std::string& name) {
        const std::string path = (dir.path / name).string();
        oar_test::write_raw(path, b);
        const std::string m = message_of<oar::format_error>([&] { oar::io::read_image(path); });
        CHECK_MESSAGE(contains(m, path), m);
        return m;
    };
    CHECK(contains(refused({}, "empty.png"), "empty file"));
    CHECK(contains(refused({'h', 'e', 'l', 'l', 'o'}, "text.jpg"), "not a PNG or JPEG"));

    const std::size_t w = 40, h = 30;
    const bytes png = oar_test::encode_png(pattern(w, h, 3), w, h, 3);
    const bytes jpeg = oar_test::encode_jpeg(pattern(w, h, 3), w, h, 3);
    const bytes progressive = oar_test::encode_jpeg(pattern(w, h, 3), w, h, 3, 90, true);
    // Truncated anywhere after the signature: refused, never a partial picture.
    for (const std::size_t keep : {std::size_t{8}, std::size_t{20}, png.size() / 2, png.size() - 13})
        CHECK(contains(refused(bytes(png.begin(), png.begin() + static_cast<long>(keep)), "cut.png"), "PNG"));
    for (const std::size_t keep : {std::size_t{3}, std::size_t{100}, jpeg.size() / 2, jpeg.size() - 2})
        CHECK(contains(refused(bytes(jpeg.begin(), jpeg.begin() + static_cast<long>(keep)), "cut.jpg"), "JPEG"));
    CHECK(contains(refused(bytes(progressive.begin(), progressive.begin() + static_cast<long>(progressive.size() * 2 / 3)),
                           "cut_progressive.jpg"),
                   "JPEG"));
    // A flipped byte in the compressed data: PNG's CRC catches it.
    bytes bad = png;
    bad[bad.size() - 20] ^= 0x55;
    CHECK(contains(refused(bad, "crc.png"), "corrupt or truncated PNG"));

    // Ancillary chunks are skipped unread: a text chunk reads as the picture without it; one
    // claiming 1.2 GB (a fuzz finding: libpng allocated the claim) only makes the file too short.
    {
        const bytes head(png.begin(), png.begin() + 33), rest(png.begin() + 33, png.end());  // signature + IHDR
        bytes with_text = head;
        chunk(with_text, "tEXt", {'C', 'o', 'm', 'm', 'e', 'n', 't', 0, 'h', 'i'});
        with_text.insert(with_text.end(), rest.begin(), rest.end());
        CHECK(decode(with_text).pixels == decode(png).pixels);
        bytes claim = head;
        chunk(claim, "zTXt", {'a', 0, 0, 0x78});
        put_be32(claim, 33, 0x48454545u);  // the length field: 1,212,499,269 bytes
        claim.insert(claim.end(), rest.begin(), rest.end());
        CHECK(contains(refused(claim, "ztxt.png"), "corrupt or truncated PNG"));
    }

    // Huge claims are refused before anything is allocated for them, at once.
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(contains(refused(forged_png(100000, 100000), "huge.png"), "more than the limit"));
    CHECK(contains(refused(forged_png(8000, 8000), "small_huge.png"), "cannot hold"));
    bytes big = jpeg;
    const std::size_t sof = sof_at(big);
    big[sof + 5] = 0xEA, big[sof + 6] = 0x60;  // height 60000
    big[sof + 7] = 0xEA, big[sof + 8] = 0x60;  // width 60000
    CHECK(contains(refused(big, "huge.jpg"), "more than the limit"));
    big[sof + 5] = 0x1F, big[sof + 6] = 0x40;  // 8000 x 8000 from a file of about a kilobyte
    big[sof + 7] = 0x1F, big[sof + 8] = 0x40;
    CHECK(contains(refused(big, "small_huge.jpg"), "cannot hold"));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));

    // Caller's limits: a file or a picture over them.
    const std::string ok = (dir.path / "ok.png").string();
    oar_test::write_raw(ok, png);
    CHECK(contains(message_of<oar::format_error>([&] { oar::io::read_image(ok, {.max_file_bytes = 10}); }),
                   "more than the limit of 10"));
    CHECK(contains(message_of<oar::format_error>([&] { oar::io::read_image(ok, {.max_pixels = 1000}); }),
                   "40x30 pixels, more than the limit"));
    CHECK(oar::io::read_image(ok).pixels.size() == w * h);
}

#else

#include "support/skip.hpp"  // skip

TEST_CASE("read_image needs libpng and libjpeg") {
    oar_test::skip("this build has no oar::image (libpng and libjpeg were not found; Debian: libpng-dev libjpeg-dev)");
}

#endif
