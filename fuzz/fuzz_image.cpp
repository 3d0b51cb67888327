// libFuzzer target for include/oar/io/image.hpp: the input is a picture file's bytes, decoded as
// PNG or JPEG (by its signature) through decode_image, then shrunk to 28x28 by resize_area.
// oar::error is the expected rejection; any other exception, a crash, a leak, a sanitizer report
// or an allocation over libFuzzer's -malloc_limit_mb is a finding. The limits are ImageLimits'
// defaults but for max_pixels (4 Mi instead of 64 Mi), so that large legitimate decodes do not
// slow the search; the checks that enforce them are the same code.
#include <cmath>    // std::isfinite
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t
#include <span>     // std::span
#include <vector>   // std::vector

#include <oar/core/error.hpp>  // oar::error: the expected rejection
#include <oar/io/image.hpp>    // under test

#include "fuzz_common.hpp"  // oar_fuzz::rejected, require

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const oar::io::ImageLimits lim{.max_pixels = std::size_t(1) << 22};
    try {
        const oar::io::GreyImage img = oar::io::decode_image(std::span<const std::uint8_t>(data, size), "input", lim);
        // A decoded picture is whole and within the limits, and no file holds more pixels than
        // its size allows.
        oar_fuzz::require(img.width > 0 && img.height > 0);
        oar_fuzz::require(img.width <= lim.max_side && img.height <= lim.max_side);
        oar_fuzz::require(img.width * img.height <= lim.max_pixels);
        oar_fuzz::require(img.pixels.size() == img.width * img.height);
        oar_fuzz::require(img.width * img.height / oar::detail::max_pixels_per_file_byte <= size);
        const std::vector<float> v = oar::io::resize_area(img, 28, 28);
        for (const float x : v) oar_fuzz::require(std::isfinite(x) && x >= -1e-3f && x <= 255.001f);
    } catch (const oar::error& e) {
        oar_fuzz::rejected(e);  // the expected outcome for malformed input
    }
    return 0;
}
