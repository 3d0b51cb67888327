// Tests of include/oar/core/layer_concepts.hpp: the Layer and ParametricLayer concepts (on oar's
// layers and on hand-written types), LayerCheck, and the parameter-block layout.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <array>        // std::array
#include <cstddef>      // std::size_t
#include <string_view>  // std::string_view

#include <oar/core/layer_concepts.hpp>  // under test
#include <oar/layers/activation.hpp>    // ReLU, Sigmoid, Tanh, Softmax
#include <oar/layers/conv2d.hpp>        // Conv2D
#include <oar/layers/dropout.hpp>       // Dropout
#include <oar/layers/flatten.hpp>       // Flatten
#include <oar/layers/linear.hpp>        // Linear
#include <oar/layers/pool2d.hpp>        // MaxPool2D, AvgPool2D

using oar::Dims;
using oar::make_dims;
using oar::ParamSpec;

namespace concept_test {  // named: clang flags unused members of types in an anonymous namespace

/// The smallest type that fulfils the Layer contract.
struct Identity {
    static constexpr std::string_view name = "Identity";
    static constexpr oar::LayerCheck check(Dims) { return {}; }
    static constexpr Dims output_dims(Dims in) { return in; }
    static constexpr std::size_t flops(Dims) { return 0; }
    static constexpr std::size_t workspace(Dims) { return 0; }
    template <oar::Backend B, class T = typename B::value_type>
    void forward(oar::Context<B>&, Dims, const T*, T*, std::size_t) const {}
    template <oar::Backend B, class T = typename B::value_type>
    void backward(oar::Context<B>&, Dims, const T*, const T*, const T*, T*, std::size_t) const {}
};

/// Identity plus parameters.
struct Scaled : Identity {
    static constexpr std::size_t num_params = 1;
    static constexpr std::array<ParamSpec, 1> params(Dims in) { return {ParamSpec{"scale", in}}; }
};

struct NoBackward {
    static constexpr std::string_view name = "NoBackward";
    static constexpr oar::LayerCheck check(Dims) { return {}; }
    static constexpr Dims output_dims(Dims in) { return in; }
    static constexpr std::size_t flops(Dims) { return 0; }
    static constexpr std::size_t workspace(Dims) { return 0; }
    void forward(oar::Context<oar::cpu>&, Dims, const float*, float*, std::size_t) const {}
};

struct BoolCheck : Identity {  // check must return LayerCheck, not something convertible
    static constexpr bool check(Dims) { return true; }
};

struct Nameless {
    static constexpr oar::LayerCheck check(Dims) { return {}; }
    static constexpr Dims output_dims(Dims in) { return in; }
    static constexpr std::size_t flops(Dims) { return 0; }
    static constexpr std::size_t workspace(Dims) { return 0; }
    void forward(oar::Context<oar::cpu>&, Dims, const float*, float*, std::size_t) const {}
    void backward(oar::Context<oar::cpu>&, Dims, const float*, const float*, const float*, float*, std::size_t) const {}
};

struct WrongParamCount : Identity {  // params() returns an array of another length than num_params
    static constexpr std::size_t num_params = 2;
    static constexpr std::array<ParamSpec, 1> params(Dims in) { return {ParamSpec{"w", in}}; }
};

}  // namespace concept_test

using namespace concept_test;

// oar's layers are Layers; those with weights are ParametricLayers.
static_assert(oar::Layer<oar::ReLU> && oar::Layer<oar::Sigmoid> && oar::Layer<oar::Tanh> && oar::Layer<oar::Softmax>);
static_assert(oar::Layer<oar::Flatten>);
static_assert(oar::Layer<oar::Dropout> && oar::Layer<oar::DropoutPercent<0>>);
static_assert(oar::Layer<oar::MaxPool2D<2, 2>> && oar::Layer<oar::AvgPool2D<3>>);
static_assert(oar::Layer<oar::Linear<980, 10>>);
static_assert(oar::Layer<oar::Conv2D<1, 20, 5, 1, 2>>);
static_assert(oar::ParametricLayer<oar::Linear<980, 10>>);
static_assert(oar::ParametricLayer<oar::Linear<1, 1>>);
static_assert(oar::ParametricLayer<oar::Conv2D<1, 20, 5, 1, 2>>);
static_assert(!oar::ParametricLayer<oar::ReLU>);
static_assert(!oar::ParametricLayer<oar::Softmax>);
static_assert(!oar::ParametricLayer<oar::Flatten>);
static_assert(!oar::ParametricLayer<oar::MaxPool2D<2, 2>>);
static_assert(!oar::ParametricLayer<oar::Dropout>);

