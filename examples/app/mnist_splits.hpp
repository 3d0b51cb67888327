// train_mnist's three splits as datasets, shared by its CPU and GPU runs and the interface between
// them. Program code (examples/app/, not installed).
#pragma once

#include <oar/data/dataset.hpp>  // Dataset

namespace mnist_job {

/// The three splits as datasets: IDX bytes scaled on load to [-1, 1] (the course's normalisation),
/// or the course's json.gz, already normalised in the file.
template <oar::data::Dataset D>
struct Splits {
    D train, valid, test;
};

}  // namespace mnist_job
