#!/usr/bin/env bash
# Side by side: loading the course's mnist.json.gz with oar::data::read_mnist_json and with Python's
# json.load(gzip.open(f)), wall time and peak RSS (/usr/bin/time -v), next to zcat alone. The file
# is made from real MNIST by examples/mnist_to_json (and checked to round-trip bitwise); a second,
# "dense" file (some zero pixels raised to 1, so more values print as 17-digit floats) is ~713 MB
# of JSON, the size the issue quotes for the course's file.
#
#   benchmarks/bench_json.sh [--runs N] [--no-python] [--no-whole] [--keep]
#   env: BUILD (default build/release, must be configured), DATA (MNIST IDX folder, default
#        $OAR_DATA, else data/mnist, else ../shared/data/mnist beside the checkout), WORK (scratch folder), CXX.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build/release}
RUNS=3
PYTHON=1
WHOLE=1
KEEP=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --no-python) PYTHON=0; shift ;;
    --no-whole) WHOLE=0; shift ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "bench_json.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ -z ${DATA:-} ]]; then
  for d in "${OAR_DATA:-}" "$ROOT/data/mnist" "$ROOT/../shared/data/mnist"; do
    if [[ -n $d && -e $d/train-images-idx3-ubyte.gz || -n $d && -e $d/train-images-idx3-ubyte ]]; then DATA=$d; break; fi
  done
