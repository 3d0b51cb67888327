// The CPU instruction sets oar's dispatched kernels are compiled for, inside the headers and
// whatever the user's -march, and the one they run: the best the CPU supports, chosen once at run
// time, or a lower one named by OAR_ISA (avx512, avx2, sse2) or set_cpu_isa for tests.
#pragma once

#include <atomic>       // std::atomic: the chosen ISA, read by every dispatched call
#include <cstdlib>      // std::getenv: OAR_ISA
#include <string>       // std::string: error messages
#include <string_view>  // std::string_view: ISA names
#include <vector>       // std::vector: supported_cpu_isas

#include "../config.hpp"  // OAR_ISA_X86, OAR_ISA_MASK, OAR_ISA_COMPILED
#include "error.hpp"      // value_error: an unknown or unsupported OAR_ISA

namespace oar {

/// Instruction sets of the dispatched kernels, lowest first. avx512 is AVX-512 F/BW/DQ/VL with
/// AVX2 and FMA (Skylake-X and later, Zen 4); avx2 is AVX2 with FMA (Haswell, Zen 1 and later);
/// sse2 is every x86-64 CPU (and the portable code path elsewhere).
enum class cpu_isa : int { sse2 = 0, avx2 = 1, avx512 = 2 };

inline constexpr std::string_view cpu_isa_name(cpu_isa isa) {
    switch (isa) {
        case cpu_isa::avx512: return "avx512";
        case cpu_isa::avx2: return "avx2";
        default: return "sse2";
    }
}

/// Whether the dispatched kernels are compiled for isa (config.hpp: OAR_ISA_LEVELS).
inline constexpr bool cpu_isa_compiled(cpu_isa isa) {
    switch (isa) {
        case cpu_isa::avx512: return OAR_ISA_COMPILED(2);
        case cpu_isa::avx2: return OAR_ISA_COMPILED(1);
        default: return true;
    }
}

/// Whether this CPU (and its OS, which must save the wider registers) runs kernels built for isa,
/// whether or not this program compiled them.
inline bool cpu_has(cpu_isa isa) {
#if OAR_ISA_X86
    switch (isa) {
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
    for (cpu_isa isa : {cpu_isa::avx512, cpu_isa::avx2})
        if (cpu_supports(isa)) return isa;
    return cpu_isa::sse2;
}

/// Every ISA this CPU supports and this program compiled, best first (what the tests compare).
inline std::vector<cpu_isa> supported_cpu_isas() {
    std::vector<cpu_isa> out;
    for (cpu_isa isa : {cpu_isa::avx512, cpu_isa::avx2, cpu_isa::sse2})
        if (cpu_supports(isa)) out.push_back(isa);
    return out;
}

/// The ISA named `name` ("avx512", "avx2", "sse2"); `what` says where the name came from. An
/// unknown name, or one this CPU cannot run, is an oar::value_error (never an illegal instruction).
inline cpu_isa parse_cpu_isa(std::string_view name, std::string_view what = "OAR_ISA") {
    for (cpu_isa isa : {cpu_isa::avx512, cpu_isa::avx2, cpu_isa::sse2}) {
        if (name != cpu_isa_name(isa)) continue;
        if (!cpu_isa_compiled(isa))
            throw value_error(std::string(what) + ": " + std::string(name) +
                              " is not compiled into this program (OAR_ISA_LEVELS=" +
                              std::to_string(OAR_ISA_MASK) + "; the best it has here is " +
                              std::string(cpu_isa_name(best_cpu_isa())) + ")");
        if (!cpu_has(isa))
            throw value_error(std::string(what) + ": this CPU does not support " + std::string(name) +
                              " (it supports up to " + std::string(cpu_isa_name(best_cpu_isa())) + ")");
        return isa;
    }
    throw value_error(std::string(what) + ": expected avx512, avx2 or sse2, got \"" + std::string(name) + "\"");
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

/// Runs the dispatched kernels on `isa` from now on (tests and benchmarks compare ISAs this way);
/// an ISA this CPU lacks is an oar::value_error. Set it between passes, not during one.
inline void set_cpu_isa(cpu_isa isa) {
    if (!cpu_isa_compiled(isa))
        throw value_error("set_cpu_isa: " + std::string(cpu_isa_name(isa)) +
                          " is not compiled into this program (OAR_ISA_LEVELS=" + std::to_string(OAR_ISA_MASK) + ")");
    if (!cpu_has(isa))
        throw value_error("set_cpu_isa: this CPU does not support " + std::string(cpu_isa_name(isa)));
    detail::cpu_isa_state().store(static_cast<int>(isa), std::memory_order_relaxed);
}

}  // namespace oar
