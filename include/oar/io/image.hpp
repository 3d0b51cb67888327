// Reading a picture (PNG through libpng, JPEG through libjpeg-turbo) as 8-bit grey, and the area
// resampling that shrinks it to a network's input, for predicting on one's own pictures (the
// course's lesson 9). Not part of oar.hpp: it needs libpng and libjpeg, which the CMake target
// oar::image links (users who read no pictures do not link them).
//
// API (namespace oar::io):
//   struct GreyImage { width, height, pixels }   row-major 8-bit grey
//   struct ImageLimits { max_file_bytes, max_side, max_pixels }
//   GreyImage decode_image(bytes, name, limits = {})   PNG or JPEG, recognised by their signatures
//   GreyImage read_image(path, limits = {})
//   std::vector<float> resize_area(image, width, height)   exact area averaging, grey levels 0..255
//   double border_mean(values, width, height)              mean of the outermost ring of pixels
// Grey as PIL's convert("L"): L = (19595 R + 38470 G + 7471 B + 32768) >> 16 on the 8-bit
// values; a transparent pixel is composited over white first (what a viewer shows), 16-bit PNG
// samples are scaled to the nearest 8-bit value, no gamma or colour profile is applied (as Pillow),
// and Adobe CMYK JPEGs are converted as Pillow does. Every problem is an oar::error whose message starts with the
// name (the file): io_error when the file cannot be read, format_error for anything else (not a
// PNG or JPEG, truncated, corrupt, or over the limits). Sizes are checked against ImageLimits before
// anything is allocated for the pixels, and libjpeg's own memory is capped, so a small file that
// claims a huge picture is refused, never a giant allocation.
#pragma once

#include <algorithm>    // std::min, std::max
#include <csetjmp>      // std::jmp_buf, setjmp, longjmp: libjpeg's error exits
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t, std::uint32_t
#include <cstdio>       // std::FILE: jpeglib.h needs it declared
#include <cstring>      // std::memset, std::memcmp
#include <filesystem>   // std::filesystem::file_size: checked before reading
#include <fstream>      // std::ifstream
#include <new>          // std::bad_alloc: libpng could not allocate its state
#include <span>         // std::span: the encoded bytes
#include <string>       // std::string
#include <system_error> // std::error_code
#include <utility>      // std::move
#include <vector>       // std::vector

#include <jpeglib.h>  // jpeg_decompress_struct, jpeg_read_header, jpeg_read_scanlines (libjpeg-turbo)
#include <jerror.h>   // JWRN_EXTRANEOUS_DATA: the one warning tolerated
#include <png.h>      // png_create_read_struct, png_read_row (libpng)

#include "../core/error.hpp"  // format_error, io_error, value_error, detail::concat

namespace oar::io {

/// An 8-bit grey picture, row-major: pixels[y * width + x].
struct GreyImage {
    std::size_t width = 0, height = 0;
    std::vector<std::uint8_t> pixels;
};

/// What a picture may be. A file or a claimed size over a limit is a format_error before any
/// buffer for it is allocated.
struct ImageLimits {
    std::size_t max_file_bytes = std::size_t(256) << 20;  ///< 256 MiB
    std::size_t max_side = std::size_t(1) << 15;          ///< 32768 pixels wide or high
    std::size_t max_pixels = std::size_t(1) << 26;        ///< 67,108,864 pixels (8192 x 8192)
};

}  // namespace oar::io

