#!/usr/bin/env bash
# What a user gets: the side-by-side jobs (sbs_oar.cpp: the course's CNN and MLP at batch 100, MyNet
# at 32 and 128, ResNet8 at 32; synthetic data, Adam, 3 timed rounds) built three ways and run
# alternately in one run:
#   tuned    oar's own build (release preset: -O3 and -march=native through oar_dev)
#   release  a user's project (benchmarks/user_build/) against the installed oar, CMake's default
#            Release flags (-O3 -DNDEBUG), no -march
#   O2       the same project with CMAKE_BUILD_TYPE=None and CMAKE_CXX_FLAGS=-O2
# Prints a Markdown table: the least CPU time per image (user + system, all threads: what a loaded
# machine distorts least) of each build over the alternations, and tuned / user (above 1: the user
# build is faster).
#   benchmarks/user_build.sh [--threads "1 2"] [--steps 10] [--rounds 3] [--jobs "cnn:train:100 mynet:train:32"]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${OAR_USER_BUILD:-$root/build/user_build}"
threads_list="1 2"
steps=10
rounds=3
jobs="cnn:train:100 mlp:train:100 mynet:train:32 mynet:train:128 resnet8:train:32"
while (($#)); do
  case "$1" in
    --threads) threads_list="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    *) echo "user_build: unknown option $1" >&2; exit 2 ;;
  esac
done

echo "user_build: oar's tuned build and its install in $build" >&2
cmake --preset release -B "$build/oar" -DOAR_BUILD_CUDA=OFF -DOAR_BUILD_TESTS=OFF -DOAR_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build/oar" --target sbs_oar oar_kernels >/dev/null  # the install holds the kernels library too
cmake --install "$build/oar" --prefix "$build/prefix" --component oar_development >/dev/null
echo "user_build: the user's project, Release defaults and -O2" >&2
cmake -S "$root/benchmarks/user_build" -B "$build/release" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$build/prefix" >/dev/null
cmake -S "$root/benchmarks/user_build" -B "$build/O2" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS=-O2 \
  -DCMAKE_PREFIX_PATH="$build/prefix" >/dev/null
cmake --build "$build/release" >/dev/null
cmake --build "$build/O2" >/dev/null
grep -h -o -- '-march=[a-z0-9-]*' "$build/release/build.ninja" "$build/O2/build.ninja" 2>/dev/null &&
  { echo "user_build: a user build got -march" >&2; exit 1; }

declare -A bin=([tuned]="$build/oar/benchmarks/sbs_oar" [release]="$build/release/sbs_oar_user" [O2]="$build/O2/sbs_oar_user")
declare -A best
echo "user_build: $(date -u '+%F %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((r = 0; r < rounds; ++r)); do
  for t in $threads_list; do
    for job in $jobs; do
      IFS=: read -r model mode batch <<<"$job"
      for b in tuned release O2; do
        out=$("${bin[$b]}" "$model" "$mode" "$t" "$batch" "$steps")
        us=$(sed -n 's/.*cpu_us_per_img=\([0-9.]*\).*/\1/p' <<<"$out")
        key="$job/$t/$b"
        if [[ -z "${best[$key]:-}" ]] || (($(bc -l <<<"$us < ${best[$key]}"))); then best[$key]=$us; fi
      done
    done
  done
done
echo "user_build: load at the end $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| job | threads | tuned CPU us/img | Release (no -march) CPU us/img | -O2 CPU us/img | tuned / Release | tuned / -O2 |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for t in $threads_list; do
  for job in $jobs; do
    tu=${best[$job/$t/tuned]} re=${best[$job/$t/release]} o2=${best[$job/$t/O2]}
    printf '| %s | %s | %s | %s | %s | %.2f | %.2f |\n' "$(tr : ' ' <<<"$job")" "$t" "$tu" "$re" "$o2" \
      "$(bc -l <<<"$tu / $re")" "$(bc -l <<<"$tu / $o2")"
  done
done
