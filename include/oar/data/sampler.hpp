// Index samplers, as paddle.io's: which samples an epoch visits, in what order, in which batches,
// and which share of them a rank of a data-parallel job takes. Every order is a pure function of
// (seed, epoch) through CounterRng, so all ranks and any number of loader workers agree on it.
#pragma once

#include <algorithm>  // std::min
#include <concepts>   // std::convertible_to, std::copy_constructible, std::same_as
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t
#include <numeric>    // std::iota
#include <span>       // std::span
#include <utility>    // std::move, std::swap
#include <vector>     // std::vector

#include "../core/error.hpp"  // value_error
#include "../core/rng.hpp"    // CounterRng, rng_stream::shuffle

namespace oar::data {

/// The batches of one epoch: each a list of sample indices.
using BatchList = std::vector<std::vector<std::size_t>>;

/// Sampler: the sample order of an epoch.
///   std::size_t size() const;                       // how many indices an epoch yields
///   void set_epoch(std::uint64_t e);                // selects epoch e's order (no-op if unshuffled)
///   std::vector<std::size_t> indices() const;       // the order; a pure function of (seed, epoch)
template <class S>
concept Sampler = std::copy_constructible<S> && requires(S& s, const S& cs, std::uint64_t e) {
    { cs.size() } -> std::convertible_to<std::size_t>;
    s.set_epoch(e);
    { cs.indices() } -> std::same_as<std::vector<std::size_t>>;
};

/// BatchSampler: the batches of an epoch (what a DataLoader iterates).
///   void set_epoch(std::uint64_t e);                // selects epoch e's batches
///   BatchList batches() const;                      // a pure function of (seed, epoch); non-empty batches
///   std::size_t num_batches() const;                // batches().size(), the same for every epoch
template <class S>
concept BatchSampler = std::copy_constructible<S> && requires(S& s, const S& cs, std::uint64_t e) {
    s.set_epoch(e);
    { cs.batches() } -> std::same_as<BatchList>;
    { cs.num_batches() } -> std::convertible_to<std::size_t>;
};

/// Shuffles v in place (Fisher-Yates): for i = n-1 down to 1, swap v[i] with v[j], j uniform in
/// [0, i] drawn as rng.below(rng_stream::shuffle + epoch, i, i + 1). Same (seed, epoch), same order
/// (epoch < 2^56, so that it stays inside the shuffle streams).
inline void shuffle_indices(std::span<std::size_t> v, std::uint64_t seed, std::uint64_t epoch) {
    const CounterRng rng{seed};
    const std::uint64_t stream = rng_stream::shuffle + epoch;
    for (std::size_t i = v.size(); i-- > 1;) std::swap(v[i], v[rng.below(stream, i, i + 1)]);
}

/// Splits `indices` into consecutive batches of `batch_size`; the last, shorter one is kept unless
/// drop_last (as Paddle's BatchSampler).
inline BatchList make_batches(std::span<const std::size_t> indices, std::size_t batch_size, bool drop_last) {
    if (batch_size == 0) throw value_error("make_batches: batch_size must be positive, got 0");
    BatchList out;
    out.reserve(indices.size() / batch_size + 1);
    for (std::size_t first = 0; first < indices.size(); first += batch_size) {
        const std::size_t n = std::min(batch_size, indices.size() - first);
        if (n < batch_size && drop_last) break;
        out.emplace_back(indices.begin() + static_cast<std::ptrdiff_t>(first),
                         indices.begin() + static_cast<std::ptrdiff_t>(first + n));
    }
    return out;
}

/// 0, 1, ..., n-1 every epoch (paddle.io.SequenceSampler).
class SequentialSampler {
public:
    explicit SequentialSampler(std::size_t n) : n_(n) {}

    std::size_t size() const { return n_; }
    void set_epoch(std::uint64_t) {}
    std::vector<std::size_t> indices() const {
        std::vector<std::size_t> v(n_);
        std::iota(v.begin(), v.end(), std::size_t{0});
        return v;
    }

private:
    std::size_t n_;
};

/// A permutation of 0..n-1 drawn from (seed, epoch) (paddle.io.RandomSampler without replacement).
class RandomSampler {
public:
    explicit RandomSampler(std::size_t n, std::uint64_t seed = 0) : n_(n), seed_(seed) {}

    std::size_t size() const { return n_; }
    std::uint64_t seed() const { return seed_; }
    std::uint64_t epoch() const { return epoch_; }
    void set_epoch(std::uint64_t e) { epoch_ = e; }
    std::vector<std::size_t> indices() const {
        std::vector<std::size_t> v = SequentialSampler(n_).indices();
        shuffle_indices(v, seed_, epoch_);
        return v;
    }

private:
    std::size_t n_;
    std::uint64_t seed_;
    std::uint64_t epoch_ = 0;
};

/// Groups a Sampler's indices into batches (paddle.io.BatchSampler).
template <Sampler S>
class BatchedSampler {
public:
    BatchedSampler(S sampler, std::size_t batch_size, bool drop_last = false)
        : sampler_(std::move(sampler)), batch_size_(batch_size), drop_last_(drop_last) {
        if (batch_size_ == 0) throw value_error("BatchedSampler: batch_size must be positive, got 0");
    }

