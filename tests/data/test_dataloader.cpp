// Tests of include/oar/data/dataloader.hpp: batch contents and shapes, drop_last and tiny
// datasets, shuffling per epoch, identical sequences for any number of workers, in-order hand-over
// under uneven timing, batch samplers, worker exceptions, early exit (prompt stop, threads joined)
// and argument errors. Built by hand with -fsanitize=thread too (see the report of this header).
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <algorithm>     // std::min
#include <atomic>        // std::atomic: load counters shared with worker threads
#include <chrono>        // std::chrono: timing bounds and sleeps
#include <cstddef>       // std::size_t
#include <cstdint>       // std::int64_t, std::uint8_t, std::uint64_t
#include <cstring>       // std::memcmp: bitwise comparison of batches
#include <filesystem>    // std::filesystem::directory_iterator: counting this process's threads
#include <memory>        // std::make_shared, std::shared_ptr
#include <span>          // std::span
#include <stdexcept>     // std::runtime_error
#include <string>        // std::string, std::to_string
#include <system_error>  // std::error_code: thread_count never throws
#include <thread>        // std::this_thread::sleep_for
#include <type_traits>   // std::is_constructible_v, std::is_same_v
#include <utility>       // std::move
#include <vector>        // std::vector

#include <oar/core/rng.hpp>         // CounterRng: random test pixels
#include <oar/data/dataloader.hpp>  // under test

#include "support/errors.hpp"  // message_of, contains

using namespace oar::data;
using oar::generator;
using oar::make_dims;
using namespace std::chrono_literals;
using Indices = std::vector<std::size_t>;

namespace {

/// n samples of `dims`, sample i's value k being 1000 i + k and its label 7 i + 1: every value
/// says which sample it came from.
InMemoryDataset numbered_set(std::size_t n, oar::Dims dims = make_dims(1, 2, 3)) {
    std::vector<float> images(n * dims.size());
    std::vector<std::int64_t> labels(n);
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t k = 0; k < dims.size(); ++k) images[i * dims.size() + k] = static_cast<float>(1000 * i + k);
        labels[i] = static_cast<std::int64_t>(7 * i + 1);
    }
    return InMemoryDataset(std::move(images), std::move(labels), dims);
}

/// Checks that b holds exactly samples `expected` of a numbered_set() dataset, in order.
void check_numbered_batch(const Batch& b, const Indices& expected, oar::Dims dims) {
    REQUIRE(b.images.batch() == expected.size());
    CHECK(b.images.dims() == dims);
    REQUIRE(b.images.size() == expected.size() * dims.size());
    REQUIRE(b.labels.size() == expected.size());
    for (std::size_t j = 0; j < expected.size(); ++j) {
        CHECK(b.labels[j] == static_cast<std::int64_t>(7 * expected[j] + 1));
        for (std::size_t k = 0; k < dims.size(); ++k)
            CHECK(b.images[j * dims.size() + k] == static_cast<float>(1000 * expected[j] + k));
    }
}

/// The sample indices of a batch of a numbered_set() dataset, read back from its labels.
Indices sample_ids(const Batch& b) {
    Indices ids;
    for (std::int64_t l : b.labels) ids.push_back(static_cast<std::size_t>((l - 1) / 7));
    return ids;
}

/// An MNIST-like dataset of random bytes.
ByteImageDataset random_bytes(std::size_t n, std::uint64_t seed) {
    const oar::CounterRng rng{seed};
    std::vector<std::uint8_t> px(n * 28 * 28);
    for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>(rng.bits(0, i)[0]);
    std::vector<std::int64_t> labels(n);
    for (std::size_t i = 0; i < n; ++i) labels[i] = static_cast<std::int64_t>(rng.below(1, i, 10));
    return ByteImageDataset(std::move(px), std::move(labels), make_dims(1, 28, 28));
}

/// Wraps a dataset: each load sleeps `delay(i)`, may throw at index `bad`, and is counted.
template <class Inner>
struct Instrumented : dataset_base<Instrumented<Inner>> {
    const Inner* inner;
    std::chrono::microseconds (*delay)(std::size_t) = nullptr;
    std::size_t bad = static_cast<std::size_t>(-1);
    mutable std::atomic<std::size_t> loads{0};

