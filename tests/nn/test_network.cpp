// Network: binding a Sequential to a shape and a backend; forward/backward bookkeeping, flat
// parameter buffers and state-dict keys, modes, seeds, copies, and bad-input errors.
#include <oar/nn/network.hpp>

#include <doctest/doctest.h>

#include <oar/layers/activation.hpp>
#include <oar/layers/batch_norm.hpp>
#include <oar/layers/conv2d.hpp>
#include <oar/layers/dropout.hpp>
#include <oar/layers/flatten.hpp>
#include <oar/layers/linear.hpp>
#include <oar/layers/pool2d.hpp>
#include <oar/models/course.hpp>
#include <oar/testing/gradcheck.hpp>
#include <oar/core/thread_pool.hpp>    // set_num_threads: results must not depend on it
#include <oar/loss/cross_entropy.hpp>  // a whole training step, for the allocation count
#include <oar/optim/adam.hpp>

#include <atomic>   // std::atomic: the operator new counter
#include <cmath>
#include <cstdint>  // std::int64_t
#include <cstdlib>  // std::malloc, std::free, std::aligned_alloc
#include <new>      // std::align_val_t, std::bad_alloc
#include <string>
#include <tuple>        // std::get on a Sequential value's layers
#include <type_traits>  // std::is_same_v
#include <vector>

#include "support/eval_reuse.hpp"  // oar_test::eval_forwards_match_train

// Every operator new of this test program is counted while counting is on (the allocation test).
namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_news{0};
void* counted_alloc(std::size_t n, std::size_t align) {
    if (g_counting.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
    if (n == 0) n = 1;
    void* p = align <= alignof(std::max_align_t) ? std::malloc(n) : std::aligned_alloc(align, (n + align - 1) / align * align);
    if (!p) throw std::bad_alloc();
    return p;
}
// Out of line, so that g++ does not pair an inlined free() with `new` (-Wmismatched-new-delete).
[[gnu::noinline]] void counted_free(void* p) noexcept { std::free(p); }
}  // namespace
void* operator new(std::size_t n) { return counted_alloc(n, 0); }
void* operator new[](std::size_t n) { return counted_alloc(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }

namespace {
using namespace oar;
using CourseCNN = course::CNN;
using CNN = Network<CourseCNN, Shape<1, 28, 28>>;
using Small = Sequential<Conv2D<2, 3, 3, 1, 1>, ReLU, MaxPool2D<2>, Flatten, Linear<48, 5>, Tanh, Linear<5, 2>>;

Tensor ramp(std::size_t n, Dims d, float scale = 1.0f) {
    Tensor t(n, d);
    const CounterRng rng{99};
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = scale * (2.0f * rng.uniform(5, i) - 1.0f);
    return t;
}
}  // namespace

TEST_CASE("the course CNN's state dict has Paddle's keys and layouts") {
    CNN net(0);
    const auto sd = net.state_dict();
    REQUIRE(sd.size() == 6);
    const std::vector<std::string> keys{"0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias"};
    const std::vector<Dims> dims{make_dims(20, 1, 5, 5), make_dims(20), make_dims(20, 20, 5, 5),
                                 make_dims(20), make_dims(980, 10), make_dims(10)};
    for (std::size_t i = 0; i < sd.size(); ++i) {
        CHECK(sd[i].key == keys[i]);
        CHECK(sd[i].dims == dims[i]);
        CHECK(sd[i].values.size() == dims[i].size());
    }
    CHECK(net.parameters().count() == 20350);
}

TEST_CASE("parameters live in one flat buffer, each tensor aligned to a cache line") {
    CNN net(0);
    auto& p = net.parameters();
    CHECK(p.values().size() == CNN::info::param_buffer_size);
    CHECK(p.grads().size() == p.values().size());
    for (const auto& e : p.entries()) {
        CHECK(e.offset % 16 == 0);
        CHECK(reinterpret_cast<std::uintptr_t>(p.value(e).data()) % 64 == 0);
        CHECK(p.value(e).data() == p.values().data() + e.offset);
    }
}

TEST_CASE("initialisation follows Paddle's defaults and the seed") {
    CNN a(7), b(7), c(8);
    CHECK(std::equal(a.parameters().values().begin(), a.parameters().values().end(), b.parameters().values().begin()));
    CHECK_FALSE(
        std::equal(a.parameters().values().begin(), a.parameters().values().end(), c.parameters().values().begin()));
    // biases zero; conv weights N(0, sqrt(2/fan_in)); linear weights within the Xavier bound
    for (const auto& e : a.parameters().entries()) {
        const auto v = a.parameters().value(e);
        if (e.key.ends_with("bias")) {
            for (float x : v) CHECK(x == 0.0f);
        }
    }
    const auto w7 = a.parameters().value(a.parameters().entry("7.weight"));
    const float bound = std::sqrt(6.0f / (980 + 10));
    for (float x : w7) CHECK(std::abs(x) <= bound);
    const auto w3 = a.parameters().value(a.parameters().entry("3.weight"));
    double s2 = 0;
    for (float x : w3) s2 += double(x) * x;
    const double sd = std::sqrt(s2 / double(w3.size())), expected = std::sqrt(2.0 / 500.0);
    // The sample sd of n normal draws has a standard error of sd / sqrt(2n) (0.7 % for 10,000):
    // within 4 standard errors, relative to the expected sd. (doctest::Approx(expected).epsilon(0.03)
    // allowed 0.03 * (1 + expected), i.e. half of expected = 0.063.)
    const double standard_error = expected / std::sqrt(2.0 * double(w3.size()));
    INFO("sd " << sd << ", expected " << expected << ", " << w3.size() << " draws");
    CHECK(std::abs(sd - expected) <= 4 * standard_error);
}

TEST_CASE("forward returns the last layer's output and keeps every activation") {
    Network<Small, Shape<2, 8, 8>> net(3);
    const Tensor x = ramp(4, make_dims(2, 8, 8));
    const auto y = net.forward(x);
    CHECK(y.batch() == 4);
    CHECK(y.dims() == make_dims(2));
    CHECK(net.activation(0).dims() == make_dims(2, 8, 8));
    CHECK(net.activation(0)[5] == x[5]);  // the input is copied in
    CHECK(net.activation(3).dims() == make_dims(3, 4, 4));
    CHECK(net.activation(7).data() == y.data());
    for (std::size_t i = 0; i < net.activation(2).size(); ++i) CHECK(net.activation(2)[i] >= 0.0f);  // after ReLU
}

TEST_CASE("a whole network's backward matches finite differences in double precision") {
    const auto r = testing::gradcheck_network<Network<Small, Shape<2, 8, 8>, cpu64>>({.batch = 3});
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.checked > 300);
    using WithDropout = Sequential<Flatten, Linear<12, 6>, ReLU, DropoutPercent<30>, Linear<6, 3>, Sigmoid>;
    const auto d = testing::gradcheck_network<Network<WithDropout, Shape<3, 2, 2>, cpu64>>({.batch = 4});
    INFO(d.message);
    CHECK(d.ok);
}

