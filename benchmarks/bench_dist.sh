#!/usr/bin/env bash
# 1 vs 2 processes of train_mnist on the same data and global batch: prints images/s and the
# parallel efficiency (images/s with 2 / (2 x images/s with 1)). Usage:
#   benchmarks/bench_dist.sh [build dir (build/release)] [data (../shared/data/mnist)] [model (cnn)]
set -euo pipefail
build="${1:-build/release}"
data="${2:-../shared/data/mnist}"
model="${3:-cnn}"
prog="$build/examples/train_mnist"
[[ -x "$prog" ]] || { echo "bench_dist: $prog not built" >&2; exit 2; }
args=(--data "$data" --model "$model" --epochs 1 --batch-size 100 --log-every 0)
rate() { grep '^result:' | tail -1 | sed -E 's/.*test_accuracy=([0-9.]+) train_images_per_sec=([0-9]+).*/\1 \2/'; }
one=$("$prog" "${args[@]}" | rate)
root=(); [[ "$(id -u)" == 0 ]] && root=(--allow-run-as-root)
two=$(mpirun "${root[@]}" --oversubscribe -np 2 "$prog" "${args[@]}" | rate)
read -r acc1 ips1 <<<"$one"
read -r acc2 ips2 <<<"$two"
echo "1 process : $ips1 img/s (test accuracy $acc1)"
echo "2 processes: $ips2 img/s (test accuracy $acc2)"
awk -v a="$ips1" -v b="$ips2" -v n="$(nproc)" 'BEGIN { printf "speed-up %.2fx, efficiency %.0f%% (%s cores)\n", b / a, 50 * b / a, n }'