    explicit Instrumented(const Inner& d) : inner(&d) {}
    std::size_t size() const { return inner->size(); }
    oar::Dims dims() const { return inner->dims(); }
    std::int64_t load(std::size_t i, std::span<float> out) const {
        loads.fetch_add(1, std::memory_order_relaxed);
        if (delay) std::this_thread::sleep_for(delay(i));
        if (i == bad) throw std::runtime_error("cannot decode sample " + std::to_string(i));
        return inner->load(i, out);
    }
};

/// Uneven per-sample times, so that workers finish batches out of order.
std::chrono::microseconds jitter(std::size_t i) { return std::chrono::microseconds((i * 7919) % 5 * 60); }
std::chrono::microseconds slow(std::size_t) { return 20ms; }

/// All batches of one epoch, moved out of the loop.
template <class G>
std::vector<Batch> drain(G&& g) {
    std::vector<Batch> out;
    for (auto&& b : g) out.push_back(std::move(b));
    return out;
}

bool bitwise_equal(const std::vector<Batch>& a, const std::vector<Batch>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k) {
        if (a[k].index != b[k].index || a[k].labels != b[k].labels || a[k].images.size() != b[k].images.size() ||
            a[k].images.batch() != b[k].images.batch() || !(a[k].images.dims() == b[k].images.dims()))
            return false;
        if (std::memcmp(a[k].images.data(), b[k].images.data(), a[k].images.size() * sizeof(float)) != 0) return false;
    }
    return true;
}

/// The number of threads of this process (Linux), or 0 where /proc is not there.
std::size_t thread_count() {
    std::error_code ec;
    std::size_t n = 0;
    for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end; it.increment(ec)) ++n;
    return n;
}

}  // namespace

TEST_CASE("sequential batches hold the samples in order, stacked as [N, dims...] with their labels") {
    const InMemoryDataset ds = numbered_set(10);
    for (std::size_t workers : {0u, 2u}) {
        DataLoader loader(ds, {.batch_size = 4, .num_workers = workers});
        CHECK(loader.num_batches() == 3);
        std::size_t k = 0;
        for (auto&& b : loader()) {  // auto& works too with oar's own generator (not std::generator)
            CHECK(b.index == k);
            Indices expected;
            for (std::size_t i = 4 * k; i < std::min<std::size_t>(4 * k + 4, 10); ++i) expected.push_back(i);
            check_numbered_batch(b, expected, make_dims(1, 2, 3));
            ++k;
        }
        CHECK(k == 3);
    }
}

TEST_CASE("the default options give batches of one sample, like Paddle's batch_size=1") {
    const InMemoryDataset ds = numbered_set(3, make_dims(2));
    DataLoader loader(ds);
    const auto batches = drain(loader());
    REQUIRE(batches.size() == 3);
    for (std::size_t k = 0; k < 3; ++k) check_numbered_batch(batches[k], {k}, make_dims(2));
}

TEST_CASE("drop_last drops the last partial batch; a dataset smaller than a batch gives one partial batch") {
    const InMemoryDataset ten = numbered_set(10, make_dims(3));
    for (std::size_t workers : {0u, 3u}) {
        DataLoader dropping(ten, {.batch_size = 4, .drop_last = true, .num_workers = workers});
        CHECK(dropping.num_batches() == 2);
        const auto kept = drain(dropping());
        REQUIRE(kept.size() == 2);
        check_numbered_batch(kept[1], {4, 5, 6, 7}, make_dims(3));

        const InMemoryDataset tiny = numbered_set(3, make_dims(3));
        DataLoader partial(tiny, {.batch_size = 8, .num_workers = workers});
        const auto one = drain(partial());
        REQUIRE(one.size() == 1);
        check_numbered_batch(one[0], {0, 1, 2}, make_dims(3));

        DataLoader none(tiny, {.batch_size = 8, .drop_last = true, .num_workers = workers});
        CHECK(none.num_batches() == 0);
        CHECK(drain(none()).empty());
    }
}

