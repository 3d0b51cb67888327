// Shared by the optimizer tests: a small parameter set with known values and gradients, and
// the independent reference updates they are compared with (written out in double).
#pragma once

#include <oar/core/rng.hpp>
#include <oar/nn/parameters.hpp>

#include <vector>

namespace optim_test {

/// Two tensors (7 and 3 values), the second starting at a padded offset like a network's.
inline oar::ParameterSet make_params() {
    std::vector<oar::ParamEntry> e{{"0.weight", oar::make_dims(7), 0, 7}, {"0.bias", oar::make_dims(3), 16, 3}};
    oar::ParameterSet p(32, e);
    const oar::CounterRng rng{5};
    for (const auto& entry : p.entries())
        for (std::size_t i = 0; i < entry.size; ++i) p.value(entry)[i] = 2.0f * rng.uniform(1, entry.offset + i) - 1.0f;
    return p;
}

/// Gradients for step t (different every step, some exactly zero).
inline void set_grads(oar::ParameterSet& p, std::size_t t) {
    const oar::CounterRng rng{6};
    for (const auto& entry : p.entries())
        for (std::size_t i = 0; i < entry.size; ++i)
            p.grad(entry)[i] = (i % 4 == 3) ? 0.0f : 2.0f * rng.uniform(t, entry.offset + i) - 1.0f;
}

inline std::vector<double> values(const oar::ParameterSet& p) {
    return std::vector<double>(p.values().begin(), p.values().end());
}
inline std::vector<double> grads(const oar::ParameterSet& p) {
    return std::vector<double>(p.grads().begin(), p.grads().end());
}

}  // namespace optim_test
