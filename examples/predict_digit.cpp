// predict_digit: the course's lesson 9, predicting the digit in one's own picture. Loads the
// course's CNN from a weights file (train_mnist --checkpoint-dir DIR writes DIR/latest.safetensors,
// or save_weights), then for each PNG or JPEG picture: grey, shrunk to 28x28 by area averaging,
// inverted when its background is light (MNIST digits are light on dark), scaled as train_mnist
// trains (x / 127.5 - 1), and classified. One line per picture:
//   result: file=PATH predicted=D probability=P
// A picture that cannot be read is named on stderr and the others are still predicted; the exit
// status is then 1. Bad flags or weights: status 2.
#include <cstdio>     // std::printf, std::fprintf
#include <exception>  // std::exception
#include <string>     // std::string
#include <vector>     // std::vector

#include <oar/io/image.hpp>          // read_image, resize_area, border_mean (oar::image: libpng, libjpeg)
#include <oar/models/course.hpp>     // oar::course::CNN, Image
#include <oar/nn/network.hpp>        // Network
#include <oar/train/checkpoint.hpp>  // load_weights
#include <oar/train/model.hpp>       // Model::predict: classes and softmax probabilities

#include "app/train_options.hpp"  // unknown_flag: the messages of train_mnist's flags

namespace {

constexpr const char* usage = R"(usage: predict_digit --weights W.safetensors [--invert auto|yes|no] IMAGE...
Predicts the digit in each picture (PNG or JPEG, any size, grey or colour) with the course's CNN.

  --weights FILE   the CNN's weights (safetensors): train_mnist --checkpoint-dir DIR writes
                   DIR/latest.safetensors (and DIR/best.safetensors)
  --invert WHEN    auto: invert a picture whose border is light, so the digit is light on dark
                   as in MNIST (default); yes: always; no: never
  --help           this text

Each picture is converted to grey, shrunk to 28x28 by area averaging and scaled as in training
(x / 127.5 - 1). One line per picture: result: file=PATH predicted=D probability=P
)";

using Net = oar::Network<oar::course::CNN, oar::course::Image>;
constexpr std::size_t side = 28;

/// The picture as the network's input: 28x28, light digit on dark, x / 127.5 - 1.
std::vector<float> to_input(const oar::io::GreyImage& picture, const std::string& invert) {
    std::vector<float> v = oar::io::resize_area(picture, side, side);
    const bool light = oar::io::border_mean(v, side, side) > 127.5;
    if (invert == "yes" || (invert == "auto" && light))
        for (float& x : v) x = 255.0f - x;
    for (float& x : v) x = x / 127.5f - 1.0f;
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    std::string weights, invert = "auto";
    std::vector<std::string> pictures;
    try {
        // `--flag value` or `--flag=value` anywhere; every other argument is a picture.
        for (int i = 1; i < argc; ++i) {
            std::string flag = argv[i], value;
            if (flag == "--help" || flag == "-h") {
                std::printf("%s", usage);
                return 0;
            }
            if (flag.rfind("--", 0) != 0) {
                pictures.push_back(flag);
                continue;
            }
            if (const auto eq = flag.find('='); eq != std::string::npos) {
                value = flag.substr(eq + 1);
                flag = flag.substr(0, eq);
            } else {
                if (i + 1 >= argc) throw oar::usage_error(flag + " needs a value (see --help)");
                value = argv[++i];
            }
            if (flag == "--weights") weights = value;
            else if (flag == "--invert") invert = value;
            else throw oar::unknown_flag(flag);
        }
        if (weights.empty()) throw oar::usage_error("--weights FILE is required (see --help)");
        if (invert != "auto" && invert != "yes" && invert != "no")
            throw oar::usage_error("--invert must be auto, yes or no, got '" + invert + "'");
        if (pictures.empty()) throw oar::usage_error("no pictures given (see --help)");
    } catch (const oar::error& e) {
        std::fprintf(stderr, "predict_digit: %s\n", e.what());
        return 2;
    }

    Net net;
    try {
        oar::load_weights(weights, net);
    } catch (const oar::error& e) {
        std::fprintf(stderr, "predict_digit: %s\n", e.what());
        return 2;
    }
    oar::Model model(net);
    int status = 0;
    for (const std::string& path : pictures) {
        try {
            const std::vector<float> x = to_input(oar::io::read_image(path), invert);
            const oar::Prediction p = model.predict(oar::TensorView(x.data(), 1, Net::input_shape::dims));
            std::printf("result: file=%s predicted=%lld probability=%.4f\n", path.c_str(),
                        static_cast<long long>(p.classes[0]),
                        static_cast<double>(p.probabilities.data()[p.classes[0]]));
        } catch (const oar::error& e) {
            std::fprintf(stderr, "predict_digit: %s\n", e.what());
            status = 1;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "predict_digit: %s: unexpected failure: %s\n", path.c_str(), e.what());
            status = 1;
        }
        std::fflush(stdout);
    }
    return status;
}
