// predict_digit (examples/predict_digit.cpp, the course's lesson 9) run for real: the first 20
// MNIST test digits rendered as PNG and JPEG pictures of other sizes, some as dark ink on light
// paper, some in colour, predicted with the weights of train_mnist's 5-epoch run
// (tests/examples/fixtures/mnist_cnn_5epochs.safetensors, made by scripts/make_digit_weights.sh):
// at least 19 of 20 right. A bad file among them is named and the others still predicted.
#include <doctest/doctest.h>

#if OAR_HAS_IMAGE

#include <cstdint>     // std::uint8_t
#include <filesystem>  // std::filesystem
#include <map>         // std::map: file -> label
#include <regex>       // std::regex: the result lines
#include <sstream>     // std::istringstream
#include <string>      // std::string
#include <vector>      // std::vector

#include <oar/data/idx.hpp>    // read_idx_pair: the MNIST test digits
#include <oar/data/mnist.hpp>  // find_idx_file

#include "support/files.hpp"     // write_raw
#include "support/pictures.hpp"  // encode_png, encode_jpeg, upscale_bilinear
#include "support/process.hpp"   // run_command
#include "support/skip.hpp"      // skip: no MNIST
#include "support/temp_dir.hpp"  // TempDir

namespace {

namespace fs = std::filesystem;

const std::string weights = std::string(OAR_SOURCE_DIR) + "/tests/examples/fixtures/mnist_cnn_5epochs.safetensors";

oar_test::Run run_predict(const std::string& args) {
    const std::string cmd = std::string(PREDICT_DIGIT) + " " + args + " 2>&1";
    const oar_test::Run r = oar_test::run_command(cmd);
    MESSAGE("$ ", cmd, "\n", r.output, "(exit status ", r.status, ")");
    return r;
}

/// Digit `v` (28x28, light on dark) rendered w x h: dark ink on light paper when `inverted`, in
/// colour (a tinted ground and ink) when `colour`; returns the samples and the channel count.
std::pair<std::vector<std::uint8_t>, int> render(const std::uint8_t* v, std::size_t w, std::size_t h, bool inverted,
                                                 bool colour) {
    const std::vector<std::uint8_t> big = oar_test::upscale_bilinear(v, 28, 28, w, h);
    if (!colour) {
        std::vector<std::uint8_t> g = big;
        if (inverted)
            for (auto& p : g) p = static_cast<std::uint8_t>(255 - p);
        return {g, 1};
    }
    // Ground and ink colours, mixed by the digit's intensity.
    const double ground[3] = {inverted ? 245.0 : 20.0, inverted ? 240.0 : 25.0, inverted ? 225.0 : 60.0};
    const double ink[3] = {inverted ? 30.0 : 250.0, inverted ? 40.0 : 235.0, inverted ? 110.0 : 140.0};
    std::vector<std::uint8_t> rgb(w * h * 3);
    for (std::size_t i = 0; i < w * h; ++i) {
        const double t = big[i] / 255.0;
        for (int c = 0; c < 3; ++c)
            rgb[3 * i + static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(ground[c] + t * (ink[c] - ground[c]) + 0.5);
    }
    return {rgb, 3};
}

}  // namespace

TEST_CASE("predict_digit is right on at least 19 of 20 MNIST test digits rendered as PNG and JPEG pictures") {
    const std::string mnist = std::string(OAR_SOURCE_DIR) + "/data/mnist";
    if (!oar::data::is_mnist_dir(mnist)) {
        oar_test::skip("no MNIST in " + mnist + " (scripts/setup.sh copies it): the test digits are rendered from it");
        return;
    }
    const oar::data::LabeledImages test = oar::data::read_idx_pair(oar::data::find_idx_file(mnist, "t10k-images-idx3-ubyte"),
                                                                   oar::data::find_idx_file(mnist, "t10k-labels-idx1-ubyte"));
    oar_test::TempDir dir;
    const std::size_t sizes[10][2] = {{56, 56}, {84, 84}, {100, 100}, {37, 37}, {140, 140},
                                      {45, 45}, {64, 64}, {33, 33}, {200, 200}, {60, 52}};
    std::map<std::string, std::int64_t> label_of;
    std::string files;
    for (std::size_t i = 0; i < 20; ++i) {
        const auto [w, h] = std::pair{sizes[i % 10][0], sizes[i % 10][1]};
        const bool inverted = i % 2 == 1, colour = i % 4 >= 2, jpeg = i % 3 == 2;
        const auto [px, channels] = render(test.pixels.data() + i * 784, w, h, inverted, colour);
        fs::path path = dir.path / ("digit_" + std::to_string(i));
        path += jpeg ? ".jpg" : ".png";
        oar_test::write_raw(path, jpeg ? oar_test::encode_jpeg(px, w, h, channels, 90) : oar_test::encode_png(px, w, h, channels));
        label_of[path.string()] = test.labels[i];
        files += ' ';
        files += path.string();
    }
    // A truncated picture among them: named, and the others still predicted.
    const fs::path cut = dir.path / "cut.png";
    {
        const std::vector<std::uint8_t> png = oar_test::encode_png(std::vector<std::uint8_t>(50 * 50, 9), 50, 50, 1);
        oar_test::write_raw(cut, std::vector<std::uint8_t>(png.begin(), png.begin() + static_cast<long>(png.size() / 2)));
    }
    const oar_test::Run r = run_predict("--weights " + weights + files + " " + cut.string());
    CHECK(r.status == 1);
    CHECK(r.output.find("predict_digit: oar: " + cut.string() + ": corrupt or truncated PNG") != std::string::npos);

    const std::regex line(R"(^result: file=(\S+) predicted=(\d) probability=(0\.\d{4}|1\.0000)$)");
    std::istringstream in(r.output);
    std::size_t lines = 0, right = 0;
    for (std::string s; std::getline(in, s);) {
        std::smatch m;
        if (!std::regex_match(s, m, line)) continue;
        ++lines;
        REQUIRE(label_of.count(m[1]) == 1);
        const bool ok = std::stoll(m[2]) == label_of[m[1]];
        if (!ok) MESSAGE("wrong: ", s, " (label ", label_of[m[1]], ")");
        right += ok;
    }
    CHECK(lines == 20);
    CHECK(right >= 19);
}

TEST_CASE("predict_digit refuses bad flags and weights with status 2, naming them") {
    CHECK(run_predict("--help").status == 0);
    const oar_test::Run none = run_predict("picture.png");
    CHECK(none.status == 2);
    CHECK(none.output.find("--weights FILE is required") != std::string::npos);
    const oar_test::Run bad_invert = run_predict("--weights " + weights + " --invert maybe picture.png");
    CHECK(bad_invert.status == 2);
    CHECK(bad_invert.output.find("--invert must be auto, yes or no, got 'maybe'") != std::string::npos);
    oar_test::TempDir dir;
    const fs::path not_weights = dir.path / "w.safetensors";
    oar_test::write_raw(not_weights, {1, 2, 3});
    const oar_test::Run bad_weights = run_predict("--weights " + not_weights.string() + " picture.png");
    CHECK(bad_weights.status == 2);
    CHECK(bad_weights.output.find(not_weights.string()) != std::string::npos);
}

#else

#include "support/skip.hpp"  // skip

TEST_CASE("predict_digit needs libpng and libjpeg") {
    oar_test::skip("this build has no oar::image (libpng and libjpeg were not found), so predict_digit is not built");
}

#endif
