#!/usr/bin/env bash
# Side by side: the same training and inference jobs (Adam 1e-3, synthetic data, best of 3 timed
# rounds after 3 warm-up steps) in oar, libtorch (Debian's libtorch-dev, C++ frontend, g++) and
# PaddlePaddle (pip `paddlepaddle` CPU in $build/paddle-venv, when it can be installed; skipped
# otherwise), on 1 and 2 threads. The models: the course's CNN and MLP (MNIST-shaped), the fleet
# chapter's MyNet and models::ResNet8 (CIFAR-shaped). A job is MODEL:MODE:BATCH[:bf16]; with :bf16
# oar runs its bf16 mixed-precision policy (the peers' jobs are the same as without it: PyTorch's
# bf16 autocast is one of its variants anyway). Batch-1 inference jobs are reported as latency
# (microseconds per image) in a second table.
# Prints Markdown tables of images/s (or latency), peak RSS and the ratios of oar to each peer.
#   benchmarks/side_by_side.sh [--threads "1 2"] [--steps 20] [--jobs "cnn:train:100 ..."]
#                              [--no-paddle] [--pytorch PYTHON]
# --steps is the number of steps per round at batch 100; other batches run proportionally more
# steps (at most 500), so each round covers about the same work.
# Current PyTorch from PyPI (sbs_pytorch.py: fp32, channels_last and bf16 autocast, the best of
# the three is its figure) joins when PYTHON (a python with torch >= 2) is given, or when
# $build/pytorch-venv/bin/python exists (docs/BENCHMARKS.md says how to make it; never installed here).
# libtorch calls Debian's OpenBLAS, whose kernel choice benchmarks/openblas_core.sh sets.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${OAR_SBS_BUILD:-$root/build/side_by_side}"
threads_list="1 2"
steps=20
jobs="cnn:train:100 cnn:infer:100 mlp:train:100 mlp:infer:100 mynet:train:32 mynet:train:128 resnet8:train:128 cnn:infer:1 mlp:infer:1 mynet:infer:1 resnet8:infer:1"
paddle=1
pytorch_py=""
while (($#)); do
  case "$1" in
    --threads) threads_list="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --no-paddle) paddle=0; shift ;;
    --pytorch) pytorch_py="$2"; shift 2 ;;
    *) echo "side_by_side: unknown option $1" >&2; exit 2 ;;
  esac
done
source "$root/benchmarks/openblas_core.sh"

echo "side_by_side: building oar's job in $build" >&2
cmake --preset release -B "$build" -DOAR_BUILD_CUDA=OFF >/dev/null
cmake --build "$build" --target sbs_oar >/dev/null
oar_bin="$build/benchmarks/sbs_oar"

torch_bin=""
if [[ -f /usr/include/torch/csrc/api/include/torch/torch.h ]]; then
  torch_bin="$build/sbs_torch"
  if [[ ! -x "$torch_bin" || "$root/benchmarks/sbs_torch.cpp" -nt "$torch_bin" ]]; then
    echo "side_by_side: building libtorch's job (g++)" >&2
    g++ -O2 -std=c++17 "$root/benchmarks/sbs_torch.cpp" -I/usr/include/torch/csrc/api/include \
      -o "$torch_bin" -ltorch -ltorch_cpu -lc10
  fi
else
  echo "side_by_side: libtorch-dev not installed; its column is skipped" >&2
fi

paddle_py=""
if ((paddle)); then
  venv="$build/paddle-venv"
  if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import paddle" 2>/dev/null; then
    echo "side_by_side: installing paddlepaddle (CPU) into $venv" >&2
    if python3 -m venv "$venv" >/dev/null 2>&1 &&
       timeout 900 "$venv/bin/pip" install -q paddlepaddle numpy >/dev/null 2>&1 &&
       "$venv/bin/python" -c "import paddle" 2>/dev/null; then
      :
    else
      echo "side_by_side: paddlepaddle could not be installed; its column is skipped" >&2
    fi
  fi
  if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import paddle" 2>/dev/null; then
    paddle_py="$venv/bin/python"
  fi
fi

if [[ -z "$pytorch_py" && -x "$build/pytorch-venv/bin/python" ]]; then pytorch_py="$build/pytorch-venv/bin/python"; fi
if [[ -n "$pytorch_py" ]] && ! "$pytorch_py" -c "import torch" 2>/dev/null; then
  echo "side_by_side: $pytorch_py cannot import torch; the PyTorch column is skipped" >&2
  pytorch_py=""
fi

# steps_for <batch> -> steps per round: --steps at batch 100, proportionally more for smaller batches
steps_for() { local n=$((steps * 100 / $1)); ((n < steps)) && n=$steps; ((n > 500)) && n=500; echo "$n"; }

