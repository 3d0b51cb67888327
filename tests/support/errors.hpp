// Checking oar's error messages: run code that must throw a given exception type and get its
// message, then look for the parts the message must name.
#pragma once

#include <doctest/doctest.h>  // FAIL

#include <exception>  // std::exception
#include <string>     // std::string

namespace oar_test {

/// Whether `part` occurs in s.
inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Runs f, requires it to throw E (an oar error, or one derived from it) and returns its message.
template <class E, class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        FAIL("threw another exception: " << e.what());
        return {};
    }
    FAIL("did not throw");
    return {};
}

}  // namespace oar_test
