// oar's runtime errors. Every message starts with "oar:" and names what was wrong and where
// (file, offset, index, key), with the expected and the actual value when there are two.
#pragma once

#include <sstream>    // std::ostringstream for message building
#include <stdexcept>  // std::runtime_error
#include <string>     // std::string

namespace oar {

/// Base of every runtime error oar throws.
class error : public std::runtime_error {
public:
    explicit error(const std::string& what) : std::runtime_error(prefixed(what)) {}

private:
    static std::string prefixed(const std::string& what) {
        return what.rfind("oar:", 0) == 0 ? what : "oar: " + what;
    }
};

/// A tensor or batch whose shape does not fit where it was used.
class shape_error : public error {
public:
    using error::error;
};

/// A value out of its domain: a label >= classes, a negative learning rate, a NaN.
class value_error : public error {
public:
    using error::error;
};

/// A NaN or infinity where training must have finite numbers (nn/hooks.hpp NonFiniteGuard,
/// check_finite): the message names the step, the layer, the pass, the tensor and the element.
class non_finite_error : public value_error {
public:
    using value_error::value_error;
};

/// A file that cannot be opened, read or written.
class io_error : public error {
public:
    using error::error;
};

/// A file whose bytes do not follow its format (bad magic, truncated body, sizes that disagree).
class format_error : public error {
public:
    using error::error;
};

/// A command-line flag that is unknown or has a bad value.
class usage_error : public error {
public:
    using error::error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
    std::ostringstream os;
    ((os << args), ...);
    return os.str();
}
}  // namespace detail

}  // namespace oar
