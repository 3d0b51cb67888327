// Training curves as a standalone SVG file (any browser shows it; no plotting library): panels side
// by side, each with axes, ticks at round numbers, labels, a legend and its polylines. Non-finite
// points are skipped (the line breaks there) and counted in the legend; all text is XML-escaped and
// invalid UTF-8 replaced, so the file is always well-formed. Rewritten every epoch, so it is written
// to a temporary file and renamed over the old one: a viewer never sees half a file.
//
//   oar::io::TrainingCurves h;                        // filled per epoch by a callback
//   h.train_loss.push_back(0.31); h.valid_loss.push_back(0.12); ...
//   oar::io::write_training_curves(log_dir / "curves.svg", h);
#pragma once

#include <algorithm>    // std::min, std::max
#include <cerrno>       // errno
#include <cmath>        // std::isfinite, std::floor, std::ceil, std::log10, std::pow, std::abs, std::lround
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint32_t
#include <cstdio>       // std::snprintf, std::FILE, std::fwrite, std::fflush, std::fclose, std::rename
#include <cstring>      // std::strerror
#include <filesystem>   // std::filesystem::path, create_directories
#include <string>       // std::string: the document
#include <string_view>  // std::string_view
#include <system_error> // std::error_code
#include <vector>       // std::vector
#include <stdlib.h>     // ::mkstemp: the temporary file beside the target
#include <unistd.h>     // ::fsync, ::close, ::unlink, ::getpid

#include "../core/error.hpp"  // value_error, io_error

