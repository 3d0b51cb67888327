// Tests of oar/interop/xtensor.hpp: a network takes xtensor containers (read in place) and
// expressions (evaluated once) as inputs, with the same outputs as from an oar::Tensor of the same
// values; outputs, tensors, parameters and gradients come back as zero-copy xtensor views (writes
// through a view change oar's memory); make_dataset builds a dataset from xt::xtensor<float, 4>;
// bad shapes are shape_errors.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/interop/xtensor.hpp>  // the header under test

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <vector>   // std::vector

#include <xtensor/xarray.hpp>    // xt::xarray
#include <xtensor/xbuilder.hpp>  // xt::arange
#include <xtensor/xmath.hpp>     // xt::sum
#include <xtensor/xtensor.hpp>   // xt::xtensor
#include <xtensor/xview.hpp>     // xt::view, xt::all, xt::range

#include <oar/layers/activation.hpp>  // ReLU
#include <oar/layers/conv2d.hpp>      // Conv2D
#include <oar/layers/flatten.hpp>     // Flatten
#include <oar/layers/linear.hpp>      // Linear
#include <oar/nn/network.hpp>         // Network
#include <oar/nn/sequential.hpp>      // Sequential

namespace {
using Seq = oar::Sequential<oar::Conv2D<1, 2, 3, 1, 1>, oar::ReLU, oar::Flatten, oar::Linear<32, 3>>;
using In = oar::Shape<1, 4, 4>;
using Net = oar::Network<Seq, In>;

/// (batch, 1, 4, 4) values that differ per element.
xt::xtensor<float, 4> images(std::size_t batch) {
    xt::xtensor<float, 4> x = xt::zeros<float>({batch, std::size_t{1}, std::size_t{4}, std::size_t{4}});
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = 0.1f * static_cast<float>(i % 17) - 0.7f;
    return x;
}

/// The outputs of a forward on an oar::Tensor holding x's values (the reference).
std::vector<float> forward_tensor(Net& net, const xt::xtensor<float, 4>& x) {
    oar::Tensor t(x.shape()[0], In::dims);
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = x.data()[i];
    const auto y = net.forward(t);
    return {y.data(), y.data() + y.size()};
}

std::vector<float> values(oar::TensorView y) { return {y.data(), y.data() + y.size()}; }
}  // namespace

static_assert(oar::TensorSource<xt::xtensor<float, 4>, float>);
static_assert(!oar::TensorSource<std::vector<float>, float>);

TEST_CASE("a network takes an xtensor container or expression as input, with the outputs of the same Tensor") {
    Net net(3);
    const auto x = images(5);
    const auto want = forward_tensor(net, x);
    CHECK(values(net.forward(x)) == want);  // a container, read in place
    const xt::xarray<float> dyn = x;
    CHECK(values(net.forward(dyn)) == want);  // a dynamic-rank container
    CHECK(values(net.forward(x * 1.0f)) == want);  // an expression, evaluated once
    const xt::xtensor<double, 4> as_double = x;
    CHECK(values(net.forward(as_double)) == want);  // converted element by element (exact here)
    // A non-contiguous view: the first 3 samples of a larger batch, and every other sample.
    const auto big = images(6);
    CHECK(values(net.forward(xt::view(big, xt::range(0, 5)))) == forward_tensor(net, xt::xtensor<float, 4>(xt::view(big, xt::range(0, 5)))));
    const xt::xtensor<float, 4> strided = xt::view(big, xt::range(0, 6, 2));
    CHECK(values(net.forward(xt::view(big, xt::range(0, 6, 2)))) == forward_tensor(net, strided));
    // The output differs with the input, so the comparisons above can fail.
    CHECK(values(net.forward(x + 1.0f)) != want);
}

TEST_CASE("a wrong xtensor input shape is a shape_error naming it") {
    Net net(3);
    const xt::xtensor<float, 4> wrong = xt::zeros<float>({std::size_t{2}, std::size_t{1}, std::size_t{5}, std::size_t{4}});
    CHECK_THROWS_AS(net.forward(wrong), oar::shape_error);
    const xt::xtensor<float, 1> flat = xt::zeros<float>({std::size_t{16}});
    CHECK_THROWS_AS(net.forward(flat), oar::shape_error);
}

TEST_CASE("outputs, tensors, parameters and gradients are zero-copy xtensor views") {
    Net net(4);
    const auto x = images(2);
    const auto y = net.forward(x);
    const auto xy = oar::as_xtensor(y);
    REQUIRE(xy.dimension() == 2);
    CHECK(xy.shape()[0] == 2);
    CHECK(xy.shape()[1] == 3);
    CHECK(xy.data() == y.data());  // no copy
    CHECK(xy(1, 2) == y[5]);

    oar::Tensor t(2, oar::make_dims(3, 2));
    auto xt_t = oar::as_xtensor(t);
    xt_t(1, 2, 1) = 7.0f;  // writes the tensor
    CHECK(t[1 * 6 + 2 * 2 + 1] == 7.0f);

    auto& ps = net.parameters();
    auto w = oar::as_xtensor(ps, "0.weight");
    REQUIRE(w.dimension() == 4);
    CHECK(w.shape()[0] == 2);
    CHECK(w.shape()[1] == 1);
    CHECK(w.shape()[2] == 3);
    CHECK(w.shape()[3] == 3);
    CHECK(w.data() == ps.value(ps.entry("0.weight")).data());
    w(1, 0, 2, 1) = 0.5f;
    CHECK(ps.value(ps.entry("0.weight"))[9 + 2 * 3 + 1] == 0.5f);
    const auto lw = oar::as_xtensor(ps, "3.weight");  // Linear: [In, Out] as Paddle stores it
    CHECK(lw.shape()[0] == 32);
    CHECK(lw.shape()[1] == 3);

    net.clear_grad();
    oar::Tensor dy(2, oar::make_dims(3));
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 1.0f;
    net.forward(x);
    net.backward(dy.view());
    const auto gb = oar::grad_as_xtensor(ps, "3.bias");
    CHECK(gb.dimension() == 1);
    CHECK(gb(0) == 2.0f);  // the bias gradient sums dy over the batch
    CHECK(gb.data() == ps.grad(ps.entry("3.bias")).data());
    CHECK_THROWS_AS(oar::as_xtensor(ps, "9.weight"), oar::value_error);
    CHECK_THROWS_AS(oar::as_xtensor(ps.value(ps.entry("3.bias")), oar::make_dims(4)), oar::shape_error);
}

TEST_CASE("a dataset is built from an xt::xtensor<float, 4> and labels") {
    const auto x = images(4);
    const auto ds = oar::data::make_dataset(x, std::vector<std::int64_t>{0, 1, 2, 1});
    CHECK(ds.size() == 4);
    CHECK(ds.dims() == In::dims);
    std::vector<float> sample(16);
    CHECK(ds.load(2, sample) == 2);
    for (std::size_t i = 0; i < 16; ++i) CHECK(sample[i] == x.data()[2 * 16 + i]);
    const xt::xtensor<std::int64_t, 1> labels = {3, 2, 1, 0};
    const auto from_expr = oar::data::make_dataset(2.0f * x, labels);
    CHECK(from_expr.load(1, sample) == 2);
    CHECK(sample[5] == 2.0f * x.data()[16 + 5]);
    CHECK_THROWS_AS(oar::data::make_dataset(x, std::vector<std::int64_t>{0, 1}), oar::shape_error);
}
