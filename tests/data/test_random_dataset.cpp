// Tests of include/oar/data/random_dataset.hpp: the course's defaults, samples that are a pure
// function of (seed, index) whatever the load order or thread, the documented streams, roughly
// uniform values and labels, and rejected arguments.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cmath>    // std::abs, std::sqrt
#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t, std::uint64_t
#include <string>   // std::string
#include <thread>   // std::thread: loads from two threads
#include <vector>   // std::vector

#include <oar/data/random_dataset.hpp>  // under test

#include "support/errors.hpp"  // oar_test::message_of, contains: checking the error messages

namespace {

using namespace oar;
using data::RandomDataset;
using oar_test::contains;
using oar_test::message_of;

struct Loaded {
    std::vector<float> image;
    std::int64_t label = -1;
    bool operator==(const Loaded&) const = default;
};

Loaded load(const RandomDataset& d, std::size_t i) {
    Loaded s;
    s.image.resize(d.dims().size());
    s.label = d.load(i, s.image);
    return s;
}

}  // namespace

static_assert(data::Dataset<RandomDataset>);

TEST_CASE("RandomDataset has the course's defaults: [784] values in [0, 1) and labels in [0, 9]") {
    const RandomDataset d(1000);
    CHECK(d.size() == 1000);
    CHECK(d.dims() == make_dims(784));
    CHECK(d.num_classes() == 10);
    CHECK(d.seed() == 0);
    std::size_t out_of_range = 0, nines = 0;
    for (std::size_t i = 0; i < d.size(); ++i) {
        const Loaded s = load(d, i);
        for (float v : s.image) out_of_range += !(v >= 0.0f && v < 1.0f);
        out_of_range += !(s.label >= 0 && s.label <= 9);
        nines += s.label == 9;
    }
    CHECK(out_of_range == 0);
    CHECK(nines > 0);  // unlike paddle's randint(0, 9), 9 occurs
}

TEST_CASE("sample i is a pure function of (seed, index), whatever the load order or thread") {
    const RandomDataset a(64, make_dims(3, 4, 4), 10, 123), b(64, make_dims(3, 4, 4), 10, 123);
    std::vector<Loaded> forward(64), backward(64), threaded(64);
    for (std::size_t i = 0; i < 64; ++i) forward[i] = load(a, i);
    for (std::size_t i = 64; i-- > 0;) backward[i] = load(b, i);
    std::thread t0([&] { for (std::size_t i = 0; i < 64; i += 2) threaded[i] = load(a, i); });
    std::thread t1([&] { for (std::size_t i = 1; i < 64; i += 2) threaded[i] = load(b, i); });
    t0.join();
    t1.join();
    CHECK(forward == backward);
    CHECK(forward == threaded);
    CHECK(load(a, 5) == load(a, 5));
}

TEST_CASE("different seeds and different indices give different samples") {
    const RandomDataset a(16, make_dims(784), 10, 1), b(16, make_dims(784), 10, 2);
    for (std::size_t i = 0; i < 16; ++i) {
        CHECK(load(a, i).image != load(b, i).image);
        if (i > 0) CHECK(load(a, i).image != load(a, i - 1).image);
    }
}

TEST_CASE("dims only shape the values: [1, 28, 28] holds the values of [784] with the same labels") {
    const RandomDataset flat(8, make_dims(784), 10, 9), image(8, make_dims(1, 28, 28), 10, 9);
    CHECK(image.dims() == make_dims(1, 28, 28));
    for (std::size_t i = 0; i < 8; ++i) CHECK(load(flat, i) == load(image, i));
    const data::Sample s = image.get(3);
    CHECK(s.dims == make_dims(1, 28, 28));
    CHECK(s.image == load(flat, 3).image);
    CHECK(s.label == load(flat, 3).label);
}

TEST_CASE("values and labels follow the documented CounterRng streams") {
    const std::uint64_t seed = 77;
    const RandomDataset d(10, make_dims(5, 3), 7, seed);  // 15 values: not a multiple of 4
    const CounterRng rng{seed};
    for (std::size_t i = 0; i < 10; ++i) {
        const Loaded s = load(d, i);
        for (std::size_t k = 0; k < 15; ++k) CHECK(s.image[k] == rng.uniform(data::random_dataset_stream + i, k));
        CHECK(s.label == static_cast<std::int64_t>(rng.below(data::random_dataset_stream + (1ull << 55), i, 7)));
    }
}

TEST_CASE("values average 1/2 and every class is drawn about equally often") {
    const std::size_t n = 6000, classes = 3;
    const RandomDataset d(n, make_dims(16), classes, 5);
    double sum = 0.0;
    std::vector<std::size_t> counts(classes);
    for (std::size_t i = 0; i < n; ++i) {
        const Loaded s = load(d, i);
        for (float v : s.image) sum += v;
        ++counts[static_cast<std::size_t>(s.label)];
    }
    const double values = static_cast<double>(n * 16);
    CHECK(std::abs(sum / values - 0.5) < 6.0 * std::sqrt(1.0 / 12.0 / values));  // 6 standard errors
    const double p = 1.0 / classes, sd = std::sqrt(n * p * (1 - p));
    for (std::size_t c = 0; c < classes; ++c) CHECK(std::abs(static_cast<double>(counts[c]) - n * p) < 6.0 * sd);
}

TEST_CASE("bad arguments and loads are rejected with the right error") {
    CHECK(contains(message_of<value_error>([] { RandomDataset(4, make_dims(784), 0); }), "num_classes"));
    CHECK(contains(message_of<shape_error>([] { RandomDataset(4, make_dims(28, 0)); }), "[28, 0]"));
    CHECK_THROWS_AS(RandomDataset(4, Dims{}), shape_error);
    CHECK_THROWS_AS(RandomDataset(std::size_t(1) << 55), value_error);
    CHECK(RandomDataset(0).size() == 0);
    const RandomDataset d(3);
    std::vector<float> out(784), small(10);
    CHECK(contains(message_of<value_error>([&] { (void)d.load(3, out); }), "sample index 3 is out of range"));
    CHECK(contains(message_of<shape_error>([&] { (void)d.load(0, small); }), "holds 10 values"));
}
