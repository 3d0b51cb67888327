// The CPU instruction sets oar's dispatched kernels are compiled for, inside the headers and
// whatever the user's -march, and the one they run: the best the CPU supports, chosen once at run
// time, or a lower one named by OAR_ISA (amx, avx512bf16, avx512, avx2, sse2) or set_cpu_isa for
// tests. The two bf16 levels choose the bf16 GEMM's path (kernels/cpu/gemm_bf16.hpp); the fp32
// kernels run their avx512 copy there (active_vector_isa).
#pragma once

#include <atomic>       // std::atomic: the chosen ISA, read by every dispatched call
#include <cstdlib>      // std::getenv: OAR_ISA
#include <string>       // std::string: error messages
#include <string_view>  // std::string_view: ISA names
#include <vector>       // std::vector: supported_cpu_isas

#include "../config.hpp"  // OAR_ISA_X86, OAR_ISA_MASK, OAR_ISA_COMPILED
#include "error.hpp"      // value_error: an unknown or unsupported OAR_ISA

#if OAR_ISA_X86
#include <cpuid.h>  // __get_cpuid_count: the AVX512-BF16 and AMX feature bits
#if defined(__linux__)
#include <sys/syscall.h>  // SYS_arch_prctl: asking the kernel for the AMX tile state
#include <unistd.h>       // syscall
#include <cerrno>         // errno: why the kernel refused
#include <cstring>        // std::strerror
#endif
#endif

namespace oar {

/// Instruction sets of the dispatched kernels, lowest first, each including the ones below. amx is
/// avx512_bf16 with AMX-TILE and AMX-BF16 tiles the OS lets this process use (Sapphire Rapids and
/// later); avx512_bf16 is avx512 with AVX512-BF16's vdpbf16ps (Cooper Lake, Zen 4); avx512 is
/// AVX-512 F/BW/DQ/VL with AVX2 and FMA (Skylake-X and later, Zen 4); avx2 is AVX2 with FMA
/// (Haswell, Zen 1 and later); sse2 is every x86-64 CPU (and the portable code path elsewhere).
enum class cpu_isa : int { sse2 = 0, avx2 = 1, avx512 = 2, avx512_bf16 = 3, amx = 4 };

/// Every ISA, best first.
inline constexpr cpu_isa all_cpu_isas[] = {cpu_isa::amx, cpu_isa::avx512_bf16, cpu_isa::avx512, cpu_isa::avx2,
                                           cpu_isa::sse2};

inline constexpr std::string_view cpu_isa_name(cpu_isa isa) {
    switch (isa) {
        case cpu_isa::amx: return "amx";
        case cpu_isa::avx512_bf16: return "avx512bf16";
        case cpu_isa::avx512: return "avx512";
        case cpu_isa::avx2: return "avx2";
        default: return "sse2";
    }
}

/// The vector width an ISA's fp32 kernels use: the bf16 levels run the avx512 copies.
inline constexpr cpu_isa vector_isa(cpu_isa isa) { return isa > cpu_isa::avx512 ? cpu_isa::avx512 : isa; }

/// Whether the dispatched kernels are compiled for isa (config.hpp: OAR_ISA_LEVELS; the bf16 levels
/// go with avx512, whose fp32 copies they run).
inline constexpr bool cpu_isa_compiled(cpu_isa isa) {
    switch (isa) {
        case cpu_isa::amx:
        case cpu_isa::avx512_bf16:
        case cpu_isa::avx512: return OAR_ISA_COMPILED(2);
        case cpu_isa::avx2: return OAR_ISA_COMPILED(1);
        default: return true;
    }
}

namespace detail {
#if OAR_ISA_X86
/// CPUID leaf 7 sub-leaf `sub`: {eax, ebx, ecx, edx}, zeros where the leaf does not exist.
inline void cpuid7(unsigned sub, unsigned (&r)[4]) {
    r[0] = r[1] = r[2] = r[3] = 0;
    if (!__get_cpuid_count(7, sub, &r[0], &r[1], &r[2], &r[3])) r[0] = r[1] = r[2] = r[3] = 0;
}
/// AVX512-BF16: CPUID.(7,1):EAX bit 5.
inline bool cpu_has_avx512_bf16_bit() {
    unsigned r[4];
    cpuid7(1, r);
    return (r[0] >> 5) & 1u;
}
/// AMX-BF16 and AMX-TILE (CPUID.(7,0):EDX bits 22 and 24), and the OS enabling the tile state in
/// XCR0 (bits 17, 18).
inline bool cpu_has_amx_bits() {
    unsigned r[4];
    cpuid7(0, r);
    if (!((r[3] >> 22) & 1u) || !((r[3] >> 24) & 1u)) return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) return false;  // OSXSAVE: xgetbv usable
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const unsigned long long xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
    return ((xcr0 >> 17) & 3u) == 3u;
}
#endif
/// Empty when this process may use the AMX tile data, else why not. Linux hands the tile state to
/// a process only on request (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)), made once here.
inline const std::string& amx_permission_error() {
    static const std::string why = [] {
#if OAR_ISA_X86 && defined(__linux__)
        if (!cpu_has_amx_bits()) return std::string("this CPU has no AMX-TILE/AMX-BF16 (or the OS does not enable them)");
        constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
        if (::syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) != 0)
            return std::string("the kernel denied AMX tile data (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): ") +
                   std::strerror(errno) + ")";
        return std::string();
#elif OAR_ISA_X86
        return std::string("AMX tiles are only requested from Linux");
#else
        return std::string("this CPU is not x86-64");
#endif
    }();
    return why;
}
}  // namespace detail

