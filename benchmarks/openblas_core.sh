# Sourced by the benchmark scripts that run OpenBLAS (libtorch's GEMMs, bench_kernels' comparison).
# Debian's OpenBLAS 0.3.21 does not recognise newer Xeons and falls back to its slowest kernel, so
# on a CPU with AVX-512 OPENBLAS_CORETYPE defaults to SkylakeX (its AVX-512 kernel). Elsewhere it
# is left to OpenBLAS's own detection: forcing SkylakeX on a CPU without AVX-512 dies on an illegal
# instruction. A value already in the environment is kept.
if [[ -z "${OPENBLAS_CORETYPE:-}" ]] && grep -q -m1 -w avx512f /proc/cpuinfo 2>/dev/null; then
  export OPENBLAS_CORETYPE=SkylakeX
fi
