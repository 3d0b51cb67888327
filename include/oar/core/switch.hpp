// A process-wide on/off switch whose default comes from a 0/1 environment variable: the shape of
// set_conv_winograd / conv_winograd (kernels/cpu/winograd.hpp, OAR_WINOGRAD) and set_conv_bf16_units
// / conv_bf16_units (core/precision.hpp, OAR_BF16_CONV_UNITS).
#pragma once

#include <atomic>   // std::atomic<int>: the switch
#include <cstdlib>  // std::getenv
#include <string>   // std::string: the message

#include "error.hpp"  // value_error: a malformed variable

namespace oar {

/// The environment variable `name` read as a flag: "0" off, "1" on, `fallback` when unset or empty.
/// Any other value throws value_error ("NAME: expected 0 or 1, got \"VALUE\""), not a silent default.
inline bool env_flag(const char* name, bool fallback) {
    const char* env = std::getenv(name);
    if (!env || !*env) return fallback;
    if ((env[0] == '0' || env[0] == '1') && env[1] == '\0') return env[0] == '1';
    throw value_error(std::string(name) + ": expected 0 or 1, got \"" + env + "\"");
}

namespace detail {
/// One switch per Default: unset (-1) until set or first read, when it takes Default()'s value
/// (whose error, if any, reaches the first reader); then 0 or 1.
template <bool (*Default)()>
struct lazy_switch {
    static void set(bool on) { state().store(on ? 1 : 0, std::memory_order_relaxed); }
    static bool get() {
        int s = state().load(std::memory_order_relaxed);
        if (s < 0) {
            int expected = -1;
            const int fresh = Default() ? 1 : 0;
            s = state().compare_exchange_strong(expected, fresh, std::memory_order_relaxed) ? fresh
                                                                                          : expected;  // set meanwhile
        }
        return s == 1;
    }

private:
    static std::atomic<int>& state() {
        static std::atomic<int> s{-1};
        return s;
    }
};
}  // namespace detail

}  // namespace oar
