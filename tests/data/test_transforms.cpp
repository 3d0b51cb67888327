// Tests of include/oar/data/transforms.hpp: each transform against a naive reference written
// here (the formula in double, a padded copy, a reversed row), the adaptor's dims chain and
// errors, and random choices that depend only on (seed, epoch, index, position in the chain).
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <algorithm>    // std::equal
#include <array>        // std::array
#include <cmath>        // std::abs, std::sqrt
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t, std::uint64_t
#include <set>          // std::set: the crop windows seen
#include <span>         // std::span
#include <string>       // std::string
#include <thread>       // std::thread: loads from two threads
#include <type_traits>  // std::is_same_v
#include <utility>      // std::move, std::pair
#include <vector>       // std::vector

#include <oar/data/transforms.hpp>  // under test
#include <oar/kernels/expr.hpp>     // expr::then: chained transforms

#include "support/errors.hpp"  // oar_test::message_of, contains: checking the error messages
#include "support/random.hpp"  // oar_test::random_vector: inputs for Normalize and Scale

namespace {

using namespace oar;
using namespace oar::data;
using oar_test::contains;
using oar_test::message_of;

/// n samples of shape d; value k of sample i is i * 10000 + k + 1 (unique, never 0), label i % 7.
InMemoryDataset counting(std::size_t n, Dims d) {
    std::vector<float> v(n * d.size());
    std::vector<std::int64_t> labels(n);
    for (std::size_t i = 0; i < n; ++i) {
        labels[i] = static_cast<std::int64_t>(i % 7);
        for (std::size_t k = 0; k < d.size(); ++k) v[i * d.size() + k] = static_cast<float>(i * 10000 + k + 1);
    }
    return InMemoryDataset(std::move(v), std::move(labels), d);
}

template <class D>
std::vector<float> sample(const D& ds, std::size_t i) {
    std::vector<float> v(ds.dims().size());
    (void)ds.load(i, v);
    return v;
}

/// All samples of ds, concatenated.
template <class D>
std::vector<float> all_samples(const D& ds) {
    std::vector<float> v;
    for (std::size_t i = 0; i < ds.size(); ++i) {
        const auto s = sample(ds, i);
        v.insert(v.end(), s.begin(), s.end());
    }
    return v;
}

/// The h x w window at (top, left) of the (C, H, W) image `in` padded by p values `fill` per side,
/// built by materialising the padded image.
std::vector<float> naive_crop(const std::vector<float>& in, std::size_t c, std::size_t hgt, std::size_t wid,
                              std::size_t p, float fill, std::size_t top, std::size_t left, std::size_t h,
                              std::size_t w) {
    const std::size_t ph = hgt + 2 * p, pw = wid + 2 * p;
    std::vector<float> padded(c * ph * pw, fill);
    for (std::size_t ch = 0; ch < c; ++ch)
        for (std::size_t y = 0; y < hgt; ++y)
            for (std::size_t x = 0; x < wid; ++x) padded[(ch * ph + y + p) * pw + x + p] = in[(ch * hgt + y) * wid + x];
    std::vector<float> out;
    for (std::size_t ch = 0; ch < c; ++ch)
        for (std::size_t y = 0; y < h; ++y)
            for (std::size_t x = 0; x < w; ++x) out.push_back(padded[(ch * ph + top + y) * pw + left + x]);
    return out;
}

/// Each row (last dimension of length w) reversed.
std::vector<float> naive_flip(const std::vector<float>& in, std::size_t w) {
    std::vector<float> out(in.size());
    for (std::size_t r = 0; r < in.size() / w; ++r)
        for (std::size_t x = 0; x < w; ++x) out[r * w + x] = in[r * w + w - 1 - x];
    return out;
}

struct NotATransform {
    Dims output_dims(Dims in) const { return in; }  // no apply
};

}  // namespace

static_assert(Transform<Normalize> && Transform<Scale> && Transform<Reshape> && Transform<RandomCrop> &&
              Transform<RandomHorizontalFlip>);
static_assert(!Transform<int> && !Transform<NotATransform> && !Transform<Scale&>);
static_assert(Dataset<TransformDataset<InMemoryDataset, Normalize, RandomCrop>>);
static_assert(Dataset<TransformDataset<const InMemoryDataset&>>);
static_assert(Dataset<TransformDataset<TransformDataset<InMemoryDataset, Scale>, Scale>>);

