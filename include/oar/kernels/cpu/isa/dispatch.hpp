// What the per-ISA kernel copies (kernels/cpu/isa/region.inc) need before they are included, and
// the run-time choice between them: a dispatched kernel's kernel<op::X, cpu>::run switches on
// active_cpu_isa() (core/cpu_isa.hpp: the best ISA of this CPU, or OAR_ISA / set_cpu_isa).
#pragma once

#include <cstddef>      // std::size_t: simd.inc
#include <type_traits>  // std::conditional_t: simd.inc

#include "../../../config.hpp"        // OAR_ISA_X86, OAR_ALWAYS_INLINE
#include "../../../core/cpu_isa.hpp"  // cpu_isa, active_cpu_isa

#if OAR_ISA_X86
#include <immintrin.h>  // _mm512_fmadd_ps, _mm256_fmadd_ps: simd.inc's fma inside the target regions
#endif
