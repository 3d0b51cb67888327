// Tests of include/oar/data/dataset.hpp: InMemoryDataset and ByteImageDataset (load, get,
// normalisation, errors that name the index and sizes), dataset_base for user datasets, the
// Dataset concept (positive and negative), and concurrent load from several threads.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t, std::uint8_t
#include <span>     // std::span
#include <string>   // std::string
#include <thread>   // std::thread: concurrent loads
#include <type_traits>  // std::is_constructible_v: a temporary base is refused
#include <utility>  // std::move
#include <vector>   // std::vector

#include <oar/data/dataset.hpp>  // under test

#include "support/errors.hpp"  // message_of, contains

using namespace oar::data;
using oar::make_dims;
using oar_test::contains;
using oar_test::message_of;

namespace {

/// n samples of `dims`, sample i's value k being 100 i + k; label 3 i.
InMemoryDataset numbered(std::size_t n, oar::Dims dims) {
    std::vector<float> images(n * dims.size());
    std::vector<std::int64_t> labels(n);
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t k = 0; k < dims.size(); ++k) images[i * dims.size() + k] = static_cast<float>(100 * i + k);
        labels[i] = static_cast<std::int64_t>(3 * i);
    }
    return InMemoryDataset(std::move(images), std::move(labels), dims);
}

/// A user dataset written with dataset_base: only size, dims and load.
struct Squares : dataset_base<Squares> {
    std::size_t size() const { return 4; }
    oar::Dims dims() const { return make_dims(2); }
    std::int64_t load(std::size_t i, std::span<float> out) const {
        check_load("Squares", i, size(), out, 2);
        out[0] = static_cast<float>(i * i);
        out[1] = -1.0f;
        return static_cast<std::int64_t>(i);
    }
};

struct NoLoad {
    std::size_t size() const { return 1; }
    oar::Dims dims() const { return make_dims(1); }
    Sample get(std::size_t) const { return {}; }
};
struct LabelNotInt64 {
    std::size_t size() const { return 1; }
    oar::Dims dims() const { return make_dims(1); }
    int load(std::size_t, std::span<float>) const { return 0; }
    Sample get(std::size_t) const { return {}; }
};
struct NonConstLoad {
    std::size_t size() const { return 1; }
    oar::Dims dims() const { return make_dims(1); }
    std::int64_t load(std::size_t, std::span<float>) { return 0; }
    Sample get(std::size_t) const { return {}; }
};
struct DimsAsVector {
    std::size_t size() const { return 1; }
    std::vector<std::size_t> dims() const { return {1}; }
    std::int64_t load(std::size_t, std::span<float>) const { return 0; }
    Sample get(std::size_t) const { return {}; }
};

}  // namespace

static_assert(Dataset<InMemoryDataset>);
static_assert(Dataset<ByteImageDataset>);
static_assert(Dataset<Squares>);
static_assert(Dataset<const Squares>);
static_assert(!Dataset<NoLoad>);
static_assert(!Dataset<LabelNotInt64>);
static_assert(!Dataset<NonConstLoad>);
static_assert(!Dataset<DimsAsVector>);
static_assert(!Dataset<int>);

TEST_CASE("InMemoryDataset loads sample i's values and label into the output span") {
    const InMemoryDataset ds = numbered(5, make_dims(1, 2, 3));
    CHECK(ds.size() == 5);
    CHECK(ds.dims() == make_dims(1, 2, 3));
    std::vector<float> out(6, -7.0f);
    CHECK(ds.load(3, out) == 9);
    for (std::size_t k = 0; k < 6; ++k) CHECK(out[k] == static_cast<float>(300 + k));
    CHECK(ds.images().size() == 30);
    CHECK(ds.labels().size() == 5);
}

TEST_CASE("get returns the same sample as load, owning its values and dims") {
    const InMemoryDataset ds = numbered(4, make_dims(3));
    const Sample s = ds.get(2);
    CHECK(s.dims == make_dims(3));
    CHECK(s.label == 6);
    CHECK(s.image == std::vector<float>{200.0f, 201.0f, 202.0f});
}

