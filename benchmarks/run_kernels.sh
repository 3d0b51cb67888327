#!/usr/bin/env bash
# The Google Benchmark kernel suite in one command: builds bench_kernels (release, with OpenBLAS
# side by side when libopenblas-dev is installed) and runs it on the threads given (default: all).
#   benchmarks/run_kernels.sh [--threads N] [extra Google Benchmark flags, e.g. --benchmark_filter=gemm]
# OpenBLAS's kernel choice: benchmarks/openblas_core.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${OAR_BENCH_BUILD:-$root/build/bench}"
if [[ "${1:-}" == "--threads" ]]; then
  export OAR_NUM_THREADS="$2"
  shift 2
fi
source "$root/benchmarks/openblas_core.sh"
cmake --preset release -B "$build" -DOAR_BUILD_CUDA=OFF >/dev/null
cmake --build "$build" --target bench_kernels >/dev/null
echo "bench_kernels: $(date -u '+%Y-%m-%d %H:%M UTC'), threads=${OAR_NUM_THREADS:-all}, load: $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$build/benchmarks/bench_kernels" --benchmark_repetitions="${OAR_BENCH_REPS:-3}" \
  --benchmark_report_aggregates_only=true "$@"
