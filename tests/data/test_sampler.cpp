// Tests of include/oar/data/sampler.hpp: the shuffle against its documented Fisher-Yates and for
// uniformity, batching, and DistributedBatchSampler against an independent transcription of
// paddle.io.DistributedBatchSampler.__iter__ plus the properties data parallelism relies on.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <algorithm>  // std::sort, std::min, std::is_permutation, std::all_of
#include <cmath>      // std::ceil
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t
#include <map>        // std::map: permutation counts
#include <numeric>    // std::iota
#include <string>     // std::string
#include <vector>     // std::vector

#include <oar/core/rng.hpp>      // CounterRng, rng_stream: the reference shuffle
#include <oar/data/sampler.hpp>  // under test

#include "support/errors.hpp"  // message_of, contains

using namespace oar::data;
using Indices = std::vector<std::size_t>;

namespace {

Indices arange(std::size_t n) {
    Indices v(n);
    std::iota(v.begin(), v.end(), std::size_t{0});
    return v;
}

/// The shuffle as documented: Fisher-Yates from the back, j = below(shuffle + epoch, i, i + 1).
void reference_shuffle(Indices& v, std::uint64_t seed, std::uint64_t epoch) {
    const oar::CounterRng rng{seed};
    if (v.size() < 2) return;
    for (std::size_t i = v.size() - 1; i >= 1; --i) {
        const std::size_t j = rng.below(oar::rng_stream::shuffle + epoch, i, i + 1);
        const std::size_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/// Python's v[a:b] for 0 <= a: clamped to the list's end.
Indices py_slice(const Indices& v, std::size_t a, std::size_t b) {
    a = std::min(a, v.size());
    b = std::min(b, v.size());
    return a < b ? Indices(v.begin() + static_cast<std::ptrdiff_t>(a), v.begin() + static_cast<std::ptrdiff_t>(b))
                 : Indices{};
}

void extend(Indices& v, const Indices& more) { v.insert(v.end(), more.begin(), more.end()); }

/// paddle.io.DistributedBatchSampler.__iter__ line by line (python/paddle/io/dataloader/
/// batch_sampler.py), with np.random.RandomState(epoch).shuffle replaced by oar's documented shuffle.
BatchList paddle_distributed_batches(std::size_t dataset_len, std::size_t batch_size, std::size_t nranks,
                                     std::size_t local_rank, bool shuffle, bool drop_last, std::uint64_t seed,
                                     std::uint64_t epoch) {
    const auto num_samples =
        static_cast<std::size_t>(std::ceil(static_cast<double>(dataset_len) * 1.0 / static_cast<double>(nranks)));
    const std::size_t total_size = num_samples * nranks;

    Indices indices = arange(dataset_len);
    const std::size_t padding_size = total_size - indices.size();
    if (padding_size <= indices.size()) {
        extend(indices, py_slice(indices, 0, padding_size));
    } else {
        Indices repeated;
        const auto times = static_cast<std::size_t>(
            std::ceil(static_cast<double>(padding_size) / static_cast<double>(indices.size())));
        for (std::size_t t = 0; t < times; ++t) extend(repeated, indices);
        extend(indices, py_slice(repeated, 0, padding_size));
    }
    REQUIRE(indices.size() == total_size);
    if (shuffle) reference_shuffle(indices, seed, epoch);

    auto get_indices_by_batch_size = [&](const Indices& ind) {
        Indices subsampled;
        const std::size_t last_batch_size = total_size % (batch_size * nranks);
        REQUIRE(last_batch_size % nranks == 0);
        const std::size_t last_local_batch_size = last_batch_size / nranks;
        for (std::size_t i = local_rank * batch_size; i < ind.size() - last_batch_size; i += batch_size * nranks)
            extend(subsampled, py_slice(ind, i, i + batch_size));
        const Indices tail = py_slice(ind, ind.size() - last_batch_size, ind.size());
        extend(subsampled,
               py_slice(tail, local_rank * last_local_batch_size, (local_rank + 1) * last_local_batch_size));
        return subsampled;
    };
    if (nranks > 1) indices = get_indices_by_batch_size(indices);
    REQUIRE(indices.size() == num_samples);

    BatchList out;
    Indices batch;
    for (std::size_t idx : indices) {
        batch.push_back(idx);
        if (batch.size() == batch_size) {
            out.push_back(batch);
            batch.clear();
        }
    }
    if (!drop_last && !batch.empty()) out.push_back(batch);
    return out;
}

/// len(DistributedBatchSampler) as Paddle computes it.
std::size_t paddle_len(std::size_t dataset_len, std::size_t batch_size, std::size_t nranks, bool drop_last) {
    auto num_samples =
        static_cast<std::size_t>(std::ceil(static_cast<double>(dataset_len) / static_cast<double>(nranks)));
    num_samples += (drop_last ? 0 : 1) * (batch_size - 1);
    return num_samples / batch_size;
}

Indices flatten(const BatchList& batches) {
    Indices out;
    for (const auto& b : batches) extend(out, b);
    return out;
}

}  // namespace

TEST_CASE("SequentialSampler gives 0..n-1 whatever the epoch") {
    SequentialSampler s(5);
    CHECK(s.size() == 5);
    CHECK(s.indices() == arange(5));
    s.set_epoch(3);
    CHECK(s.indices() == arange(5));
    CHECK(SequentialSampler(0).indices().empty());
}

TEST_CASE("RandomSampler is the documented Fisher-Yates of (seed, epoch)") {
    for (std::size_t n : {0u, 1u, 2u, 7u, 100u}) {
        for (std::uint64_t seed : {0ull, 42ull}) {
            RandomSampler s(n, seed);
            for (std::uint64_t epoch : {0ull, 1ull, 17ull}) {
                s.set_epoch(epoch);
                Indices expected = arange(n);
                reference_shuffle(expected, seed, epoch);
                CHECK(s.indices() == expected);
            }
        }
    }
}

TEST_CASE("RandomSampler gives a permutation, the same for the same (seed, epoch), new for a new epoch or seed") {
    RandomSampler a(1000, 7), b(1000, 7), c(1000, 8);
    const Indices first = a.indices();
    CHECK(std::is_permutation(first.begin(), first.end(), arange(1000).begin()));
    CHECK(first != arange(1000));
    CHECK(b.indices() == first);
    CHECK(c.indices() != first);
    a.set_epoch(1);
    const Indices second = a.indices();
    CHECK(second != first);
    CHECK(std::is_permutation(second.begin(), second.end(), first.begin()));
    a.set_epoch(0);
    CHECK(a.indices() == first);
    CHECK(a.epoch() == 0);
}

TEST_CASE("the shuffle draws every permutation of 4 equally often") {
    // 24 permutations over 48,000 epochs: 2,000 expected each. Pearson chi-square with 23 degrees of
    // freedom has mean 23 and sd 6.8; 80 is over 8 sd out, while a biased shuffle (e.g. j drawn from
    // [0, n) instead of [0, i]) lands in the thousands.
    RandomSampler s(4, 123);
    std::map<Indices, std::size_t> counts;
    const std::size_t epochs = 48000;
    for (std::uint64_t e = 0; e < epochs; ++e) {
        s.set_epoch(e);
        ++counts[s.indices()];
    }
    CHECK(counts.size() == 24);
    const double expected = static_cast<double>(epochs) / 24.0;
    double chi2 = 0.0;
    for (const auto& [perm, count] : counts) {
        const double d = static_cast<double>(count) - expected;
        chi2 += d * d / expected;
    }
    CHECK(chi2 < 80.0);
}

TEST_CASE("shuffle_indices leaves empty and single-element lists alone") {
    Indices empty, one{9};
    shuffle_indices(empty, 1, 2);
    shuffle_indices(one, 1, 2);
    CHECK(empty.empty());
    CHECK(one == Indices{9});
}

TEST_CASE("make_batches keeps the last partial batch unless drop_last") {
    const Indices idx = arange(10);
    const BatchList kept = make_batches(idx, 4, false);
    REQUIRE(kept.size() == 3);
    CHECK(kept[0] == Indices{0, 1, 2, 3});
    CHECK(kept[1] == Indices{4, 5, 6, 7});
    CHECK(kept[2] == Indices{8, 9});
    CHECK(make_batches(idx, 4, true).size() == 2);
    CHECK(make_batches(idx, 5, true).size() == 2);        // exact: nothing dropped
    CHECK(make_batches(idx, 20, false) == BatchList{idx});  // fewer samples than one batch
    CHECK(make_batches(idx, 20, true).empty());
    CHECK(make_batches(Indices{}, 3, false).empty());
    CHECK(oar_test::contains(oar_test::message_of<oar::value_error>([&] { (void)make_batches(idx, 0, false); }),
                             "batch_size"));
}

TEST_CASE("BatchedSampler batches its sampler's order and counts its batches without building them") {
    for (std::size_t n : {1u, 9u, 10u, 11u, 64u}) {
        for (std::size_t bs : {1u, 3u, 10u, 100u}) {
            for (bool drop_last : {false, true}) {
                BatchedSampler<RandomSampler> s(RandomSampler(n, 5), bs, drop_last);
                s.set_epoch(2);
                const BatchList batches = s.batches();
                CHECK(s.num_batches() == batches.size());
                RandomSampler order(n, 5);
                order.set_epoch(2);
                CHECK(batches == make_batches(order.indices(), bs, drop_last));
            }
        }
    }
    CHECK_THROWS_AS(BatchedSampler<SequentialSampler>(SequentialSampler(3), 0), oar::value_error);
}

TEST_CASE("DistributedBatchSampler matches a transcription of Paddle's algorithm") {
    std::size_t combos = 0;
    for (std::size_t n : {1u, 2u, 3u, 5u, 10u, 17u, 64u, 100u, 101u}) {
        for (std::size_t bs : {1u, 3u, 4u, 16u}) {
            for (std::size_t replicas : {1u, 2u, 3u, 4u, 8u}) {
                for (bool shuffle : {false, true}) {
                    for (bool drop_last : {false, true}) {
                        for (std::size_t rank = 0; rank < replicas; ++rank) {
                            DistributedBatchSampler s(n, bs, replicas, rank, shuffle, drop_last, 11);
                            for (std::uint64_t epoch : {0ull, 3ull}) {
                                s.set_epoch(epoch);
                                INFO("n=" << n << " bs=" << bs << " replicas=" << replicas << " rank=" << rank
                                          << " shuffle=" << shuffle << " drop_last=" << drop_last
                                          << " epoch=" << epoch);
                                const BatchList got = s.batches();
                                CHECK(got == paddle_distributed_batches(n, bs, replicas, rank, shuffle, drop_last, 11,
                                                                        epoch));
                                CHECK(s.num_batches() == paddle_len(n, bs, replicas, drop_last));
                                CHECK(s.num_batches() == got.size());
                                ++combos;
                            }
                        }
                    }
                }
            }
        }
    }
    CHECK(combos > 1000);
}

TEST_CASE("Paddle's interleaving: rank r takes every num_replicas-th batch-sized block, then its share of the rest") {
    // n = 10, batch 2, 2 ranks: total 10; blocks [0,1] [2,3] | [4,5] [6,7] | then last = 10 % 4 = 2
    // indices [8, 9] split one each. Written out by hand from the algorithm's definition.
    CHECK(DistributedBatchSampler(10, 2, 2, 0).batches() == BatchList{{0, 1}, {4, 5}, {8}});
    CHECK(DistributedBatchSampler(10, 2, 2, 1).batches() == BatchList{{2, 3}, {6, 7}, {9}});
    // n = 5, 3 ranks: padded to 6 with index 0 repeated; batch 1 gives rank r the r-th, (r+3)-th.
    CHECK(DistributedBatchSampler(5, 1, 3, 0).batches() == BatchList{{0}, {3}});
    CHECK(DistributedBatchSampler(5, 1, 3, 1).batches() == BatchList{{1}, {4}});
    CHECK(DistributedBatchSampler(5, 1, 3, 2).batches() == BatchList{{2}, {0}});
}

TEST_CASE("DistributedBatchSampler ranks get equal batch counts, disjoint shards apart from padding, and cover the data") {
    for (std::size_t n : {1u, 3u, 7u, 50u, 99u, 1000u}) {
        for (std::size_t bs : {1u, 5u, 32u}) {
            for (std::size_t replicas : {1u, 2u, 3u, 4u, 7u}) {
                for (bool shuffle : {false, true}) {
                    INFO("n=" << n << " bs=" << bs << " replicas=" << replicas << " shuffle=" << shuffle);
                    const std::size_t num_samples = (n + replicas - 1) / replicas;
                    std::vector<std::size_t> times_seen(n, 0);
                    std::size_t first_count = 0;
                    for (std::size_t rank = 0; rank < replicas; ++rank) {
                        DistributedBatchSampler s(n, bs, replicas, rank, shuffle, false, 99);
                        s.set_epoch(5);
                        const BatchList batches = s.batches();
                        if (rank == 0) first_count = batches.size();
                        CHECK(batches.size() == first_count);
                        for (std::size_t b = 0; b < batches.size(); ++b) {
                            CHECK_FALSE(batches[b].empty());
                            if (b + 1 < batches.size()) CHECK(batches[b].size() == bs);
                        }
                        const Indices mine = flatten(batches);
                        CHECK(mine.size() == num_samples);
                        CHECK(mine == s.indices());
                        for (std::size_t i : mine) {
                            REQUIRE(i < n);
                            ++times_seen[i];
                        }
                    }
                    // The union is the padded list 0..n-1 then the first (total - n) again (cyclically).
                    const std::size_t total = num_samples * replicas;
                    for (std::size_t i = 0; i < n; ++i) {
                        std::size_t expected = 0;
                        for (std::size_t k = 0; k < total; ++k) expected += (k % n == i) ? 1 : 0;
                        CHECK(times_seen[i] == expected);
                    }
                }
            }
        }
    }
}

TEST_CASE("DistributedBatchSampler with drop_last gives every rank the same whole batches") {
    for (std::size_t replicas : {2u, 3u}) {
        std::vector<std::size_t> counts;
        for (std::size_t rank = 0; rank < replicas; ++rank) {
            const BatchList b = DistributedBatchSampler(103, 8, replicas, rank, true, true, 1).batches();
            for (const auto& batch : b) CHECK(batch.size() == 8);
            counts.push_back(b.size());
        }
        CHECK(std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == counts[0]; }));
        CHECK(counts[0] == ((103 + replicas - 1) / replicas) / 8);
    }
}

