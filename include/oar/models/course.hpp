// The PaddlePaddle MNIST course's four models as oar types: the linear regressor, the sigmoid MLP,
// the MLP and the CNN, each a Sequential over 28x28 one-channel images (Image). Defined once here
// and reused by the examples, the tests and the benchmarks; users following the course can take
// them as they are. Only layer headers: nvcc-clean (CUDA code may include it).
#pragma once

#include "../core/shape.hpp"         // Shape
#include "../layers/activation.hpp"  // ReLU, Sigmoid
#include "../layers/conv2d.hpp"      // Conv2D
#include "../layers/dropout.hpp"     // Dropout
#include "../layers/flatten.hpp"     // Flatten
#include "../layers/linear.hpp"      // Linear
#include "../layers/pool2d.hpp"      // MaxPool2D
#include "../nn/sequential.hpp"      // Sequential

namespace oar::course {

/// Linear regression 784 -> 1 (predicts the digit as a number; MSE).
using LinearRegression = Sequential<Flatten, Linear<784, 1>>;

/// The sigmoid MLP 784 -> 10 -> 10 -> 1 (MSE).
using SigmoidMLP = Sequential<Flatten, Linear<784, 10>, Sigmoid, Linear<10, 10>, Sigmoid, Linear<10, 1>>;

/// Flatten - Linear(784, 512) - ReLU - Dropout(0.2) - Linear(512, 10) (cross-entropy).
using MLP = Sequential<Flatten, Linear<784, 512>, ReLU, Dropout<20>, Linear<512, 10>>;

/// The course's CNN: two 5x5 convolutions with 20 channels, ReLU and 2x2 max pooling, then a classifier.
using CNN = Sequential<Conv2D<1, 20, 5, 1, 2>, ReLU, MaxPool2D<2, 2>, Conv2D<20, 20, 5, 1, 2>, ReLU, MaxPool2D<2, 2>,
                       Flatten, Linear<980, 10>>;

/// The course's input: one 28x28 channel.
using Image = Shape<1, 28, 28>;

}  // namespace oar::course
