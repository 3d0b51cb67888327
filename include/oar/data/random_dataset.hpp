// The course's RandomDataset (the paddle.io.Dataset example): N samples of uniform [0, 1) noise
// with a random label, each a pure function of (seed, index), so a training loop can be run and
// tested without any data on disk, with the same samples for every thread count and load order.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t, std::int64_t
#include <span>     // std::span

#include "../core/error.hpp"  // value_error, shape_error
#include "../core/rng.hpp"    // CounterRng
#include "../core/shape.hpp"  // Dims, make_dims, max_rank
#include "dataset.hpp"        // dataset_base, Dataset

namespace oar::data {

/// Random stream id of RandomDataset, beside core/rng.hpp's rng_stream ids (1-3 << 56) and
/// transforms.hpp's transform_stream (4 << 56): top 8 bits = 5, then bit 55 clear and the sample
/// index for images, bit 55 set for the labels.
inline constexpr std::uint64_t random_dataset_stream = rng_stream::random_dataset;

/// Sample i of RandomDataset{n, dims, classes, seed} is, with rng = CounterRng{seed}:
///   value k (row-major, k < dims.size()) = rng.uniform(random_dataset_stream + i, k)   in [0, 1)
///   label                                = rng.below(random_dataset_stream + 2^55, i, classes)
/// so the flat values do not depend on dims' shape, only on its element count. Paddle's example
/// draws np.random.random([784]) and np.random.randint(0, 9), whose labels never reach 9; here
/// labels cover [0, num_classes), [0, 9] by default.
class RandomDataset : public dataset_base<RandomDataset> {
public:
    /// shape_error for dims of rank outside 1..4 or with a zero dimension; value_error for
    /// num_classes == 0 or num_samples >= 2^55.
    explicit RandomDataset(std::size_t num_samples, Dims dims = make_dims(784), std::size_t num_classes = 10,
                           std::uint64_t seed = 0)
        : n_(num_samples), dims_(dims), classes_(num_classes), seed_(seed) {
        bool ok = dims.rank >= 1 && dims.rank <= max_rank;
        for (std::size_t i = 0; ok && i < dims.rank; ++i) ok = dims[i] > 0;
        if (!ok)
            throw shape_error(oar::detail::concat("RandomDataset: sample dims ", to_string(dims), " need rank 1..",
                                                  max_rank, " and positive dimensions"));
        if (num_classes == 0) throw value_error("RandomDataset: num_classes must be at least 1");
        if (num_samples >= label_bit)
            throw value_error(oar::detail::concat("RandomDataset: ", num_samples, " samples, at most 2^55 - 1"));
    }

    std::size_t size() const { return n_; }
    Dims dims() const { return dims_; }
    std::size_t num_classes() const { return classes_; }
    std::uint64_t seed() const { return seed_; }

    std::int64_t load(std::size_t i, std::span<float> out) const {
        check_load("RandomDataset", i, n_, out, dims_.size());
        const CounterRng rng{seed_};
        const std::uint64_t stream = random_dataset_stream + i;
        // rng.uniform(stream, k) is word k % 4 of bits(stream, k / 4): one Philox block per 4 values.
        for (std::size_t k = 0; k < out.size(); k += 4) {
            const auto b = rng.bits(stream, k / 4);
            for (std::size_t j = 0; j < 4 && k + j < out.size(); ++j)
                out[k + j] = static_cast<float>(b[j] >> 8) * (1.0f / 16777216.0f);
        }
        return static_cast<std::int64_t>(rng.below(random_dataset_stream + label_bit, i, classes_));
    }

private:
    static constexpr std::uint64_t label_bit = 1ull << 55;

    std::size_t n_;
    Dims dims_;
    std::size_t classes_;
    std::uint64_t seed_;
};

static_assert(Dataset<RandomDataset>);

}  // namespace oar::data
