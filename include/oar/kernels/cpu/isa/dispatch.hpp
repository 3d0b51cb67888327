// What the per-ISA kernel copies (kernels/cpu/isa/region.inc) need before they are included, and
// the run-time choice between them: a dispatched kernel's kernel<op::X, cpu>::run switches on
// active_cpu_isa() (core/cpu_isa.hpp: the best ISA of this CPU, or OAR_ISA / set_cpu_isa) through
// OAR_ISA_DISPATCH.
#pragma once

#include <cstddef>      // std::size_t: simd.inc
#include <type_traits>  // std::conditional_t: simd.inc
#include <utility>      // std::index_sequence: simd.inc's permute

#include "../../../config.hpp"        // OAR_ISA_X86, OAR_ALWAYS_INLINE
#include "../../../core/cpu_isa.hpp"  // cpu_isa, active_cpu_isa

#if OAR_ISA_X86
#include <immintrin.h>  // _mm512_fmadd_ps, _mm256_fmadd_ps: simd.inc's fma inside the target regions
#endif

/// `return oar::cpu_detail::isa_<active vector ISA>::fn(args...);` (fn may name template arguments
/// without commas, e.g. gemm_run<T>): the one switch between a dispatched kernel's ISA copies. The
/// tests pick the copy with set_cpu_isa (tests/support/isa.hpp), so every copy is compared.
#if OAR_ISA_X86
#define OAR_ISA_DISPATCH(fn, ...)                                                     \
    switch (::oar::active_vector_isa()) {                                             \
        case ::oar::cpu_isa::avx512: return ::oar::cpu_detail::isa_avx512::fn(__VA_ARGS__); \
        case ::oar::cpu_isa::avx2: return ::oar::cpu_detail::isa_avx2::fn(__VA_ARGS__);     \
        default: return ::oar::cpu_detail::isa_sse2::fn(__VA_ARGS__);                       \
    }
#else
#define OAR_ISA_DISPATCH(fn, ...) return ::oar::cpu_detail::isa_sse2::fn(__VA_ARGS__);
#endif