TEST_CASE("Normalize computes (x - mean[c]) / std[c] over the channels of a CHW image") {
    const Dims d = make_dims(3, 4, 5);
    const std::vector<float> in = oar_test::random_vector<float>(d.size(), 11, 3.0);
    const std::vector<float> mean{0.25f, -1.5f, 2.0f}, sd{0.5f, 2.0f, 0.125f};
    const Normalize n(mean, sd);
    CHECK(n.output_dims(d) == d);
    std::vector<float> out(d.size());
    n.apply(in, d, out, {});
    for (std::size_t k = 0; k < d.size(); ++k) {
        const std::size_t c = k / 20;
        CHECK(out[k] == static_cast<float>((static_cast<double>(in[k]) - mean[c]) / sd[c]));
    }
}

TEST_CASE("Normalize with one mean and std applies them to every value of any shape") {
    const Dims d = make_dims(784);
    const std::vector<float> in = oar_test::random_vector<float>(d.size(), 5);
    std::vector<float> out(d.size());
    Normalize({0.1307f}, {0.3081f}).apply(in, d, out, {});
    for (std::size_t k = 0; k < d.size(); ++k)
        CHECK(out[k] == static_cast<float>((static_cast<double>(in[k]) - 0.1307f) / 0.3081f));
}

TEST_CASE("Normalize takes std::array means such as CIFAR-10's and rejects bad lists") {
    const std::array<float, 3> mean{0.4914f, 0.4822f, 0.4465f}, sd{0.2470f, 0.2435f, 0.2616f};
    const Normalize n(mean, sd);
    CHECK(n.mean().size() == 3);
    CHECK(n.stddev()[2] == 0.2616f);
    CHECK(contains(message_of<value_error>([] { Normalize({0.5f, 0.5f}, {0.5f}); }), "2 means and 1 standard"));
    CHECK(contains(message_of<value_error>([] { Normalize(std::vector<float>{}, std::vector<float>{}); }), "0 means"));
    CHECK(contains(message_of<value_error>([] { Normalize({0.5f, 0.5f}, {0.5f, 0.0f}); }), "std[1] is 0"));
    CHECK(contains(message_of<value_error>([] { Normalize({0.5f}, {-1.0f}); }), "std[0] is -1"));
}

TEST_CASE("Normalize with 3 channels refuses a 1-channel input when the adaptor is made") {
    const auto mnist = counting(2, make_dims(1, 28, 28));
    const std::string what =
        message_of<shape_error>([&] { (void)transform(mnist, Normalize({0.f, 0.f, 0.f}, {1.f, 1.f, 1.f})); });
    INFO(what);
    CHECK(contains(what, "transform 0 of 1"));
    CHECK(contains(what, "[1, 28, 28]"));
    CHECK(contains(what, "3 channels"));
    CHECK(what.find("oar: ", 1) == std::string::npos);  // one prefix, not two
}

TEST_CASE("Scale computes x * a + b and its named constructors map the usual ranges") {
    const Dims d = make_dims(2, 50);
    const std::vector<float> in = oar_test::random_vector<float>(d.size(), 3, 100.0);
    std::vector<float> out(d.size());
    const Scale s{0.75f, -2.5f};
    CHECK(s.output_dims(d) == d);
    s.apply(in, d, out, {});
    for (std::size_t k = 0; k < d.size(); ++k) CHECK(out[k] == doctest::Approx(in[k] * 0.75 - 2.5).epsilon(1e-6));
    for (std::size_t k = 0; k < d.size(); ++k) CHECK(out[k] == in[k] * 0.75f + -2.5f);  // the float formula's bits

    const std::vector<float> edges{0.0f, 127.5f, 255.0f};
    std::vector<float> o(3);
    Scale::byte_to_unit().apply(edges, make_dims(3), o, {});
    CHECK(o[0] == 0.0f);
    CHECK(o[1] == doctest::Approx(0.5).epsilon(1e-6));
    CHECK(o[2] == doctest::Approx(1.0).epsilon(1e-6));
    Scale::byte_to_symmetric().apply(edges, make_dims(3), o, {});
    CHECK(o[0] == -1.0f);
    CHECK(std::abs(o[1]) <= 1e-6f);
    CHECK(o[2] == doctest::Approx(1.0).epsilon(1e-6));
    const std::vector<float> unit{0.0f, 0.5f, 1.0f};
    Scale::unit_to_symmetric().apply(unit, make_dims(3), o, {});
    CHECK(o == std::vector<float>{-1.0f, 0.0f, 1.0f});
}