TEST_CASE("num_batches equals the number of batches an epoch yields") {
    for (std::size_t n : {1u, 5u, 16u, 17u}) {
        const InMemoryDataset ds = numbered_set(n, make_dims(1));
        for (std::size_t bs : {1u, 4u, 16u, 40u}) {
            for (bool drop_last : {false, true}) {
                DataLoader loader(ds, {.batch_size = bs, .shuffle = true, .drop_last = drop_last, .num_workers = 1});
                CHECK(drain(loader()).size() == loader.num_batches());
            }
        }
    }
}

TEST_CASE("with shuffle each epoch visits every sample once, in RandomSampler's order for (seed, epoch)") {
    const InMemoryDataset ds = numbered_set(50, make_dims(2));
    DataLoader loader(ds, {.batch_size = 8, .shuffle = true, .seed = 5});
    std::vector<Indices> orders;
    for (std::uint64_t e = 0; e < 3; ++e) {
        Indices order;
        for (auto&& b : loader())
            for (std::size_t id : sample_ids(b)) order.push_back(id);
        RandomSampler expected(50, 5);
        expected.set_epoch(e);
        CHECK(order == expected.indices());
        orders.push_back(order);
    }
    CHECK(orders[0] != orders[1]);
    CHECK(orders[1] != orders[2]);
}

TEST_CASE("loader() advances the epoch; epoch(e) gives epoch e and the next loader() gives e + 1") {
    const InMemoryDataset ds = numbered_set(30, make_dims(1));
    DataLoader loader(ds, {.batch_size = 30, .shuffle = true, .seed = 9});
    auto order_of = [](generator<Batch> g) { return sample_ids(drain(std::move(g)).at(0)); };
    CHECK(loader.current_epoch() == 0);
    const Indices e0 = order_of(loader());
    CHECK(loader.current_epoch() == 1);
    const Indices e1 = order_of(loader());
    CHECK(e0 != e1);
    CHECK(order_of(loader.epoch(0)) == e0);
    CHECK(loader.current_epoch() == 1);
    CHECK(order_of(loader()) == e1);
    loader.set_epoch(0);
    CHECK(order_of(loader()) == e0);

    // The order is fixed when the generator is made, not when it is iterated.
    auto later = loader.epoch(1);
    loader.set_epoch(7);
    CHECK(order_of(std::move(later)) == e1);

    DataLoader unshuffled(ds, {.batch_size = 30});
    CHECK(order_of(unshuffled()) == order_of(unshuffled()));
}

TEST_CASE("the batch sequence is bitwise identical for 0, 1, 2 and 3 workers with the same seed") {
    const ByteImageDataset bytes = random_bytes(300, 17);
    Instrumented<ByteImageDataset> ds(bytes);
    ds.delay = jitter;  // uneven timing, so the workers race
    DataLoader reference(ds, {.batch_size = 7, .shuffle = true, .seed = 3});
    const auto e0 = drain(reference.epoch(0)), e1 = drain(reference.epoch(1));
    REQUIRE(e0.size() == 43);
    CHECK_FALSE(bitwise_equal(e0, e1));
    for (std::size_t workers : {1u, 2u, 3u}) {
        for (std::size_t prefetch : {1u, 3u}) {
            INFO("workers=" << workers << " prefetch=" << prefetch);
            DataLoader loader(ds, {.batch_size = 7, .shuffle = true, .num_workers = workers, .prefetch = prefetch,
                                   .seed = 3});
            CHECK(bitwise_equal(drain(loader()), e0));
            CHECK(bitwise_equal(drain(loader()), e1));
        }
    }
}

TEST_CASE("batches reach the loop in order, with the right samples, when workers finish out of order") {
    const InMemoryDataset inner = numbered_set(120, make_dims(2));
    Instrumented<InMemoryDataset> ds(inner);
    ds.delay = [](std::size_t i) { return std::chrono::microseconds(i % 8 < 4 ? 1500 : 0); };  // batch parity
    DataLoader loader(ds, {.batch_size = 4, .num_workers = 3, .prefetch = 1});
    std::size_t k = 0;
    for (auto&& b : loader()) {
        CHECK(b.index == k);
        check_numbered_batch(b, {4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3}, make_dims(2));
        ++k;
    }
    CHECK(k == 30);
}