TEST_CASE("gradients accumulate over backward calls until clear_grad") {
    Network<Small, Shape<2, 8, 8>> net(1);
    const Tensor x = ramp(2, make_dims(2, 8, 8));
    Tensor dy(2, make_dims(2));
    dy[0] = 1.0f;
    dy[3] = -0.5f;
    net.forward(x);
    net.backward(dy);
    const std::vector<float> once(net.parameters().grads().begin(), net.parameters().grads().end());
    double norm = 0;
    for (float g : once) norm += std::abs(g);
    CHECK(norm > 0);
    net.backward(dy);
    for (std::size_t i = 0; i < once.size(); ++i) CHECK(net.parameters().grads()[i] == doctest::Approx(2 * once[i]));
    net.clear_grad();
    for (float g : net.parameters().grads()) CHECK(g == 0.0f);
}

TEST_CASE("backward can also return the input gradient") {
    Network<Small, Shape<2, 8, 8>> net(1);
    const Tensor x = ramp(2, make_dims(2, 8, 8));
    Tensor dy(2, make_dims(2)), dx(2, make_dims(2, 8, 8));
    dy[1] = 1.0f;
    net.forward(x);
    net.backward(dy, dx);
    double s = 0;
    for (std::size_t i = 0; i < dx.size(); ++i) s += std::abs(dx[i]);
    CHECK(s > 0);
}

TEST_CASE("dropout is active in train mode only, and the mask depends on the step") {
    using D = Sequential<Flatten, Dropout>;
    Network<D, Shape<100>> net(5);
    Tensor x(1, make_dims(100));
    for (std::size_t i = 0; i < 100; ++i) x[i] = 1.0f;
    CHECK(net.training());
    auto copy = [](TensorView v) { return std::vector<float>(v.span().begin(), v.span().end()); };
    net.forward(x);
    const std::vector<float> a = copy(net.forward(x));  // step 1
    CHECK(net.step() == 2);
    net.set_step(0);
    const std::vector<float> first = copy(net.forward(x));
    net.set_step(1);
    auto again = net.forward(x);
    std::size_t zeros = 0, differ = 0;
    for (std::size_t i = 0; i < 100; ++i) {
        zeros += again[i] == 0.0f;
        CHECK((again[i] == 0.0f || again[i] == 2.0f));
        differ += first[i] != again[i];
    }
    CHECK(zeros > 20);
    CHECK(zeros < 80);
    CHECK(differ > 0);
    for (std::size_t i = 0; i < 100; ++i) CHECK(a[i] == again[i]);  // step 1 again: the same mask
    net.eval();
    CHECK_FALSE(net.training());
    auto y = net.forward(x);
    for (std::size_t i = 0; i < 100; ++i) CHECK(y[i] == 1.0f);
    CHECK(net.step() == 2);  // evaluation does not advance the step
}

TEST_CASE("a copied network is independent of the original") {
    Network<Small, Shape<2, 8, 8>> a(2);
    const Tensor x = ramp(3, make_dims(2, 8, 8));
    const auto out = a.forward(x);
    const std::vector<float> ya(out.span().begin(), out.span().end());
    Network<Small, Shape<2, 8, 8>> b = a;
    a.parameters().values()[0] += 1.0f;
    auto yb = b.forward(x);
    for (std::size_t i = 0; i < yb.size(); ++i) CHECK(yb[i] == ya[i]);
    Network<Small, Shape<2, 8, 8>> c = std::move(b);
    auto yc = c.forward(x);
    for (std::size_t i = 0; i < yc.size(); ++i) CHECK(yc[i] == ya[i]);
}

TEST_CASE("a Network built from a Sequential value keeps its layers' settings through copies and moves") {
    using Seq = Sequential<Flatten, Linear<12, 6>, LeakyReLU, Dropout, Linear<6, 3>>;
    static_assert(std::is_same_v<decltype(Sequential{Flatten{}, Linear<12, 6>{}, LeakyReLU{0.3f}, Dropout{0.2f},
                                                     Linear<6, 3>{}}),
                                 Seq>);  // deduced from the layer values
    const Seq seq{{}, {}, LeakyReLU{0.3f}, {0.2f}, {}};
    Network<Seq, Shape<3, 2, 2>> net{seq, 7};
    CHECK(net.layer<2>().negative_slope() == 0.3f);
    CHECK(net.layer<3>().p == 0.2f);
    const Network<Seq, Shape<3, 2, 2>> by_seed(7);  // the same initialisation from the same seed
    CHECK(std::vector<float>(net.parameters().values().begin(), net.parameters().values().end()) ==
          std::vector<float>(by_seed.parameters().values().begin(), by_seed.parameters().values().end()));
    CHECK(by_seed.layer<3>().p == 0.5f);  // Paddle's defaults without a Sequential value
    CHECK(by_seed.layer<2>().negative_slope() == 0.01f);

    auto copy = net;
    CHECK(copy.layer<2>().negative_slope() == 0.3f);
    CHECK(copy.layer<3>().p == 0.2f);
    auto moved = std::move(copy);
    CHECK(moved.layer<3>().p == 0.2f);
    const Seq back = moved.layers();
    CHECK(std::get<2>(back.layers).negative_slope() == 0.3f);
    CHECK(std::get<3>(back.layers).p == 0.2f);
}