TEST_CASE("ByteImageDataset maps bytes to x / 127.5 - 1 by default, and to x * scale + shift when asked") {
    std::vector<std::uint8_t> px{0, 255, 51, 127, 128, 1};
    const ByteImageDataset ds(px, {4, 9}, make_dims(1, 3));
    std::vector<float> out(3);
    CHECK(ds.load(0, out) == 4);
    CHECK(out[0] == doctest::Approx(-1.0f));
    CHECK(out[1] == doctest::Approx(1.0f));
    CHECK(out[2] == doctest::Approx(51.0 / 127.5 - 1.0));
    CHECK(ds.load(1, out) == 9);
    CHECK(out[0] == doctest::Approx(127.0 / 127.5 - 1.0));
    CHECK(out[2] == doctest::Approx(1.0 / 127.5 - 1.0));

    const ByteImageDataset unit(px, {4, 9}, make_dims(3), 1.0f / 255.0f, 0.0f);
    const Sample s = unit.get(0);
    CHECK(s.image[1] == doctest::Approx(1.0f));
    CHECK(s.image[2] == doctest::Approx(0.2f));
    CHECK(unit.pixels().size() == 6);
    CHECK(unit.labels()[1] == 9);
}

TEST_CASE("an index out of range is a value_error naming the index and the size") {
    const InMemoryDataset mem = numbered(5, make_dims(2));
    std::vector<float> out(2);
    const std::string m = message_of<oar::value_error>([&] { (void)mem.load(5, out); });
    CHECK(contains(m, "InMemoryDataset"));
    CHECK(contains(m, "index 5"));
    CHECK(contains(m, "size 5"));
    CHECK(contains(message_of<oar::value_error>([&] { (void)mem.get(1000); }), "index 1000"));

    const ByteImageDataset bytes(std::vector<std::uint8_t>(4), {0, 1}, make_dims(2));
    const std::string b = message_of<oar::value_error>([&] { (void)bytes.load(2, out); });
    CHECK(contains(b, "ByteImageDataset"));
    CHECK(contains(b, "index 2"));
    CHECK(contains(b, "size 2"));
}

TEST_CASE("an output span of the wrong size is a shape_error naming both sizes") {
    const InMemoryDataset ds = numbered(2, make_dims(4));
    std::vector<float> small(3);
    const std::string m = message_of<oar::shape_error>([&] { (void)ds.load(0, small); });
    CHECK(contains(m, "3 values"));
    CHECK(contains(m, "has 4"));
}

TEST_CASE("constructing a dataset whose value count disagrees with labels * dims is a shape_error") {
    const std::string m = message_of<oar::shape_error>(
        [] { InMemoryDataset(std::vector<float>(10), std::vector<std::int64_t>(3), make_dims(2, 2)); });
    CHECK(contains(m, "10 image values"));
    CHECK(contains(m, "3 labels"));
    CHECK(contains(m, "[2, 2]"));
    CHECK(contains(message_of<oar::shape_error>([] {
                       ByteImageDataset(std::vector<std::uint8_t>(5), std::vector<std::int64_t>(1), make_dims(4));
                   }),
                   "5 pixels"));
}

TEST_CASE("an empty or default-constructed dataset has size 0 and refuses every index") {
    const InMemoryDataset empty;
    CHECK(empty.size() == 0);
    std::vector<float> out;
    CHECK_THROWS_AS((void)empty.load(0, out), oar::value_error);
    const ByteImageDataset none(std::vector<std::uint8_t>{}, {}, make_dims(1, 28, 28));
    CHECK(none.size() == 0);
}

TEST_CASE("dataset_base builds get() from a user dataset's load()") {
    const Squares sq;
    const Sample s = sq.get(3);
    CHECK(s.dims == make_dims(2));
    CHECK(s.image == std::vector<float>{9.0f, -1.0f});
    CHECK(s.label == 3);
    CHECK(contains(message_of<oar::value_error>([&] { (void)sq.get(4); }), "Squares: sample index 4"));
}