TEST_CASE("batches moved out of the loop keep their contents while later batches are built") {
    const InMemoryDataset ds = numbered_set(64, make_dims(5));
    for (std::size_t workers : {0u, 2u}) {
        DataLoader loader(ds, {.batch_size = 5, .num_workers = workers, .prefetch = 1});
        const auto kept = drain(loader());
        REQUIRE(kept.size() == 13);
        for (std::size_t k = 0; k < kept.size(); ++k) {
            Indices expected;
            for (std::size_t i = 5 * k; i < std::min<std::size_t>(5 * k + 5, 64); ++i) expected.push_back(i);
            check_numbered_batch(kept[k], expected, make_dims(5));
        }
    }
}

TEST_CASE("a batch sampler's batches are loaded as given: each rank of a DistributedBatchSampler") {
    const InMemoryDataset ds = numbered_set(23, make_dims(1));
    for (std::size_t rank = 0; rank < 3; ++rank) {
        DistributedBatchSampler sampler(23, 4, 3, rank, true, false, 8);
        DataLoader loader(ds, sampler, {.num_workers = 2});
        CHECK(loader.num_batches() == sampler.num_batches());
        for (std::uint64_t e = 0; e < 2; ++e) {
            sampler.set_epoch(e);
            const BatchList expected = sampler.batches();
            const auto got = drain(loader());
            REQUIRE(got.size() == expected.size());
            for (std::size_t k = 0; k < got.size(); ++k) check_numbered_batch(got[k], expected[k], make_dims(1));
        }
    }
}

TEST_CASE("a Dataset::load exception reaches the loop after every earlier batch") {
    const InMemoryDataset inner = numbered_set(40, make_dims(2));
    Instrumented<InMemoryDataset> ds(inner);
    ds.bad = 21;  // in batch 5 of batch size 4
    for (std::size_t workers : {0u, 1u, 3u}) {
        INFO("workers=" << workers);
        DataLoader loader(ds, {.batch_size = 4, .num_workers = workers});
        std::vector<std::size_t> seen;
        const std::string m = oar_test::message_of<std::runtime_error>([&] {
            for (auto&& b : loader()) seen.push_back(b.index);
        });
        CHECK(m == "cannot decode sample 21");
        CHECK(seen == std::vector<std::size_t>{0, 1, 2, 3, 4});
        // The loader stays usable: the next epoch fails at the same place again.
        CHECK_THROWS_AS(drain(loader()), std::runtime_error);
    }
    ds.bad = 0;  // the very first sample: the exception comes from begin()
    DataLoader first(ds, {.batch_size = 4, .num_workers = 2});
    auto g = first();
    CHECK_THROWS_WITH_AS(g.begin(), "cannot decode sample 0", std::runtime_error);
}

TEST_CASE("an index past the dataset's end from a batch sampler is the dataset's value_error, naming it") {
    const InMemoryDataset ds = numbered_set(10, make_dims(1));
    DataLoader loader(ds, DistributedBatchSampler(12, 4, 1, 0), {.num_workers = 1});
    const std::string m = oar_test::message_of<oar::value_error>([&] { (void)drain(loader()); });
    CHECK(oar_test::contains(m, "index 10"));
}

TEST_CASE("leaving the loop early stops the workers promptly and joins them") {
    const InMemoryDataset inner = numbered_set(400, make_dims(1));
    Instrumented<InMemoryDataset> ds(inner);
    ds.delay = slow;  // 20 ms a sample: a full epoch takes 8 s of loading, 4 s with two workers
    const std::size_t threads_before = thread_count();
    DataLoader loader(ds, {.batch_size = 10, .num_workers = 2, .prefetch = 2});
    const auto start = std::chrono::steady_clock::now();
    {
        std::size_t got = 0;
        for (auto&& b : loader()) {
            CHECK(b.labels.size() == 10);
            if (++got == 2) break;
        }
    }  // the generator is destroyed here: its workers are stopped and joined
    const auto elapsed = std::chrono::steady_clock::now() - start;
    // "Promptly" is counted in samples, not seconds (a wall-clock bound flakes on a loaded machine):
    // the 400-sample epoch was not loaded to its end. The 60 s bound only catches a hang.
    CHECK(elapsed < 60s);
    const std::size_t loads_at_exit = ds.loads.load();
    CHECK(loads_at_exit < 120);  // 2 batches taken + at most (2 * 2 waiting + 2 building) more
    std::this_thread::sleep_for(100ms);
    CHECK(ds.loads.load() == loads_at_exit);  // nobody is loading any more
    if (threads_before > 0) CHECK(thread_count() == threads_before);
}

