#!/usr/bin/env bash
# oar's main job: install what it needs and is missing (scripts/setup.sh --main: the compiler,
# CMake, Ninja, xsimd, xtl, zlib, simdjson; nothing the tests alone need), build train_mnist (release
# preset; without doctest the tests are simply not configured), and train the course's CNN on MNIST.
# Extra arguments go to train_mnist (e.g. --epochs 5, --model mlp). The build runs 2 jobs, or
# CMAKE_BUILD_PARALLEL_LEVEL when set.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/setup.sh --main
cmake --preset release >/dev/null
cmake --build --preset release -j"${CMAKE_BUILD_PARALLEL_LEVEL:-2}" --target train_mnist
exec build/release/examples/train_mnist "$@"