TEST_CASE("the settings of a Sequential value decide what its Network computes") {
    // LeakyReLU{0.3f} scales negative inputs by 0.3, not by the default 0.01.
    using Leaky = Sequential<LeakyReLU>;
    Network<Leaky, Shape<4>> leaky{Leaky{LeakyReLU{0.3f}}};
    Tensor x(1, make_dims(4));
    x[0] = -2.0f, x[1] = -1.0f, x[2] = 0.5f, x[3] = 3.0f;
    const auto y = leaky.forward(x);
    CHECK(y[0] == doctest::Approx(-0.6f));
    CHECK(y[1] == doctest::Approx(-0.3f));
    CHECK(y[2] == 0.5f);
    CHECK(y[3] == 3.0f);

    // Dropout{0.2f} drops about a fifth of 10000 ones (5 standard deviations: 40), plain Dropout a half.
    using Drop = Sequential<Flatten, Dropout>;
    Network<Drop, Shape<10000>> fifth{Drop{{}, Dropout{0.2f}}, 3};
    Network<Drop, Shape<10000>> half(3);
    Tensor ones(1, make_dims(10000));
    for (std::size_t i = 0; i < 10000; ++i) ones[i] = 1.0f;
    auto zeros = [&](auto& net) {
        const auto out = net.forward(ones);
        std::size_t z = 0;
        for (std::size_t i = 0; i < out.size(); ++i) z += out[i] == 0.0f;
        return static_cast<double>(z);
    };
    CHECK(std::abs(zeros(fifth) - 2000.0) <= 200.0);
    CHECK(std::abs(zeros(half) - 5000.0) <= 250.0);
    fifth.eval();  // evaluation stays the layer's: no drops
    CHECK(zeros(fifth) == 0.0);
}

TEST_CASE("batches may change size between steps") {
    Network<Small, Shape<2, 8, 8>> net(4);
    const Tensor big = ramp(8, make_dims(2, 8, 8));
    const auto yb = net.forward(big);
    const std::vector<float> first_two(yb.data(), yb.data() + 4);
    Tensor small(2, make_dims(2, 8, 8));
    std::copy(big.data(), big.data() + small.size(), small.data());
    const auto ys = net.forward(small);
    CHECK(ys.batch() == 2);
    for (std::size_t i = 0; i < 4; ++i) CHECK(ys[i] == doctest::Approx(first_two[i]));
    CHECK(net.forward(big).batch() == 8);
}

TEST_CASE("bad inputs to forward and backward are named errors") {
    Network<Small, Shape<2, 8, 8>> net(4);
    Tensor wrong(2, make_dims(2, 8, 7));
    CHECK_THROWS_WITH_AS(net.forward(wrong), doctest::Contains("input has per-sample shape [2, 8, 7]"), shape_error);
    CHECK_THROWS_WITH_AS(net.forward(Tensor(0, make_dims(2, 8, 8))), doctest::Contains("empty"), shape_error);
    CHECK_THROWS_WITH_AS(net.backward(Tensor(2, make_dims(2))), doctest::Contains("call forward first"), value_error);
    net.forward(ramp(3, make_dims(2, 8, 8)));
    CHECK_THROWS_WITH_AS(net.backward(Tensor(2, make_dims(2))),
                         doctest::Contains("dy has shape [2, 2], expected [3, 2]"), shape_error);
    Tensor dx(3, make_dims(2, 8, 8));
    CHECK_THROWS_WITH_AS(net.backward(Tensor(3, make_dims(2)), Tensor(3, make_dims(1)).view()),
                         doctest::Contains("dx has shape"), shape_error);
    CHECK_NOTHROW(net.backward(Tensor(3, make_dims(2)), dx));
}

TEST_CASE("the network type carries its facts") {
    static_assert(std::is_same_v<CNN::output_shape, Shape<10>>);
    static_assert(std::is_same_v<CNN::input_shape, Shape<1, 28, 28>>);
    static_assert(std::is_same_v<CNN::value_type, float>);
    static_assert(CNN::num_layers == 8);
    static_assert(std::is_same_v<Network<Small, Shape<2, 8, 8>, cpu64>::value_type, double>);
    CHECK(CNN(0).seed() == 0);
}

