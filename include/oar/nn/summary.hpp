// summary(): a table like paddle.summary — each layer's output shape and parameter count (a block's
// inner layers indented under it), then totals (parameters, forward FLOPs and activation memory per
// sample). All numbers are the network type's constexpr facts; nothing is run.
#pragma once

#include <algorithm>    // std::max
#include <array>        // std::array: a row's cells
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

namespace detail {
/// s padded with spaces to `width` on the right (left-aligned) or on the left (right-aligned).
inline std::string pad(const std::string& s, std::size_t width, bool right_align = false) {
    if (s.size() >= width) return s;
    return right_align ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}
}  // namespace detail

/// The summary table of a network type (Network<...> or anything with an `info` like it). Each
/// column is as wide as its widest entry (at least the widths of paddle.summary's table), so long
/// layer names ("AdaptiveAvgPool2D") and deep block paths stay aligned.
template <class Net>
std::string summary() {
    using info = typename Net::info;
    std::string out;
    char line[160];
    // A block's inner layers follow its row, indented, under their state-dict path ("3.body.0").
    const std::vector<LayerRow> rows = info::layer_rows();
    std::vector<std::array<std::string, 5>> cells;
    cells.push_back({"#", "Layer (type)", "Output Shape", "Param #", "FLOPs"});
    cells.push_back({"-", "Input", detail::batch_shape(info::dims[0]), "", ""});
    for (const auto& r : rows)
        cells.push_back({std::string(2 * r.depth, ' ') + r.path, std::string(r.name), detail::batch_shape(r.output),
                         detail::thousands(r.params), detail::thousands(r.flops)});
    std::array<std::size_t, 5> width{5, 14, 22, 16, 10};
    for (const auto& c : cells)
        for (std::size_t k = 0; k < 5; ++k) width[k] = std::max(width[k], c[k].size());
    const auto row_text = [&](const std::array<std::string, 5>& c) {
        std::string t;
        for (std::size_t k = 0; k < 5; ++k) {
            t += ' ';
            t += detail::pad(c[k], width[k], k == 4);
        }
        t += '\n';
        return t;
    };
    const std::size_t total = width[0] + width[1] + width[2] + width[3] + width[4] + 5;
    const std::string rule(std::max<std::size_t>(72, total), '-'), bold(rule.size(), '=');
    out += rule + "\n";
    out += row_text(cells[0]);
    out += bold + "\n";
    for (std::size_t i = 1; i < cells.size(); ++i) out += row_text(cells[i]);
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
