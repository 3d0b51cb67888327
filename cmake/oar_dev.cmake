# oar_dev: flags for oar's own tests, examples and benchmarks (never for users' targets).
# OAR_NATIVE (default ON) compiles for this machine's CPU, so xsimd picks its widest SIMD
# (AVX-512 on the development machines) at compile time; users choose their own -march.
include_guard(GLOBAL)
option(OAR_NATIVE "Build oar's tests, examples and benchmarks with -march=native" ON)
add_library(oar_dev INTERFACE)
if(OAR_NATIVE AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(oar_dev INTERFACE -march=native)
endif()