namespace oar::io {

/// One line of a panel: points (x[i], y[i]); pairs with a non-finite coordinate are skipped.
struct Curve {
    std::string name;
    std::vector<double> x, y;
    std::string color;  ///< any SVG colour ("#1f77b4"); empty: the next of the palette
};

/// One plot: its curves share the axes.
struct Panel {
    std::string title;
    std::string y_label;
    std::vector<Curve> curves;
    std::string x_label = "epoch";
};

/// Per-epoch values for write_training_curves: index i is epoch first_epoch + i. A vector may be
/// shorter than the others or empty (no validation): its curve has the points it has.
struct TrainingCurves {
    std::vector<double> train_loss, valid_loss;
    std::vector<double> train_accuracy, valid_accuracy;
    std::size_t first_epoch = 1;  ///< a resumed run's first plotted epoch
};

/// Colours of training and validation curves (matplotlib's first two, so plots look familiar).
inline constexpr std::string_view svg_train_color = "#1f77b4";
inline constexpr std::string_view svg_valid_color = "#ff7f0e";

namespace svg_detail {

inline constexpr std::string_view palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

/// Values beyond this are treated like non-finite ones: their differences overflow and no reader
/// could see them next to ordinary values anyway.
inline constexpr double plot_limit = 1e300;

inline bool plottable(double v) { return std::isfinite(v) && std::abs(v) <= plot_limit; }

/// Appends `s` as XML character data or attribute text: markup characters escaped, control
/// characters XML 1.0 forbids and bytes that are not valid UTF-8 replaced by U+FFFD.
inline void append_escaped(std::string& out, std::string_view s) {
    constexpr std::string_view replacement = "\xEF\xBF\xBD";
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const std::size_t n = s.size();
    for (std::size_t i = 0; i < n;) {
        const unsigned char c = p[i];
        if (c < 0x80) {
            switch (c) {
                case '&': out += "&amp;"; break;
                case '<': out += "&lt;"; break;
                case '>': out += "&gt;"; break;
                case '"': out += "&quot;"; break;
                case '\'': out += "&apos;"; break;
                default:
                    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') out += replacement;
                    else out.push_back(static_cast<char>(c));
            }
            ++i;
            continue;
        }
        // A multi-byte sequence: its length from the lead byte, then continuation bytes, then the
        // code point must be minimal, not a surrogate, at most U+10FFFF and not U+FFFE/U+FFFF.
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1Fu;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0Fu;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07u;
        bool ok = len != 0 && i + len <= n;
        for (std::size_t k = 1; ok && k < len; ++k) {
            if ((p[i + k] & 0xC0u) != 0x80u) ok = false;
            else cp = (cp << 6) | (p[i + k] & 0x3Fu);
        }
        if (ok) {
            const std::uint32_t min_cp = len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u;
            ok = cp >= min_cp && cp <= 0x10FFFFu && !(cp >= 0xD800u && cp <= 0xDFFFu) && cp != 0xFFFEu && cp != 0xFFFFu;
        }
        if (ok) {
            out.append(s.substr(i, len));
            i += len;
        } else {
            out += replacement;
            ++i;
        }
    }
}

inline std::string escaped(std::string_view s) {
    std::string out;
    append_escaped(out, s);
    return out;
}

/// A coordinate or length with two decimals ("12.35"), never "-0.00" or an exponent.
inline std::string num(double v) {
    if (std::abs(v) < 0.005) v = 0;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

/// The axis range [lo, hi] widened to multiples of a round step (1, 2 or 5 times a power of ten),
/// about `target` ticks. `integer`: steps of at least 1 (epochs).
struct Ticks {
    double lo = 0, hi = 1, step = 0.2;
    int decimals = 1;
};

inline double nice_step(double raw) {
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / mag;
    return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

inline Ticks nice_ticks(double lo, double hi, bool integer, int target = 5) {
    if (!(lo <= hi)) lo = 0, hi = 1;  // no data
    if (hi - lo <= std::max(std::abs(lo), std::abs(hi)) * 1e-12) {  // one value: a window around it
        const double pad = integer ? 1.0 : (lo == 0 ? 1.0 : std::abs(lo) * 0.1);
        lo -= pad;
        hi += pad;
    }
    if (!(hi - lo > 1e-200) || !std::isfinite(hi - lo)) lo -= 1, hi += 1;  // subnormal or no spread
    Ticks t;
    t.step = nice_step((hi - lo) / target);
    if (integer) t.step = std::max(1.0, std::round(t.step));
    t.lo = std::floor(lo / t.step) * t.step;
    t.hi = std::ceil(hi / t.step) * t.step;
    t.decimals = std::max(0, static_cast<int>(-std::floor(std::log10(t.step) + 1e-9)));
    return t;
}

inline std::string tick_label(double v, const Ticks& t) {
    if (std::abs(v) < t.step * 1e-6) v = 0;
    char buf[64];
    if (t.decimals > 6 || std::max(std::abs(t.lo), std::abs(t.hi)) >= 1e7)
        std::snprintf(buf, sizeof buf, "%.3g", v);
    else
        std::snprintf(buf, sizeof buf, "%.*f", t.decimals, v);
    return buf;
}

}  // namespace svg_detail

/// The SVG document: `title` over the panels, laid out side by side in width x height pixels.
/// Throws value_error when a curve's x and y differ in length (naming the panel and curve).
inline std::string render_svg(std::string_view title, const std::vector<Panel>& panels, int width = 800, int height = 450) {
    using namespace svg_detail;
    if (width < 200 || height < 200 || width > 100000 || height > 100000)
        throw value_error(oar::detail::concat("render_svg: size ", width, "x", height, " is outside 200..100000 pixels"));
    for (const auto& p : panels)
        for (const auto& c : p.curves)
            if (c.x.size() != c.y.size())
                throw value_error(oar::detail::concat("render_svg: panel \"", p.title, "\", curve \"", c.name, "\" has ",
                                                      c.x.size(), " x values but ", c.y.size(), " y values"));
    std::string s;
    s.reserve(4096);
    s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
         std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
         "\" font-family=\"sans-serif\">\n";
    s += "<rect class=\"background\" x=\"0\" y=\"0\" width=\"" + std::to_string(width) + "\" height=\"" +
         std::to_string(height) + "\" fill=\"#ffffff\"/>\n";
    s += "<text class=\"title\" x=\"" + num(width / 2.0) + "\" y=\"26\" font-size=\"18\" text-anchor=\"middle\">";
    append_escaped(s, title);
    s += "</text>\n";

    std::size_t max_curves = 0;
    for (const auto& p : panels) max_curves = std::max(max_curves, p.curves.size());
    const double panel_w = panels.empty() ? width : static_cast<double>(width) / static_cast<double>(panels.size());
    std::size_t color_index = 0;
    for (std::size_t pi = 0; pi < panels.size(); ++pi) {
        const Panel& p = panels[pi];
        const double left = pi * panel_w;
        const double top = 44;
        const double plot_x0 = left + 62, plot_x1 = left + panel_w - 16;
        const double plot_y0 = top + 30 + 17.0 * static_cast<double>(max_curves), plot_y1 = height - 48.0;
        // Data ranges over plottable points; x ticks are whole numbers when every x is one.
        double xlo = 1, xhi = 0, ylo = 1, yhi = 0;
        bool all_integer_x = true, any = false;
        for (const auto& c : p.curves)
            for (std::size_t i = 0; i < c.x.size(); ++i) {
                if (!plottable(c.x[i]) || !plottable(c.y[i])) continue;
                if (!any) xlo = xhi = c.x[i], ylo = yhi = c.y[i];
                any = true;
                xlo = std::min(xlo, c.x[i]), xhi = std::max(xhi, c.x[i]);
                ylo = std::min(ylo, c.y[i]), yhi = std::max(yhi, c.y[i]);
                if (c.x[i] != std::floor(c.x[i])) all_integer_x = false;
            }
        const Ticks tx = nice_ticks(xlo, xhi, all_integer_x);
        const Ticks ty = nice_ticks(ylo, yhi, false);
        // Data and ticks map into the plot area less an inset, so markers on the extreme ticks
        // stay clear of the axes.
        constexpr double inset = 8;
        const auto px = [&](double x) {
            return plot_x0 + inset + (x - tx.lo) / (tx.hi - tx.lo) * (plot_x1 - plot_x0 - 2 * inset);
        };
        const auto py = [&](double y) {
            return plot_y1 - inset - (y - ty.lo) / (ty.hi - ty.lo) * (plot_y1 - plot_y0 - 2 * inset);
        };

        s += "<g class=\"panel\">\n<text class=\"panel-title\" x=\"" + num(left + panel_w / 2) + "\" y=\"" + num(top + 12) +
             "\" font-size=\"15\" text-anchor=\"middle\">";
        append_escaped(s, p.title);
        s += "</text>\n";
        // Grid and ticks.
        s += "<g class=\"ticks\" font-size=\"11\" fill=\"#333333\">\n";
        const int nx = std::min(100, static_cast<int>(std::lround((tx.hi - tx.lo) / tx.step)));
        for (int k = 0; k <= nx; ++k) {
            const double v = tx.lo + k * tx.step, X = px(v);
            s += "<line x1=\"" + num(X) + "\" y1=\"" + num(plot_y0) + "\" x2=\"" + num(X) + "\" y2=\"" + num(plot_y1 + 4) +
                 "\" stroke=\"#e5e5e5\"/>\n<text class=\"tick\" x=\"" + num(X) + "\" y=\"" + num(plot_y1 + 17) +
                 "\" text-anchor=\"middle\">" + tick_label(v, tx) + "</text>\n";
        }
        const int ny = std::min(100, static_cast<int>(std::lround((ty.hi - ty.lo) / ty.step)));
        for (int k = 0; k <= ny; ++k) {
            const double v = ty.lo + k * ty.step, Y = py(v);
            s += "<line x1=\"" + num(plot_x0 - 4) + "\" y1=\"" + num(Y) + "\" x2=\"" + num(plot_x1) + "\" y2=\"" + num(Y) +
                 "\" stroke=\"#e5e5e5\"/>\n<text class=\"tick\" x=\"" + num(plot_x0 - 7) + "\" y=\"" + num(Y + 4) +
                 "\" text-anchor=\"end\">" + tick_label(v, ty) + "</text>\n";
        }
        s += "</g>\n";
        // Axes and their labels.
        s += "<polyline class=\"axes\" points=\"" + num(plot_x0) + "," + num(plot_y0) + " " + num(plot_x0) + "," +
             num(plot_y1) + " " + num(plot_x1) + "," + num(plot_y1) + "\" fill=\"none\" stroke=\"#000000\"/>\n";
        s += "<text class=\"axis-label\" x=\"" + num((plot_x0 + plot_x1) / 2) + "\" y=\"" + num(height - 12.0) +
             "\" font-size=\"12\" text-anchor=\"middle\">";
        append_escaped(s, p.x_label);
        s += "</text>\n<text class=\"axis-label\" x=\"" + num(left + 14) + "\" y=\"" + num((plot_y0 + plot_y1) / 2) +
             "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 " + num(left + 14) + " " +
             num((plot_y0 + plot_y1) / 2) + ")\">";
        append_escaped(s, p.y_label);
        s += "</text>\n";
        if (!any) {
            s += "<text class=\"no-data\" x=\"" + num((plot_x0 + plot_x1) / 2) + "\" y=\"" + num((plot_y0 + plot_y1) / 2) +
                 "\" font-size=\"13\" fill=\"#888888\" text-anchor=\"middle\">no finite values</text>\n";
        }
        // Curves: one polyline per run of consecutive plottable points; markers on every point when
        // there are few, and always on a point with no plottable neighbour (it has no line).
        for (std::size_t ci = 0; ci < p.curves.size(); ++ci) {
            const Curve& c = p.curves[ci];
            const std::string color = escaped(c.color.empty() ? palette[color_index++ % std::size(palette)] : c.color);
            std::size_t finite = 0;
            for (std::size_t i = 0; i < c.x.size(); ++i) finite += plottable(c.x[i]) && plottable(c.y[i]);
            const bool markers = finite <= 40;
            s += "<g class=\"curve-group\">\n";
            for (std::size_t i = 0; i < c.x.size();) {
                if (!plottable(c.x[i]) || !plottable(c.y[i])) {
                    ++i;
                    continue;
                }
                std::size_t j = i;
                while (j < c.x.size() && plottable(c.x[j]) && plottable(c.y[j])) ++j;
                if (j - i >= 2) {
                    s += "<polyline class=\"curve\" fill=\"none\" stroke=\"" + color +
                         "\" stroke-width=\"2.5\" stroke-linejoin=\"round\" points=\"";
                    for (std::size_t k = i; k < j; ++k) {
                        if (k > i) s.push_back(' ');
                        s += num(px(c.x[k])) + "," + num(py(c.y[k]));
                    }
                    s += "\"/>\n";
                }
                if (markers || j - i == 1)
                    for (std::size_t k = i; k < j; ++k)
                        s += "<circle class=\"marker\" cx=\"" + num(px(c.x[k])) + "\" cy=\"" + num(py(c.y[k])) +
                             "\" r=\"3.5\" fill=\"" + color + "\"/>\n";
                i = j;
            }
            s += "</g>\n";
            // Legend entry above the plot.
            const double ly = top + 30 + 17.0 * static_cast<double>(ci);
            s += "<line class=\"legend-line\" x1=\"" + num(plot_x0 + 4) + "\" y1=\"" + num(ly - 4) + "\" x2=\"" +
                 num(plot_x0 + 28) + "\" y2=\"" + num(ly - 4) + "\" stroke=\"" + color + "\" stroke-width=\"2.5\"/>\n";
            s += "<text class=\"legend\" x=\"" + num(plot_x0 + 34) + "\" y=\"" + num(ly) + "\" font-size=\"12\">";
            append_escaped(s, c.name);
            if (finite < c.x.size())
                s += " (" + std::to_string(c.x.size() - finite) + " non-finite skipped)";
            s += "</text>\n";
        }
        s += "</g>\n";
    }
    s += "</svg>\n";
    return s;
}

/// Writes `content` to `path` through a temporary file in the same folder (flushed, fsynced and
/// renamed over `path`): readers see the old file or the new one, never a part. On failure the
/// temporary file is removed and io_error names the path and the step that failed.
inline void write_file_replacing(const std::filesystem::path& path, std::string_view content) {
    const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec) throw io_error(oar::detail::concat(path.string(), ": cannot create its folder (", ec.message(), ")"));
    // Appended piece by piece: GCC 12's -Wrestrict misreads `"." + std::string&&` (a false positive).
    std::string name = ".";
    name += path.filename().string();
    name += ".tmp.";
    name += std::to_string(::getpid());
    name += ".XXXXXX";
    std::string tmpl = (folder / name).string();
    const int fd = ::mkstemp(tmpl.data());
    if (fd < 0) throw io_error(oar::detail::concat(path.string(), ": cannot create a temporary file beside it (", std::strerror(errno), ")"));
    std::FILE* f = ::fdopen(fd, "wb");
    if (!f) {
        const int e = errno;
        ::close(fd);
        ::unlink(tmpl.c_str());
        throw io_error(oar::detail::concat(path.string(), ": cannot open its temporary file (", std::strerror(e), ")"));
    }
    const char* step = nullptr;
    if (std::fwrite(content.data(), 1, content.size(), f) != content.size()) step = "write";
    else if (std::fflush(f) != 0) step = "flush";
    else if (::fsync(::fileno(f)) != 0) step = "fsync";
    const int e = errno;
    if (std::fclose(f) != 0 && !step) step = "close";
    if (!step && std::rename(tmpl.c_str(), path.c_str()) != 0) step = "rename the temporary file over";
    if (step) {
        const int err = e ? e : errno;
        ::unlink(tmpl.c_str());
        throw io_error(oar::detail::concat(path.string(), ": cannot ", step, " it (", std::strerror(err), ")"));
    }
}

/// Writes render_svg(title, panels, width, height) to `path` atomically (see write_file_replacing).
inline void write_svg(const std::filesystem::path& path, std::string_view title, const std::vector<Panel>& panels,
                      int width = 800, int height = 450) {
    write_file_replacing(path, render_svg(title, panels, width, height));
}

/// The two panels of a training run: loss and accuracy, training and validation curves in
/// svg_train_color and svg_valid_color. Empty vectors give no curve.
inline std::vector<Panel> training_panels(const TrainingCurves& h) {
    const auto curve = [&](std::string name, const std::vector<double>& y, std::string_view color) {
        Curve c{std::move(name), {}, y, std::string(color)};
        c.x.resize(y.size());
        for (std::size_t i = 0; i < y.size(); ++i) c.x[i] = static_cast<double>(h.first_epoch + i);
        return c;
    };
    std::vector<Panel> panels(2);
    panels[0].title = "Loss";
    panels[0].y_label = "loss";
    panels[1].title = "Accuracy";
    panels[1].y_label = "accuracy";
    if (!h.train_loss.empty()) panels[0].curves.push_back(curve("train loss", h.train_loss, svg_train_color));
    if (!h.valid_loss.empty()) panels[0].curves.push_back(curve("valid loss", h.valid_loss, svg_valid_color));
    if (!h.train_accuracy.empty()) panels[1].curves.push_back(curve("train accuracy", h.train_accuracy, svg_train_color));
    if (!h.valid_accuracy.empty()) panels[1].curves.push_back(curve("valid accuracy", h.valid_accuracy, svg_valid_color));
    return panels;
}

/// Writes the loss and accuracy curves of `h` to `path` (atomically; call it after every epoch).
inline void write_training_curves(const std::filesystem::path& path, const TrainingCurves& h,
                                  std::string_view title = "Training curves") {
    write_svg(path, title, training_panels(h));
}

}  // namespace oar::io
