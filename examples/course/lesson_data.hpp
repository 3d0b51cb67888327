// The course's data handling, shared by the lesson programs 1, 2 and 4: load_data's reading of
// mnist.json.gz into its three splits, the index list shuffled per epoch, and data_generator, the
// batches produced by a coroutine (co_yield where the course's Python has yield).
// Only the lesson programs include it (examples/course/README.md).
#pragma once

#include <algorithm>   // std::min
#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t, std::uint64_t
#include <filesystem>  // std::filesystem::is_directory
#include <numeric>     // std::iota
#include <string>      // std::string
#include <vector>      // std::vector

#include <oar/data/mnist_json.hpp>  // read_mnist_json, mnist_json_from_idx (simdjson: not in oar.hpp)
#include <oar/oar.hpp>              // Tensor, generator, load_mnist, shuffle_indices

namespace lesson {

/// The course's data file, or an MNIST IDX folder (data/mnist) as the same three splits: 50,000 /
/// 10,000 / 10,000 images of [1, 28, 28] values x / 127.5 - 1 (mnist_to_json writes that file from
/// such a folder; both give bitwise the same values). Everything is checked while reading: a bad
/// file is an oar::error naming the file, split, sample and byte offset.
inline oar::data::MnistJson load_splits(const std::string& path) {
    if (std::filesystem::is_directory(path)) return oar::data::mnist_json_from_idx(oar::data::load_mnist(path));
    return oar::data::read_mnist_json(path);
}

/// The first `n` samples of `ds` (all of them when n is 0 or larger than the set).
inline oar::data::InMemoryDataset first(const oar::data::InMemoryDataset& ds, std::size_t n) {
    if (n == 0 || n >= ds.size()) return ds;
    const std::size_t values = ds.dims().size();
    return {std::vector<float>(ds.images().begin(), ds.images().begin() + static_cast<std::ptrdiff_t>(n * values)),
            std::vector<std::int64_t>(ds.labels().begin(), ds.labels().begin() + static_cast<std::ptrdiff_t>(n)),
            ds.dims()};
}

/// index_list = [0, n), shuffled for `epoch` when `shuffle` (the course's random.shuffle in train
/// mode; seeded, so a run is repeatable).
inline std::vector<std::size_t> index_list(std::size_t n, bool shuffle, std::uint64_t epoch, std::uint64_t seed = 0) {
    std::vector<std::size_t> v(n);
    std::iota(v.begin(), v.end(), std::size_t{0});
    if (shuffle) oar::data::shuffle_indices(v, seed, epoch);
    return v;
}

/// One batch as the course's generator yields it: images [n, 1, 28, 28] and labels [n].
struct Batch {
    oar::Tensor images;
    std::vector<std::int64_t> labels;
};

/// The course's data_generator: the samples of `ds` in the order of `order`, in batches of
/// `batch_size`, the remainder (if any) last as a smaller batch. `ds` must outlive the loop; the
/// yielded batch is reused by the next step.
inline oar::generator<Batch> data_generator(const oar::data::InMemoryDataset& ds, std::vector<std::size_t> order,
                                            std::size_t batch_size) {
    const std::size_t values = ds.dims().size();
    Batch b;
    for (std::size_t begin = 0; begin < order.size(); begin += batch_size) {
        const std::size_t n = std::min(batch_size, order.size() - begin);
        b.images.resize(n, ds.dims());
        b.labels.resize(n);
        for (std::size_t k = 0; k < n; ++k)
            b.labels[k] = ds.load(order[begin + k], {b.images.data() + k * values, values});
        co_yield b;
    }
}

}  // namespace lesson
