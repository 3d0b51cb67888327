// The umbrella of oar's CPU API: shapes, layers, networks, losses, metrics, optimizers, IDX data.
// CUDA code may include it too: nothing here pulls in simdjson (docs/ARCHITECTURE.md, "Constraints").
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
#include "layers/pool2d.hpp"          // MaxPool2D, AvgPool2D, AdaptiveAvgPool2D
#include "layers/batch_norm.hpp"      // BatchNorm1D, BatchNorm2D
#include "layers/activation.hpp"      // ReLU, Sigmoid, Tanh, GELU, Hardswish, LeakyReLU, ELU, Identity, Softmax
#include "layers/flatten.hpp"         // Flatten
#include "layers/dropout.hpp"         // Dropout
#include "nn/sequential.hpp"          // Sequential
#include "nn/blocks.hpp"              // Residual, Concat
#include "nn/network.hpp"             // Network
#include "nn/summary.hpp"             // summary
#include "nn/hooks.hpp"               // LayerStats, NonFiniteGuard, observers
#include "models/course.hpp"          // course::LinearRegression, SigmoidMLP, MLP, CNN, Image
#include "loss/cross_entropy.hpp"     // CrossEntropyLoss
#include "loss/mse.hpp"               // MSELoss
#include "loss/label_mse.hpp"         // LabelMSELoss: the course's regressors
#include "metric/accuracy.hpp"        // accuracy, Accuracy
#include "metric/metric.hpp"          // Metric, MetricType, top_k_accuracy
#include "metric/rounded_accuracy.hpp" // RoundedAccuracy: the course's regressors
#include "optim/sgd.hpp"              // SGD
#include "optim/momentum.hpp"         // Momentum
#include "optim/adagrad.hpp"          // Adagrad
#include "optim/adam.hpp"             // Adam
#include "optim/lr_scheduler.hpp"     // StepDecay, MultiStepDecay, CosineAnnealingDecay, LinearWarmup, ReduceOnPlateau
#include "data/idx.hpp"               // read_idx, read_idx_pair
#include "data/mnist.hpp"               // load_mnist: the course split of an IDX folder
#include "data/generator.hpp"       // generator: co_yield sequences
#include "data/dataset.hpp"         // Dataset, InMemoryDataset, ByteImageDataset
#include "data/random_dataset.hpp"  // RandomDataset (the course's)
#include "data/transforms.hpp"      // transform, Normalize, Scale, Reshape, RandomCrop, RandomHorizontalFlip
#include "data/sampler.hpp"         // SequentialSampler, RandomSampler, BatchedSampler, DistributedBatchSampler
#include "data/dataloader.hpp"      // DataLoader, Batch, LoaderOptions
#include "data/cifar10.hpp"         // load_cifar10: a folder or cifar-10-binary.tar.gz
#include "data/synthetic_cifar10.hpp"  // synthetic_cifar10: learnable CIFAR-10-shaped data
#include "train/model.hpp"            // Model: prepare / fit / evaluate / predict, History
#include "train/callbacks/callback.hpp"         // Logs, Callback, MonitorMode
#include "train/callbacks/progress.hpp"         // ProgBarLogger
#include "train/callbacks/loggers.hpp"          // CSVLogger, TensorBoardLogger, CurvesLogger
#include "train/callbacks/model_checkpoint.hpp" // ModelCheckpoint
#include "train/callbacks/early_stopping.hpp"   // EarlyStopping
#include "train/callbacks/lr_scheduler.hpp"     // LRScheduler (the callback)
#include "train/callbacks/diagnostics.hpp"      // TerminateOnNonFinite, Diagnostics
#include "train/callbacks/signals.hpp"          // StopOnSignal
// Not here: data/mnist_json.hpp (simdjson; include it yourself from a .cpp, never from CUDA code).