    void set_epoch(std::uint64_t e) { sampler_.set_epoch(e); }
    BatchList batches() const { return make_batches(sampler_.indices(), batch_size_, drop_last_); }
    std::size_t num_batches() const {
        const std::size_t n = sampler_.size();
        return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
    }
    std::size_t batch_size() const { return batch_size_; }
    bool drop_last() const { return drop_last_; }
    const S& sampler() const { return sampler_; }

private:
    S sampler_;
    std::size_t batch_size_;
    bool drop_last_;
};

/// One rank's batches in data-parallel training, with paddle.io.DistributedBatchSampler's
/// semantics (python/paddle/io/dataloader/batch_sampler.py):
///   num_samples = ceil(n / num_replicas), total_size = num_samples * num_replicas;
///   indices = 0..n-1 padded cyclically to total_size (index i is i % n), then — if shuffle —
///   the padded list is shuffled by (seed, epoch) (Paddle pads first, then shuffles);
///   rank r takes indices[i : i + batch_size] for i = r * batch_size, stepping by
///   batch_size * num_replicas, up to total_size - last, where last = total_size % (batch_size *
///   num_replicas); then its share [r * last / R, (r + 1) * last / R) of the last `last` indices;
///   its num_samples indices are cut into batches (the last partial one dropped if drop_last).
/// Every rank gets num_batches() batches; the ranks' shards are disjoint apart from the padding
/// repeats and together cover 0..n-1. Unlike Paddle, iterating does not advance the epoch:
/// call set_epoch(e) each epoch (the DataLoader does), and give every rank the same seed.
class DistributedBatchSampler {
public:
    DistributedBatchSampler(std::size_t dataset_size, std::size_t batch_size, std::size_t num_replicas,
                            std::size_t rank, bool shuffle = false, bool drop_last = false, std::uint64_t seed = 0)
        : n_(dataset_size), batch_size_(batch_size), replicas_(num_replicas), rank_(rank), shuffle_(shuffle),
          drop_last_(drop_last), seed_(seed) {
        if (batch_size_ == 0) throw value_error("DistributedBatchSampler: batch_size must be positive, got 0");
        if (replicas_ == 0) throw value_error("DistributedBatchSampler: num_replicas must be positive, got 0");
        if (rank_ >= replicas_)
            throw value_error(detail::concat("DistributedBatchSampler: rank ", rank_, " is out of range (num_replicas ",
                                             replicas_, ")"));
        num_samples_ = (n_ + replicas_ - 1) / replicas_;
    }

    void set_epoch(std::uint64_t e) { epoch_ = e; }
    std::uint64_t epoch() const { return epoch_; }

    /// This rank's sample indices for the current epoch, in batch order (num_samples() of them).
    std::vector<std::size_t> indices() const {
        const std::size_t total = num_samples_ * replicas_;
        std::vector<std::size_t> all(total);
        for (std::size_t i = 0; i < total; ++i) all[i] = i % n_;  // n_ > 0 whenever total > 0
        if (shuffle_) shuffle_indices(all, seed_, epoch_);

        const std::size_t stride = batch_size_ * replicas_;
        const std::size_t last = total % stride;  // a multiple of replicas_
        const std::size_t last_local = last / replicas_;
        std::vector<std::size_t> mine;
        mine.reserve(num_samples_);
        for (std::size_t i = rank_ * batch_size_; i < total - last; i += stride)
            mine.insert(mine.end(), all.begin() + static_cast<std::ptrdiff_t>(i),
                        all.begin() + static_cast<std::ptrdiff_t>(i + batch_size_));
        const std::size_t tail = total - last + rank_ * last_local;
        mine.insert(mine.end(), all.begin() + static_cast<std::ptrdiff_t>(tail),
                    all.begin() + static_cast<std::ptrdiff_t>(tail + last_local));
        return mine;
    }

    BatchList batches() const { return make_batches(indices(), batch_size_, drop_last_); }
    std::size_t num_batches() const {
        return drop_last_ ? num_samples_ / batch_size_ : (num_samples_ + batch_size_ - 1) / batch_size_;
    }

    std::size_t num_samples() const { return num_samples_; }
    std::size_t total_size() const { return num_samples_ * replicas_; }
    std::size_t dataset_size() const { return n_; }
    std::size_t batch_size() const { return batch_size_; }
    std::size_t num_replicas() const { return replicas_; }
    std::size_t rank() const { return rank_; }

private:
    std::size_t n_, batch_size_, replicas_, rank_;
    bool shuffle_, drop_last_;
    std::uint64_t seed_;
    std::uint64_t epoch_ = 0;
    std::size_t num_samples_ = 0;
};

static_assert(Sampler<SequentialSampler>);
static_assert(Sampler<RandomSampler>);
static_assert(BatchSampler<BatchedSampler<RandomSampler>>);
static_assert(BatchSampler<DistributedBatchSampler>);

}  // namespace oar::data
