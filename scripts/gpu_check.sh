#!/usr/bin/env bash
# Every check that needs a GPU, in one command, for the first machine that has one: builds the
# release preset (nvcc targets included), runs every real-launch test (ctest label `gpu`), the
# main job on one GPU in fp32 and with --precision bf16 (the bf16_mixed policy's cuBLAS bf16
# GEMMs: test accuracy, img/s and the gap to fp32), the data-parallel main job on two GPUs over NCCL
# when two are visible (under mpirun and under oar-launch --gpus 0,1), and the GPU benchmark (fp32
# and bf16); then prints one summary table. Logs go to build/gpu_check/ (OAR_GPU_LOGS overrides).
#
#   scripts/gpu_check.sh            # OAR_JOBS (default: all cores), OAR_GPU_EPOCHS (default 1)
#   scripts/gpu_check.sh --prebuilt build/gpu
#
# --prebuilt DIR skips the build and uses DIR, a build tree of this source made on another machine
# (targets cuda_gpu_kernels cuda_gpu_network cuda_gpu_train cuda_gpu_train_mnist train_mnist
# bench_train_gpu), for a GPU machine that lacks the build's dependencies. Its ctest files and test
# programs name absolute paths, so DIR must sit where it was built (a link will do), with data/mnist
# staged beside it and the libraries it links on LD_LIBRARY_PATH.
#
# Exit status: 0 when every row passed, 1 when one failed, 77 when no GPU is visible (nothing was
# checked; the emulated-launch tests of the normal suite stay the proof of the kernel math).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=build/release
prebuilt=0
if [[ "${1:-}" == --prebuilt ]]; then
  [[ -n "${2:-}" && -d "$2" ]] || { echo "[gpu_check] --prebuilt: no build tree at '${2:-}'" >&2; exit 2; }
  build="$2"; prebuilt=1
elif (($# > 0)); then
  echo "[gpu_check] unknown argument '$1' (only --prebuilt DIR)" >&2; exit 2
fi
logs="${OAR_GPU_LOGS:-build/gpu_check}"
jobs="${OAR_JOBS:-$(nproc)}"
epochs="${OAR_GPU_EPOCHS:-1}"
data="data/mnist"
mkdir -p "$logs"

rows=()
failed=0
row() {  # check, outcome, detail
  rows+=("$(printf '| %-44s | %-7s | %s |' "$1" "$2" "$3")")
  [[ "$2" == failed ]] && failed=1
  return 0
}
table() {
  echo
  echo "[gpu_check] summary ($(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname))"
  printf '| %-44s | %-7s | %s |\n' check outcome detail
  printf '| %-44s | %-7s | %s |\n' "---" "---" "---"
  printf '%s\n' "${rows[@]}"
}
# The main job's result line -> "test_accuracy=... train_images_per_sec=..."
result_of() { grep -m1 '^result:' "$1" | grep -o 'test_accuracy=[^ ]* train_images_per_sec=[^ ]*' || true; }

gpus=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >"$logs/gpus.txt" 2>&1; then
  gpus=$(grep -c '^GPU' "$logs/gpus.txt" || true)
fi
if ((gpus == 0)); then
  echo "[gpu_check] no GPU visible (nvidia-smi -L): nothing to check here"
  exit 77
fi
echo "[gpu_check] $gpus GPU(s):"
cat "$logs/gpus.txt"

# 1. Build (setup stages data/mnist; the release preset builds the nvcc targets when nvcc is found).
t0=$SECONDS
if ((prebuilt)); then
  if [[ -d "$data" ]]; then
    row "build (prebuilt: $build)" passed "built elsewhere; $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1) driver"
  else
    row "build (prebuilt: $build)" failed "no $data beside it"
    table
    exit 1
  fi
elif scripts/setup.sh >"$logs/setup.log" 2>&1 && cmake --preset release >"$logs/configure.log" 2>&1 &&
   cmake --build --preset release -j"$jobs" >"$logs/build.log" 2>&1; then
  row "build (release preset, nvcc sm_80 + sm_90)" passed "$((SECONDS - t0)) s"
else
  row "build (release preset, nvcc sm_80 + sm_90)" failed "see $logs/build.log"
  table
  exit 1
fi

# 2. Every real-launch test: kernels, the network, the GPU main job, NCCL.
ctest --test-dir "$build" -L gpu --output-on-failure >"$logs/ctest_gpu.log" 2>&1
rc=$?
summary=$(grep -m1 'tests passed' "$logs/ctest_gpu.log" || echo "no ctest summary")
skipped=$(grep -c '\*\*\*Skipped\|Not Run' "$logs/ctest_gpu.log" || true)
if ((rc == 0)); then row "ctest -L gpu (real launches)" passed "$summary; $skipped skipped"
else row "ctest -L gpu (real launches)" failed "$summary (see $logs/ctest_gpu.log)"; fi

# 3. The main job on one GPU.
if "$build/examples/train_mnist" --data "$data" --device gpu --epochs "$epochs" >"$logs/train_gpu.log" 2>&1; then
  row "train_mnist --device gpu ($epochs epoch)" passed "$(result_of "$logs/train_gpu.log")"
else
  row "train_mnist --device gpu ($epochs epoch)" failed "see $logs/train_gpu.log"
fi

# 3b. The same run under the bf16_mixed policy: it must train (test accuracy, a fraction, within
# 0.005 of the fp32 run's of the same seed and epochs) and its img/s is printed beside fp32's.
acc_of() { grep -m1 '^result:' "$1" | grep -o 'test_accuracy=[0-9.]*' | cut -d= -f2; }
if "$build/examples/train_mnist" --data "$data" --device gpu --precision bf16 --epochs "$epochs" \
     >"$logs/train_gpu_bf16.log" 2>&1; then
  a32=$(acc_of "$logs/train_gpu.log"); a16=$(acc_of "$logs/train_gpu_bf16.log")
  if [[ -n "$a32" && -n "$a16" ]] && awk -v a="$a16" -v b="$a32" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.005) }'; then
    row "train_mnist --device gpu --precision bf16" passed "$(result_of "$logs/train_gpu_bf16.log") (fp32: $a32)"
  else
    row "train_mnist --device gpu --precision bf16" failed "accuracy $a16 against fp32's $a32 (see $logs/train_gpu_bf16.log)"
  fi
