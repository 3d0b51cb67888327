#!/usr/bin/env bash
# Runs train_mnist once per seed with the same flags and prints each seed's test accuracy, then the
# mean, min and max: how a recipe does across seeds, not on one lucky or unlucky draw.
#   benchmarks/accuracy/seed_sweep.sh [--seeds "0 1 2 ..."] [--jobs N] [--bin PATH] [--logs DIR] [--no-run] -- TRAIN_MNIST_FLAGS...
# Per seed it prints the last epoch's validation accuracy and the test accuracy; then, for each, the
# mean with its standard error (std / sqrt(runs)), the std, min and max. --no-run only reads the
# logs already in --logs DIR (a sweep run before) and prints the same.
# Each run uses one thread (OAR_NUM_THREADS=1), pinned to its own core when --jobs > 1 (taskset),
# so N runs go side by side on N cores. Logs: DIR/seed<S>.log (default: a temporary folder).
# Example (docs/RESULTS.md):
#   benchmarks/accuracy/seed_sweep.sh --seeds "0 1 2 3 4 5 6 7 8 9" --jobs 2 -- --data ../shared/data/mnist
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
seeds="0 1 2 3 4"
jobs=1
bin="$root/build/release/examples/train_mnist"
logs=""
run=1
while (($#)); do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    --no-run) run=0; shift ;;
    --) shift; break ;;
    *) echo "seed_sweep: unknown option $1 (flags for train_mnist go after --)" >&2; exit 2 ;;
  esac
done
((run)) || [[ -n "$logs" ]] || { echo "seed_sweep: --no-run needs --logs DIR" >&2; exit 2; }
((!run)) || [[ -x "$bin" ]] || { echo "seed_sweep: $bin not found: build it (cmake --build --preset release --target train_mnist)" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "seed_sweep: --jobs needs a positive integer" >&2; exit 2; }
[[ -n "$logs" ]] || logs="$(mktemp -d)"
if ((run)); then mkdir -p "$logs"; else [[ -d "$logs" ]] || { echo "seed_sweep: --no-run: no folder $logs" >&2; exit 2; }; fi
cores="$(nproc)"

if ((run)); then
  echo "seed_sweep: $(date -u '+%Y-%m-%d %H:%M UTC'), flags: $*, seeds: $seeds, $jobs at a time, logs in $logs"
  slot=0
  for s in $seeds; do
    core=$((slot % cores))
    if ((jobs > 1)); then pin=(taskset -c "$core"); else pin=(); fi
    OAR_NUM_THREADS=1 "${pin[@]}" "$bin" "$@" --seed "$s" --log-every 0 >"$logs/seed$s.log" 2>&1 &
    slot=$((slot + 1))
    if ((slot % jobs == 0)); then wait; fi
  done
  wait
fi

rows=()  # "valid test" per seed with a result line
for s in $seeds; do
  a="$(sed -n 's/^result: .*test_accuracy=\([0-9.]*\).*/\1/p' "$logs/seed$s.log" 2>/dev/null || true)"
  if [[ -z "$a" ]]; then
    echo "seed $s: no result line (see $logs/seed$s.log)"
    continue
  fi
  # the last epoch line's validation accuracy: "... | valid loss L acc A | ..."
  v="$(sed -n 's/^epoch [0-9]*: .*| valid loss [0-9.]* acc \([0-9.]*\) |.*/\1/p' "$logs/seed$s.log" 2>/dev/null | tail -n 1 || true)"
  echo "seed $s: valid_accuracy=${v:-none} test_accuracy=$a"
  rows+=("${v:--} $a")
done
((${#rows[@]})) || exit 1
printf '%s\n' "${rows[@]}" | awk -v t="${OAR_SWEEP_TARGET:-0.989}" '
  # One line for column col (1 valid, 2 test) over the runs that have it ("-": none), then tail.
  function report(name, col, tail,    i, m, s, v, lo, hi, n, sd) {
    n = 0; s = 0
    for (i = 1; i <= NR; ++i) if (x[i, col] != "-") { n++; s += x[i, col]
      if (n == 1 || x[i, col] < lo) lo = x[i, col]; if (n == 1 || x[i, col] > hi) hi = x[i, col] }
    if (n == 0) return
    m = s / n; v = 0
    for (i = 1; i <= NR; ++i) if (x[i, col] != "-") v += (x[i, col] - m) ^ 2
    sd = n > 1 ? sqrt(v / (n - 1)) : 0
    printf "%s, runs %d: mean %.5f +- %.5f (standard error), std %.4f, min %.4f, max %.4f%s\n",
           name, n, m, sd / sqrt(n), sd, lo, hi, tail
  }
  { x[NR, 1] = $1; x[NR, 2] = $2; if ($2 >= t) ok++ }
  END { report("valid (last epoch)", 1, "")
        report("test", 2, sprintf(", %d of %d >= %s", ok, NR, t)) }'