TEST_CASE("a generator that is never iterated starts no threads and loads nothing") {
    const InMemoryDataset inner = numbered_set(40, make_dims(1));
    Instrumented<InMemoryDataset> ds(inner);
    const std::size_t threads_before = thread_count();
    DataLoader loader(ds, {.batch_size = 4, .num_workers = 3});
    {
        auto g = loader();
        if (threads_before > 0) CHECK(thread_count() == threads_before);
    }
    CHECK(ds.loads.load() == 0);
}

TEST_CASE("a shared_ptr dataset lives as long as a generator that outlives the loader") {
    auto ds = std::make_shared<InMemoryDataset>(numbered_set(9, make_dims(2)));
    generator<Batch> g = [&] {
        DataLoader loader(ds, {.batch_size = 4, .num_workers = 1});  // DataLoader<InMemoryDataset>
        return loader();
    }();
    ds.reset();
    const auto batches = drain(std::move(g));
    REQUIRE(batches.size() == 3);
    check_numbered_batch(batches[2], {8}, make_dims(2));
}

TEST_CASE("the loader refuses batch_size 0, an empty dataset and prefetch 0 with workers, naming each") {
    using oar_test::contains;
    using oar_test::message_of;
    const InMemoryDataset ds = numbered_set(4, make_dims(1));
    CHECK(contains(message_of<oar::value_error>([&] { DataLoader(ds, {.batch_size = 0}); }), "batch_size"));
    CHECK(contains(message_of<oar::value_error>([&] { DataLoader(ds, {.num_workers = 2, .prefetch = 0}); }),
                   "prefetch"));
    const InMemoryDataset empty;
    CHECK(contains(message_of<oar::value_error>([&] { DataLoader(empty, {.batch_size = 4}); }), "empty"));
    CHECK(contains(message_of<oar::value_error>([&] { DataLoader(empty, DistributedBatchSampler(0, 4, 1, 0)); }),
                   "empty"));
    CHECK(contains(message_of<oar::value_error>([] { DataLoader(std::shared_ptr<const InMemoryDataset>{}); }),
                   "null"));
}

static_assert(oar::generator_is_std ||
              std::is_same_v<decltype(*std::declval<DataLoader<InMemoryDataset>&>()().begin()), Batch&>);
static_assert(std::is_constructible_v<DataLoader<InMemoryDataset>, const InMemoryDataset&, LoaderOptions>);
static_assert(!std::is_constructible_v<DataLoader<InMemoryDataset>, InMemoryDataset&&, LoaderOptions>);
static_assert(std::is_constructible_v<DataLoader<InMemoryDataset>, const InMemoryDataset&, DistributedBatchSampler,
                                      WorkerOptions>);
static_assert(!std::is_constructible_v<DataLoader<InMemoryDataset>, const InMemoryDataset&, RandomSampler>);

// ---------------------------------------------------------------------------------------------
// The epoch reaches the dataset (issue 24: random transforms repeated every epoch)

#include <oar/data/transforms.hpp>  // transform, RandomCrop, RandomHorizontalFlip: an epoch-aware dataset

