// Tests of include/oar/core/error.hpp: the "oar: " prefix, the error hierarchy and detail::concat.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <stdexcept>    // std::runtime_error
#include <string>       // std::string
#include <type_traits>  // std::is_base_of_v

#include <oar/core/error.hpp>  // under test

namespace {

template <class E>
void check_kind_is_catchable() {
    static_assert(std::is_base_of_v<oar::error, E>);
    static_assert(std::is_base_of_v<std::runtime_error, E>);
    bool as_oar = false, as_runtime = false, as_std = false;
    try {
        throw E("something broke");
    } catch (const oar::error& e) {
        as_oar = true;
        CHECK(std::string(e.what()) == "oar: something broke");
    }
    try {
        throw E("something broke");
    } catch (const std::runtime_error& e) {
        as_runtime = true;
        CHECK(std::string(e.what()) == "oar: something broke");
    }
    try {
        throw E("oar: already prefixed");
    } catch (const std::exception& e) {
        as_std = true;
        CHECK(std::string(e.what()) == "oar: already prefixed");
    }
    CHECK(as_oar);
    CHECK(as_runtime);
    CHECK(as_std);
}

}  // namespace

TEST_CASE("an error message gets the oar: prefix exactly once") {
    CHECK(std::string(oar::error("bad thing").what()) == "oar: bad thing");
    CHECK(std::string(oar::error("oar: bad thing").what()) == "oar: bad thing");
    CHECK(std::string(oar::error("").what()) == "oar: ");
    // "oar" elsewhere in the message is not a prefix.
    CHECK(std::string(oar::error("roar: x").what()) == "oar: roar: x");
    CHECK(std::string(oar::error(" oar: x").what()) == "oar:  oar: x");
}

TEST_CASE("re-wrapping an error's message does not double the prefix") {
    const oar::error first("file.idx: truncated");
    const oar::format_error second(first.what());
    CHECK(std::string(second.what()) == "oar: file.idx: truncated");
}

TEST_CASE("every error kind is catchable as oar::error, std::runtime_error and std::exception") {
    check_kind_is_catchable<oar::error>();
    check_kind_is_catchable<oar::shape_error>();
    check_kind_is_catchable<oar::value_error>();
    check_kind_is_catchable<oar::io_error>();
    check_kind_is_catchable<oar::format_error>();
    check_kind_is_catchable<oar::usage_error>();
}

TEST_CASE("error kinds are distinct types, so a handler for one does not catch another") {
    bool caught_as_io = false, caught_as_format = false;
    try {
        try {
            throw oar::format_error("x");
        } catch (const oar::io_error&) {
            caught_as_io = true;
        }
    } catch (const oar::format_error&) {
        caught_as_format = true;
    }
    CHECK_FALSE(caught_as_io);
    CHECK(caught_as_format);
}

TEST_CASE("detail::concat streams every argument in order") {
    CHECK(oar::detail::concat("abc") == "abc");
    CHECK(oar::detail::concat("x = ", 42, ", y = ", 2.5, ' ', std::string("end")) == "x = 42, y = 2.5 end");
    CHECK(oar::detail::concat(std::size_t{18446744073709551615ull}) == "18446744073709551615");
    CHECK(oar::detail::concat(-7, -7L) == "-7-7");
}
