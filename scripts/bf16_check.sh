#!/usr/bin/env bash
# Issue 21's checks for a CPU with bf16 units (AVX512-BF16, AMX): the bf16 kernel tests on every
# path the CPU has, then the bf16_mixed policy's speed beside fp32 and PyTorch, each job pinned to
# two cores, and the same bf16 jobs with OAR_ISA forcing each path (where the time goes).
#
#   scripts/bf16_check.sh [BUILD_DIR] [PYTHON]   # defaults: build/release, .venv/bin/python
#
# BUILD_DIR needs oar_tests_kernels_cpu, sbs_oar and bench_mixed_gemm built; PYTHON a torch (benchmarks/sbs_pytorch.py).
# Prints its findings; exit status 0 unless the tests fail. Results go to docs/BENCHMARKS.md by hand.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B="${1:-build/release}"
py="${2:-.venv/bin/python}"
pin=(taskset -c 0,1)
command -v taskset >/dev/null || pin=()

echo "== cpu"
lscpu | grep -E 'Model name|^CPU\(s\)'
grep -o -w 'amx_bf16\|amx_tile\|avx512_bf16\|avx512f' /proc/cpuinfo | sort | uniq -c

echo "== bf16 kernel tests (every path this CPU has; the others report SKIPPED)"
"$B/tests/oar_tests_kernels_cpu" '--source-file=*bf16*' 2>&1 | grep -E 'SKIPPED|ERROR|test cases|assertions|Status'
rc=${PIPESTATUS[0]}
((rc == 77)) && rc=0  # some paths skipped

job() {  # model mode batch steps
  local v vs="fp32 channels_last bf16"
  [[ $1 == mlp ]] && vs="fp32 bf16"
  for v in fp32 bf16; do
    echo "oar $1 $2 b$3 $v: $(timeout 300 "${pin[@]}" "$B/benchmarks/sbs_oar" "$1" "$2" 2 "$3" "$4" "$v" 2>&1 | tail -1)"
  done
  for v in $vs; do
    echo "torch $1 $2 b$3 $v: $(OMP_NUM_THREADS=2 timeout 300 "${pin[@]}" "$py" benchmarks/sbs_pytorch.py "$1" "$2" 2 "$3" "$4" "$v" 2>&1 | tail -1)"
  done
}
echo "== side by side on 2 cores, torch $("$py" -c 'import torch; print(torch.__version__)' 2>&1)"
job cnn train 100 20
job mlp train 100 200  # 20 steps of the MLP (2,000 images) are too few to time
job mynet train 128 20
job cnn infer 100 20

echo "== the MLP's GEMMs alone, fp32 against bf16_mixed (bench_mixed_gemm: 1 and 2 threads)"
"${pin[@]}" "$B/benchmarks/bench_mixed_gemm" 1
"${pin[@]}" "$B/benchmarks/bench_mixed_gemm" 2

echo "== bf16_mixed with OAR_ISA forcing each path (avx512: the rounded operands through the fp32 kernels)"
for isa in amx avx512bf16 avx512; do
  for j in "cnn train 100 10" "mynet train 128 6" "mlp infer 100 2000"; do
    set -- $j
    echo "OAR_ISA=$isa $1 $2 b$3: $(OAR_ISA=$isa timeout 300 "${pin[@]}" "$B/benchmarks/sbs_oar" "$1" "$2" 2 "$3" "$4" bf16 2>&1 | tail -1)"
  done
done
echo "== the same with Conv2D on the bf16 units (OAR_BF16_CONV_UNITS=1; off by default)"
for j in "cnn train 100 10" "mynet train 128 6"; do
  set -- $j
  echo "OAR_BF16_CONV_UNITS=1 $1 $2 b$3: $(OAR_BF16_CONV_UNITS=1 timeout 300 "${pin[@]}" "$B/benchmarks/sbs_oar" "$1" "$2" 2 "$3" "$4" bf16 2>&1 | tail -1)"
done
exit "$rc"