TEST_CASE("Reshape [784] -> [1, 28, 28] keeps the values and the adaptor reports the new dims") {
    const auto flat = counting(3, make_dims(784));
    const auto t = transform(flat, Reshape(make_dims(1, 28, 28)));
    CHECK(t.dims() == make_dims(1, 28, 28));
    CHECK(t.dims_at(0) == make_dims(784));
    CHECK(t.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) CHECK(sample(t, i) == sample(flat, i));
    const Sample s = t.get(2);
    CHECK(s.dims == make_dims(1, 28, 28));
    CHECK(s.label == 2);
}

TEST_CASE("Reshape to a different element count fails when the adaptor is made, naming both shapes") {
    const auto flat = counting(1, make_dims(784));
    const std::string what =
        message_of<shape_error>([&] { (void)transform(flat, Scale{}, Reshape(make_dims(1, 28, 27))); });
    INFO(what);
    CHECK(contains(what, "transform 1 of 2"));
    CHECK(contains(what, "[784] (784 values)"));
    CHECK(contains(what, "[1, 28, 27] (756 values)"));
    CHECK_THROWS_AS(Reshape(make_dims(4, 0)), shape_error);
    CHECK_THROWS_AS(Reshape(Dims{}), shape_error);
}

TEST_CASE("RandomCrop output equals a naive padded copy at exactly one window, and covers every window") {
    const Dims d = make_dims(2, 6, 5);
    const std::size_t p = 2, h = 4, w = 3;
    const auto ds = counting(600, d);
    const auto t = transform(ds, RandomCrop(make_dims(h, w), p, -1.0f));
    CHECK(t.dims() == make_dims(2, 4, 3));
    std::set<std::pair<std::size_t, std::size_t>> seen;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < ds.size(); ++i) {
        const auto out = sample(t, i), in = sample(ds, i);
        std::size_t matches = 0;
        std::pair<std::size_t, std::size_t> where{};
        for (std::size_t top = 0; top + h <= 6 + 2 * p; ++top)
            for (std::size_t left = 0; left + w <= 5 + 2 * p; ++left)
                if (naive_crop(in, 2, 6, 5, p, -1.0f, top, left, h, w) == out) {
                    ++matches;
                    where = {top, left};
                }
        if (matches != 1) ++bad;
        const auto offs = std::get<0>(t.transforms()).offsets(d, TransformContext{0, 0, i, 0});
        if (where != std::pair{offs[0], offs[1]}) ++bad;
        seen.insert(where);
    }
    CHECK(bad == 0);
    CHECK(seen.size() == 7 * 7);  // top in [0, 6], left in [0, 6]
}

TEST_CASE("RandomCrop of the whole input without padding is the identity, on (H, W) inputs too") {
    const auto ds = counting(5, make_dims(6, 7));
    const auto t = transform(ds, RandomCrop(make_dims(6, 7)));
    for (std::size_t i = 0; i < 5; ++i) CHECK(sample(t, i) == sample(ds, i));
}

TEST_CASE("RandomCrop rejects windows larger than the padded input, other ranks and empty windows") {
    const auto ds = counting(1, make_dims(3, 32, 32));
    CHECK(transform(ds, RandomCrop(40, 4)).dims() == make_dims(3, 40, 40));
    std::string what = message_of<shape_error>([&] { (void)transform(ds, RandomCrop(41, 4)); });
    CHECK(contains(what, "window 41x41 is larger than input [3, 32, 32] padded by 4 (40x40)"));
    what = message_of<shape_error>([&] { (void)transform(counting(1, make_dims(784)), RandomCrop(28)); });
    CHECK(contains(what, "[784]"));
    CHECK_THROWS_AS(RandomCrop(0), value_error);
    CHECK_THROWS_AS(RandomCrop(make_dims(1, 2, 3)), value_error);
}