namespace oar::detail {

/// PIL's ITU-R 601-2 luma of 8-bit R, G, B.
inline std::uint8_t luma(unsigned r, unsigned g, unsigned b) {
    return static_cast<std::uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

/// The most pixels a PNG or a Huffman-coded JPEG can hold per byte of file: a PNG pixel is at
/// least one bit and deflate's best ratio is 1032:1; a JPEG codes at least one bit per 8x8 block
/// of the component with fewest blocks (its DC), and such a block covers at most 32x32 pixels.
inline constexpr std::size_t max_pixels_per_file_byte = 8 * 1032;

/// Refuses an empty picture, one over the limits, and one its file is too small to hold.
inline void check_picture_size(std::size_t w, std::size_t h, std::size_t file_bytes, const std::string& name,
                               const char* format, const io::ImageLimits& lim) {
    if (w == 0 || h == 0)
        throw format_error(concat(name, ": the ", format, " header says ", w, "x", h, " pixels (an empty picture)"));
    if (w > lim.max_side || h > lim.max_side || w * h > lim.max_pixels)
        throw format_error(concat(name, ": the ", format, " header says ", w, "x", h, " pixels, more than the limit (",
                                  lim.max_side, " per side, ", lim.max_pixels, " in all; oar::io::ImageLimits)"));
    if (w * h / max_pixels_per_file_byte > file_bytes)
        throw format_error(concat(name, ": the ", format, " header says ", w, "x", h, " pixels, which ", file_bytes,
                                  " bytes cannot hold (a truncated or forged file)"));
}

/// A row of `channels` 8-bit samples per pixel (grey, grey + alpha, RGB, RGBA) as grey, any
/// transparency composited over white.
inline void grey_of_row(const std::uint8_t* row, std::size_t width, std::size_t channels, std::uint8_t* out) {
    auto over_white = [](unsigned v, unsigned a) { return (v * a + 255u * (255u - a) + 127u) / 255u; };
    for (std::size_t x = 0; x < width; ++x) {
        const std::uint8_t* p = row + channels * x;
        switch (channels) {
            case 1: out[x] = p[0]; break;
            case 2: out[x] = static_cast<std::uint8_t>(over_white(p[0], p[1])); break;
            case 3: out[x] = luma(p[0], p[1], p[2]); break;
            default: out[x] = luma(over_white(p[0], p[3]), over_white(p[1], p[3]), over_white(p[2], p[3])); break;
        }
    }
}

/// libpng's state, its read position in the bytes, and where its error exits jump to (as for
/// libjpeg below: libpng reports errors by a callback that must not return).
struct PngDecoder {
    png_structp png = nullptr;
    png_infop info = nullptr;
    std::span<const std::uint8_t> bytes;
    std::size_t at = 0;
    char message[256] = {};

    /// The most memory libpng may take for one ancillary chunk (no text or ICC profile a picture
    /// needs comes near it).
    static constexpr png_alloc_size_t max_chunk_bytes = png_alloc_size_t(8) << 20;

    ~PngDecoder() {
        if (png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    }
    PngDecoder() = default;
    PngDecoder(const PngDecoder&) = delete;
    PngDecoder& operator=(const PngDecoder&) = delete;

    static void error_fn(png_structp p, png_const_charp msg) {
        auto* d = static_cast<PngDecoder*>(png_get_error_ptr(p));
        std::snprintf(d->message, sizeof d->message, "%s", msg);
        png_longjmp(p, 1);
    }
    static void warning_fn(png_structp, png_const_charp) {}  // ancillary trouble (a bad iCCP, ...): ignored
    static void read_fn(png_structp p, png_bytep dst, png_size_t n) {
        auto* d = static_cast<PngDecoder*>(png_get_io_ptr(p));
        if (n > d->bytes.size() - d->at) png_error(p, "unexpected end of file");
        std::memcpy(dst, d->bytes.data() + d->at, n);
        d->at += n;
    }
};

/// Decodes into `grey`, which grows row by row with the rows decoded (all passes first for an
/// interlaced file); returns false with the message in d.message on a libpng error. Only
/// trivially destructible locals live here (libpng's errors longjmp back into it).
inline bool png_decode(PngDecoder& d, const std::string& name, const io::ImageLimits& lim,
                       std::vector<std::uint8_t>& rows, std::vector<png_bytep>& pointers, std::vector<std::uint8_t>& grey) {
    d.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &d, &PngDecoder::error_fn, &PngDecoder::warning_fn);
    if (!d.png) throw std::bad_alloc();
    d.info = png_create_info_struct(d.png);
    if (!d.info) throw std::bad_alloc();
    if (setjmp(png_jmpbuf(d.png))) return false;
    png_set_read_fn(d.png, &d, &PngDecoder::read_fn);
    // libpng allocates a text chunk or an ICC profile as large as its length field claims before
    // reading it: the ancillary chunks a grey picture does not need are skipped unread instead
    // (tRNS, transparency, is kept), and whatever libpng still allocates per chunk is capped.
    static constexpr png_byte skipped[] = "tEXt\0zTXt\0iTXt\0iCCP\0sPLT\0eXIf\0cHRM\0gAMA\0sRGB\0sBIT\0"
                                          "bKGD\0hIST\0pHYs\0oFFs\0pCAL\0sCAL\0tIME";
    png_set_keep_unknown_chunks(d.png, PNG_HANDLE_CHUNK_NEVER, nullptr, 0);
    png_set_keep_unknown_chunks(d.png, PNG_HANDLE_CHUNK_NEVER, skipped, static_cast<int>(sizeof skipped / 5));
    png_set_chunk_malloc_max(d.png, PngDecoder::max_chunk_bytes);
    png_read_info(d.png, d.info);
    const std::size_t w = png_get_image_width(d.png, d.info), h = png_get_image_height(d.png, d.info);
    check_picture_size(w, h, d.bytes.size(), name, "PNG", lim);
    // Every kind of PNG to 8-bit grey, grey + alpha, RGB or RGBA: 16-bit samples scaled (rounded),
    // 1, 2 and 4-bit ones and palettes expanded, a tRNS colour key made an alpha channel.
    png_set_scale_16(d.png);
    png_set_expand(d.png);
    const int passes = png_set_interlace_handling(d.png);
    png_read_update_info(d.png, d.info);
    const std::size_t channels = png_get_channels(d.png, d.info), row_bytes = png_get_rowbytes(d.png, d.info);
    if (row_bytes != w * channels) png_error(d.png, "unexpected row layout after the transformations");
    if (passes == 1) {  // one row at a time
        rows.resize(row_bytes);
        for (std::size_t y = 0; y < h; ++y) {
            png_read_row(d.png, rows.data(), nullptr);
            grey.resize(grey.size() + w);
            grey_of_row(rows.data(), w, channels, grey.data() + grey.size() - w);
        }
    } else {  // Adam7: the passes fill the whole picture
        rows.resize(row_bytes * h);
        pointers.resize(h);
        for (std::size_t y = 0; y < h; ++y) pointers[y] = rows.data() + y * row_bytes;
        png_read_image(d.png, pointers.data());
        grey.resize(w * h);
        for (std::size_t y = 0; y < h; ++y) grey_of_row(pointers[y], w, channels, grey.data() + y * w);
    }
    png_read_end(d.png, nullptr);  // the chunks after the data, up to IEND: a file cut there is refused too
    return true;
}

inline io::GreyImage decode_png(std::span<const std::uint8_t> bytes, const std::string& name,
                                const io::ImageLimits& lim) {
    PngDecoder d;
    d.bytes = bytes;
    std::vector<std::uint8_t> rows, grey;
    std::vector<png_bytep> pointers;
    if (!png_decode(d, name, lim, rows, pointers, grey))
        throw format_error(concat(name, ": corrupt or truncated PNG (libpng: ", d.message, ")"));
    const std::size_t w = png_get_image_width(d.png, d.info), h = png_get_image_height(d.png, d.info);
    return {w, h, std::move(grey)};
}

/// libjpeg's state and where its error exits jump to. libjpeg reports errors through callbacks
/// that must not return; they longjmp back to jpeg_decode, whose frame holds nothing that needs
/// destroying, and the message is kept here.
struct JpegDecoder {
    struct ErrorManager {
        jpeg_error_mgr pub;
        std::jmp_buf jump;
        char message[JMSG_LENGTH_MAX];
    };
    jpeg_decompress_struct cinfo;
    ErrorManager err;
    jpeg_progress_mgr progress;
    bool created = false;

    /// More scans than any encoder writes (a real progressive file has about 10): a file of
    /// thousands of tiny scans would otherwise make decoding take minutes.
    static constexpr int max_scans = 1000;

    JpegDecoder() {
        std::memset(&cinfo, 0, sizeof cinfo);
        std::memset(&err, 0, sizeof err);
        std::memset(&progress, 0, sizeof progress);
    }
    ~JpegDecoder() {
        if (created) jpeg_destroy_decompress(&cinfo);
    }
    JpegDecoder(const JpegDecoder&) = delete;
    JpegDecoder& operator=(const JpegDecoder&) = delete;

    static void error_exit(j_common_ptr c) {
        auto* e = reinterpret_cast<ErrorManager*>(c->err);
        (*c->err->format_message)(c, e->message);
        std::longjmp(e->jump, 1);
    }
    /// Warnings are corrupt or missing data (libjpeg would fill in grey and go on): errors here,
    /// except bytes between markers, which many cameras write and every viewer skips.
    static void emit_message(j_common_ptr c, int level) {
        if (level != -1 || c->err->msg_code == JWRN_EXTRANEOUS_DATA) return;
        error_exit(c);
    }
    static void on_progress(j_common_ptr c) {
        auto* d = reinterpret_cast<j_decompress_ptr>(c);
        if (d->input_scan_number > max_scans) {
            auto* e = reinterpret_cast<ErrorManager*>(c->err);
            std::snprintf(e->message, sizeof e->message, "more than %d scans", max_scans);
            std::longjmp(e->jump, 1);
        }
    }
};

/// One decoded row of `components` samples per pixel (grey, RGB or CMYK) appended to `grey`.
inline void append_grey_row(const std::uint8_t* row, std::size_t width, std::size_t components, bool adobe,
                            std::vector<std::uint8_t>& grey) {
    const std::size_t at = grey.size();
    grey.resize(at + width);
    std::uint8_t* out = grey.data() + at;
    if (components == 1) {
        std::memcpy(out, row, width);
    } else if (components == 3) {
        for (std::size_t x = 0; x < width; ++x) out[x] = luma(row[3 * x], row[3 * x + 1], row[3 * x + 2]);
    } else {
        // Adobe's CMYK JPEGs store inverted ink (Pillow reads them as "CMYK;I"); then Pillow's
        // conversion, R = (255 - C)(255 - K) / 255 per channel.
        for (std::size_t x = 0; x < width; ++x) {
            const std::uint8_t* s = row + 4 * x;
            auto paper = [&](int k) { return adobe ? unsigned{s[k]} : 255u - s[k]; };  // 255 - ink
            auto rgb = [&](int k) { return (paper(k) * paper(3) + 127u) / 255u; };
            out[x] = luma(rgb(0), rgb(1), rgb(2));
        }
    }
}

/// Decodes into `grey`, which grows row by row with the data actually decoded (a truncated file
/// stops at its first missing row); returns false with the message in d.err.message on a libjpeg
/// error. Only trivially destructible locals live here (libjpeg's errors longjmp back into it).
inline bool jpeg_decode(JpegDecoder& d, std::span<const std::uint8_t> bytes, const std::string& name,
                        const io::ImageLimits& lim, std::vector<std::uint8_t>& row, std::vector<std::uint8_t>& grey) {
    d.cinfo.err = jpeg_std_error(&d.err.pub);
    d.err.pub.error_exit = &JpegDecoder::error_exit;
    d.err.pub.emit_message = &JpegDecoder::emit_message;
    if (setjmp(d.err.jump)) return false;
    jpeg_create_decompress(&d.cinfo);
    d.created = true;
    d.progress.progress_monitor = &JpegDecoder::on_progress;
    d.cinfo.progress = &d.progress;
    // libjpeg's own buffers (a progressive file keeps every coefficient: 128 bytes per 8x8 block
    // per component) may not grow past this; over it, libjpeg stops with an error.
    d.cinfo.mem->max_memory_to_use = static_cast<long>(std::min<std::size_t>(lim.max_pixels * 8, std::size_t(1) << 30));
    jpeg_mem_src(&d.cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
    jpeg_read_header(&d.cinfo, TRUE);
    if (d.cinfo.arith_code)  // what browsers do not decode either; its pixels per byte are unbounded
        throw format_error(concat(name, ": arithmetic-coded JPEG, which is not supported (re-save it)"));
    check_picture_size(d.cinfo.image_width, d.cinfo.image_height, bytes.size(), name, "JPEG", lim);
    switch (d.cinfo.jpeg_color_space) {
        case JCS_GRAYSCALE: d.cinfo.out_color_space = JCS_GRAYSCALE; break;
        case JCS_CMYK:
        case JCS_YCCK: d.cinfo.out_color_space = JCS_CMYK; break;
        default: d.cinfo.out_color_space = JCS_RGB; break;
    }
    jpeg_start_decompress(&d.cinfo);
    row.resize(static_cast<std::size_t>(d.cinfo.output_width) * static_cast<std::size_t>(d.cinfo.output_components));
    while (d.cinfo.output_scanline < d.cinfo.output_height) {
        JSAMPROW line = row.data();
        if (jpeg_read_scanlines(&d.cinfo, &line, 1) != 1) break;
        append_grey_row(row.data(), d.cinfo.output_width, static_cast<std::size_t>(d.cinfo.output_components),
                        d.cinfo.saw_Adobe_marker, grey);
    }
    jpeg_finish_decompress(&d.cinfo);
    return true;
}

inline io::GreyImage decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& name,
                                 const io::ImageLimits& lim) {
    JpegDecoder d;
    std::vector<std::uint8_t> row, grey;
    if (!jpeg_decode(d, bytes, name, lim, row, grey))
        throw format_error(concat(name, ": corrupt or truncated JPEG (libjpeg: ", d.err.message, ")"));
    const std::size_t w = d.cinfo.output_width, h = d.cinfo.output_height;
    if (grey.size() != w * h)  // cannot happen with the warnings as errors; never a short picture
        throw format_error(concat(name, ": JPEG decoding stopped after ", grey.size() / w, " of ", h, " rows"));
    return {w, h, std::move(grey)};
}

}  // namespace oar::detail

namespace oar::io {

/// A PNG or a JPEG (recognised by its first bytes, whatever the name says) as grey. `name` goes
/// into messages. format_error for anything else, truncated or corrupt data, or a size over `lim`.
inline GreyImage decode_image(std::span<const std::uint8_t> bytes, const std::string& name,
                              const ImageLimits& lim = {}) {
    static constexpr std::uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (bytes.size() > lim.max_file_bytes)
        throw format_error(oar::detail::concat(name, ": ", bytes.size(), " bytes, more than the limit of ",
                                               lim.max_file_bytes, " (oar::io::ImageLimits)"));
    if (bytes.size() >= 8 && std::memcmp(bytes.data(), png_sig, 8) == 0) return oar::detail::decode_png(bytes, name, lim);
    if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF)
        return oar::detail::decode_jpeg(bytes, name, lim);
    if (bytes.empty()) throw format_error(oar::detail::concat(name, ": empty file (expected a PNG or JPEG picture)"));
    throw format_error(oar::detail::concat(name, ": not a PNG or JPEG picture (it starts with neither signature)"));
}

/// read_image: the file's bytes (io_error if it cannot be read; format_error over
/// lim.max_file_bytes, checked before reading), then decode_image with the path as the name.
inline GreyImage read_image(const std::string& path, const ImageLimits& lim = {}) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw io_error(oar::detail::concat(path, ": is a folder, not a picture"));
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw io_error(oar::detail::concat(path, ": cannot read (", ec.message(), ")"));
    if (size > lim.max_file_bytes)
        throw format_error(oar::detail::concat(path, ": ", size, " bytes, more than the limit of ", lim.max_file_bytes,
                                               " (oar::io::ImageLimits)"));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw io_error(oar::detail::concat(path, ": cannot open"));
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (static_cast<std::size_t>(in.gcount()) != bytes.size())
        throw io_error(oar::detail::concat(path, ": cannot read (got ", in.gcount(), " of ", size, " bytes)"));
    return decode_image(bytes, path, lim);
}

