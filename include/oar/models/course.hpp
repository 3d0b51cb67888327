// The PaddlePaddle MNIST course's four models as oar types: the linear regressor, the sigmoid MLP,
// the MLP and the CNN, each a Sequential over 28x28 one-channel images (Image); and the fleet
// chapter's MyNet over CIFAR-10's 32x32 colour images (CifarImage). Defined once here
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
using MLP = Sequential<Flatten, Linear<784, 512>, ReLU, DropoutPercent<20>, Linear<512, 10>>;

/// The course's CNN: two 5x5 convolutions with 20 channels, ReLU and 2x2 max pooling, then a classifier.
using CNN = Sequential<Conv2D<1, 20, 5, 1, 2>, ReLU, MaxPool2D<2, 2>, Conv2D<20, 20, 5, 1, 2>, ReLU, MaxPool2D<2, 2>,
                       Flatten, Linear<980, 10>>;

/// The course's input: one 28x28 channel.
using Image = Shape<1, 28, 28>;

/// The fleet chapter's MyNet(num_classes=10) for CIFAR-10: three 3x3 convolutions without
/// padding (32, 64, 64 channels) with ReLU, 2x2 max pooling after the first two, then
/// Linear(1024, 64) - ReLU - Linear(64, 10). Shapes: 32 -> 30 -> 15 -> 13 -> 6 -> 4; 64 x 4 x 4 = 1024.
using MyNet = Sequential<Conv2D<3, 32, 3>, ReLU, MaxPool2D<2, 2>, Conv2D<32, 64, 3>, ReLU, MaxPool2D<2, 2>,
                         Conv2D<64, 64, 3>, ReLU, Flatten, Linear<1024, 64>, ReLU, Linear<64, 10>>;

/// CIFAR-10's input: three 32x32 channels (R, G, B).
using CifarImage = Shape<3, 32, 32>;

}  // namespace oar::course
