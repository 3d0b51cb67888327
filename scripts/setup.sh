#!/usr/bin/env bash
# Installs what oar needs on Debian 12 (idempotent) and stages the MNIST files; prints what it
# installs, or "all present". Two sets:
#   scripts/setup.sh --main   what building and running the main job (scripts/run_main.sh: the
#                             train_mnist example) needs: the compiler, CMake, Ninja and the
#                             library's dependencies (xsimd and xtl, zlib, simdjson);
#   scripts/setup.sh          the above plus what the tests, benchmarks and fuzzers need (the test
#                             command, scripts/test.sh): doctest, xtensor, libtorch, Open MPI,
#                             libpng/libjpeg, libonnx, Google Benchmark, OpenBLAS, clang 14,
#                             Chromium, Debian's Python with numpy and torch, and a venv (.venv)
#                             with the Python readers from PyPI.
# Installing needs root or password-less sudo; otherwise it prints the apt-get line and exits 1.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

mode=all
case "${1:-}" in
  "") ;;
  --main) mode=main ;;
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
  *) echo "setup: error: unknown argument '$1' (expected --main, or nothing for the tests' set)" >&2; exit 2 ;;
esac

# The main job: compiler, CMake + Ninja (the presets' generator), oar::oar's headers (xsimd with the
# xtl its CMake target names, zlib) and simdjson (train_mnist reads the course's mnist.json.gz).
main_packages=(build-essential g++ cmake ninja-build libxsimd-dev xtl-dev zlib1g-dev libsimdjson-dev)
# Without the MNIST files (data/mnist, or ../shared/data/mnist to copy them from) the main job
# trains on Debian's Fashion-MNIST.
mnist_files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
             t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
mnist_dest="$repo_root/data/mnist"
mnist_src="$repo_root/../shared/data/mnist"
have_mnist=1
for f in "${mnist_files[@]}"; do
  [[ -s "$mnist_dest/$f" || -s "$mnist_src/$f" ]] || have_mnist=0
done
((have_mnist)) || main_packages+=(dataset-fashion-mnist)
# The tests (doctest; xtensor for oar/interop/xtensor.hpp), the cross-checks' independent
# implementations (libtorch, Debian's Python with numpy and torch, Chromium for the SVG curves),
# the optional targets they exercise (Open MPI, libpng/libjpeg, libonnx), the benchmarks (Google
# Benchmark, OpenBLAS), the clang presets (clang 14 + its sanitizer runtimes) and Fashion-MNIST.
test_packages=(
  clang-14 libclang-rt-14-dev git pkg-config xtensor-dev doctest-dev
  libbenchmark-dev libopenblas-dev libopenmpi-dev openmpi-bin dataset-fashion-mnist libtorch-dev
  libpng-dev libjpeg-dev
  python3-numpy python3-torch python3-venv python3-pip chromium libonnx-dev
)
if [[ "$mode" == main ]]; then
  packages=("${main_packages[@]}")
  echo "setup: the main job's packages: ${packages[*]}"
else
  packages=("${main_packages[@]}" "${test_packages[@]}")
  echo "setup: the main job's and the tests' packages: ${packages[*]}"
fi

missing=()
for pkg in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done
# (a package named twice is checked twice: keep each once)
if ((${#missing[@]})); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | awk '!seen[$0]++')
fi

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
# Skipped with OAR_NO_PIP=1 and by --main; the tests that need them then skip.
pip_packages=(tensorboard safetensors pillow visualdl onnxruntime onnx "numpy<2")
venv="$repo_root/.venv"
if [[ "$mode" == main ]]; then
  echo "setup: python venv: not needed by the main job"
elif [[ "${OAR_NO_PIP:-0}" == 1 ]]; then
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
dest="$mnist_dest"
src="$mnist_src"
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
  echo "setup: data/mnist: files absent and $src not found; the main job uses Fashion-MNIST" \
       "(/usr/share/datasets/fashion-mnist) and the MNIST tests are skipped"
fi
