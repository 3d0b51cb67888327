// Compile-time facts of Sequential networks: shapes, parameter counts, FLOPs and activation
// sizes as constexpr values (checked by static_assert), and the runtime propagation helper.
#include <oar/nn/sequential.hpp>

#include <doctest/doctest.h>

#include <oar/layers/activation.hpp>
#include <oar/layers/conv2d.hpp>
#include <oar/layers/dropout.hpp>
#include <oar/layers/flatten.hpp>
#include <oar/layers/linear.hpp>
#include <oar/layers/pool2d.hpp>
#include <oar/models/course.hpp>

#include <type_traits>

namespace {
using namespace oar;

using CourseCNN = course::CNN;
using SeqCNN = CourseCNN::bind<Shape<1, 28, 28>>;

// The course's CNN: output Shape<10> and its exact parameter count, by formula:
//   conv1 20*1*5*5 + 20 = 520, conv2 20*20*5*5 + 20 = 10,020, fc 980*10 + 10 = 9,810.
static_assert(std::is_same_v<SeqCNN::output_shape, Shape<10>>);
static_assert(SeqCNN::valid);
static_assert(SeqCNN::num_layers == 8);
static_assert(SeqCNN::total_params == 20 * 1 * 25 + 20 + 20 * 20 * 25 + 20 + 980 * 10 + 10);
static_assert(SeqCNN::total_params == 20350);
static_assert(SeqCNN::param_counts[0] == 520 && SeqCNN::param_counts[3] == 10020 && SeqCNN::param_counts[7] == 9810);
static_assert(SeqCNN::param_counts[1] == 0 && SeqCNN::param_counts[2] == 0 && SeqCNN::param_counts[6] == 0);

// Every intermediate shape.
static_assert(SeqCNN::dims[0] == make_dims(1, 28, 28));
static_assert(SeqCNN::dims[1] == make_dims(20, 28, 28));
static_assert(SeqCNN::dims[2] == make_dims(20, 28, 28));
static_assert(SeqCNN::dims[3] == make_dims(20, 14, 14));
static_assert(SeqCNN::dims[4] == make_dims(20, 14, 14));
static_assert(SeqCNN::dims[5] == make_dims(20, 14, 14));
static_assert(SeqCNN::dims[6] == make_dims(20, 7, 7));
static_assert(SeqCNN::dims[7] == make_dims(980));
static_assert(SeqCNN::dims[8] == make_dims(10));

// FLOPs per sample: a multiply-add counts 2, plus one add per output for the bias.
static_assert(SeqCNN::flops[0] == 20 * 28 * 28 * (2 * 25 + 1));
static_assert(SeqCNN::flops[3] == 20 * 14 * 14 * (2 * 500 + 1));
static_assert(SeqCNN::flops[7] == 2 * 980 * 10 + 10);
static_assert(SeqCNN::flops[1] == 20 * 28 * 28 && SeqCNN::flops[2] == 20 * 14 * 14 * 4);

// Activation memory per sample: the input and every layer's output, float32.
constexpr std::size_t cnn_floats = 784 + 15680 + 15680 + 3920 + 3920 + 3920 + 980 + 980 + 10;
static_assert(SeqCNN::activation_floats == cnn_floats);
static_assert(SeqCNN::activation_bytes == cnn_floats * 4);
static_assert(SeqCNN::max_activation_floats == 15680);

// The flat parameter buffer: each layer's block starts on a cache line (16 floats).
static_assert(SeqCNN::param_offsets[0] == 0);
static_assert(SeqCNN::param_offsets[3] % 16 == 0 && SeqCNN::param_offsets[7] % 16 == 0);
static_assert(SeqCNN::param_offsets[3] >= 520 && SeqCNN::param_offsets[7] >= SeqCNN::param_offsets[3] + 10020);
static_assert(SeqCNN::param_buffer_size >= SeqCNN::total_params);

// Linear works on the last dimension, as paddle.nn.Linear does.
using PerRow = Sequential<Linear<7, 3>, ReLU>::bind<Shape<5, 7>>;
static_assert(std::is_same_v<PerRow::output_shape, Shape<5, 3>>);
static_assert(PerRow::flops[0] == 5 * (2 * 7 * 3 + 3));

// The course's MLP, dropout included.
using MLP = course::MLP::bind<Shape<1, 28, 28>>;
static_assert(MLP::total_params == 784 * 512 + 512 + 512 * 10 + 10);
static_assert(std::is_same_v<MLP::output_shape, Shape<10>>);

// Strided convolution and non-square images.
using Strided = Sequential<Conv2D<3, 8, 3, 2, 1>, AvgPool2D<2>>::bind<Shape<3, 17, 10>>;
static_assert(Strided::dims[1] == make_dims(8, 9, 5));
static_assert(Strided::dims[2] == make_dims(8, 4, 2));

// The workspace is the largest any layer needs (Conv2D: two (C*K*K, OH*OW) column buffers).
static_assert(SeqCNN::max_workspace == 2 * 500 * 196);

// Layer names, as the summary prints them.
static_assert(SeqCNN::names[0] == "Conv2D" && SeqCNN::names[2] == "MaxPool2D" && SeqCNN::names[7] == "Linear");
}  // namespace

TEST_CASE("propagate stops at the first layer that refuses its input and names it") {
    constexpr auto ok = propagate<Flatten, Linear<12, 4>>(make_dims(3, 2, 2));
    static_assert(!ok.failed && ok.dims[2] == make_dims(4));

    constexpr auto bad = propagate<Flatten, Linear<13, 4>, ReLU>(make_dims(3, 2, 2));
    CHECK(bad.failed);
    CHECK(bad.failed_layer == 1);
    CHECK(bad.failure.kind == check_kind::features);
    CHECK(bad.failure.expected == 13);
    CHECK(bad.failure.got == 12);
    CHECK(bad.dims[3] == make_dims(12));  // later entries repeat the last good dims

    // A Linear on a multi-dimensional input (a forgotten Flatten) is reported as such.
    constexpr auto unflat = propagate<Conv2D<1, 4, 3, 1, 1>, Linear<144, 2>>(make_dims(1, 6, 6));
    static_assert(unflat.failed && unflat.failed_layer == 1);
    static_assert(unflat.failure.kind == check_kind::features_unflattened);
    static_assert(unflat.failure.expected == 144 && unflat.failure.got == 6);

    constexpr auto chan = propagate<Conv2D<2, 4, 3>>(make_dims(3, 8, 8));
    CHECK(chan.failure.kind == check_kind::channels);
    CHECK(chan.failure.expected == 2);
    CHECK(chan.failure.got == 3);

    constexpr auto small = propagate<Conv2D<1, 1, 5, 1, 1>>(make_dims(1, 2, 9));
    CHECK(small.failure.kind == check_kind::spatial);
    CHECK(small.failure.expected == 5);
    CHECK(small.failure.got == 4);  // 2 + 2 * pad
}

TEST_CASE("a Sequential knows whether all of its elements are layers") {
    CHECK(Sequential<ReLU, Flatten>::all_layers);
    CHECK(Sequential<ReLU, Flatten>::first_non_layer == 2);
}
