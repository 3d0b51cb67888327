// Tests of oar/core/cpu_isa.hpp: the ISA names, what this CPU supports, OAR_ISA's parsing (an
// unknown name or an ISA the CPU lacks is an oar::value_error naming the variable and the value)
// and set_cpu_isa.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/core/cpu_isa.hpp>  // the header under test

#include <cstdlib>  // setenv, unsetenv
#include <string>   // std::string

namespace {

std::string message_of(void (*f)()) {
    try {
        f();
    } catch (const oar::value_error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("every CPU runs sse2, the best ISA is supported and listed first") {
    CHECK(oar::cpu_supports(oar::cpu_isa::sse2));
    const auto isas = oar::supported_cpu_isas();
    REQUIRE(!isas.empty());
    CHECK(isas.front() == oar::best_cpu_isa());
    CHECK(isas.back() == oar::cpu_isa::sse2);
    for (oar::cpu_isa isa : isas) CHECK(oar::cpu_supports(isa));
    // On the CPU (cpu_has: whether or not this program compiled a level; a build with
    // OAR_ISA_LEVELS=0 has the native level and the baseline only) avx512 implies avx2 (both need
    // FMA and AVX2), and each level includes the ones below it.
    if (oar::cpu_has(oar::cpu_isa::avx512)) CHECK(oar::cpu_has(oar::cpu_isa::avx2));
    if (oar::cpu_has(oar::cpu_isa::amx)) CHECK(oar::cpu_has(oar::cpu_isa::avx512_bf16));
    if (oar::cpu_has(oar::cpu_isa::avx512_bf16)) CHECK(oar::cpu_has(oar::cpu_isa::avx512));
}

TEST_CASE("the bf16 levels run the avx512 copies of the fp32 kernels") {
    CHECK(oar::vector_isa(oar::cpu_isa::amx) == oar::cpu_isa::avx512);
    CHECK(oar::vector_isa(oar::cpu_isa::avx512_bf16) == oar::cpu_isa::avx512);
    for (oar::cpu_isa isa : {oar::cpu_isa::avx512, oar::cpu_isa::avx2, oar::cpu_isa::sse2})
        CHECK(oar::vector_isa(isa) == isa);
    CHECK(oar::cpu_isa_name(oar::cpu_isa::avx512_bf16) == "avx512bf16");
    CHECK(oar::cpu_isa_name(oar::cpu_isa::amx) == "amx");
    for (oar::cpu_isa isa : oar::supported_cpu_isas()) {
        oar::set_cpu_isa(isa);
        CHECK(oar::active_vector_isa() == oar::vector_isa(isa));
    }
    oar::set_cpu_isa(oar::default_cpu_isa());
}

TEST_CASE("an unsupported amx or avx512bf16 names what is missing") {
    if (!oar::cpu_supports(oar::cpu_isa::amx)) {
        const std::string why = oar::cpu_isa_unsupported_reason(oar::cpu_isa::amx);
        // A program built without the avx512 copies (OAR_ISA_LEVELS) says so before asking the CPU.
        CHECK(why.find(oar::cpu_isa_compiled(oar::cpu_isa::amx) ? "does not support amx"
                                                                 : "amx is not compiled into this program") !=
              std::string::npos);
        // With AVX512-BF16 present, the missing piece is AMX itself or the kernel's permission.
        if (oar::cpu_supports(oar::cpu_isa::avx512_bf16))
            CHECK((why.find("AMX-TILE") != std::string::npos || why.find("ARCH_REQ_XCOMP_PERM") != std::string::npos));
    }
    if (!oar::cpu_supports(oar::cpu_isa::avx512_bf16) && oar::cpu_supports(oar::cpu_isa::avx512))
        CHECK(oar::cpu_isa_unsupported_reason(oar::cpu_isa::avx512_bf16).find("no AVX512-BF16") != std::string::npos);
}

TEST_CASE("ISA names round-trip through parse_cpu_isa") {
    for (oar::cpu_isa isa : oar::supported_cpu_isas()) CHECK(oar::parse_cpu_isa(oar::cpu_isa_name(isa)) == isa);
}

TEST_CASE("an unknown OAR_ISA name is a value_error naming the variable, the value and the choices") {
    const std::string msg = message_of([] { (void)oar::parse_cpu_isa("avx3"); });
    CHECK(msg.find("OAR_ISA") != std::string::npos);
    CHECK(msg.find("\"avx3\"") != std::string::npos);
    CHECK(msg.find("amx, avx512bf16, avx512, avx2 or sse2") != std::string::npos);
    CHECK(message_of([] { (void)oar::parse_cpu_isa("AVX2"); }).find("\"AVX2\"") != std::string::npos);
}

TEST_CASE("OAR_ISA picks the default ISA; empty means the best; bad values throw") {
    ::setenv("OAR_ISA", "sse2", 1);
    CHECK(oar::default_cpu_isa() == oar::cpu_isa::sse2);
    ::setenv("OAR_ISA", "", 1);
    CHECK(oar::default_cpu_isa() == oar::best_cpu_isa());
    ::setenv("OAR_ISA", "neon", 1);
    CHECK_THROWS_AS((void)oar::default_cpu_isa(), oar::value_error);
    ::unsetenv("OAR_ISA");
    CHECK(oar::default_cpu_isa() == oar::best_cpu_isa());
}

TEST_CASE("an ISA this CPU lacks, or this program did not compile, is refused by name, never run") {
    for (oar::cpu_isa isa : oar::all_cpu_isas) {
        CHECK(oar::cpu_supports(isa) == (oar::cpu_isa_compiled(isa) && oar::cpu_has(isa)));
        if (oar::cpu_supports(isa)) continue;
        const std::string name(oar::cpu_isa_name(isa));
        const std::string expected = oar::cpu_isa_compiled(isa)
                                         ? "does not support " + name
                                         : name + " is not compiled into this program (OAR_ISA_LEVELS=";
        INFO("ISA ", name, ", OAR_ISA_MASK ", OAR_ISA_MASK);
        try {
            oar::set_cpu_isa(isa);
            FAIL("set_cpu_isa accepted " << name);
        } catch (const oar::value_error& e) {
            CHECK(std::string(e.what()).find(expected) != std::string::npos);
        }
        try {
            (void)oar::parse_cpu_isa(name);
            FAIL("parse_cpu_isa accepted " << name);
        } catch (const oar::value_error& e) {
            CHECK(std::string(e.what()).find(expected) != std::string::npos);
        }
    }
}

TEST_CASE("OAR_ISA_LEVELS decides which ISAs are compiled; the baseline always is") {
#if OAR_ISA_LEVELS == 0
    // 0: the -march level of this translation unit and the baseline.
#if defined(__AVX2__) && defined(__FMA__)
    CHECK(OAR_ISA_MASK != 1);
#endif
#else
    CHECK(OAR_ISA_MASK == OAR_ISA_LEVELS);
#endif
    CHECK(oar::cpu_isa_compiled(oar::cpu_isa::sse2));
#if OAR_ISA_X86
    CHECK(oar::cpu_isa_compiled(oar::cpu_isa::avx2) == (((OAR_ISA_MASK) & 2) != 0));
    CHECK(oar::cpu_isa_compiled(oar::cpu_isa::avx512) == (((OAR_ISA_MASK) & 4) != 0));
#endif
    for (oar::cpu_isa isa : oar::supported_cpu_isas()) CHECK(oar::cpu_isa_compiled(isa));
}

TEST_CASE("set_cpu_isa switches the active ISA among the supported ones") {
    for (oar::cpu_isa isa : oar::supported_cpu_isas()) {
        oar::set_cpu_isa(isa);
        CHECK(oar::active_cpu_isa() == isa);
    }
    oar::set_cpu_isa(oar::default_cpu_isa());
    CHECK(oar::active_cpu_isa() == oar::default_cpu_isa());
}
