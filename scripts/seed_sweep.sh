#!/usr/bin/env bash
# Runs train_mnist once per seed with the same flags and prints each seed's test accuracy, then the
# mean, min and max: how a recipe does across seeds, not on one lucky or unlucky draw.
#   scripts/seed_sweep.sh [--seeds "0 1 2 ..."] [--jobs N] [--bin PATH] [--logs DIR] -- TRAIN_MNIST_FLAGS...
# Each run uses one thread (OAR_NUM_THREADS=1), pinned to its own core when --jobs > 1 (taskset),
# so N runs go side by side on N cores. Logs: DIR/seed<S>.log (default: a temporary folder).
# Example (README, Results):
#   scripts/seed_sweep.sh --seeds "0 1 2 3 4 5 6 7 8 9" --jobs 2 -- --data ../shared/data/mnist
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seeds="0 1 2 3 4"
jobs=1
bin="$root/build/release/examples/train_mnist"
logs=""
while (($#)); do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "seed_sweep: unknown option $1 (flags for train_mnist go after --)" >&2; exit 2 ;;
  esac
done
[[ -x "$bin" ]] || { echo "seed_sweep: $bin not found: build it (cmake --build --preset release --target train_mnist)" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "seed_sweep: --jobs needs a positive integer" >&2; exit 2; }
[[ -n "$logs" ]] || logs="$(mktemp -d)"
mkdir -p "$logs"
cores="$(nproc)"

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

accs=()
for s in $seeds; do
  a="$(sed -n 's/^result: .*test_accuracy=\([0-9.]*\).*/\1/p' "$logs/seed$s.log")"
  if [[ -z "$a" ]]; then
    echo "seed $s: no result line (see $logs/seed$s.log)"
    continue
  fi
  echo "seed $s: test_accuracy=$a"
  accs+=("$a")
done
((${#accs[@]})) || exit 1
printf '%s\n' "${accs[@]}" | awk -v t="${OAR_SWEEP_TARGET:-0.989}" '
  { x[NR] = $1; s += $1; if (NR == 1 || $1 < lo) lo = $1; if (NR == 1 || $1 > hi) hi = $1; if ($1 >= t) ok++ }
  END { m = s / NR; for (i = 1; i <= NR; ++i) v += (x[i] - m) ^ 2;
        printf "runs %d: mean %.4f, std %.4f, min %.4f, max %.4f, %d of %d >= %s\n",
               NR, m, (NR > 1 ? sqrt(v / (NR - 1)) : 0), lo, hi, ok, NR, t }'
