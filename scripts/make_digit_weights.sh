#!/usr/bin/env bash
# Makes tests/examples/fixtures/mnist_cnn_5epochs.safetensors, the weights predict_digit's test
# uses: the course's CNN after train_mnist's default 5-epoch run (seed 0) on the real MNIST, the
# weights of its last epoch (DIR/latest.safetensors of --checkpoint-dir).
#   scripts/make_digit_weights.sh [BUILD_DIR]   (default build/release; train_mnist must be built)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build/release}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$build/examples/train_mnist" --data data/mnist --model cnn --epochs 5 --seed 0 --log-every 0 \
  --checkpoint-dir "$work" | tail -2
mkdir -p tests/examples/fixtures
cp "$work/latest.safetensors" tests/examples/fixtures/mnist_cnn_5epochs.safetensors
echo "wrote tests/examples/fixtures/mnist_cnn_5epochs.safetensors"
