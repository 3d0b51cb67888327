// MNIST-style IDX folders (MNIST, Fashion-MNIST): find the four files (.gz or raw), load them and
// split like PaddlePaddle's course: train = the first 50,000 training images, valid = the last
// 10,000, test = the 10,000 t10k images. load_mnist keeps the pixels uint8 (batches are made by the
// caller); load_mnist_datasets gives the same split as ready datasets for DataLoader and Model::fit.
#pragma once

#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint8_t, std::int64_t
#include <filesystem>  // std::filesystem::exists
#include <span>        // std::span
#include <string>      // std::string
#include <vector>      // std::vector

#include "../core/error.hpp"   // io_error, value_error
#include "../core/tensor.hpp"  // Tensor
#include "dataset.hpp"         // ByteImageDataset: load_mnist_datasets
#include "idx.hpp"            // read_idx_pair, LabeledImages

namespace oar::data {

/// `dir/stem.gz` or `dir/stem`, whichever exists; io_error naming both when neither does.
inline std::string find_idx_file(const std::string& dir, const std::string& stem) {
    for (const std::string& candidate : {dir + "/" + stem + ".gz", dir + "/" + stem})
        if (std::filesystem::exists(candidate)) return candidate;
    throw io_error(detail::concat(dir, ": neither ", stem, ".gz nor ", stem, " exists"));
}

/// True when `dir` holds the four MNIST IDX files (compressed or not).
inline bool is_mnist_dir(const std::string& dir) {
    for (const char* stem : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                             "t10k-labels-idx1-ubyte"})
        if (!std::filesystem::exists(dir + "/" + stem + ".gz") && !std::filesystem::exists(dir + "/" + stem))
            return false;
    return true;
}

/// The first `n` samples (or the samples from `first` on) of a set.
inline LabeledImages slice(const LabeledImages& s, std::size_t first, std::size_t count) {
    if (first + count > s.count)
        throw value_error(detail::concat("slice [", first, ", ", first + count, ") of a set of ", s.count, " samples"));
    LabeledImages out;
    out.count = count;
    out.rows = s.rows;
    out.cols = s.cols;
    const std::size_t px = s.rows * s.cols;
    out.pixels.assign(s.pixels.begin() + static_cast<std::ptrdiff_t>(first * px),
                      s.pixels.begin() + static_cast<std::ptrdiff_t>((first + count) * px));
    out.labels.assign(s.labels.begin() + static_cast<std::ptrdiff_t>(first),
                      s.labels.begin() + static_cast<std::ptrdiff_t>(first + count));
    return out;
}

/// Copies samples `indices` of `set` into a batch: images (n, 1, rows, cols) scaled to [-1, 1]
/// (x / 127.5 - 1, the course's normalisation) and their labels. Reuses the buffers' capacity.
inline void fill_batch(const LabeledImages& set, std::span<const std::size_t> indices, Tensor& images,
                       std::vector<std::int64_t>& labels) {
    const std::size_t px = set.rows * set.cols;
    images.resize(indices.size(), make_dims(1, set.rows, set.cols));
    labels.resize(indices.size());
    for (std::size_t b = 0; b < indices.size(); ++b) {
        const std::size_t i = indices[b];
        if (i >= set.count)
            throw value_error(detail::concat("fill_batch: sample index ", i, " in a set of ", set.count));
        const std::uint8_t* src = set.pixels.data() + i * px;
        float* dst = images.data() + b * px;
        for (std::size_t p = 0; p < px; ++p) dst[p] = static_cast<float>(src[p]) * (1.0f / 127.5f) - 1.0f;
        labels[b] = set.labels[i];
    }
}

struct MnistSplits {
    LabeledImages train, valid, test;
};

/// Loads an MNIST-layout folder and splits it as the course does. `valid_count` samples are taken
/// from the end of the training file (10,000 of 60,000 gives the course's 50k / 10k / 10k); a
/// training file with no more than `valid_count` samples keeps them all for training and
/// validates on the test set, so tiny folders still train.
inline MnistSplits load_mnist(const std::string& dir, std::size_t valid_count = 10000) {
    // One statement per file, so the first missing file named is always the same one.
    const std::string train_images = find_idx_file(dir, "train-images-idx3-ubyte");
    const std::string train_labels = find_idx_file(dir, "train-labels-idx1-ubyte");
    const std::string test_images = find_idx_file(dir, "t10k-images-idx3-ubyte");
    const std::string test_labels = find_idx_file(dir, "t10k-labels-idx1-ubyte");
    LabeledImages train = read_idx_pair(train_images, train_labels);
    LabeledImages test = read_idx_pair(test_images, test_labels);
    if (train.rows != test.rows || train.cols != test.cols)
        throw format_error(detail::concat(dir, ": training images are ", train.rows, "x", train.cols,
                                          " but test images are ", test.rows, "x", test.cols));
    MnistSplits s;
    if (train.count > valid_count) {
        s.valid = slice(train, train.count - valid_count, valid_count);
        s.train = slice(train, 0, train.count - valid_count);
    } else {
        s.train = std::move(train);
        s.valid = test;
    }
    s.test = std::move(test);
    return s;
}

/// The course's split as ready datasets: (1, rows, cols) images scaled to [-1, 1] (x / 127.5 - 1,
/// the course's normalisation, as train_mnist feeds them) and their labels.
struct MnistDatasets {
    ByteImageDataset train, valid, test;
};

/// load_mnist(dir, valid_count) as datasets: `auto [train, valid, test] = load_mnist_datasets(dir);`
/// then `model.fit(train, &valid, ...)`, `model.evaluate(test)`.
inline MnistDatasets load_mnist_datasets(const std::string& dir, std::size_t valid_count = 10000) {
    MnistSplits s = load_mnist(dir, valid_count);
    auto as_dataset = [](LabeledImages& set) {
        const Dims dims = make_dims(1, set.rows, set.cols);
        return ByteImageDataset(std::move(set.pixels), std::move(set.labels), dims);
    };
    return {as_dataset(s.train), as_dataset(s.valid), as_dataset(s.test)};
}

}  // namespace oar::data
