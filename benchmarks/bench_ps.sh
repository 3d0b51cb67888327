#!/usr/bin/env bash
# Parameter server beside collective data parallel, on the same job: train_mnist (the course's
# CNN by default), 1 epoch of MNIST, global batch 100, 2 trainers, under
#   collective:  oar-launch --nproc_per_node 2                       (MPI allreduce, DataParallel)
#   PS sync:     oar-launch --server_num S --worker_num 2            (S = 1, 2)
#   PS async:    oar-launch --server_num S --worker_num 2 ... --a-sync
# Prints per configuration: training steps/s (global batches of 100 per second, from
# train_mnist's train_images_per_sec: forward, backward, exchange and update, no data loading or
# evaluation), test accuracy, and the bytes moved per step, from the protocol's message sizes:
# a PS trainer pushes its 4P gradient bytes and pulls 4P parameter bytes per step (plus a 16-byte
# header per server), each server receives and sends W x 4P / S; a collective rank sends and
# receives 2 (N-1)/N x 4P each (ring allreduce; Open MPI may pick another algorithm of the same
# volume). P: the model's parameters (train_mnist's summary).
# Usage:
#   benchmarks/bench_ps.sh [--build DIR (build/release)] [--data DIR (../shared/data/mnist)]
#                          [--model cnn] [--epochs 1] [--rounds 2]
# Rounds interleave the configurations (A B C ... A B C ...), so that other load on the machine
# falls on all of them alike; the load average is printed before every run.
set -euo pipefail
build=build/release data=../shared/data/mnist model=cnn epochs=1 rounds=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "bench_ps: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ -d "$build" ]] || { echo "bench_ps: no build folder $build (cmake --preset release first)" >&2; exit 2; }
cmake --build "$build" --target train_mnist -j1 >/dev/null
prog="$build/examples/train_mnist"
launch="$(dirname "$0")/../scripts/oar-launch"
args=(--data "$data" --model "$model" --epochs "$epochs" --batch-size 100 --log-every 0)

echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(date -u '+%Y-%m-%d %H:%M UTC')"
configs=("collective" "ps-sync-1" "ps-sync-2" "ps-async-1" "ps-async-2")
P=""
for ((r = 1; r <= rounds; r++)); do
  for cfg in "${configs[@]}"; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    case "$cfg" in
      collective) out=$("$launch" --nproc_per_node 2 "$prog" "${args[@]}" 2>&1) ;;
      ps-sync-*) out=$("$launch" --server_num "${cfg##*-}" --worker_num 2 "$prog" "${args[@]}" 2>&1) ;;
      ps-async-*) out=$("$launch" --server_num "${cfg##*-}" --worker_num 2 "$prog" "${args[@]}" --a-sync 2>&1) ;;
    esac
    [[ -n "$P" ]] || P=$(sed -nE 's/^Total params: ([0-9,]+).*/\1/p' <<<"$out" | tr -d , | head -1)
    res=$(grep '^result:' <<<"$out" | tail -1)
    [[ -n "$res" ]] || { echo "bench_ps: $cfg failed:"; tail -5 <<<"$out"; exit 1; }
    acc=$(sed -E 's/.*test_accuracy=([0-9.]+).*/\1/' <<<"$res")
    ips=$(sed -E 's/.*train_images_per_sec=([0-9]+).*/\1/' <<<"$res")
    case "$cfg" in
      collective) bytes="each rank sends + receives $(( 2 * 4 * P ))" ;;
      ps-*) s="${cfg##*-}"
            bytes="each trainer sends + receives $(( 8 * P + 16 * s )), each server $(( 2 * 2 * 4 * P / s ))" ;;
    esac
    printf 'round %d  %-11s load %5s  %7.1f steps/s (%6d img/s)  test accuracy %s  bytes/step: %s\n' \
      "$r" "$cfg" "$load" "$(awk -v x="$ips" 'BEGIN { print x / 100 }')" "$ips" "$acc" "$bytes"
  done
done
echo "P = $P parameters ($(( 4 * P )) bytes)"
