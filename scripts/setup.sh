#!/usr/bin/env bash
# Installs what oar needs on Debian 12 (idempotent) and stages the MNIST files.
# Run as root (or with sudo available). Prints what it installs, or "all present".
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  build-essential cmake ninja-build g++ clang-14 libclang-rt-14-dev git pkg-config
  xtensor-dev xtl-dev libxsimd-dev libsimdjson-dev doctest-dev zlib1g-dev
  libbenchmark-dev libopenblas-dev libopenmpi-dev openmpi-bin dataset-fashion-mnist libtorch-dev
  libpng-dev libjpeg-dev
  python3-numpy python3-torch python3-venv python3-pip chromium libonnx-dev
)

missing=()
for pkg in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: packages: all present"
else
  echo "setup: missing packages: ${missing[*]}"
  if [[ "$(id -u)" -eq 0 ]]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo)
  else
    echo "setup: error: not root and no password-less sudo; install as root with:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing: ${missing[*]}"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  echo "setup: installed: ${missing[*]}"
fi

# Python packages that Debian lacks, for the cross-check tests only (readers written by others:
# TensorBoard's EventAccumulator, VisualDL's LogReader, the safetensors package, Pillow's picture
# codecs, onnxruntime and onnx's checker): a venv in .venv that also sees Debian's numpy and torch.
# numpy stays below 2: Debian's torch 1.13 is built against numpy 1.x and cannot convert arrays
# under numpy 2 (pip would otherwise pull numpy 2 in for newer pandas or ml_dtypes).
# Skipped with OAR_NO_PIP=1; the tests that need them then skip.
pip_packages=(tensorboard safetensors pillow visualdl onnxruntime onnx "numpy<2")
venv="$repo_root/.venv"
if [[ "${OAR_NO_PIP:-0}" == 1 ]]; then
  echo "setup: python venv: skipped (OAR_NO_PIP=1)"
elif [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import tensorboard, safetensors, PIL, visualdl, onnxruntime, onnx, numpy
assert int(numpy.__version__.split(".")[0]) < 2' 2>/dev/null; then
  echo "setup: python venv (.venv): all present"
else
  [[ -x "$venv/bin/python" ]] || /usr/bin/python3 -m venv --system-site-packages "$venv"
  echo "setup: python venv (.venv): installing ${pip_packages[*]}"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${pip_packages[@]}"
  echo "setup: python venv (.venv): installed ${pip_packages[*]}"
fi

# MNIST IDX files: copy from the shared folder beside the checkout when absent.
mnist_files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
             t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
dest="$repo_root/data/mnist"
src="$repo_root/../shared/data/mnist"
need_copy=0
for f in "${mnist_files[@]}"; do
  [[ -s "$dest/$f" ]] || need_copy=1
done
if ((need_copy == 0)); then
  echo "setup: data/mnist: all present"
elif [[ -d "$src" ]]; then
  mkdir -p "$dest"
  for f in "${mnist_files[@]}"; do
    if [[ ! -s "$dest/$f" ]]; then
      cp "$src/$f" "$dest/$f"
      echo "setup: data/mnist: copied $f"
    fi
  done
  if [[ -f "$src/SHA256SUMS" ]]; then
    cp "$src/SHA256SUMS" "$dest/SHA256SUMS"
    (cd "$dest" && sha256sum --quiet -c SHA256SUMS) ||
      { echo "setup: error: data/mnist checksum mismatch" >&2; exit 1; }
    echo "setup: data/mnist: checksums ok"
  fi
else
  echo "setup: data/mnist: files absent and $src not found; MNIST tests will be skipped"
fi