TEST_CASE("concurrent loads from several threads give the same values as serial loads") {
    const std::size_t n = 2000;
    std::vector<std::uint8_t> px(n * 16);
    for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>((i * 37 + i / 16) % 256);
    std::vector<std::int64_t> labels(n);
    for (std::size_t i = 0; i < n; ++i) labels[i] = static_cast<std::int64_t>(i % 10);
    const ByteImageDataset ds(px, labels, make_dims(1, 4, 4));

    std::vector<float> serial(n * 16);
    std::vector<std::int64_t> serial_labels(n);
    for (std::size_t i = 0; i < n; ++i) serial_labels[i] = ds.load(i, std::span<float>(serial.data() + i * 16, 16));

    std::vector<float> parallel(n * 16);
    std::vector<std::int64_t> parallel_labels(n);
    std::vector<std::thread> threads;
    const std::size_t workers = 4;
    for (std::size_t w = 0; w < workers; ++w)
        threads.emplace_back([&, w] {
            for (std::size_t i = w; i < n; i += workers)
                parallel_labels[i] = ds.load(i, std::span<float>(parallel.data() + i * 16, 16));
        });
    for (auto& t : threads) t.join();
    CHECK(parallel == serial);
    CHECK(parallel_labels == serial_labels);
}

// ---------------------------------------------------------------------------------------------
// Subset

#include <oar/data/transforms.hpp>  // transform, RandomCrop: a Subset passes the epoch on

TEST_CASE("Subset views the base's samples at the given indices, in their order, repeats allowed") {
    std::vector<float> images(5 * 2);
    std::vector<std::int64_t> labels(5);
    for (std::size_t i = 0; i < 5; ++i) {
        images[2 * i] = static_cast<float>(i);
        images[2 * i + 1] = static_cast<float>(10 * i);
        labels[i] = static_cast<std::int64_t>(100 + i);
    }
    const InMemoryDataset base(images, labels, make_dims(2));
    const Subset sub(base, {4, 1, 1});
    static_assert(Dataset<decltype(sub)>);
    CHECK(sub.size() == 3);
    CHECK(sub.dims() == make_dims(2));
    const Sample s0 = sub.get(0), s2 = sub.get(2);
    CHECK(s0.label == 104);
    CHECK(s0.image == std::vector<float>{4.0f, 40.0f});
    CHECK(s2.label == 101);
    CHECK(sub.indices()[1] == 1);
    const auto tail = Subset<InMemoryDataset>::range(base, 3, 2);
    CHECK(tail.size() == 2);
    CHECK(tail.get(1).label == 104);
}

TEST_CASE("Subset refuses an index past the base and a load past itself, naming them") {
    const InMemoryDataset base(std::vector<float>(3), {0, 1, 2}, make_dims(1));
    CHECK(contains(message_of<oar::value_error>([&] { (void)Subset(base, {0, 3}); }), "index 3 (position 1) is out of range for a dataset of 3"));
    CHECK(contains(message_of<oar::value_error>([&] { (void)Subset<InMemoryDataset>::range(base, 2, 2); }), "[2, 4) of a dataset of 3"));
    const Subset sub(base, {2});
    float out = 0;
    CHECK(contains(message_of<oar::value_error>([&] { (void)sub.load(1, std::span<float>(&out, 1)); }), "sample index 1 is out of range (size 1)"));
    static_assert(!std::is_constructible_v<Subset<InMemoryDataset>, InMemoryDataset&&, std::vector<std::size_t>>);
}

TEST_CASE("Subset passes set_epoch on to a base that takes one") {
    const InMemoryDataset base(std::vector<float>(4 * 9, 1.0f), {0, 1, 2, 3}, make_dims(1, 3, 3));
    const auto aug = transform(base, RandomCrop(3, 1));
    const Subset sub(aug, {3, 0});
    static_assert(ConstEpochAware<decltype(sub)>);
    static_assert(!EpochAware<Subset<InMemoryDataset>>);
    sub.set_epoch(6);
    CHECK(aug.epoch() == 6);
}