/// Whether this CPU (and its OS, which must save the wider registers) runs kernels built for isa,
/// whether or not this program compiled them (amx: and Linux grants this process the tile state).
inline bool cpu_has(cpu_isa isa) {
#if OAR_ISA_X86
    switch (isa) {
        case cpu_isa::amx: return cpu_has(cpu_isa::avx512_bf16) && detail::amx_permission_error().empty();
        case cpu_isa::avx512_bf16: return cpu_has(cpu_isa::avx512) && detail::cpu_has_avx512_bf16_bit();
        case cpu_isa::avx512:
            return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        case cpu_isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        default: return true;
    }
#else
    return isa == cpu_isa::sse2;
#endif
}

/// Whether the dispatch can run isa here: compiled in, and this CPU has it.
inline bool cpu_supports(cpu_isa isa) { return cpu_isa_compiled(isa) && cpu_has(isa); }

/// The best ISA this CPU supports and this program compiled.
inline cpu_isa best_cpu_isa() {
    for (cpu_isa isa : all_cpu_isas)
        if (cpu_supports(isa)) return isa;
    return cpu_isa::sse2;
}

/// Every ISA this CPU supports and this program compiled, best first (what the tests compare).
inline std::vector<cpu_isa> supported_cpu_isas() {
    std::vector<cpu_isa> out;
    for (cpu_isa isa : all_cpu_isas)
        if (cpu_supports(isa)) out.push_back(isa);
    return out;
}

/// Why `isa` cannot run here, for messages and skipped tests (call it for an unsupported isa).
inline std::string cpu_isa_unsupported_reason(cpu_isa isa) {
    if (!cpu_isa_compiled(isa))
        return std::string(cpu_isa_name(isa)) + " is not compiled into this program (OAR_ISA_LEVELS=" +
               std::to_string(OAR_ISA_MASK) + "; the best it has here is " +
               std::string(cpu_isa_name(best_cpu_isa())) + ")";
    std::string msg = "this CPU does not support " + std::string(cpu_isa_name(isa));
#if OAR_ISA_X86
    if (isa >= cpu_isa::avx512_bf16 && cpu_has(cpu_isa::avx512) && !detail::cpu_has_avx512_bf16_bit())
        msg += ": no AVX512-BF16";
    else if (isa == cpu_isa::amx && cpu_has(cpu_isa::avx512_bf16))
        msg += ": " + detail::amx_permission_error();
#endif
    return msg + " (it supports up to " + std::string(cpu_isa_name(best_cpu_isa())) + ")";
}

/// The ISA named `name` ("amx", "avx512bf16", "avx512", "avx2", "sse2"); `what` says where the name
/// came from. An unknown name, or one this CPU cannot run (AMX: or whose tiles the kernel denies),
/// is an oar::value_error (never an illegal instruction).
inline cpu_isa parse_cpu_isa(std::string_view name, std::string_view what = "OAR_ISA") {
    for (cpu_isa isa : all_cpu_isas) {
        if (name != cpu_isa_name(isa)) continue;
        if (!cpu_supports(isa)) throw value_error(std::string(what) + ": " + cpu_isa_unsupported_reason(isa));
        return isa;
    }
    throw value_error(std::string(what) + ": expected amx, avx512bf16, avx512, avx2 or sse2, got \"" +
                      std::string(name) + "\"");
}

/// OAR_ISA when set and not empty, else the best ISA of this CPU.
inline cpu_isa default_cpu_isa() {
    const char* env = std::getenv("OAR_ISA");
    if (!env || !*env) return best_cpu_isa();
    return parse_cpu_isa(env);
}

namespace detail {
/// The ISA the dispatched kernels run: -1 until set or first read (then default_cpu_isa()).
inline std::atomic<int>& cpu_isa_state() {
    static std::atomic<int> state{-1};
    return state;
}
}  // namespace detail

/// The ISA the dispatched kernels run now. The first call reads OAR_ISA (a malformed or
/// unsupported value throws oar::value_error from the first kernel that asks).
inline cpu_isa active_cpu_isa() {
    int state = detail::cpu_isa_state().load(std::memory_order_relaxed);
    if (state < 0) {
        int expected = -1;
        const int fresh = static_cast<int>(default_cpu_isa());
        state = detail::cpu_isa_state().compare_exchange_strong(expected, fresh, std::memory_order_relaxed)
                    ? fresh
                    : expected;
    }
    return static_cast<cpu_isa>(state);
}

/// The vector ISA the fp32 kernels run now (vector_isa of active_cpu_isa()).
inline cpu_isa active_vector_isa() { return vector_isa(active_cpu_isa()); }

/// Runs the dispatched kernels on `isa` from now on (tests and benchmarks compare ISAs this way);
/// an ISA this CPU lacks is an oar::value_error. Set it between passes, not during one.
inline void set_cpu_isa(cpu_isa isa) {
    if (!cpu_supports(isa)) throw value_error("set_cpu_isa: " + cpu_isa_unsupported_reason(isa));
    detail::cpu_isa_state().store(static_cast<int>(isa), std::memory_order_relaxed);
}

}  // namespace oar
