#!/usr/bin/env bash
# The whole check: setup, configure, build, test (release preset), with timings.
#   equivalent to: scripts/setup.sh && cmake --preset release &&
#                  cmake --build --preset release -j2 && ctest --preset release
# OAR_PRESET (default release) and OAR_JOBS (default 2) may override.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

preset="${OAR_PRESET:-release}"
jobs="${OAR_JOBS:-2}"
timings=()

report() {
  local t
  for t in "${timings[@]}"; do echo "[oar] $t"; done
}

stage() {
  local name="$1"; shift
  echo "[oar] ==> $name: $*"
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  local dt=$((SECONDS - t0))
  if ((rc != 0)); then
    timings+=("$name: FAILED (exit $rc) after ${dt}s")
    report
    exit "$rc"
  fi
  timings+=("$name: ${dt}s")
  echo "[oar] <== $name: ${dt}s"
}

stage setup     scripts/setup.sh
stage configure cmake --preset "$preset"
stage build     cmake --build --preset "$preset" -j"$jobs"
stage test      ctest --preset "$preset" --output-on-failure --no-tests=error
report
