// Tests of include/oar/core/backend.hpp: the Backend concept and the cpu / cpu64 backends.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <string_view>  // std::string_view
#include <type_traits>  // std::is_same_v

#include <oar/core/backend.hpp>  // under test

namespace backend_test {  // named: clang flags unused members of types in an anonymous one
struct not_marked {  // all but the marker
    using value_type = float;
    static constexpr std::string_view name = "x";
};
struct marked_false {
    using value_type = float;
    static constexpr std::string_view name = "x";
    static constexpr bool is_oar_backend = false;
};
struct integer_scalar {
    using value_type = int;
    static constexpr std::string_view name = "x";
    static constexpr bool is_oar_backend = true;
};
struct nameless {
    using value_type = float;
    static constexpr bool is_oar_backend = true;
};
struct custom {  // a third-party backend satisfying the contract
    using value_type = double;
    static constexpr const char* name = "custom";
    static constexpr bool is_oar_backend = true;
};

template <oar::Backend B>
constexpr bool accepts() { return true; }
template <class T>
concept accepted = requires { accepts<T>(); };
}  // namespace backend_test

using namespace backend_test;

static_assert(oar::Backend<oar::cpu>);
static_assert(oar::Backend<oar::cpu64>);
static_assert(oar::Backend<oar::basic_cpu<long double>>);
static_assert(oar::Backend<custom>);
static_assert(!oar::Backend<int>);
static_assert(!oar::Backend<float>);
static_assert(!oar::Backend<void>);
static_assert(!oar::Backend<not_marked>);
static_assert(!oar::Backend<marked_false>);
static_assert(!oar::Backend<integer_scalar>);
static_assert(!oar::Backend<nameless>);
static_assert(accepted<oar::cpu> && !accepted<int>);

static_assert(std::is_same_v<oar::cpu, oar::basic_cpu<float>>);
static_assert(std::is_same_v<oar::cpu::value_type, float>);
static_assert(std::is_same_v<oar::cpu64::value_type, double>);

TEST_CASE("the cpu backends are named cpu and carry their scalar type") {
    CHECK(oar::cpu::name == "cpu");
    CHECK(oar::cpu64::name == "cpu");
    CHECK(oar::cpu::is_oar_backend);
    CHECK(sizeof(oar::cpu::value_type) == 4);
    CHECK(sizeof(oar::cpu64::value_type) == 8);
}
