// A reported skip: oar_test::skip("why") records the reason and prints "SKIPPED: why"; the test
// executable's main (tests/main.cpp) then exits 77, which ctest reports as Skipped
// (SKIP_RETURN_CODE 77), but only when no check failed: a failed check is always a failure.
// Call it after the checks that can run and `return` from the test case.
#pragma once

#include <doctest/doctest.h>

#include <string>  // std::string
#include <vector>  // std::vector

namespace oar_test {

/// The reasons recorded by skip(), in order.
inline std::vector<std::string>& skip_reasons() {
    static std::vector<std::string> reasons;
    return reasons;
}

/// Marks the running test as skipped for `why` (the executable exits 77 if nothing failed).
inline void skip(const std::string& why) {
    skip_reasons().push_back(why);
    MESSAGE("SKIPPED: " << why);
}

}  // namespace oar_test
