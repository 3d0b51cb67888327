// The umbrella of oar's CPU API: shapes, layers, networks, losses, metrics, optimizers, IDX data.
// CUDA code may include it too: nothing here pulls in simdjson (DESIGN.md, commitment 3).
#pragma once

#include "config.hpp"                 // feature macros
#include "core/error.hpp"             // oar::error and its kinds
#include "core/shape.hpp"             // Shape, Dims
#include "core/tensor.hpp"            // Tensor, TensorView
#include "core/rng.hpp"               // CounterRng
#include "core/backend.hpp"           // cpu, cpu64
#include "core/layer_concepts.hpp"    // Layer, ParametricLayer
#include "layers/linear.hpp"          // Linear
#include "layers/conv2d.hpp"          // Conv2D
#include "layers/pool2d.hpp"          // MaxPool2D, AvgPool2D
#include "layers/activation.hpp"      // ReLU, Sigmoid, Tanh, Softmax
#include "layers/flatten.hpp"         // Flatten
#include "layers/dropout.hpp"         // Dropout
#include "nn/sequential.hpp"          // Sequential
#include "nn/network.hpp"             // Network
#include "nn/summary.hpp"             // summary
#include "loss/cross_entropy.hpp"     // CrossEntropyLoss
#include "loss/mse.hpp"               // MSELoss
#include "metric/accuracy.hpp"        // accuracy, Accuracy
#include "optim/sgd.hpp"              // SGD
#include "optim/momentum.hpp"         // Momentum
#include "optim/adagrad.hpp"          // Adagrad
#include "optim/adam.hpp"             // Adam
#include "data/idx.hpp"               // read_idx, read_idx_pair
#include "data/mnist.hpp"               // load_mnist: the course split of an IDX folder
