// Tests of include/oar/config.hpp: feature macros default to 0, OAR_HOST_DEVICE is empty on the
// host, and the helper macros compile where they are meant to be used.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cstring>     // std::strcmp
#include <filesystem>  // std::filesystem::path, to find CMakeLists.txt
#include <fstream>     // std::ifstream
#include <iterator>    // std::istreambuf_iterator
#include <sstream>     // std::istringstream
#include <string>      // std::string

#include "support/skip.hpp"  // oar_test::skip

// The build may define the feature macros (oar::mpi, oar::cuda); drop them to see the defaults.
#undef OAR_HAS_MPI
#undef OAR_HAS_CUDA
#undef OAR_HAS_NCCL
#include <oar/config.hpp>  // under test

#define TEST_STR_IMPL(...) #__VA_ARGS__
#define TEST_STR(...) TEST_STR_IMPL(__VA_ARGS__)

static_assert(OAR_HAS_MPI == 0, "OAR_HAS_MPI defaults to 0");
static_assert(OAR_HAS_CUDA == 0, "OAR_HAS_CUDA defaults to 0");
static_assert(OAR_HAS_NCCL == 0, "OAR_HAS_NCCL defaults to 0");
static_assert(OAR_VERSION_MAJOR >= 0 && OAR_VERSION_MINOR >= 0 && OAR_VERSION_PATCH >= 0);

#if OAR_HAS_MPI || OAR_HAS_CUDA || OAR_HAS_NCCL
#error "a feature macro is on by default"
#endif

namespace {
OAR_HOST_DEVICE int twice(int x) { return 2 * x; }
OAR_ALWAYS_INLINE int thrice(int x) { return 3 * x; }
void add(const float* OAR_RESTRICT a, const float* OAR_RESTRICT b, float* OAR_RESTRICT out, int n) {
    for (int i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
}  // namespace

TEST_CASE("the feature macros default to 0 when the build defines none") {
    CHECK(OAR_HAS_MPI == 0);
    CHECK(OAR_HAS_CUDA == 0);
    CHECK(OAR_HAS_NCCL == 0);
}

TEST_CASE("OAR_HOST_DEVICE expands to nothing in a host compiler") {
    CHECK(std::strcmp(TEST_STR(OAR_HOST_DEVICE), "") == 0);
    CHECK(twice(21) == 42);
}

TEST_CASE("OAR_RESTRICT and OAR_ALWAYS_INLINE expand to the GCC/Clang attributes") {
    CHECK(std::strcmp(TEST_STR(OAR_RESTRICT), "__restrict__") == 0);
    CHECK(std::strcmp(TEST_STR(OAR_ALWAYS_INLINE), "inline __attribute__((always_inline))") == 0);
    const float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
    float c[3] = {};
    add(a, b, c, 3);
    CHECK(c[2] == 33.0f);
    CHECK(thrice(5) == 15);
}

// CMakeLists.txt's `project(oar VERSION x.y.z ...)` is the other place the version lives.
TEST_CASE("the version macros agree with the project version in CMakeLists.txt") {
    const std::filesystem::path cmake = std::filesystem::path(__FILE__).parent_path().parent_path() / "CMakeLists.txt";
    std::ifstream in(cmake);
    if (!in) {
        oar_test::skip("cannot open " + cmake.string() + " to read the project version (built from a moved source tree?)");
        return;
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto project = text.find("project(oar");
    REQUIRE(project != std::string::npos);
    const auto at = text.find("VERSION", project);
    REQUIRE(at != std::string::npos);
    std::istringstream version(text.substr(at + 7, 40));
    int major = -1, minor = -1, patch = -1;
    char dot1 = 0, dot2 = 0;
    version >> major >> dot1 >> minor >> dot2 >> patch;
    CHECK(dot1 == '.');
    CHECK(dot2 == '.');
    CHECK(major == OAR_VERSION_MAJOR);
    CHECK(minor == OAR_VERSION_MINOR);
    CHECK(patch == OAR_VERSION_PATCH);
}