// The contract, on hand-written types.
static_assert(oar::Layer<Identity> && !oar::ParametricLayer<Identity>);
static_assert(oar::Layer<Scaled> && oar::ParametricLayer<Scaled>);
static_assert(!oar::Layer<NoBackward>);
static_assert(!oar::Layer<BoolCheck>);
static_assert(!oar::Layer<Nameless>);
static_assert(oar::Layer<WrongParamCount> && !oar::ParametricLayer<WrongParamCount>);
static_assert(!oar::Layer<int> && !oar::Layer<Dims> && !oar::Layer<void> && !oar::Layer<oar::ReLU*>);
static_assert(!oar::ParametricLayer<int>);

TEST_CASE("a default LayerCheck is ok, and a layer's refusal says what and by how much") {
    constexpr oar::LayerCheck fine{};
    static_assert(fine.ok());
    CHECK(fine.kind == oar::check_kind::ok);

    constexpr auto bad = oar::Linear<4, 2>::check(make_dims(5));
    CHECK_FALSE(bad.ok());
    CHECK(bad.kind == oar::check_kind::features);
    CHECK(bad.expected == 4);
    CHECK(bad.got == 5);

    constexpr auto rank = oar::Conv2D<1, 2, 3>::check(make_dims(9));
    CHECK(rank.kind == oar::check_kind::rank);
    CHECK(rank.expected == 3);
    CHECK(rank.got == 1);

    constexpr auto channels = oar::Conv2D<3, 2, 3>::check(make_dims(1, 8, 8));
    CHECK(channels.kind == oar::check_kind::channels);
    CHECK(channels.expected == 3);
    CHECK(channels.got == 1);

    CHECK(oar::Linear<4, 2>::check(make_dims(4)).ok());
}

TEST_CASE("param_offset packs tensors in order, each at a multiple of 16 floats") {
    constexpr std::array<ParamSpec, 4> specs{ParamSpec{"a", make_dims(5)}, ParamSpec{"b", make_dims(16)},
                                             ParamSpec{"c", make_dims(17)}, ParamSpec{"d", make_dims(1)}};
    static_assert(oar::param_offset(specs, 0) == 0);
    CHECK(oar::param_offset(specs, 1) == 16);  // 5 -> one line
    CHECK(oar::param_offset(specs, 2) == 32);  // 16 -> exactly one line
    CHECK(oar::param_offset(specs, 3) == 64);  // 17 -> two lines
    CHECK(oar::param_block_size(specs) == 80);
}

TEST_CASE("every parameter tensor starts cache-line aligned and the block holds them all without overlap") {
    // Sizes of every residue modulo 16, and some large ones.
    constexpr std::array<ParamSpec, 8> specs{
        ParamSpec{"a", make_dims(1)},        ParamSpec{"b", make_dims(15)},      ParamSpec{"c", make_dims(20, 1, 5, 5)},
        ParamSpec{"d", make_dims(20)},       ParamSpec{"e", make_dims(980, 10)}, ParamSpec{"f", make_dims(10)},
        ParamSpec{"g", make_dims(3, 7, 11)}, ParamSpec{"h", make_dims(32)}};
    std::size_t expected_offset = 0;
    for (std::size_t t = 0; t < specs.size(); ++t) {
        const std::size_t off = oar::param_offset(specs, t);
        INFO("tensor ", t);
        CHECK(off % 16 == 0);                 // 16 floats = 64 bytes
        CHECK(off == expected_offset);        // packed: the smallest aligned offset after the previous tensor
        const std::size_t n = specs[t].dims.size();
        expected_offset = (n + 15) / 16 * 16 + off;
    }
    CHECK(oar::param_block_size(specs) == expected_offset);
    CHECK(oar::param_block_size(specs) % 16 == 0);
}

TEST_CASE("Linear and Conv2D parameter blocks have the sizes their shapes imply") {
    constexpr auto lin = oar::Linear<980, 10>::params(make_dims(980));
    CHECK(lin[0].name == "weight");
    CHECK(lin[0].dims == make_dims(980, 10));
    CHECK(lin[1].name == "bias");
    CHECK(lin[1].dims == make_dims(10));
    CHECK(oar::param_offset(lin, 1) == 9808);            // 9800 rounded up to a multiple of 16
    CHECK(oar::param_block_size(lin) == 9808 + 16);      // + 10 rounded up
    CHECK(oar::Linear<980, 10>::bias_offset == oar::param_offset(lin, 1));

    constexpr auto conv = oar::Conv2D<1, 20, 5, 1, 2>::params(make_dims(1, 28, 28));
    CHECK(conv[0].dims == make_dims(20, 1, 5, 5));
    CHECK(conv[0].init == oar::init_kind::kaiming_normal);
    CHECK(conv[0].fan_in == 1 * 5 * 5);
    CHECK(conv[1].init == oar::init_kind::zeros);
    CHECK(oar::param_offset(conv, 1) == 512);             // 500 -> 512
    CHECK(oar::param_block_size(conv) == 512 + 32);       // 20 -> 32

    constexpr std::array<ParamSpec, 0> none{};
    CHECK(oar::param_block_size(none) == 0);
}