fi
[[ -n ${DATA:-} ]] || { echo "bench_json.sh: no MNIST IDX folder (set DATA)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "bench_json.sh: needs GNU time (/usr/bin/time)" >&2; exit 2; }
[[ -f $BUILD/CMakeCache.txt ]] || { echo "bench_json.sh: $BUILD is not a configured build (cmake --preset release)" >&2; exit 2; }

WORK=${WORK:-$(mktemp -d /tmp/oar_bench_json.XXXXXX)}
mkdir -p "$WORK"
cleanup() { if [[ $KEEP == 0 ]]; then rm -f "$WORK"/*.json.gz "$WORK"/bench_json_load "$WORK"/bench_json_load.cpp "$WORK"/time.log; rmdir "$WORK" 2>/dev/null || true; fi; }
trap cleanup EXIT

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- the converter, and a small loader program built with the library's release flags ----
cmake --build "$BUILD" --target mnist_to_json >/dev/null
CONVERTER=$BUILD/examples/mnist_to_json
CXX=${CXX:-$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")}
cat > "$WORK/bench_json_load.cpp" <<'EOF'
// bench_json_load FILE                 read_mnist_json, prints the split sizes and seconds
// bench_json_load --whole FILE         baseline: inflate everything, then one On-Demand pass
// bench_json_load --verify FILE DIR    FILE equals the course floats of the IDX folder DIR, bitwise
// bench_json_load --dense DIR OUT      writes the dense variant (7 in 20 zero pixels raised to 1)
#include <oar/data/mnist_json.hpp>
#include <oar/io/gzip.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
static double since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
static int whole(const char* path) {
    const auto t0 = std::chrono::steady_clock::now();
    simdjson::padded_string json;
    {
        std::vector<std::uint8_t> raw = oar::io::read_maybe_gzip(path);
        json = simdjson::padded_string(reinterpret_cast<const char*>(raw.data()), raw.size());
    }
    const double inflate = since(t0);
    simdjson::ondemand::parser parser(json.size());
    std::vector<float> x[3];
    std::vector<std::int64_t> y[3];
    std::size_t s = 0;
    auto doc = parser.iterate(json);
    for (auto split : doc.get_array()) {
        auto parts = split.get_array();
        auto it = parts.begin();
        for (auto img : (*it).get_array())
            for (auto v : img.get_array()) {
                const float f = static_cast<float>(double(v.get_double()));
                if (!std::isfinite(f)) return 1;
                x[s].push_back(f);
            }
        ++it;
        for (auto l : (*it).get_array()) y[s].push_back(std::int64_t(l.get_int64()));
        ++s;
    }
    std::printf("whole-document On-Demand: %zu/%zu/%zu images, inflate %.2f s + parse %.2f s = %.2f s\n",
                y[0].size(), y[1].size(), y[2].size(), inflate, since(t0) - inflate, since(t0));
    return 0;
}
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "--whole" && argc == 3) return whole(argv[2]);
    if (mode == "--dense" && argc == 4) {
        auto s = oar::data::load_mnist(argv[2]);
        for (auto* set : {&s.train, &s.valid, &s.test})
            for (std::size_t i = 0; i < set->pixels.size(); ++i)
                if (set->pixels[i] == 0 && i % 20 < 7) set->pixels[i] = 1;
        oar::data::write_mnist_json(argv[3], oar::data::mnist_json_from_idx(s));
        return 0;
    }
    if (mode == "--verify" && argc == 4) {
        const auto m = oar::data::read_mnist_json(argv[2]);
        const auto want = oar::data::mnist_json_from_idx(oar::data::load_mnist(argv[3]));
        for (auto s : {oar::data::MnistJsonSplit::train, oar::data::MnistJsonSplit::valid, oar::data::MnistJsonSplit::test}) {
            const auto &a = m[s], &b = want[s];
            if (a.size() != b.size() || a.dims() != b.dims() ||
                std::memcmp(a.images().data(), b.images().data(), a.images().size_bytes()) != 0 ||
                !std::equal(a.labels().begin(), a.labels().end(), b.labels().begin())) {
                std::printf("round trip: split %s differs\n", oar::data::split_name(s));
                return 1;
            }
        }
        std::printf("round trip: %zu/%zu/%zu images and labels identical, bitwise, to the IDX folder's x / 127.5 - 1\n",
                    m.train.size(), m.valid.size(), m.test.size());
        return 0;
    }
    if (argc != 2) return 2;
    const auto t0 = std::chrono::steady_clock::now();
    const auto m = oar::data::read_mnist_json(argv[1]);
    std::printf("read_mnist_json: %zu/%zu/%zu images, %.2f s\n", m.train.size(), m.valid.size(), m.test.size(), since(t0));
    return 0;
}
EOF
"$CXX" -std=c++20 -O3 -DNDEBUG -march=native -I"$ROOT/include" "$WORK/bench_json_load.cpp" -o "$WORK/bench_json_load" \
  -lsimdjson -lz -pthread
LOAD=$WORK/bench_json_load

# ---- the files ----
echo "== converter: $CONVERTER --data $DATA"
"$CONVERTER" --data "$DATA" --out "$WORK/mnist.json.gz"
"$LOAD" --verify "$WORK/mnist.json.gz" "$DATA"
"$LOAD" --dense "$DATA" "$WORK/dense.json.gz"

# Runs "$@" under /usr/bin/time -v; prints the command's own output and "wall s, peak RSS MB".
timed() {
  local log=$WORK/time.log out
  out=$(/usr/bin/time -v "$@" 2>"$log")
  local wall rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$log" | awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$log")
  printf '    %-70s wall %6.2f s  peak RSS %5d MB\n' "${out:-$(basename "$1")}" "$wall" $((rss / 1024))
}

for f in mnist dense; do
  gz=$WORK/$f.json.gz
  json_bytes=$(zcat "$gz" | wc -c)
  echo "== $f.json.gz: $(stat -c %s "$gz") bytes gzipped, $json_bytes bytes of JSON"
  start=$(date +%s.%N); zcat "$gz" >/dev/null; end=$(date +%s.%N)
  printf "    %-70s wall %6.2f s\n" "zcat alone" "$(awk -v a="$start" -v b="$end" "BEGIN { print b - a }")"
  for ((r = 0; r < RUNS; ++r)); do timed "$LOAD" "$gz"; done
  if [[ $WHOLE == 1 ]]; then timed "$LOAD" --whole "$gz"; fi
  if [[ $PYTHON == 1 ]]; then
    timed python3 -c '
import gzip, json, sys, time
t0 = time.time()
d = json.load(gzip.open(sys.argv[1]))
print("python json.load(gzip.open(f)): %d/%d/%d images, %.2f s" % (len(d[0][0]), len(d[1][0]), len(d[2][0]), time.time() - t0))
' "$gz"
  fi
done
echo "== load average now: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine slows every line)"