/// The picture resampled to width x height by exact area averaging: each output pixel is the
/// mean of the source over the rectangle it covers (fractions of pixels weighted by the fraction
/// covered), so shrinking never aliases. Grey levels 0..255 as floats, row-major.
inline std::vector<float> resize_area(const GreyImage& img, std::size_t width, std::size_t height) {
    if (img.width == 0 || img.height == 0 || img.pixels.size() != img.width * img.height)
        throw value_error(oar::detail::concat("resize_area: a ", img.width, "x", img.height, " picture with ",
                                              img.pixels.size(), " pixels"));
    if (width == 0 || height == 0)
        throw value_error(oar::detail::concat("resize_area: the output is ", width, "x", height));
    struct Tap {
        std::size_t src;
        double weight;
    };
    // Per output index, the source indices it covers and their weights (summing to 1).
    auto taps = [](std::size_t in, std::size_t out) {
        std::vector<std::vector<Tap>> t(out);
        const double scale = static_cast<double>(in) / static_cast<double>(out);
        for (std::size_t o = 0; o < out; ++o) {
            const double a = static_cast<double>(o) * scale, b = static_cast<double>(o + 1) * scale;
            const auto first = static_cast<std::size_t>(a);
            for (std::size_t s = first; s < in && static_cast<double>(s) < b; ++s) {
                const double cover = std::min(b, static_cast<double>(s + 1)) - std::max(a, static_cast<double>(s));
                if (cover > 0) t[o].push_back({s, cover / scale});
            }
        }
        return t;
    };
    const auto tx = taps(img.width, width), ty = taps(img.height, height);
    std::vector<double> rows(img.height * width);  // (height_in, width_out): horizontal pass
    for (std::size_t y = 0; y < img.height; ++y) {
        const std::uint8_t* src = img.pixels.data() + y * img.width;
        for (std::size_t x = 0; x < width; ++x) {
            double s = 0;
            for (const Tap& t : tx[x]) s += t.weight * src[t.src];
            rows[y * width + x] = s;
        }
    }
    std::vector<float> out(width * height);  // (height_out, width_out): vertical pass
    for (std::size_t y = 0; y < height; ++y)
        for (std::size_t x = 0; x < width; ++x) {
            double s = 0;
            for (const Tap& t : ty[y]) s += t.weight * rows[t.src * width + x];
            out[y * width + x] = static_cast<float>(s);
        }
    return out;
}

/// The mean of the outermost ring of a width x height picture (its background, for a picture of
/// one object on a plain ground).
inline double border_mean(std::span<const float> v, std::size_t width, std::size_t height) {
    if (width == 0 || height == 0 || v.size() != width * height)
        throw value_error(oar::detail::concat("border_mean: ", v.size(), " values for ", width, "x", height));
    double s = 0;
    std::size_t n = 0;
    for (std::size_t y = 0; y < height; ++y)
        for (std::size_t x = 0; x < width; ++x)
            if (y == 0 || x == 0 || y + 1 == height || x + 1 == width) {
                s += v[y * width + x];
                ++n;
            }
    return s / static_cast<double>(n);
}

}  // namespace oar::io
