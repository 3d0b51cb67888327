// Runs a test body once per CPU vector ISA this machine supports (core/cpu_isa.hpp: the dispatched
// fp32 kernels are compiled for avx512, avx2 and sse2 and chosen at run time; the bf16 levels above
// avx512 run the same avx512 copies, so they are not repeated), that ISA active, then restores the
// default. Each failed check names the ISA it ran on.
#pragma once

#include <doctest/doctest.h>

#include <oar/core/cpu_isa.hpp>  // supported_cpu_isas, set_cpu_isa

namespace oar_test {

template <class F>
void for_each_isa(F&& f) {
    for (oar::cpu_isa isa : oar::supported_cpu_isas()) {
        if (isa > oar::cpu_isa::avx512) continue;
        oar::set_cpu_isa(isa);
        INFO("ISA ", oar::cpu_isa_name(isa));
        f();
    }
    oar::set_cpu_isa(oar::default_cpu_isa());
}

}  // namespace oar_test