# pytorch_best <model> <mode> <threads> <batch> -> "img_per_sec peak_rss_mb variant" of the fastest variant
pytorch_best() {
  local best="- - -" v out ips
  [[ -n "$pytorch_py" ]] || { echo "$best"; return; }
  for v in fp32 channels_last bf16; do
    out="$(OMP_NUM_THREADS="$3" "$pytorch_py" "$root/benchmarks/sbs_pytorch.py" "$1" "$2" "$3" "$4" "$(steps_for "$4")" "$v" 2>/dev/null | tail -1 || true)"
    ips="$(sed -n 's/.*img_per_sec=\([0-9.]*\).*/\1/p' <<<"$out")"
    [[ -n "$ips" ]] || continue
    if [[ "$best" == "- - -" ]] || awk -v a="$ips" -v b="${best%% *}" 'BEGIN { exit !(a > b) }'; then
      best="$ips $(sed -n 's/.*peak_rss_mb=\([0-9.]*\).*/\1/p' <<<"$out") $v"
    fi
  done
  echo "$best"
}

# run <framework> <model> <mode> <threads> <batch> [precision] -> "img_per_sec peak_rss_mb" (or "- -")
run() {
  local fw="$1" model="$2" mode="$3" t="$4" b="$5" prec="${6:-fp32}" out="" n
  n="$(steps_for "$b")"
  case "$fw" in
    oar) out="$("$oar_bin" "$model" "$mode" "$t" "$b" "$n" "$prec" 2>/dev/null || true)" ;;
    torch) [[ -n "$torch_bin" ]] && out="$(OMP_NUM_THREADS="$t" "$torch_bin" "$model" "$mode" "$t" "$b" "$n" 2>/dev/null || true)" ;;
    paddle) [[ -n "$paddle_py" ]] && out="$(OMP_NUM_THREADS="$t" MKL_NUM_THREADS="$t" CPU_NUM=1 "$paddle_py" "$root/benchmarks/sbs_paddle.py" "$model" "$mode" "$t" "$b" "$n" 2>/dev/null | tail -1 || true)" ;;
  esac
  local ips rss
  ips="$(sed -n 's/.*img_per_sec=\([0-9.]*\).*/\1/p' <<<"$out")"
  rss="$(sed -n 's/.*peak_rss_mb=\([0-9.]*\).*/\1/p' <<<"$out")"
  echo "${ips:--} ${rss:--}"
}
ratio() { [[ "$1" == "-" || "$2" == "-" ]] && echo "-" || awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "side-by-side, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(detected)}"
echo "command: benchmarks/side_by_side.sh --threads \"$threads_list\" --steps $steps --jobs \"$jobs\""
echo "CPU: $(sed -n "s/^model name[[:space:]]*: //p" /proc/cpuinfo | head -1) (family $(sed -n "s/^cpu family[[:space:]]*: //p" /proc/cpuinfo | head -1), model $(sed -n "s/^model[[:space:]]*: //p" /proc/cpuinfo | head -1)), ISA flags: $(grep -m1 -o -w -E 'avx512f|avx512_bf16|amx_tile|avx2' /proc/cpuinfo | tr '\n' ' ')"
# latency <img_per_sec> -> microseconds per image
latency() { [[ "$1" == "-" ]] && echo "-" || awk -v a="$1" 'BEGIN { printf "%.0f", 1e6 / a }'; }

rows=()      # throughput rows
lat_rows=()  # batch-1 latency rows
for t in $threads_list; do
  for job in $jobs; do
    IFS=: read -r model mode b prec <<<"$job"
    prec="${prec:-fp32}"
    tag=""; [[ "$prec" == bf16 ]] && tag=", oar bf16"
    read -r o_ips o_rss <<<"$(run oar "$model" "$mode" "$t" "$b" "$prec")"
    read -r t_ips t_rss <<<"$(run torch "$model" "$mode" "$t" "$b")"
    read -r p_ips p_rss <<<"$(run paddle "$model" "$mode" "$t" "$b")"
    read -r y_ips y_rss y_var <<<"$(pytorch_best "$model" "$mode" "$t" "$b")"
    ratios="$(ratio "$o_ips" "$t_ips") | $(ratio "$o_ips" "$p_ips") | $(ratio "$o_ips" "$y_ips")"
    if [[ "$mode" == infer && "$b" == 1 ]]; then
      y_cell="$(latency "$y_ips")"; [[ "$y_var" != "-" ]] && y_cell="$y_cell ($y_var)"
      lat_rows+=("| $model$tag | $t | $(latency "$o_ips") | $(latency "$t_ips") | $(latency "$p_ips") | $y_cell | $ratios |")
    else
      y_cell="$y_ips"; [[ "$y_var" != "-" ]] && y_cell="$y_ips ($y_var)"
      rows+=("| $model $mode, batch $b$tag | $t | $o_ips | $t_ips | $p_ips | $y_cell | $ratios | $o_rss / $t_rss / $p_rss / $y_rss |")
    fi
  done
done
echo
if ((${#rows[@]})); then
  echo "| job | threads | oar img/s | libtorch img/s | paddle img/s | pytorch img/s (best variant) | oar / libtorch | oar / paddle | oar / pytorch | peak RSS MB oar / libtorch / paddle / pytorch |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
  printf '%s\n' "${rows[@]}"
fi
if ((${#lat_rows[@]})); then
  echo
  echo "Batch-1 inference latency, microseconds per image (best round's mean); ratios are peer latency / oar latency:"
  echo
  echo "| model | threads | oar us | libtorch us | paddle us | pytorch us (best variant) | libtorch / oar | paddle / oar | pytorch / oar |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  printf '%s\n' "${lat_rows[@]}"
fi
