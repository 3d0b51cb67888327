// Command-line flags for the example programs: `--flag value` or `--flag=value`, `--help`/`-h`.
// Each program maps flags to its settings; a bad flag is an oar::usage_error (exit status 2).
#pragma once

#include <string>  // std::string

#include <oar/core/error.hpp>  // oar::usage_error

namespace cli {

/// Calls on_flag(flag, value) for each flag in order; returns false when --help was asked for.
template <class F>
bool for_each_flag(int argc, char** argv, F&& on_flag) {
    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i], value;
        if (flag == "--help" || flag == "-h") return false;
        if (flag.rfind("--", 0) != 0) throw oar::usage_error("unexpected argument '" + flag + "' (see --help)");
        if (const auto eq = flag.find('='); eq != std::string::npos) {
            value = flag.substr(eq + 1);
            flag = flag.substr(0, eq);
        } else {
            if (i + 1 >= argc) throw oar::usage_error(flag + " needs a value (see --help)");
            value = argv[++i];
        }
        on_flag(flag, value);
    }
    return true;
}

/// The error for a flag the program does not know.
inline oar::usage_error unknown_flag(const std::string& flag) {
    return oar::usage_error("unknown flag '" + flag + "' (see --help)");
}

}  // namespace cli