TEST_CASE("DistributedBatchSampler's shuffle is shared by all ranks and changes with the epoch") {
    DistributedBatchSampler r0(40, 4, 2, 0, true, false, 3), r1(40, 4, 2, 1, true, false, 3);
    const Indices e0 = flatten(r0.batches());
    r0.set_epoch(1);
    r1.set_epoch(1);
    const Indices a = flatten(r0.batches()), b = flatten(r1.batches());
    CHECK(a != e0);
    Indices both = a;
    extend(both, b);
    std::sort(both.begin(), both.end());
    CHECK(both == arange(40));  // 40 splits evenly: no padding, so the ranks partition the data
    r0.set_epoch(0);
    CHECK(flatten(r0.batches()) == e0);
    CHECK(DistributedBatchSampler(40, 4, 2, 0, false).indices() != e0);  // unshuffled differs
}

TEST_CASE("DistributedBatchSampler of an empty dataset has no batches") {
    DistributedBatchSampler s(0, 4, 2, 1, true);
    CHECK(s.batches().empty());
    CHECK(s.num_batches() == 0);
}

TEST_CASE("DistributedBatchSampler refuses bad arguments and names the bad value") {
    using oar_test::contains;
    using oar_test::message_of;
    const std::string rank = message_of<oar::value_error>([] { DistributedBatchSampler(10, 2, 4, 4); });
    CHECK(contains(rank, "rank 4"));
    CHECK(contains(rank, "num_replicas 4"));
    CHECK(contains(message_of<oar::value_error>([] { DistributedBatchSampler(10, 0, 4, 0); }), "batch_size"));
    CHECK(contains(message_of<oar::value_error>([] { DistributedBatchSampler(10, 2, 0, 0); }), "num_replicas"));
}

static_assert(Sampler<SequentialSampler>);
static_assert(Sampler<RandomSampler>);
static_assert(!Sampler<DistributedBatchSampler>);  // has indices() but no size(): a batch sampler
static_assert(BatchSampler<BatchedSampler<SequentialSampler>>);
static_assert(BatchSampler<DistributedBatchSampler>);
static_assert(!BatchSampler<RandomSampler>);
static_assert(!BatchSampler<int>);
