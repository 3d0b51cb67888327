#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset: clang++-14, ASan + UBSan) and runs each for a
# bounded time on a scratch copy of its seed corpus (fuzz/corpus/<target>/ is never written), then
# prints executions and coverage per target. Exit status 1 if any target crashed, leaked, ran out
# of memory or timed out; the reproducer's path is printed (rerun it: <binary> <reproducer>).
#   FUZZ_STAGE_SECONDS  the fuzzing time of the whole stage (default 180), shared evenly: each
#                 target runs FUZZ_STAGE_SECONDS / ceil(targets / FUZZ_JOBS) seconds, so that a
#                 new target does not lengthen CI (7 targets, 2 at once: 45 s each)
#   FUZZ_SECONDS  seconds per target instead (overrides the share)
#   FUZZ_JOBS     targets fuzzed at once (default 2, one per core of the CI machine)
#   FUZZ_TARGETS  space-separated subset (default: all)
#   FUZZ_WORK     scratch folder (default build/fuzz/run): corpora, logs, reproducers
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs="${FUZZ_JOBS:-2}"
targets=(${FUZZ_TARGETS:-fuzz_idx fuzz_cifar10 fuzz_mnist_json fuzz_gzip fuzz_safetensors fuzz_options fuzz_image})
rounds=$(( (${#targets[@]} + jobs - 1) / jobs ))
seconds="${FUZZ_SECONDS:-$(( ${FUZZ_STAGE_SECONDS:-180} / rounds ))}"
work="${FUZZ_WORK:-build/fuzz/run}"
bin=build/fuzz/fuzz

t0=$SECONDS
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
echo "[fuzz] build: $((SECONDS - t0))s"

rm -rf "$work"
mkdir -p "$work"

dict_of() {
  case "$1" in
    fuzz_mnist_json) echo "-dict=fuzz/json.dict" ;;
    fuzz_cifar10) echo "-dict=fuzz/tar.dict" ;;
    fuzz_safetensors) echo "-dict=fuzz/safetensors.dict" ;;
    fuzz_image) echo "-dict=fuzz/image.dict" ;;
  esac
}

# One target: a fresh copy of the seeds, bounded time and memory, artifacts in $work/<target>/.
run_one() {
  local t="$1" dir="$work/$1"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp fuzz/corpus/"$t"/* "$dir/corpus/"
  # shellcheck disable=SC2046
  ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0:handle_abort=1" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "$bin/$t" "$dir/corpus" $(dict_of "$t") \
      -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
      >"$dir/log" 2>&1
}

declare -A pid_of
for t in "${targets[@]}"; do
  [[ -x "$bin/$t" ]] || { echo "[fuzz] $bin/$t was not built"; exit 1; }
  while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done
  echo "[fuzz] $t: ${seconds}s"
  run_one "$t" &
  pid_of[$t]=$!
done

failed=0
for t in "${targets[@]}"; do
  rc=0
  wait "${pid_of[$t]}" || rc=$?
  log="$work/$t/log"
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | tail -1 | awk '{print $2}')
  cov=$(grep -oE '(cov|ft|corp): [0-9/a-zA-Z]+' "$log" | tail -3 | paste -sd' ')
  peak=$(grep -oE 'stat::peak_rss_mb: *[0-9]+' "$log" | tail -1 | awk '{print $2}')
  if (( rc != 0 )); then
    failed=1
    echo "[fuzz] $t: FAILED (exit $rc) after ${execs:-?} executions; last lines of $log:"
    grep -E 'ERROR|SUMMARY|Test unit written|DEATH|deadly|timeout|out-of-memory|leak' "$log" | tail -8 | sed 's/^/    /'
    for a in "$work/$t"/artifacts/*; do
      [[ -e "$a" ]] && echo "[fuzz] $t: reproducer $a  (rerun: $bin/$t $a)"
    done
  else
    echo "[fuzz] $t: ok  executions ${execs:-?}  ${cov}  peak RSS ${peak:-?} MB"
  fi
done
echo "[fuzz] total: $((SECONDS - t0))s"
exit "$failed"
