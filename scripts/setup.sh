#!/usr/bin/env bash
# Installs what oar needs on Debian 12 (idempotent) and stages the MNIST files.
# Run as root (or with sudo available). Prints what it installs, or "all present".
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  build-essential cmake ninja-build g++ clang-14 libclang-rt-14-dev git pkg-config
  xtensor-dev xtl-dev libxsimd-dev libsimdjson-dev doctest-dev zlib1g-dev
  libbenchmark-dev libopenmpi-dev openmpi-bin dataset-fashion-mnist libtorch-dev
  python3-numpy
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