namespace {

/// Every value of every batch of epoch e, in order.
std::vector<float> epoch_values(auto& loader, std::uint64_t e) {
    std::vector<float> v;
    for (auto&& b : loader.epoch(e)) v.insert(v.end(), b.images.data(), b.images.data() + b.images.size());
    return v;
}

/// A dataset of the caller's whose samples are its epoch (set_epoch not const).
struct EpochStamped : dataset_base<EpochStamped> {
    std::uint64_t epoch = 99;
    std::size_t size() const { return 6; }
    oar::Dims dims() const { return make_dims(1); }
    std::int64_t load(std::size_t, std::span<float> out) const {
        out[0] = static_cast<float>(epoch);
        return 0;
    }
    void set_epoch(std::uint64_t e) { epoch = e; }
};

}  // namespace

TEST_CASE("the loader tells a TransformDataset each epoch: new crops and flips every epoch, the same per seed and "
          "per num_workers") {
    const auto base = numbered_set(24, make_dims(2, 6, 6));
    std::vector<std::vector<float>> by_workers;
    for (std::size_t workers : {0, 1, 3}) {
        auto aug = transform(base, RandomCrop(6, 2), RandomHorizontalFlip());
        aug.set_seed(11);
        DataLoader loader(aug, {.batch_size = 5, .num_workers = workers});  // no shuffle: only the augmentation moves
        const auto e0 = epoch_values(loader, 0), e1 = epoch_values(loader, 1), e2 = epoch_values(loader, 2);
        CHECK(e0 != e1);
        CHECK(e1 != e2);
        CHECK(aug.epoch() == 2);
        CHECK(epoch_values(loader, 1) == e1);  // going back to an epoch repeats it bit for bit
        std::vector<float> all = e0;
        all.insert(all.end(), e1.begin(), e1.end());
        by_workers.push_back(all);
    }
    CHECK(by_workers[0] == by_workers[1]);
    CHECK(by_workers[0] == by_workers[2]);
}

TEST_CASE("loader() advances the epoch of a dataset borrowed as const, and of one shared") {
    const auto base = numbered_set(8, make_dims(1, 4, 4));
    const auto aug = transform(base, RandomCrop(4, 1));  // const: TransformDataset::set_epoch is const
    DataLoader loader(aug, {.batch_size = 8});
    std::vector<float> first, second;
    for (auto&& b : loader()) first.assign(b.images.data(), b.images.data() + b.images.size());
    for (auto&& b : loader()) second.assign(b.images.data(), b.images.data() + b.images.size());
    CHECK(aug.epoch() == 1);
    CHECK(first != second);
    auto shared = std::make_shared<decltype(transform(numbered_set(8, make_dims(1, 4, 4)), RandomCrop(4, 1)))>(
        numbered_set(8, make_dims(1, 4, 4)), RandomCrop(4, 1));
    DataLoader from_shared(shared, {.batch_size = 8});
    CHECK(epoch_values(from_shared, 0) == first);
    CHECK(epoch_values(from_shared, 1) == second);
}

TEST_CASE("the epoch reaches an adaptor over an adaptor, and a dataset whose set_epoch is not const") {
    const auto base = numbered_set(8, make_dims(1, 4, 4));
    auto inner = transform(base, RandomCrop(4, 1));
    auto outer = transform(std::move(inner), RandomHorizontalFlip());
    DataLoader loader(outer, {.batch_size = 4});
    for (auto&& b : loader.epoch(5)) (void)b;
    CHECK(outer.epoch() == 5);
    CHECK(outer.base().epoch() == 5);

    EpochStamped stamped;
    DataLoader mine(stamped, {.batch_size = 3, .num_workers = 2});
    CHECK(epoch_values(mine, 4) == std::vector<float>(6, 4.0f));
    CHECK(stamped.epoch == 4);
    // Given const, such a dataset could not be told: refused at compile time (a static_assert).
    static_assert(EpochAware<EpochStamped> && !ConstEpochAware<EpochStamped>);
}

TEST_CASE("the epoch is set when the loop begins, not when the generator is made") {
    const auto base = numbered_set(4, make_dims(1, 4, 4));
    auto aug = transform(base, RandomCrop(4, 1));
    DataLoader loader(aug, {.batch_size = 4});
    auto g = loader.epoch(7);
    CHECK(aug.epoch() == 0);
    for (auto&& b : g) (void)b;
    CHECK(aug.epoch() == 7);
}
