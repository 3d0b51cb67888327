// The course's four models (oar/models/course.hpp): their layer sequences, output shapes and
// parameter counts, by formula, on the course's 28x28 images.
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
static_assert(std::is_same_v<course::MLP, Sequential<Flatten, Linear<784, 512>, ReLU, Dropout<20>, Linear<512, 10>>>);
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
