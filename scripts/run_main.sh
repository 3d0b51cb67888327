#!/usr/bin/env bash
# oar's main job: install what is missing, build (release preset), and train the course's CNN on
# MNIST with train_mnist. Extra arguments go to train_mnist (e.g. --epochs 5, --model mlp).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j2 --target train_mnist
exec build/release/examples/train_mnist "$@"