TEST_CASE("RandomHorizontalFlip with p = 1 reverses every row and with p = 0 copies") {
    const Dims d = make_dims(3, 4, 5);
    const auto ds = counting(4, d);
    const auto always = transform(ds, RandomHorizontalFlip(1.0f));
    const auto never = transform(ds, RandomHorizontalFlip(0.0f));
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(sample(always, i) == naive_flip(sample(ds, i), 5));
        CHECK(sample(never, i) == sample(ds, i));
    }
    CHECK_THROWS_AS(RandomHorizontalFlip(1.5f), value_error);
    CHECK_THROWS_AS(RandomHorizontalFlip(-0.1f), value_error);
    CHECK_THROWS_AS((void)transform(counting(1, make_dims(10)), RandomHorizontalFlip()), shape_error);
}

TEST_CASE("RandomHorizontalFlip with p = 0.5 mirrors about half the samples and copies the rest") {
    const std::size_t n = 4000;
    const auto ds = counting(n, make_dims(1, 2, 3));
    const auto t = transform(ds, RandomHorizontalFlip());
    std::size_t flipped = 0, neither = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const auto out = sample(t, i), in = sample(ds, i);
        if (out == naive_flip(in, 3))
            ++flipped;
        else if (out != in)
            ++neither;
    }
    CHECK(neither == 0);
    const double bound = 6.0 * std::sqrt(0.25 / static_cast<double>(n));  // 6 standard errors
    CHECK(std::abs(static_cast<double>(flipped) / n - 0.5) < bound);
}

TEST_CASE("random transforms depend only on (seed, epoch, index): load order and threads do not matter") {
    const auto ds = counting(64, make_dims(3, 8, 8));
    auto a = transform(ds, RandomCrop(8, 2), RandomHorizontalFlip());
    auto b = transform(ds, RandomCrop(8, 2), RandomHorizontalFlip());
    a.set_seed(42);
    b.set_seed(42);
    a.set_epoch(3);
    b.set_epoch(3);
    std::vector<std::vector<float>> forward(64), backward(64), threaded(64);
    for (std::size_t i = 0; i < 64; ++i) forward[i] = sample(a, i);
    for (std::size_t i = 64; i-- > 0;) backward[i] = sample(b, i);
    std::thread t0([&] { for (std::size_t i = 0; i < 64; i += 2) threaded[i] = sample(a, i); });
    std::thread t1([&] { for (std::size_t i = 63; i < 64; i -= 2) threaded[i] = sample(a, i); });
    t0.join();
    t1.join();
    CHECK(forward == backward);
    CHECK(forward == threaded);
}

TEST_CASE("each epoch and each seed draws new crops, and going back to an epoch repeats it") {
    const auto ds = counting(32, make_dims(3, 8, 8));
    auto t = transform(ds, RandomCrop(8, 2), RandomHorizontalFlip());
    const auto e0 = all_samples(t);
    t.set_epoch(1);
    CHECK(t.epoch() == 1);
    const auto e1 = all_samples(t);
    CHECK(e1 != e0);
    std::size_t same = 0;  // samples that drew the same crop and flip in both epochs: few
    for (std::size_t i = 0; i < 32; ++i)
        same += std::equal(e0.begin() + i * 192, e0.begin() + (i + 1) * 192, e1.begin() + i * 192);
    CHECK(same < 8);
    t.set_epoch(0);
    CHECK(all_samples(t) == e0);
    t.set_seed(7);
    CHECK(t.seed() == 7);
    CHECK(all_samples(t) != e0);
}

TEST_CASE("two random transforms in one chain draw independent numbers") {
    // Two flips with p = 0.5: were they drawing the same number, every sample would come out unflipped.
    const std::size_t n = 2000;
    const auto ds = counting(n, make_dims(1, 1, 4));
    const auto t = transform(ds, RandomHorizontalFlip(), RandomHorizontalFlip());
    std::size_t flipped = 0;
    for (std::size_t i = 0; i < n; ++i) flipped += sample(t, i) == naive_flip(sample(ds, i), 4);
    const double bound = 6.0 * std::sqrt(0.25 / static_cast<double>(n));
    CHECK(std::abs(static_cast<double>(flipped) / n - 0.5) < bound);
}

