// summary(): a table like paddle.summary — each layer's output shape and parameter count (a block's
// inner layers indented under it), then totals (parameters, forward FLOPs and activation memory per
// sample). All numbers are the network type's constexpr facts; nothing is run.
#pragma once

#include <algorithm>    // std::max
#include <cstddef>      // std::size_t
#include <cstdio>       // std::snprintf
#include <string>       // std::string
#include <vector>       // std::vector of rows

#include "../core/shape.hpp"  // to_string(Dims)
#include "sequential.hpp"      // LayerRow

namespace oar {

namespace detail {
/// 20350 -> "20,350"
inline std::string thousands(std::size_t v) {
    const std::string digits = std::to_string(v);
    std::string s;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
        s += digits[i];
    }
    return s;
}
inline std::string batch_shape(const Dims& d) { return "[N, " + to_string(d).substr(1); }
}  // namespace detail

/// The summary table of a network type (Network<...> or anything with an `info` like it).
template <class Net>
std::string summary() {
    using info = typename Net::info;
    std::string out;
    char line[160];
    const std::string rule(72, '-'), bold(72, '=');
    out += rule + "\n";
    // A block's inner layers follow its row, indented, under their state-dict path ("3.body.0").
    const std::vector<LayerRow> rows = info::layer_rows();
    int width = 5;
    for (const auto& r : rows) width = std::max(width, static_cast<int>(2 * r.depth + r.path.size()));
    std::snprintf(line, sizeof line, " %-*s %-14s %-22s %-16s %10s\n", width, "#", "Layer (type)", "Output Shape",
                  "Param #", "FLOPs");
    out += line;
    out += bold + "\n";
    std::snprintf(line, sizeof line, " %-*s %-14s %-22s %-16s %10s\n", width, "-", "Input",
                  detail::batch_shape(info::dims[0]).c_str(), "", "");
    out += line;
    for (const auto& r : rows) {
        const std::string index = std::string(2 * r.depth, ' ') + r.path;
        std::snprintf(line, sizeof line, " %-*s %-14s %-22s %-16s %10s\n", width, index.c_str(),
                      std::string(r.name).c_str(), detail::batch_shape(r.output).c_str(),
                      detail::thousands(r.params).c_str(), detail::thousands(r.flops).c_str());
        out += line;
    }
    out += bold + "\n";
    // As paddle.summary: a layer's Param # and the total count its buffers (running statistics) too.
    out += "Total params: " + detail::thousands(info::total_params + info::total_buffers) + "\n";
    out += "Trainable params: " + detail::thousands(info::total_params) + "\n";
    out += "Non-trainable params: " + detail::thousands(info::total_buffers) + "\n";
    out += rule + "\n";
    std::snprintf(line, sizeof line, "Forward FLOPs per sample: %s (%.2f MFLOP)\n",
                  detail::thousands(info::total_flops).c_str(), static_cast<double>(info::total_flops) / 1e6);
    out += line;
    using T = typename Net::value_type;  // float, or double on cpu64
    const std::size_t act_bytes = info::activation_floats * sizeof(T);
    std::snprintf(line, sizeof line, "Activations per sample: %s bytes (%.2f KB)\n", detail::thousands(act_bytes).c_str(),
                  static_cast<double>(act_bytes) / 1024.0);
    out += line;
    std::snprintf(line, sizeof line, "Params size: %.2f KB\n",
                  static_cast<double>(info::total_params * sizeof(T)) / 1024.0);
    out += line;
    out += rule + "\n";
    return out;
}

template <class Net>
std::string summary(const Net&) {
    return summary<Net>();
}

}  // namespace oar
