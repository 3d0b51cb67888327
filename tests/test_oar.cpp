// Tests of include/oar/oar.hpp, the umbrella header: it alone is enough to build, train and
// inspect a network (layers, Network, losses, metrics, optimizers, summary, IDX reading), and it
// keeps simdjson and xtensor out as it promises.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cmath>    // std::isfinite, std::sin
#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <span>     // std::span
#include <string>   // std::string
#include <vector>   // std::vector

#include <oar/oar.hpp>  // under test

#ifdef SIMDJSON_H
#error "oar/oar.hpp must not pull in simdjson"
#endif
#ifdef XTENSOR_VERSION_MAJOR
#error "oar/oar.hpp must not pull in xtensor (oar/interop/xtensor.hpp is opt-in)"
#endif

// Everything the umbrella announces is declared by it.
static_assert(oar::Backend<oar::cpu> && oar::Backend<oar::cpu64>);
static_assert(oar::Layer<oar::Linear<3, 2>> && oar::Layer<oar::Conv2D<1, 2, 3>>);
static_assert(oar::Layer<oar::MaxPool2D<2>> && oar::Layer<oar::AvgPool2D<2>>);
static_assert(oar::Layer<oar::ReLU> && oar::Layer<oar::Sigmoid> && oar::Layer<oar::Tanh> && oar::Layer<oar::Softmax>);
static_assert(oar::Layer<oar::Flatten> && oar::Layer<oar::Dropout> && oar::Layer<oar::DropoutPercent<20>>);
static_assert(oar::Optimizer<oar::SGD<>> && oar::Optimizer<oar::Momentum<>> && oar::Optimizer<oar::Adagrad<>> &&
              oar::Optimizer<oar::Adam<>>);
static_assert(oar::ShapeType<oar::Shape<1, 28, 28>>);
static_assert(sizeof(oar::CounterRng) > 0 && sizeof(oar::Tensor) > 0 && sizeof(oar::MSELoss<>) > 0 &&
              sizeof(oar::CrossEntropyLoss<>) > 0 && sizeof(oar::Accuracy) > 0 && sizeof(oar::data::IdxArray) > 0);
static_assert(std::is_same_v<decltype(oar::data::read_idx_pair("", "")), oar::data::LabeledImages>);

namespace {

using Mlp = oar::Network<oar::Sequential<oar::Linear<2, 16>, oar::Tanh, oar::Linear<16, 1>>, oar::Shape<2>>;

/// 32 points on a grid in [-1, 1]^2 and the target y = sin(2 x0) - x1 / 2.
void toy_regression(oar::Tensor& x, oar::Tensor& y) {
    x = oar::Tensor(32, oar::make_dims(2));
    y = oar::Tensor(32, oar::make_dims(1));
    for (std::size_t i = 0; i < 32; ++i) {
        const float a = -1.0f + 2.0f * static_cast<float>(i % 8) / 7.0f;
        const float b = -1.0f + 2.0f * static_cast<float>(i / 8) / 3.0f;
        x[2 * i] = a;
        x[2 * i + 1] = b;
        y[i] = std::sin(2.0f * a) - 0.5f * b;
    }
}

/// MSE of the network's prediction, computed here, not by oar.
double mse_by_hand(Mlp& net, const oar::Tensor& x, const oar::Tensor& y) {
    const auto out = net.forward(x);
    double s = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) {
        const double d = static_cast<double>(out[i]) - static_cast<double>(y[i]);
        s += d * d;
    }
    return s / static_cast<double>(y.size());
}

}  // namespace

TEST_CASE("an MLP built from the umbrella header learns a toy regression with Adam in 20 steps") {
    oar::Tensor x, y;
    toy_regression(x, y);
    Mlp net(1);
    oar::MSELoss<> loss_fn;
    oar::Adam<> adam(net.parameters(), {.learning_rate = 0.01f});

    const double start = mse_by_hand(net, x, y);
    std::vector<double> losses;
    for (int step = 0; step < 20; ++step) {
        net.clear_grad();
        const auto out = net.forward(x);
        const float loss = loss_fn(out, y);
        REQUIRE(std::isfinite(loss));
        losses.push_back(loss);
        net.backward(loss_fn.backward());
        adam.step();
    }
    const double end = mse_by_hand(net, x, y);
    INFO("loss at step 0: ", losses.front(), ", at step 19: ", losses.back(), ", after training: ", end);
    CHECK(losses.front() == doctest::Approx(start).epsilon(1e-5));  // oar's loss is the MSE
    CHECK(end < 0.25 * start);
    CHECK(losses.back() < losses.front());
    // At this small step size the descent is steady (it is monotone with g++ 12 -O2); allow a
    // couple of rounding-level wiggles for other compilers and instruction sets.
    std::size_t decreases = 0;
    for (std::size_t i = 1; i < losses.size(); ++i) decreases += losses[i] < losses[i - 1];
    CHECK(decreases >= 17);
}

TEST_CASE("a classifier built from the umbrella header fits four labelled points with cross-entropy") {
    using Clf = oar::Network<oar::Sequential<oar::Linear<2, 8>, oar::ReLU, oar::Linear<8, 2>>, oar::Shape<2>>;
    Clf net(3);
    oar::Tensor x(4, oar::make_dims(2));
    const float pts[8] = {1, 1, -1, -1, 1, -1, -1, 1};
    for (std::size_t i = 0; i < 8; ++i) x[i] = pts[i];
    const std::vector<std::int64_t> labels{0, 0, 1, 1};  // XOR-like: the sign of x0 * x1
    oar::CrossEntropyLoss<> ce;
    oar::Adam<> adam(net.parameters(), {.learning_rate = 0.05f});
    float first = 0.0f, last = 0.0f;
    for (int step = 0; step < 100; ++step) {
        net.clear_grad();
        const float loss = ce(net.forward(x), labels);
        if (step == 0) first = loss;
        last = loss;
        net.backward(ce.backward());
        adam.step();
    }
    CHECK(first > 0.3f);  // ln 2 = 0.69 for an undecided network
    CHECK(last < 0.1f * first);
    CHECK(oar::accuracy(net.forward(x), labels) == 1.0f);
}

TEST_CASE("the umbrella header's summary describes the same network") {
    const std::string s = oar::summary<Mlp>();
    CHECK(s.find("Linear") != std::string::npos);
    CHECK(s.find("Tanh") != std::string::npos);
    CHECK(s.find("Total params: " + std::to_string(2 * 16 + 16 + 16 * 1 + 1)) != std::string::npos);
}
