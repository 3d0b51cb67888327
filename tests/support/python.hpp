// Cross-checks that run a Python reader (TensorBoard's EventAccumulator, the safetensors package,
// onnxruntime, torch) skip, naming the set-up command, when OAR_PYTHON cannot import it: a build
// configured without the test venv (scripts/setup.sh makes .venv) reports them skipped, not failed.
#pragma once

#include <map>     // std::map: one import attempt per module list
#include <string>  // std::string

#include "process.hpp"  // run_command
#include "skip.hpp"     // skip

namespace oar_test {

/// "" when OAR_PYTHON imports every module of `modules` ("tensorboard", "torch, safetensors");
/// otherwise why not and what to run.
inline std::string python_missing(const std::string& modules) {
    static std::map<std::string, std::string> seen;
    if (auto it = seen.find(modules); it != seen.end()) return it->second;
    const Run r = run_command(std::string(OAR_PYTHON) + " -c 'import " + modules + "' 2>&1");
    std::string why;
    if (r.status != 0) {
        std::string last = r.output;
        while (!last.empty() && last.back() == '\n') last.pop_back();
        if (const auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
        why = "Python module(s) " + modules + " not importable by " + std::string(OAR_PYTHON) + " (" + last +
              "): run scripts/test.sh, or scripts/setup.sh then reconfigure (it makes the test venv .venv)";
    }
    return seen[modules] = why;
}

/// Records a skip and returns true when `modules` are missing: `if (skip_without_python("x")) return;`
inline bool skip_without_python(const std::string& modules) {
    const std::string why = python_missing(modules);
    if (why.empty()) return false;
    skip(why);
    return true;
}

}  // namespace oar_test