TEST_CASE("a CIFAR-style chain crops, flips and normalises each sample like a naive pipeline") {
    const Dims d = make_dims(3, 32, 32);
    const auto ds = counting(20, d);
    const std::array<float, 3> mean{0.4914f, 0.4822f, 0.4465f}, sd{0.2470f, 0.2435f, 0.2616f};
    auto t = transform(ds, RandomCrop(32, 4), RandomHorizontalFlip(), Normalize(mean, sd));
    t.set_seed(9);
    t.set_epoch(2);
    CHECK(t.dims() == d);
    const auto& [crop, flip, norm] = t.transforms();
    for (std::size_t i = 0; i < ds.size(); ++i) {
        const auto offs = crop.offsets(d, {9, 2, i, 0});
        std::vector<float> expect = naive_crop(sample(ds, i), 3, 32, 32, 4, 0.0f, offs[0], offs[1], 32, 32);
        if (flip.flips({9, 2, i, 1})) expect = naive_flip(expect, 32);
        for (std::size_t k = 0; k < expect.size(); ++k)
            expect[k] = static_cast<float>((static_cast<double>(expect[k]) - mean[k / 1024]) / sd[k / 1024]);
        std::vector<float> out(d.size());
        CHECK(t.load(i, out) == static_cast<std::int64_t>(i % 7));
        CHECK(out == expect);
    }
    (void)norm;
}

TEST_CASE("transform() borrows an lvalue dataset and owns an rvalue one") {
    const auto ds = counting(3, make_dims(4));
    const auto borrowed = transform(ds, Scale{2.0f, 0.0f});
    static_assert(std::is_same_v<decltype(borrowed), const TransformDataset<const InMemoryDataset&, Scale>>);
    CHECK(&borrowed.base() == &ds);
    auto owned = transform(counting(3, make_dims(4)), Scale{2.0f, 0.0f});
    static_assert(std::is_same_v<decltype(owned), TransformDataset<InMemoryDataset, Scale>>);
    CHECK(all_samples(owned) == all_samples(borrowed));
    CHECK(sample(owned, 1)[0] == 2.0f * 10001.0f);
}

TEST_CASE("an adaptor with no transforms forwards, and an adaptor over an adaptor applies both chains") {
    const auto ds = counting(5, make_dims(784));
    const auto none = transform(ds);
    CHECK(all_samples(none) == all_samples(ds));
    const auto inner = transform(ds, Reshape(make_dims(1, 28, 28)), RandomCrop(24));
    const auto outer = transform(inner, RandomHorizontalFlip(1.0f), Scale{1.0f, 1.0f});
    CHECK(outer.dims() == make_dims(1, 24, 24));
    for (std::size_t i = 0; i < 5; ++i) {
        std::vector<float> expect = naive_flip(sample(inner, i), 24);
        for (float& v : expect) v += 1.0f;
        CHECK(sample(outer, i) == expect);
    }
}

TEST_CASE("the adaptor checks the sample index and the output span") {
    const auto t = transform(counting(3, make_dims(2, 2)), Scale{});
    std::vector<float> out(4), small(3);
    CHECK(contains(message_of<value_error>([&] { (void)t.load(3, out); }), "sample index 3 is out of range (size 3)"));
    CHECK(contains(message_of<shape_error>([&] { (void)t.load(0, small); }), "holds 3 values"));
    CHECK(contains(message_of<shape_error>([&] { Scale{}.apply(out, make_dims(2, 2), small, {}); }), "Scale"));
}

TEST_CASE("Scale and Normalize are expression functors: chained with expr::then they give the two transforms' bits in one pass") {
    const Dims d = make_dims(1, 7, 9);
    const std::vector<float> in = oar_test::random_vector<float>(d.size(), 21, 255.0);
    std::vector<float> mid(d.size()), two(d.size()), one(d.size());
    Scale::byte_to_unit().apply(in, d, mid, {});
    Normalize({0.1307f}, {0.3081f}).apply(mid, d, two, {});
    const auto f = oar::expr::then(oar::data::scale_fn{1.0f / 255.0f, 0.0f}, oar::data::standardize_fn{0.1307f, 0.3081f});
    oar::cpu_detail::map_span(f, in.data(), one.data(), one.size());
    CHECK(one == two);
    double s = 0;
    for (float v : one) s += std::abs(v);
    CHECK(s > 0);
}
