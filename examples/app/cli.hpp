// Command-line flags for the example programs: `--flag value` or `--flag=value`, `--help`/`-h`.
// Each program maps flags to its settings; a bad flag is an oar::usage_error (exit status 2).
// The loop itself lives in train_options.hpp (beside this header), where it is tested and fuzzed.
#pragma once

#include <string>  // std::string

#include <oar/core/error.hpp>  // oar::usage_error

#include "train_options.hpp"  // oar::for_each_flag, oar::unknown_flag

namespace cli {

/// Calls on_flag(flag, value) for each flag in order; returns false when --help was asked for.
template <class F>
bool for_each_flag(int argc, char** argv, F&& on_flag) {
    return oar::for_each_flag(argc, argv, on_flag);
}

/// The error for a flag the program does not know.
inline oar::usage_error unknown_flag(const std::string& flag) { return oar::unknown_flag(flag); }

}  // namespace cli
