// Writing test pictures: PNG through libpng's simplified API and JPEG through libjpeg's
// compressor (the encoders, independent of oar's reader in oar/io/image.hpp), and a bilinear
// upscale for rendering a 28x28 digit at other sizes. Needs oar::image (libpng, libjpeg).
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t
#include <cstdio>   // std::FILE: jpeglib.h needs it declared
#include <cstdlib>  // std::free: jpeg_mem_dest's buffer
#include <cstring>  // std::memset
#include <stdexcept>  // std::runtime_error: an encoder failure is a broken test
#include <vector>   // std::vector

#include <jpeglib.h>  // jpeg_compress_struct, jpeg_mem_dest
#include <png.h>      // png_image_write_to_memory

namespace oar_test {

/// A PNG of w x h pixels with `channels` 1 (grey), 2 (grey + alpha), 3 (RGB) or 4 (RGBA).
inline std::vector<std::uint8_t> encode_png(const std::vector<std::uint8_t>& px, std::size_t w, std::size_t h,
                                            int channels) {
    png_image img;
    std::memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = static_cast<png_uint_32>(w);
    img.height = static_cast<png_uint_32>(h);
    img.format = channels == 1   ? PNG_FORMAT_GRAY
                 : channels == 2 ? PNG_FORMAT_GA
                 : channels == 3 ? PNG_FORMAT_RGB
                                 : PNG_FORMAT_RGBA;
    png_alloc_size_t size = 0;
    if (!png_image_write_to_memory(&img, nullptr, &size, 0, px.data(), 0, nullptr))
        throw std::runtime_error(std::string("encode_png: ") + img.message);
    std::vector<std::uint8_t> out(size);
    if (!png_image_write_to_memory(&img, out.data(), &size, 0, px.data(), 0, nullptr))
        throw std::runtime_error(std::string("encode_png: ") + img.message);
    out.resize(size);
    return out;
}

/// A baseline (or progressive) JPEG of w x h pixels, `channels` 1 (grey) or 3 (RGB).
inline std::vector<std::uint8_t> encode_jpeg(const std::vector<std::uint8_t>& px, std::size_t w, std::size_t h,
                                             int channels, int quality = 90, bool progressive = false) {
    jpeg_compress_struct c;
    jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char* buf = nullptr;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &buf, &size);
    c.image_width = static_cast<JDIMENSION>(w);
    c.image_height = static_cast<JDIMENSION>(h);
    c.input_components = channels;
    c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = const_cast<std::uint8_t*>(px.data()) + c.next_scanline * w * static_cast<std::size_t>(channels);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    std::vector<std::uint8_t> out(buf, buf + size);
    jpeg_destroy_compress(&c);
    std::free(buf);
    return out;
}

/// A grey w x h picture scaled to W x H bilinearly (pixel centres aligned), rounded to 8 bits.
inline std::vector<std::uint8_t> upscale_bilinear(const std::uint8_t* px, std::size_t w, std::size_t h,
                                                  std::size_t W, std::size_t H) {
    std::vector<std::uint8_t> out(W * H);
    auto at = [&](long x, long y) {
        x = x < 0 ? 0 : (x >= static_cast<long>(w) ? static_cast<long>(w) - 1 : x);
        y = y < 0 ? 0 : (y >= static_cast<long>(h) ? static_cast<long>(h) - 1 : y);
        return static_cast<double>(px[static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x)]);
    };
    for (std::size_t Y = 0; Y < H; ++Y)
        for (std::size_t X = 0; X < W; ++X) {
            const double sx = (static_cast<double>(X) + 0.5) * static_cast<double>(w) / static_cast<double>(W) - 0.5;
            const double sy = (static_cast<double>(Y) + 0.5) * static_cast<double>(h) / static_cast<double>(H) - 0.5;
            const long x0 = static_cast<long>(sx < 0 ? -1 : sx), y0 = static_cast<long>(sy < 0 ? -1 : sy);
            const double fx = sx - static_cast<double>(x0), fy = sy - static_cast<double>(y0);
            const double v = (1 - fy) * ((1 - fx) * at(x0, y0) + fx * at(x0 + 1, y0)) +
                             fy * ((1 - fx) * at(x0, y0 + 1) + fx * at(x0 + 1, y0 + 1));
            out[Y * W + X] = static_cast<std::uint8_t>(v + 0.5);
        }
    return out;
}

}  // namespace oar_test
