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