namespace {
/// One training step of the course CNN: forward, cross-entropy, backward, Adam, clear_grad.
struct CnnStep {
    CNN net{3};
    Adam<> opt{net.parameters(), {.learning_rate = 1e-3f}};
    CrossEntropyLoss<> ce;
    Tensor x = ramp(10, make_dims(1, 28, 28));
    std::vector<std::int64_t> labels{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    float operator()() {
        const float loss = ce(net.forward(x), labels);
        net.backward(ce.backward());
        opt.step();
        opt.clear_grad();
        return loss;
    }
};
}  // namespace

TEST_CASE("a steady-state training step allocates nothing on the heap") {
    for (std::size_t threads : {1u, 2u}) {
        set_num_threads(threads);
        CnnStep step;
        step();  // the first step sizes the arena, the kernels' scratch and the pool's threads
        step();
        g_news = 0;
        g_counting = true;
        for (int i = 0; i < 3; ++i) step();
        g_counting = false;
        INFO("threads=" << threads);
        CHECK(g_news.load() == 0);
    }
    // The counter works: a vector allocates.
    g_counting = true;
    std::vector<int> v(3);
    g_counting = false;
    CHECK(g_news.load() >= 1);
    set_num_threads(default_thread_count());
}

TEST_CASE("training gives bit-identical losses and parameters on 1, 2 and 3 threads") {
    std::vector<std::vector<float>> params;
    std::vector<std::vector<float>> losses;
    for (std::size_t threads : {1u, 2u, 3u}) {
        set_num_threads(threads);
        CnnStep step;
        std::vector<float> l;
        for (int i = 0; i < 3; ++i) l.push_back(step());
        losses.push_back(l);
        params.emplace_back(step.net.parameters().values().begin(), step.net.parameters().values().end());
    }
    set_num_threads(default_thread_count());
    CHECK(losses[1] == losses[0]);
    CHECK(losses[2] == losses[0]);
    CHECK(params[1] == params[0]);
    CHECK(params[2] == params[0]);
}

TEST_CASE("backward without dx skips the input gradient of a first Linear after Flatten, with equal results") {
    using Mlp = Network<Sequential<Flatten, Linear<48, 7>, ReLU, Linear<7, 3>>, Shape<3, 4, 4>>;
    Mlp a(4), b(4);
    const Tensor x = ramp(5, make_dims(3, 4, 4));
    Tensor dy(5, make_dims(3)), dx(5, make_dims(3, 4, 4));
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
    a.forward(x);
    a.backward(dy);  // no input gradient wanted: Linear<48, 7> gets no dx
    b.forward(x);
    b.backward(dy, dx);
    const std::vector<float> ga(a.parameters().grads().begin(), a.parameters().grads().end());
    const std::vector<float> gb(b.parameters().grads().begin(), b.parameters().grads().end());
    CHECK(ga == gb);
    double s = 0;
    for (std::size_t i = 0; i < dx.size(); ++i) s += std::abs(dx[i]);
    CHECK(s > 0);  // asked for, the input gradient is still there
}

namespace {
/// Observers that only count: attached, they make the pass run layer by layer (no ReLU fusion).
struct CountForward {
    std::size_t calls = 0;
    void on_forward(const LayerEvent&) { ++calls; }
};
struct CountBackward {
    std::size_t calls = 0;
    void on_backward(const LayerEvent&) { ++calls; }
};
std::vector<float> copy_of(TensorView v) { return {v.data(), v.data() + v.size()}; }
std::vector<float> grads_of(const auto& net) {
    return {net.parameters().grads().begin(), net.parameters().grads().end()};
}
}  // namespace

TEST_CASE("a ReLU after a Conv2D or a Linear is fused at compile time, only where the sequence allows it") {
    static_assert(CNN::fuses_relu(0) && CNN::fuses_relu(3));
    static_assert(!CNN::fuses_relu(1) && !CNN::fuses_relu(2) && !CNN::fuses_relu(7) && !CNN::fuses_relu(8));
    using Mlp = Network<course::MLP, Shape<1, 28, 28>>;
    static_assert(!Mlp::fuses_relu(0) && Mlp::fuses_relu(1) && !Mlp::fuses_relu(4));
    using TanhAfter = Network<Sequential<Linear<4, 4>, Tanh, Linear<4, 4>, ReLU, Flatten>, Shape<4>>;
    static_assert(!TanhAfter::fuses_relu(0) && TanhAfter::fuses_relu(2) && !TanhAfter::fuses_relu(3));
    // A ReLU with an activation after it is part of a longer tail (the epilogue expression).
    using Longer = Network<Sequential<Linear<4, 4>, ReLU, ReLU>, Shape<4>>;
    static_assert(!Longer::fuses_relu(0) && Longer::epilogue_length(0) == 2);
    static_assert(Network<Small, Shape<2, 8, 8>, cpu64>::fuses_relu(0));  // the double gradient checks too
}

TEST_CASE("fused Conv2D/Linear + ReLU: forward, backward and the input gradient equal the unfused layers bit for bit") {
    const auto check = [](auto a, auto b, Dims in, std::size_t batch, std::size_t relu_slot) {
        using Net = decltype(a);
        const Tensor x = ramp(batch, in, 2.0f);
        CountForward seen;
        const auto fused = copy_of(a.forward(x));
        const auto plain = copy_of(b.forward(x, seen));  // observed: layer by layer
        CHECK(seen.calls == Net::num_layers);
        CHECK(fused == plain);
        // Fused, the layer's own output is the ReLU's; unfused, it keeps its negative values.
        CHECK(a.activation(relu_slot - 1).data() == a.activation(relu_slot).data());
        CHECK(copy_of(b.activation(relu_slot)) == copy_of(a.activation(relu_slot)));
        double negatives = 0;
        for (std::size_t i = 0; i < b.activation(relu_slot - 1).size(); ++i)
            negatives += b.activation(relu_slot - 1)[i] < 0.0f ? 1 : 0;
        CHECK(negatives > 0);  // so the mask matters below
        Tensor dy = ramp(batch, a.activation(Net::num_layers).dims(), 0.5f);
        Tensor dxa(batch, in), dxb(batch, in);
        CountBackward watched;
        a.backward(dy, dxa);           // fused: the ReLU's mask applied inside the layer
        b.backward(dy, dxb, watched);  // observed: the ReLU layer's own backward
        CHECK(watched.calls == Net::num_layers);
        CHECK(grads_of(a) == grads_of(b));
        CHECK(copy_of(dxa) == copy_of(dxb));
        double s = 0;
        for (float g : grads_of(a)) s += std::abs(g);
        CHECK(s > 0);
    };
    SUBCASE("the course CNN") {
        set_num_threads(2);
        check(CNN(5), CNN(5), make_dims(1, 28, 28), 7, 2);
        check(CNN(5), CNN(5), make_dims(1, 28, 28), 7, 5);
        set_num_threads(default_thread_count());
    }
    SUBCASE("a Conv2D, ReLU and overlapping 3x3 max pooling") {
        using Net = Network<Sequential<Conv2D<2, 4, 3, 1, 1>, ReLU, MaxPool2D<3, 2>, Flatten, Linear<36, 3>>,
                            Shape<2, 8, 8>>;
        static_assert(Net::fuses_relu(0));
        check(Net(6), Net(6), make_dims(2, 8, 8), 5, 2);
    }
    SUBCASE("a strided Conv2D (im2col path) and a Linear") {
        using Net = Network<Sequential<Conv2D<3, 4, 3, 2, 1>, ReLU, Flatten, Linear<64, 6>, ReLU, Linear<6, 3>>,
                            Shape<3, 8, 8>>;
        static_assert(Net::fuses_relu(0) && Net::fuses_relu(3));
        check(Net(2), Net(2), make_dims(3, 8, 8), 5, 2);
        check(Net(2), Net(2), make_dims(3, 8, 8), 5, 5);
    }
    SUBCASE("a Linear, ReLU and Dropout (its backward applies the ReLU's mask too), in training and evaluation") {
        using Net = Network<Sequential<Flatten, Linear<12, 6>, ReLU, DropoutPercent<30>, Linear<6, 3>>, Shape<3, 2, 2>>;
        static_assert(Net::fuses_relu(1));
        check(Net(4), Net(4), make_dims(3, 2, 2), 9, 3);
        Net a(4), b(4);
        a.eval();
        b.eval();
        check(a, b, make_dims(3, 2, 2), 9, 3);
    }
}

TEST_CASE("training steps with the fused ReLU give the bits of steps run layer by layer") {
    CnnStep fused, plain;
    CountForward f;
    CountBackward b;
    for (int i = 0; i < 3; ++i) {
        const float lf = fused();
        const float lp = plain.ce(plain.net.forward(plain.x, f), plain.labels);
        plain.net.backward(plain.ce.backward(), b);
        plain.opt.step();
        plain.opt.clear_grad();
        CHECK(lf == lp);
    }
    CHECK(f.calls == 3 * CNN::num_layers);
    const std::vector<float> pf(fused.net.parameters().values().begin(), fused.net.parameters().values().end());
    const std::vector<float> pp(plain.net.parameters().values().begin(), plain.net.parameters().values().end());
    CHECK(pf == pp);
    const CNN init(3);
    CHECK(pf != std::vector<float>(init.parameters().values().begin(), init.parameters().values().end()));
}

namespace {
/// A pool, then runs of activations that are not a producer's tail: three after a Flatten (one with
/// a setting) and two after a Dropout; a Linear with a lone GELU (its tail, no chain).
using Chains = Sequential<MaxPool2D<2>, Flatten, LeakyReLU, Hardswish, Tanh, Linear<32, 6>, Dropout, LeakyReLU, ELU,
                          Linear<6, 4>, GELU, Flatten>;
using ChainNet = Network<Chains, Shape<2, 8, 8>>;
}  // namespace

TEST_CASE("runs of activations are chains at compile time where all but the last are cheap, a fused ReLU not counted") {
    static_assert(ChainNet::chain_length(1) == 0 && ChainNet::chain_length(2) == 3);
    static_assert(ChainNet::chain_length(3) == 0 && ChainNet::chain_length(4) == 0);
    static_assert(ChainNet::chain_length(7) == 2 && ChainNet::chain_length(10) == 0);
    static_assert(ChainNet::epilogue_length(9) == 1 && ChainNet::epilogue_length(5) == 0);
    using Lone = Network<Sequential<Linear<4, 4>, Tanh, Flatten, ReLU, LeakyReLU, Sigmoid>, Shape<4>>;
    static_assert(Lone::chain_length(1) == 0 && Lone::chain_length(3) == 3 && Lone::epilogue_length(0) == 1);
    using Starts = Network<Sequential<ReLU, Sigmoid, Linear<4, 4>>, Shape<4>>;  // a chain on the input
    static_assert(Starts::chain_length(0) == 2);
    // GELU, Tanh, Sigmoid, ELU are costly to recompute: a chain ends at them.
    using Costly = Network<Sequential<GELU, Tanh, Sigmoid, ELU>, Shape<4>>;
    static_assert(Costly::chain_length(0) == 0 && Costly::chain_length(1) == 0 && Costly::chain_length(2) == 0);
    using Split = Network<Sequential<LeakyReLU, Tanh, GELU, Hardswish, ReLU, Sigmoid>, Shape<4>>;
    static_assert(Split::chain_length(0) == 2 && Split::chain_length(2) == 0 && Split::chain_length(3) == 3);
    static_assert(CNN::chain_length(1) == 0 && CNN::chain_length(4) == 0);  // the course CNN: ReLUs only
}

TEST_CASE("chained activations: forward, backward and the input gradient equal the layers one by one, bit for bit") {
    // LeakyReLU{-0.5f}: a setting the chain must carry (the default slope gives other bits).
    const Chains seq{{}, {}, LeakyReLU{-0.5f}, {}, {}, {}, {}, {}, ELU{0.3f}, {}, {}, {}};
    for (const bool train : {true, false}) {
        INFO("train=", train);
        ChainNet a(seq, 4), b(seq, 4), c(seq, 4);
        if (!train) {
            a.eval();
            b.eval();
            c.eval();
        }
        const Tensor x = ramp(5, make_dims(2, 8, 8), 3.0f);
        CountForward seen;
        const auto fused = copy_of(a.forward(x));
        const auto plain = copy_of(b.forward(x, seen));
        CHECK(seen.calls == ChainNet::num_layers);
        CHECK(fused == plain);
        // Inside a chain the activations are its output; its input and output are the layers'.
        CHECK(a.activation(3).data() == a.activation(5).data());
        CHECK(a.activation(4).data() == a.activation(5).data());
        CHECK(a.activation(8).data() == a.activation(9).data());
        CHECK(copy_of(a.activation(5)) == copy_of(b.activation(5)));
        CHECK(copy_of(a.activation(7)) == copy_of(b.activation(7)));
        CHECK(copy_of(a.activation(3)) != copy_of(b.activation(3)));  // b kept the LeakyReLU's own output
        Tensor dy = ramp(5, a.activation(ChainNet::num_layers).dims(), 0.5f);
        Tensor dxa(5, make_dims(2, 8, 8)), dxb(5, make_dims(2, 8, 8));
        CountBackward watched;
        a.backward(dy, dxa);
        b.backward(dy, dxb, watched);
        CHECK(watched.calls == ChainNet::num_layers);
        CHECK(grads_of(a) == grads_of(b));
        CHECK(copy_of(dxa) == copy_of(dxb));
        double s = 0;
        for (float v : copy_of(dxa)) s += std::abs(v);
        CHECK(s > 0);
        // A chain's inner values are written before an observed backward after a fused forward.
        Tensor dxc(5, make_dims(2, 8, 8));
        c.forward(x);
        c.backward(dy, dxc, watched);
        CHECK(grads_of(c) == grads_of(b));
        CHECK(copy_of(dxc) == copy_of(dxb));
        CHECK(copy_of(c.activation(3)) == copy_of(b.activation(3)));
    }
    // With the default slope the output differs: the chain does use the layer's value.
    ChainNet d(4);
    CHECK(copy_of(d.forward(ramp(5, make_dims(2, 8, 8), 3.0f))) != copy_of(ChainNet(seq, 4).forward(ramp(5, make_dims(2, 8, 8), 3.0f))));
}

TEST_CASE("a network with activation tails in its producers' epilogues matches finite differences in double precision") {
    using Net = Network<Sequential<Linear<5, 6>, LeakyReLU, Hardswish, GELU, Linear<6, 4>, Hardswish, ReLU, ELU>,
                        Shape<5>, cpu64>;
    static_assert(Net::epilogue_length(0) == 3 && Net::epilogue_length(4) == 3);  // each Linear's tail
    const auto r = testing::gradcheck_network<Net>({.batch = 3, .input_scale = 2.0});
    INFO(r.message, " at ", r.worst);
    CHECK(r.ok);
    CHECK(r.checked > 60);
}

namespace {
/// Tails after producers: a stride-1 Conv2D (implicit GEMM) with three activations (one with a
/// setting), a Linear with a lone Sigmoid, a Linear with GELU (the last layer).
using Tails = Sequential<Conv2D<3, 5, 3, 1, 1>, LeakyReLU, Hardswish, Tanh, MaxPool2D<2>, Flatten, Linear<80, 7>,
                         Sigmoid, Linear<7, 3>, GELU>;
/// Winograd (3x3, 8+ channels) and im2col (stride 2) convolutions with their tails.
using WinoTails = Sequential<Conv2D<3, 8, 3, 1, 1>, ELU, Conv2D<8, 8, 3, 1, 1>, LeakyReLU, ReLU, Conv2D<8, 4, 3, 2, 1>,
                             GELU, Flatten, Linear<64, 3>>;
}  // namespace

TEST_CASE("a producer's tail of activations is one expression in its epilogue, bit for bit the layers one by one") {
    static_assert(Network<Tails, Shape<3, 8, 8>>::epilogue_length(0) == 3);
    static_assert(Network<Tails, Shape<3, 8, 8>>::epilogue_length(6) == 1 && Network<Tails, Shape<3, 8, 8>>::epilogue_length(8) == 1);
    static_assert(!Network<Tails, Shape<3, 8, 8>>::fuses_relu(0) && Network<Tails, Shape<3, 8, 8>>::chain_length(1) == 0);
    static_assert(Network<WinoTails, Shape<3, 8, 8>>::epilogue_length(2) == 2 && Network<WinoTails, Shape<3, 8, 8>>::epilogue_length(5) == 1);
    const auto check = [](auto a, auto b, Dims in, std::size_t batch) {
        using Net = decltype(a);
        auto c = a;  // fused forward, observed backward (DataParallel's per-layer allreduce)
        for (const bool train : {true, false}) {
            INFO("train=", train, " batch=", batch);
            if (!train) {
                a.eval();
                b.eval();
                c.eval();
            }
            const Tensor x = ramp(batch, in, 2.5f);
            CountForward seen;
            const auto fused = copy_of(a.forward(x));
            const auto plain = copy_of(b.forward(x, seen));  // observed: layer by layer
            CHECK(seen.calls == Net::num_layers);
            CHECK(fused == plain);
            CHECK(copy_of(a.activation(1)) == copy_of(b.activation(1)));  // the producer's own output z
            Tensor dy = ramp(batch, a.activation(Net::num_layers).dims(), 0.5f);
            Tensor dxa(batch, in), dxb(batch, in);
            CountBackward watched;
            a.backward(dy, dxa);
            b.backward(dy, dxb, watched);
            CHECK(grads_of(a) == grads_of(b));
            CHECK(copy_of(dxa) == copy_of(dxb));
            double s = 0;
            for (float g : copy_of(dxa)) s += std::abs(g);
            CHECK(s > 0);
            // An observed backward after a fused forward: the values inside the tails are written first.
            Tensor dxc(batch, in);
            CHECK(copy_of(c.forward(x)) == plain);
            c.backward(dy, dxc, watched);
            CHECK(grads_of(c) == grads_of(b));
            CHECK(copy_of(dxc) == copy_of(dxb));
            for (std::size_t i = 1; i < Net::num_layers; ++i) CHECK(copy_of(c.activation(i)) == copy_of(b.activation(i)));
            a.clear_grad();
            b.clear_grad();
            c.clear_grad();
        }
    };
    const Tails tails{{}, LeakyReLU{-0.3f}, {}, {}, {}, {}, {}, {}, {}, {}};
    using TailNet = Network<Tails, Shape<3, 8, 8>>;
    check(TailNet(tails, 6), TailNet(tails, 6), make_dims(3, 8, 8), 3);  // sizes that leave partial vectors
    check(TailNet(tails, 6), TailNet(tails, 6), make_dims(3, 8, 8), 5);
    using WinoNet = Network<WinoTails, Shape<3, 8, 8>>;
    set_num_threads(2);
    check(WinoNet(7), WinoNet(7), make_dims(3, 8, 8), 9);
    set_num_threads(default_thread_count());
    // Inside a tail the activations are its output; z is the layer's.
    TailNet a(tails, 6);
    a.forward(ramp(2, make_dims(3, 8, 8)));
    CHECK(a.activation(2).data() == a.activation(4).data());
    CHECK(a.activation(3).data() == a.activation(4).data());
    CHECK(a.activation(1).data() != a.activation(4).data());
}

namespace {
/// Producers with a BatchNorm first in their tail: a Conv2D without bias, BatchNorm2D, ReLU, Tanh;
/// a Linear, BatchNorm1D, Sigmoid; a Linear and a BatchNorm1D alone (an identity tail).
template <class B = cpu>
using BnNet = Network<Sequential<Conv2D<3, 6, 3, 1, 1, Bias::no>, BatchNorm2D<6>, ReLU, Tanh, MaxPool2D<2>, Flatten,
                                 Linear<96, 5>, BatchNorm1D<5>, Sigmoid, Linear<5, 4>, BatchNorm1D<4>>,
                      Shape<3, 8, 8>, B>;
BnNet<>::sequential bn_layers() {
    BnNet<>::sequential s;
    std::get<1>(s.layers).epsilon = 0.5f;  // a large epsilon: a fold that drops it is far off
    std::get<7>(s.layers).epsilon = 0.25f;
    std::get<10>(s.layers).epsilon = 0.5f;
    return s;
}
/// The state-dict values under `key`.
std::vector<double> entry(const auto& net, const std::string& key) {
    for (const auto& e : net.state_dict())
        if (e.key == key) return {e.values.begin(), e.values.end()};
    FAIL("no state-dict key ", key);
    return {};
}
/// The bound of a folded eval-mode BatchNorm (then an activation of slope at most 1): per value,
/// |fused - layers| <= 2^-22 (|z * scale| + |u|) + 2^-21 |y|, z the producer's output, u the
/// BatchNorm's and y the tail's (the fold computes z * scale + shift with the layer's own scale and
/// shift, bit for bit, but the multiply-add may round once where the layer rounds twice; the
/// activation after it may round its nearby input differently by an ulp).
bool within_fold_bound(const std::vector<float>& fused, const std::vector<float>& ref, const std::vector<float>& z,
                       const std::vector<float>& u, const std::vector<double>& scale, std::size_t inner,
                       double* worst = nullptr) {
    bool ok = fused.size() == ref.size();
    double w = 0;
    for (std::size_t i = 0; ok && i < ref.size(); ++i) {
        const double s = scale[(i / inner) % scale.size()];
        const double bound = std::ldexp(std::abs(z[i] * s) + std::abs(u[i]), -22) + std::ldexp(std::abs(ref[i]), -21);
        const double d = std::abs(static_cast<double>(fused[i]) - ref[i]);
        w = std::max(w, bound > 0 ? d / bound : (d > 0 ? 1e30 : 0.0));
        ok = d <= bound;
    }
    if (worst) *worst = w;
    return ok;
}
std::vector<double> bn_scale(const auto& net, const std::string& n, double eps) {
    const auto g = entry(net, n + ".weight"), v = entry(net, n + "._variance");
    std::vector<double> s(g.size());
    for (std::size_t c = 0; c < s.size(); ++c) s[c] = g[c] / std::sqrt(v[c] + eps);
    return s;
}
}  // namespace

TEST_CASE("an eval-mode BatchNorm after a producer is folded into its epilogue, within the fold's bound; training runs it as itself") {
    using Net = BnNet<>;
    static_assert(Net::epilogue_length(0) == 3 && Net::folds_batch_norm(0));
    static_assert(Net::epilogue_length(6) == 2 && Net::folds_batch_norm(6));
    static_assert(Net::epilogue_length(9) == 1 && Net::folds_batch_norm(9));
    // A Linear over (L, In) rows has its channels last: a BatchNorm1D after it reads L channels, no fold.
    static_assert(!Network<Sequential<Linear<4, 3>, BatchNorm1D<2>, ReLU>, Shape<2, 4>>::folds_batch_norm(0));
    Net a(bn_layers(), 3), b(bn_layers(), 3);
    const Tensor x = ramp(6, make_dims(3, 8, 8), 2.0f);
    CountForward seen;
    CountBackward watched;
    for (int step = 0; step < 3; ++step) {  // training: bits of the layers one by one, statistics moving
        const auto fa = copy_of(a.forward(x)), fb = copy_of(b.forward(x, seen));
        CHECK(fa == fb);
        CHECK(copy_of(a.activation(2)) == copy_of(b.activation(2)));  // the BatchNorm's own output
        Tensor dy = ramp(6, a.activation(Net::num_layers).dims(), 0.25f);
        a.backward(dy);
        b.backward(dy, watched);
        CHECK(grads_of(a) == grads_of(b));
    }
    CHECK(entry(a, "1._mean") == entry(b, "1._mean"));
    CHECK(entry(a, "1._mean") != std::vector<double>(6, 0.0));
    a.eval();
    b.eval();
    a.clear_grad();
    b.clear_grad();
    const auto fa = copy_of(a.forward(x)), fb = copy_of(b.forward(x, seen));
    double worst = 0;
    // The first tail (ReLU, Tanh after the BatchNorm2D) at its output, the Linear's, the last one's.
    CHECK(within_fold_bound(copy_of(a.activation(4)), copy_of(b.activation(4)), copy_of(b.activation(1)),
                            copy_of(b.activation(2)), bn_scale(b, "1", 0.5), 64, &worst));
    INFO("worst / bound: ", worst);
    CHECK(within_fold_bound(copy_of(a.activation(9)), copy_of(b.activation(9)), copy_of(b.activation(7)),
                            copy_of(b.activation(8)), bn_scale(b, "7", 0.25), 1));
    CHECK(within_fold_bound(fa, fb, copy_of(b.activation(10)), fb, bn_scale(b, "10", 0.5), 1));
    CHECK(copy_of(a.activation(1)) == copy_of(b.activation(1)));  // z: the producer's own output
    CHECK(a.activation(2).data() == a.activation(4).data());      // the folded BatchNorm's output: not written
    // A backward after the folded forward recomputes the BatchNorm's output: the layers' bits, and
    // gradients close to the layers' (the tail's output is the fold's).
    Tensor dy = ramp(6, a.activation(Net::num_layers).dims(), 0.25f);
    a.backward(dy);
    b.backward(dy, watched);
    CHECK(a.activation(2).data() != a.activation(4).data());
    CHECK(copy_of(a.activation(2)) == copy_of(b.activation(2)));
    // An observed backward after a folded forward: the same gradients as the plain backward after it.
    Net c = a;
    c.clear_grad();
    c.forward(x);
    c.backward(dy, watched);
    CHECK(grads_of(c) == grads_of(a));
    const auto ga = grads_of(a), gb = grads_of(b);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < ga.size(); ++i) {
        num = std::max(num, static_cast<double>(std::abs(ga[i] - gb[i])));
        den = std::max(den, static_cast<double>(std::abs(gb[i])));
    }
    CHECK(den > 0);
    CHECK(num <= 1e-5 * den);
}

