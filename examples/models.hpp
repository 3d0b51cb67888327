// The PaddlePaddle MNIST course's four models as oar types, shared by the examples.
#pragma once

#include <oar/oar.hpp>  // Sequential and the layers

namespace course {

/// Linear regression 784 -> 1 (predicts the digit as a number; MSE).
using LinearRegression = oar::Sequential<oar::Flatten, oar::Linear<784, 1>>;

/// The sigmoid MLP 784 -> 10 -> 10 -> 1 (MSE).
using SigmoidMLP = oar::Sequential<oar::Flatten, oar::Linear<784, 10>, oar::Sigmoid, oar::Linear<10, 10>, oar::Sigmoid,
                                   oar::Linear<10, 1>>;

/// Flatten - Linear(784, 512) - ReLU - Dropout(0.2) - Linear(512, 10) (cross-entropy).
using MLP = oar::Sequential<oar::Flatten, oar::Linear<784, 512>, oar::ReLU, oar::Dropout<20>, oar::Linear<512, 10>>;

/// The course's CNN: two 5x5 convolutions with 20 channels, ReLU and 2x2 max pooling, then a classifier.
using CNN = oar::Sequential<oar::Conv2D<1, 20, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>, oar::Conv2D<20, 20, 5, 1, 2>,
                            oar::ReLU, oar::MaxPool2D<2, 2>, oar::Flatten, oar::Linear<980, 10>>;

using Image = oar::Shape<1, 28, 28>;

}  // namespace course
