// The CUDA backend's umbrella, for a .cu file (nvcc): networks, layers, losses and optimizers (the
// same templates as on the CPU, docs/ARCHITECTURE.md) plus what makes `oar::cuda` a backend: its
// storage (device buffers), its kernels and the batch stager. Include oar/train/model.hpp too for
// Model.fit; not oar/oar.hpp (its data loader's coroutines do not compile under nvcc 13).
#pragma once

#include "layers/activation.hpp"          // ReLU, Sigmoid, Tanh, Softmax
#include "layers/conv2d.hpp"              // Conv2D
#include "layers/dropout.hpp"             // Dropout
#include "layers/flatten.hpp"             // Flatten
#include "layers/linear.hpp"              // Linear
#include "layers/pool2d.hpp"              // MaxPool2D, AvgPool2D
#include "loss/cross_entropy.hpp"         // CrossEntropyLoss
#include "nn/blocks.hpp"                  // Residual, Concat
#include "nn/network.hpp"                 // Network
#include "nn/sequential.hpp"              // Sequential
#include "optim/adagrad.hpp"              // Adagrad
#include "optim/adam.hpp"                 // Adam
#include "optim/momentum.hpp"             // Momentum
#include "optim/sgd.hpp"                  // SGD
#include "kernels/cuda/device.hpp"        // basic_cuda, cuda, DeviceSpec, no_device_error
#include "kernels/cuda/runtime.cuh"       // set_device, device buffers, streams, cuBLAS handle
#include "kernels/cuda/storage.cuh"       // storage<cuda>
#include "kernels/cuda/kernels.cuh"       // kernel<op::X, cuda>
#include "kernels/cuda/batch_stager.cuh"  // BatchStager
