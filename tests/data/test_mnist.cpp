// The course's split of an MNIST-layout folder (50k / 10k / 10k), file lookup (.gz or raw), and
// batches scaled to [-1, 1].
#include <oar/data/mnist.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "support/files.hpp"      // oar_test::write_raw: the IDX files
#include "support/idx_files.hpp"  // oar_test::idx_bytes: their contents
#include "support/temp_dir.hpp"   // oar_test::TempDir: the MNIST-layout folder

namespace fs = std::filesystem;
using namespace oar;
using oar_test::TempDir;

namespace {
/// Sample i has every pixel equal to i % 256 and label i % 10 (so slices are recognisable).
void write_pair(const fs::path& dir, const std::string& prefix, std::uint32_t n, std::uint32_t rows = 4,
                std::uint32_t cols = 3) {
    oar_test::bytes pixels, labels;
    for (std::uint32_t i = 0; i < n; ++i) {
        pixels.insert(pixels.end(), rows * cols, static_cast<std::uint8_t>(i % 256));
        labels.push_back(static_cast<std::uint8_t>(i % 10));
    }
    oar_test::write_raw(dir / (prefix + "-images-idx3-ubyte"), oar_test::idx_bytes({n, rows, cols}, pixels));
    oar_test::write_raw(dir / (prefix + "-labels-idx1-ubyte"), oar_test::idx_bytes({n}, labels));
}
}  // namespace

TEST_CASE("load_mnist keeps the last valid_count training samples for validation") {
    TempDir t;
    write_pair(t.path, "train", 60);
    write_pair(t.path, "t10k", 10);
    CHECK(data::is_mnist_dir(t.path.string()));
    const auto s = data::load_mnist(t.path.string(), 12);
    CHECK(s.train.count == 48);
    CHECK(s.valid.count == 12);
    CHECK(s.test.count == 10);
    CHECK(s.train.labels[47] == 47 % 10);
    CHECK(s.valid.labels[0] == 48 % 10);
    CHECK(s.valid.pixels[0] == 48);  // the first validation image is training image 48
    CHECK(s.valid.pixels.size() == 12 * 4 * 3);
    CHECK(s.test.rows == 4);
    CHECK(s.test.cols == 3);
}

TEST_CASE("a training file no larger than the validation split trains on all of it and validates on test") {
    TempDir t;
    write_pair(t.path, "train", 8);
    write_pair(t.path, "t10k", 5);
    const auto s = data::load_mnist(t.path.string(), 10);
    CHECK(s.train.count == 8);
    CHECK(s.valid.count == 5);
    CHECK(s.test.count == 5);
}

TEST_CASE("missing files and mismatched image sizes are named errors") {
    TempDir t;
    CHECK_FALSE(data::is_mnist_dir(t.path.string()));
    CHECK_THROWS_WITH_AS(data::load_mnist(t.path.string()),
                         doctest::Contains("neither train-images-idx3-ubyte.gz nor train-images-idx3-ubyte exists"),
                         io_error);
    write_pair(t.path, "train", 20, 4, 3);
    write_pair(t.path, "t10k", 5, 3, 4);
    CHECK_THROWS_WITH_AS(data::load_mnist(t.path.string()),
                         doctest::Contains("training images are 4x3 but test images are 3x4"), format_error);
}

TEST_CASE("fill_batch scales pixels to [-1, 1] and gathers the chosen samples") {
    TempDir t;
    write_pair(t.path, "train", 300);
    write_pair(t.path, "t10k", 5);
    const auto s = data::load_mnist(t.path.string(), 10);
    Tensor x;
    std::vector<std::int64_t> y;
    const std::vector<std::size_t> idx{0, 255, 17};
    data::fill_batch(s.train, idx, x, y);
    CHECK(x.batch() == 3);
    CHECK(x.dims() == make_dims(1, 4, 3));
    CHECK(x[0] == -1.0f);                                        // pixel 0
    CHECK(x[12] == doctest::Approx(1.0f));                       // pixel 255
    CHECK(x[24] == doctest::Approx(17.0 / 127.5 - 1.0));         // pixel 17
    CHECK(y == std::vector<std::int64_t>{0, 5, 7});
    const std::vector<std::size_t> out_of_range{290};
    CHECK_THROWS_WITH_AS(data::fill_batch(s.train, out_of_range, x, y),
                         doctest::Contains("sample index 290 in a set of 290"), value_error);
}

TEST_CASE("slice refuses ranges past the end") {
    data::LabeledImages s;
    s.count = 3;
    s.rows = s.cols = 1;
    s.pixels = {1, 2, 3};
    s.labels = {1, 2, 3};
    CHECK(data::slice(s, 1, 2).pixels == std::vector<std::uint8_t>{2, 3});
    CHECK_THROWS_WITH_AS(data::slice(s, 2, 2), doctest::Contains("slice [2, 4) of a set of 3 samples"), value_error);
}

TEST_CASE("load_mnist_datasets gives the course's split as datasets scaled to [-1, 1], as train_mnist feeds them") {
    TempDir dir;
    write_pair(dir.path, "train", 12);
    write_pair(dir.path, "t10k", 5);
    const auto [train, valid, test] = data::load_mnist_datasets(dir.path.string(), 4);
    CHECK(train.size() == 8);
    CHECK(valid.size() == 4);
    CHECK(test.size() == 5);
    CHECK(train.dims() == make_dims(1, 4, 3));
    const data::Sample v0 = valid.get(0);  // training sample 8: pixels 8, label 8
    CHECK(v0.label == 8);
    CHECK(v0.image[0] == doctest::Approx(8.0 / 127.5 - 1.0));
    const data::Sample t4 = test.get(4);
    CHECK(t4.label == 4);
    CHECK(t4.image.back() == doctest::Approx(4.0 / 127.5 - 1.0));
}