else
  row "train_mnist --device gpu --precision bf16" failed "see $logs/train_gpu_bf16.log"
fi

# 4. Data parallel over NCCL on two GPUs (each rank takes the GPU of its local rank).
if ((gpus >= 2)); then
  mpi=(mpirun -np 2 --oversubscribe)
  [[ "$(id -u)" == 0 ]] && mpi+=(--allow-run-as-root)
  if "${mpi[@]}" "$build/examples/train_mnist" --data "$data" --device gpu --epochs "$epochs" >"$logs/train_2gpu_mpirun.log" 2>&1; then
    row "mpirun -np 2 train_mnist --device gpu" passed "$(result_of "$logs/train_2gpu_mpirun.log")"
  else
    row "mpirun -np 2 train_mnist --device gpu" failed "see $logs/train_2gpu_mpirun.log"
  fi
  if scripts/oar-launch --gpus 0,1 "$build/examples/train_mnist" --data "$data" --device gpu --epochs "$epochs" \
       >"$logs/train_2gpu_launch.log" 2>&1; then
    row "oar-launch --gpus 0,1 train_mnist --device gpu" passed "$(result_of "$logs/train_2gpu_launch.log")"
  else
    row "oar-launch --gpus 0,1 train_mnist --device gpu" failed "see $logs/train_2gpu_launch.log"
  fi
else
  row "data parallel on 2 GPUs (NCCL)" skipped "one GPU visible"
fi

# 5. The GPU benchmark (img/s at batch 100 and 1024), in fp32 and under the bf16_mixed policy.
bench="$build/benchmarks/cuda/bench_train_gpu"
for precision in fp32 bf16; do
  name="bench_train_gpu 200 --precision $precision"
  log="$logs/bench_train_gpu_$precision.log"
  if [[ ! -x "$bench" ]]; then
    row "$name" failed "not built ($bench)"
  elif "$bench" 200 --precision "$precision" >"$log" 2>&1; then
    row "$name" passed "$(grep -o '"batch": [0-9]*\|"train_images_per_sec": [0-9.]*' "$log" | tr '\n' ' ')"
  else
    row "$name" failed "see $log"
  fi
done

table
exit "$failed"
