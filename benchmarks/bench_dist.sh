#!/usr/bin/env bash
# Data-parallel scaling in one command: builds what it runs, then
#  1. the communication and step timings behind the cost model in docs/DISTRIBUTED.md
#     (tests/dist/mpi_worker bench under mpirun -np N: allreduce of 1..1M floats, the course's
#     CNN's forward+backward at batch 50 per rank, data-parallel steps blocking / overlapped);
#  2. train_mnist, 1 process vs N processes, same data and global batch: images/s, test
#     accuracy and the parallel efficiency (images/s with N) / (N x images/s with 1).
# Usage:
#   benchmarks/bench_dist.sh [--build DIR (build/release)] [--data DIR (../shared/data/mnist)]
#                            [--model cnn] [--epochs 1] [--np 2] [--skip-train]
# Run it on a quiet machine: the load average is printed first, since other jobs on the same
# cores make every number here slower and noisier.
set -euo pipefail
build=build/release data=../shared/data/mnist model=cnn epochs=1 np=2 train=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --np) np="$2"; shift 2 ;;
    --skip-train) train=0; shift ;;
    *) echo "bench_dist: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ -d "$build" ]] || { echo "bench_dist: no build folder $build (cmake --preset release first)" >&2; exit 2; }
cmake --build "$build" --target dist_mpi_worker train_mnist -j"$(nproc)" >/dev/null
worker="$build/tests/dist/dist_mpi_worker"
prog="$build/examples/train_mnist"
mpirun=(mpirun --oversubscribe -np "$np")
[[ "$(id -u)" == 0 ]] && mpirun=(mpirun --allow-run-as-root --oversubscribe -np "$np")

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $np processes"
echo "== communication and step timings (median; mpi_worker bench)"
"${mpirun[@]}" "$worker" bench | grep -v '^mpi_worker'

[[ "$train" == 1 ]] || exit 0
echo "== train_mnist --model $model --epochs $epochs --batch-size 100, 1 vs $np processes"
args=(--data "$data" --model "$model" --epochs "$epochs" --batch-size 100 --log-every 0)
rate() { grep '^result:' | tail -1 | sed -E 's/.*test_accuracy=([0-9.]+) train_images_per_sec=([0-9]+).*/\1 \2/'; }
one=$("$prog" "${args[@]}" | rate)
many=$("${mpirun[@]}" "$prog" "${args[@]}" | rate)
read -r acc1 ips1 <<<"$one"
read -r accn ipsn <<<"$many"
echo "1 process  : $ips1 img/s (test accuracy $acc1)"
echo "$np processes: $ipsn img/s (test accuracy $accn)"
awk -v a="$ips1" -v b="$ipsn" -v n="$np" -v c="$(nproc)" \
  'BEGIN { printf "speed-up %.2fx, efficiency %.0f%% (%d processes on %d cores)\n", b / a, 100 * b / (n * a), n, c }'
