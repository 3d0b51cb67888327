// Small networks for 3x32x32 images (CIFAR-10's shape) built from blocks (nn/blocks.hpp): ResNet8,
// a ResNet with a BatchNorm stem, two basic residual blocks and a stride-2 projection block, and
// InceptionNet, whose middle is an Inception-style Concat of three branches. Shared by the examples
// (examples/resnet_cifar.cpp), the tests and the libtorch cross-check. Only layer headers:
// nvcc-clean.
#pragma once

#include <cstddef>  // std::size_t

#include "../core/shape.hpp"           // Shape
#include "../layers/activation.hpp"    // ReLU
#include "../layers/batch_norm.hpp"    // BatchNorm2D
#include "../layers/conv2d.hpp"        // Conv2D
#include "../layers/flatten.hpp"       // Flatten
#include "../layers/linear.hpp"        // Linear
#include "../layers/pool2d.hpp"        // AdaptiveAvgPool2D, MaxPool2D
#include "../nn/blocks.hpp"            // Residual, Concat
#include "../nn/sequential.hpp"        // Sequential

namespace oar::models {

/// A 3x3 convolution without bias: every convolution here feeds a BatchNorm2D, whose mean
/// subtraction cancels a bias exactly (its gradient is zero in training), as torchvision's
/// ResNet does (bias=False).
template <std::size_t In, std::size_t Out, std::size_t Stride = 1>
using Conv3x3 = Conv2D<In, Out, 3, Stride, 1, Bias::no>;

/// A ResNet basic block of C channels: conv3x3-BN-ReLU-conv3x3-BN plus the input (the ReLU after
/// the sum is the next layer, as in torchvision's BasicBlock).
template <std::size_t C>
using BasicBlock = Residual<Sequential<Conv3x3<C, C>, BatchNorm2D<C>, ReLU, Conv3x3<C, C>, BatchNorm2D<C>>>;

/// A downsampling basic block In -> Out channels, stride 2, with the projection shortcut
/// conv1x1(stride 2)-BN.
template <std::size_t In, std::size_t Out>
using DownBlock = Residual<Sequential<Conv3x3<In, Out, 2>, BatchNorm2D<Out>, ReLU, Conv3x3<Out, Out>, BatchNorm2D<Out>>,
                           Sequential<Conv2D<In, Out, 1, 2, 0, Bias::no>, BatchNorm2D<Out>>>;

/// Stem conv3x3(3 -> W)-BN-ReLU (convolutions without bias), two basic blocks of W channels, a projection block to 2W at
/// stride 2, global average pooling, a Linear classifier: 8 weighted layers on the main path.
template <std::size_t W = 16, std::size_t Classes = 10>
using ResNet8 = Sequential<Conv3x3<3, W>, BatchNorm2D<W>, ReLU, BasicBlock<W>, ReLU, BasicBlock<W>, ReLU,
                           DownBlock<W, 2 * W>, ReLU, AdaptiveAvgPool2D<1, 1>, Flatten, Linear<2 * W, Classes>>;

/// An Inception-style block: a 1x1 branch, a 1x1-then-3x3 branch and a 5x5 branch on the same
/// input, joined along channels (B1 + B3 + B5 outputs).
template <std::size_t In, std::size_t B1, std::size_t B3, std::size_t B5>
using InceptionBlock = Concat<1, Sequential<Conv2D<In, B1, 1>, ReLU>,
                              Sequential<Conv2D<In, B3, 1>, ReLU, Conv2D<B3, B3, 3, 1, 1>, ReLU>,
                              Sequential<Conv2D<In, B5, 5, 1, 2>, ReLU>>;

/// Stem conv3x3(3 -> 16)-BN-ReLU, 2x2 max pooling, an Inception block (8 + 16 + 8 channels), 2x2
/// max pooling, global average pooling, a Linear classifier.
template <std::size_t Classes = 10>
using InceptionNet = Sequential<Conv3x3<3, 16>, BatchNorm2D<16>, ReLU, MaxPool2D<2, 2>, InceptionBlock<16, 8, 16, 8>,
                                MaxPool2D<2, 2>, AdaptiveAvgPool2D<1, 1>, Flatten, Linear<32, Classes>>;

/// CIFAR-10's per-sample shape.
using CifarImage = Shape<3, 32, 32>;

}  // namespace oar::models