TEST_CASE("the fold's bound is tight enough to reject a broken fold") {
    BnNet<> b(bn_layers(), 3);
    const Tensor x = ramp(4, make_dims(3, 8, 8), 2.0f);
    CountForward seen;
    b.forward(x, seen);  // moves the running statistics away from (0, 1)
    b.forward(x, seen);
    b.eval();
    b.forward(x, seen);
    const auto z = copy_of(b.activation(1)), u = copy_of(b.activation(2));
    const auto gamma = entry(b, "1.weight"), beta = entry(b, "1.bias"), mean = entry(b, "1._mean"),
               var = entry(b, "1._variance");
    const auto fold_with = [&](double eps, double mean_sign) {  // op::bias_map with a scale and shift computed here
        std::vector<float> scale(6), shift(6), zz = z, out(z.size());
        for (std::size_t c = 0; c < 6; ++c) {
            const double inv = 1.0 / std::sqrt(var[c] + eps);
            scale[c] = static_cast<float>(gamma[c] * inv);
            shift[c] = static_cast<float>(beta[c] - mean_sign * mean[c] * gamma[c] * inv);
        }
        kernel<op::bias_map, cpu>::run(expr::identity{}, static_cast<const float*>(nullptr), scale.data(), shift.data(),
                                       zz.data(), out.data(), 4, 6, 64);
        return out;
    };
    const auto s = bn_scale(b, "1", 0.5);
    CHECK(within_fold_bound(fold_with(0.5, 1.0), u, z, u, s, 64));    // the fold as the layer defines it
    CHECK(!within_fold_bound(fold_with(0.0, 1.0), u, z, u, s, 64));   // epsilon dropped
    CHECK(!within_fold_bound(fold_with(0.5, -1.0), u, z, u, s, 64));  // the mean's sign flipped
    std::vector<float> scale(6), shift(6);  // the kernel the network uses: the layer's own bits
    const std::vector<float> g(gamma.begin(), gamma.end()), bt(beta.begin(), beta.end()), m(mean.begin(), mean.end()),
        v(var.begin(), var.end());
    kernel<op::batch_norm_fold, cpu>::run(6, g.data(), bt.data(), m.data(), v.data(), 0.5f, scale.data(), shift.data());
    std::vector<float> zz = z, out(z.size());
    kernel<op::bias_map, cpu>::run(expr::identity{}, static_cast<const float*>(nullptr), scale.data(), shift.data(),
                                   zz.data(), out.data(), 4, 6, 64);
    CHECK(within_fold_bound(out, u, z, u, s, 64));
    CHECK(zz == z);  // without a bias, z is only read
}

