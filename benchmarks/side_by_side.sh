#!/usr/bin/env bash
# Side by side: the same training and inference jobs (the course's CNN and MLP, batch 100,
# synthetic MNIST-shaped data, Adam 1e-3, best of 3 timed rounds after 3 warm-up steps) in oar,
# libtorch (Debian's libtorch-dev, C++ frontend, g++) and PaddlePaddle (pip `paddlepaddle` CPU in
# build/side_by_side/paddle-venv, when it can be installed; skipped otherwise), on 1 and 2 threads.
# Prints a Markdown table of images/s, peak RSS and the ratios oar/libtorch and oar/paddle.
#   benchmarks/side_by_side.sh [--threads "1 2"] [--steps 20] [--no-paddle] [--pytorch PYTHON]
# Current PyTorch from PyPI (sbs_pytorch.py: fp32, channels_last and bf16 autocast, the best of
# the three is its figure) joins when PYTHON (a python with torch >= 2) is given, or when
# $build/pytorch-venv/bin/python exists (docs/BENCHMARKS.md says how to make it; never installed here).
# Debian's OpenBLAS 0.3.21 does not know this CPU model and falls back to its slowest kernel; both
# libtorch (which calls it) and the GEMM comparison therefore run with OPENBLAS_CORETYPE=SkylakeX
# (the AVX-512 kernel) unless OPENBLAS_CORETYPE is already set: the peers get their fast path.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${OAR_SBS_BUILD:-$root/build/side_by_side}"
threads_list="1 2"
steps=20
paddle=1
pytorch_py=""
while (($#)); do
  case "$1" in
    --threads) threads_list="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --no-paddle) paddle=0; shift ;;
    --pytorch) pytorch_py="$2"; shift 2 ;;
    *) echo "side_by_side: unknown option $1" >&2; exit 2 ;;
  esac
done
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-SkylakeX}"

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

# pytorch_best <model> <mode> <threads> -> "img_per_sec peak_rss_mb variant" of the fastest variant
pytorch_best() {
  local best="- - -" v out ips
  [[ -n "$pytorch_py" ]] || { echo "$best"; return; }
  for v in fp32 channels_last bf16; do
    out="$(OMP_NUM_THREADS="$3" "$pytorch_py" "$root/benchmarks/sbs_pytorch.py" "$1" "$2" "$3" 100 "$steps" "$v" 2>/dev/null | tail -1 || true)"
    ips="$(sed -n 's/.*img_per_sec=\([0-9.]*\).*/\1/p' <<<"$out")"
    [[ -n "$ips" ]] || continue
    if [[ "$best" == "- - -" ]] || awk -v a="$ips" -v b="${best%% *}" 'BEGIN { exit !(a > b) }'; then
      best="$ips $(sed -n 's/.*peak_rss_mb=\([0-9.]*\).*/\1/p' <<<"$out") $v"
    fi
  done
  echo "$best"
}

# run <framework> <model> <mode> <threads> -> "img_per_sec peak_rss_mb" (or "- -")
run() {
  local fw="$1" model="$2" mode="$3" t="$4" out=""
  case "$fw" in
    oar) out="$("$oar_bin" "$model" "$mode" "$t" 100 "$steps" 2>/dev/null || true)" ;;
    torch) [[ -n "$torch_bin" ]] && out="$(OMP_NUM_THREADS="$t" "$torch_bin" "$model" "$mode" "$t" 100 "$steps" 2>/dev/null || true)" ;;
    paddle) [[ -n "$paddle_py" ]] && out="$(OMP_NUM_THREADS="$t" MKL_NUM_THREADS="$t" CPU_NUM=1 "$paddle_py" "$root/benchmarks/sbs_paddle.py" "$model" "$mode" "$t" 100 "$steps" 2>/dev/null | tail -1 || true)" ;;
  esac
  local ips rss
  ips="$(sed -n 's/.*img_per_sec=\([0-9.]*\).*/\1/p' <<<"$out")"
  rss="$(sed -n 's/.*peak_rss_mb=\([0-9.]*\).*/\1/p' <<<"$out")"
  echo "${ips:--} ${rss:--}"
}
ratio() { [[ "$1" == "-" || "$2" == "-" ]] && echo "-" || awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "side-by-side, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
echo "command: benchmarks/side_by_side.sh --threads \"$threads_list\" --steps $steps"
echo
echo "| job (batch 100) | threads | oar img/s | libtorch img/s | paddle img/s | pytorch img/s (best variant) | oar / libtorch | oar / paddle | oar / pytorch | peak RSS MB oar / libtorch / paddle / pytorch |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
for t in $threads_list; do
  for job in "cnn train" "cnn infer" "mlp train" "mlp infer"; do
    set -- $job
    read -r o_ips o_rss <<<"$(run oar "$1" "$2" "$t")"
    read -r t_ips t_rss <<<"$(run torch "$1" "$2" "$t")"
    read -r p_ips p_rss <<<"$(run paddle "$1" "$2" "$t")"
    read -r y_ips y_rss y_var <<<"$(pytorch_best "$1" "$2" "$t")"
    y_cell="$y_ips"; [[ "$y_var" != "-" ]] && y_cell="$y_ips ($y_var)"
    echo "| $1 $2 | $t | $o_ips | $t_ips | $p_ips | $y_cell | $(ratio "$o_ips" "$t_ips") | $(ratio "$o_ips" "$p_ips") | $(ratio "$o_ips" "$y_ips") | $o_rss / $t_rss / $p_rss / $y_rss |"
  done
done
