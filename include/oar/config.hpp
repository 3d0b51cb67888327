// Feature macros: the only header that looks at compilers and optional backends.
// Build systems define OAR_HAS_MPI / OAR_HAS_CUDA / OAR_HAS_NCCL through the oar::mpi and
// oar::cuda CMake targets; nothing is switched on by editing a header.
#pragma once

#ifndef OAR_HAS_MPI
#define OAR_HAS_MPI 0
#endif
#ifndef OAR_HAS_CUDA
#define OAR_HAS_CUDA 0
#endif
#ifndef OAR_HAS_NCCL
#define OAR_HAS_NCCL 0
#endif

// C++23 std::generator, where the standard library has it (libstdc++ 12 does not).
#if __has_include(<version>)
#include <version>  // __cpp_lib_generator
#endif
#if defined(__cpp_lib_generator) && __cpp_lib_generator >= 202207L
#define OAR_HAS_STD_GENERATOR 1
#else
#define OAR_HAS_STD_GENERATOR 0
#endif

// A per-element kernel body that runs on the host and, compiled by nvcc, on the device.
#if defined(__CUDACC__)
#define OAR_HOST_DEVICE __host__ __device__
#else
#define OAR_HOST_DEVICE
#endif

#if defined(__GNUC__) || defined(__clang__)
#define OAR_RESTRICT __restrict__
#define OAR_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define OAR_RESTRICT
#define OAR_ALWAYS_INLINE inline
#endif

#define OAR_VERSION_MAJOR 0
#define OAR_VERSION_MINOR 1
#define OAR_VERSION_PATCH 0

// x86 with GCC or Clang: the kernels of kernels/cpu/isa/ are compiled for AVX-512 and AVX2 besides
// the baseline and chosen at run time (core/cpu_isa.hpp); elsewhere only the baseline is built.
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define OAR_ISA_X86 1
#else
#define OAR_ISA_X86 0
#endif

// Which of those ISAs are compiled: a mask of 1 (sse2, the baseline: always compiled), 2 (avx2)
// and 4 (avx512); the default is all of them. A level left out is never chosen at run time (the
// best compiled level this CPU runs is), so a smaller mask only trades speed on some CPUs for
// compile time, e.g. -DOAR_ISA_LEVELS=5 (avx512 and the baseline) or 1 (the baseline alone).
// 0 means the level the translation unit's own -march reaches, and the baseline.
// OAR_EXTERN_KERNELS=1: the compiled-kernels mode. The dispatched GEMM, convolution and Winograd
// kernels (every ISA's copy) are only declared in the headers and linked from the oar::kernels
// library (one translation unit defining OAR_KERNELS_IMPLEMENTATION and including
// oar/kernels/cpu/compiled.hpp), so a program's own files do not compile them. Default 0: the
// headers define everything (header-only). The library and the program must agree on
// OAR_ISA_LEVELS. The implementation file itself always sees the definitions.
#if defined(OAR_KERNELS_IMPLEMENTATION)
#undef OAR_EXTERN_KERNELS
#define OAR_EXTERN_KERNELS 0
#elif !defined(OAR_EXTERN_KERNELS)
#define OAR_EXTERN_KERNELS 0
#endif

#ifndef OAR_ISA_LEVELS
#define OAR_ISA_LEVELS 7
#endif
#if OAR_ISA_LEVELS == 0
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && \
    defined(__AVX2__) && defined(__FMA__)
#define OAR_ISA_MASK 5
#elif defined(__AVX2__) && defined(__FMA__)
#define OAR_ISA_MASK 3
#else
#define OAR_ISA_MASK 1
#endif
#else
#define OAR_ISA_MASK (OAR_ISA_LEVELS)
#endif
#if OAR_ISA_X86
#define OAR_ISA_COMPILED(level) ((level) == 0 || ((OAR_ISA_MASK) >> (level)) & 1)
#else
#define OAR_ISA_COMPILED(level) ((level) == 0)
#endif
