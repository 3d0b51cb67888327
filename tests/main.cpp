// The one doctest main every test executable links. Exit status: doctest's (non-zero when a check
// failed); 77 when nothing failed but a test called oar_test::skip (support/skip.hpp), which ctest
// reports as Skipped (SKIP_RETURN_CODE 77), with the reasons printed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>  // the test runner

#include <cstdio>  // std::printf

#include "support/skip.hpp"  // oar_test::skip_reasons

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int status = context.run();
    if (context.shouldExit() || status != 0) return status;
    if (!oar_test::skip_reasons().empty()) {
        for (const auto& why : oar_test::skip_reasons()) std::printf("SKIPPED: %s\n", why.c_str());
        return 77;
    }
    return status;
}