TEST_CASE("eval-mode forwards reuse packed Linear weights only while the parameters are unchanged") {
    // Linears wide enough for the tiled GEMM (the path that packs the weight); train-mode forwards
    // (no Dropout here, so the same function) never use the packed copies: they are the reference.
    using Seq = Sequential<Flatten, Linear<60, 48>, ReLU, Linear<48, 40>, Sigmoid, Linear<40, 10>>;
    Network<Seq, Shape<60>> net(3);
    Tensor x(7, make_dims(60));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 37) % 101) / 50.0f - 1.0f;
    const auto check_eval = [&](const char* what) { return oar_test::eval_forwards_match_train(net, x, what); };
    const auto fresh = check_eval("fresh network");
    auto before = fresh;
    net.parameters().values()[net.parameters().entry("1.weight").offset + 5] += 0.5f;  // a write through values()
    auto after = check_eval("after a write through values()");
    CHECK(after != before);
    before = after;
    {
        auto w = net.parameters().value(net.parameters().entry("3.weight"));
        for (float& v : w) v *= -1.0f;
    }
    after = check_eval("after a write through value(entry)");
    CHECK(after != before);
    before = after;
    Adam opt(net.parameters(), {.learning_rate = 0.05f});
    CrossEntropyLoss<> ce;
    const std::vector<std::int64_t> y = {0, 1, 2, 3, 4, 5, 6};
    ce(net.forward(x), y);
    net.backward(ce.backward());
    opt.step();
    after = check_eval("after an optimizer step");
    CHECK(after != before);
    before = after;
    const Network<Seq, Shape<60>> initial(3);  // the fresh network's weights
    net.load_state_dict(initial.state_dict());
    after = check_eval("after load_state_dict");
    CHECK(after == fresh);
    before = after;
    std::vector<float> host(net.parameters().host_values().begin(), net.parameters().host_values().end());
    host[net.parameters().entry("5.weight").offset + 3] += 1.0f;
    net.parameters().upload_values(host);
    after = check_eval("after upload_values");
    CHECK(after != before);
    Network<Seq, Shape<60>> copy(net);  // its own buffer and cache: its eval forward is the original's
    copy.eval();
    const auto yc = copy.forward(x);
    CHECK(std::vector<float>(yc.data(), yc.data() + yc.size()) == after);
}
