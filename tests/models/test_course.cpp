// The course's models (oar/models/course.hpp): their layer sequences, output shapes and
// parameter counts, by formula, on the course's 28x28 images and CIFAR-10's 3x32x32.
#include <doctest/doctest.h>

#include <oar/models/course.hpp>  // under test

#include <type_traits>  // std::is_same_v

namespace {
using namespace oar;
template <class Seq>
using Bound = typename Seq::template bind<course::Image>;
}  // namespace

static_assert(std::is_same_v<course::Image, Shape<1, 28, 28>>);
static_assert(std::is_same_v<course::CNN, Sequential<Conv2D<1, 20, 5, 1, 2>, ReLU, MaxPool2D<2, 2>, Conv2D<20, 20, 5, 1, 2>,
                                                     ReLU, MaxPool2D<2, 2>, Flatten, Linear<980, 10>>>);
static_assert(std::is_same_v<course::MLP, Sequential<Flatten, Linear<784, 512>, ReLU, DropoutPercent<20>, Linear<512, 10>>>);
static_assert(std::is_same_v<course::SigmoidMLP,
                             Sequential<Flatten, Linear<784, 10>, Sigmoid, Linear<10, 10>, Sigmoid, Linear<10, 1>>>);
static_assert(std::is_same_v<course::LinearRegression, Sequential<Flatten, Linear<784, 1>>>);

TEST_CASE("the course's classifiers give 10 logits, its regressors one value") {
    static_assert(std::is_same_v<Bound<course::CNN>::output_shape, Shape<10>>);
    static_assert(std::is_same_v<Bound<course::MLP>::output_shape, Shape<10>>);
    static_assert(std::is_same_v<Bound<course::SigmoidMLP>::output_shape, Shape<1>>);
    static_assert(std::is_same_v<Bound<course::LinearRegression>::output_shape, Shape<1>>);
    CHECK(Bound<course::CNN>::total_params == 20 * 1 * 5 * 5 + 20 + 20 * 20 * 5 * 5 + 20 + 980 * 10 + 10);
    CHECK(Bound<course::MLP>::total_params == 784 * 512 + 512 + 512 * 10 + 10);
    CHECK(Bound<course::SigmoidMLP>::total_params == 784 * 10 + 10 + 10 * 10 + 10 + 10 + 1);
    CHECK(Bound<course::LinearRegression>::total_params == 784 + 1);
}

TEST_CASE("the fleet chapter's MyNet maps a 3x32x32 image through 64x4x4 = 1024 features to 10 logits") {
    using Net = course::MyNet::bind<course::CifarImage>;
    static_assert(std::is_same_v<Net::output_shape, Shape<10>>);
    // 122,570 parameters, as torch counts the same nn.Sequential (by layer below).
    CHECK(Net::total_params == (3 * 32 * 9 + 32) + (32 * 64 * 9 + 64) + (64 * 64 * 9 + 64) + (1024 * 64 + 64) + (64 * 10 + 10));
    CHECK(Net::total_params == 122570);
    CHECK(Net::dims[8] == make_dims(64, 4, 4));  // after the third convolution's ReLU
}
