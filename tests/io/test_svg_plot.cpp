// Tests of include/oar/io/svg_plot.hpp: documents are parsed by python's xml.etree
// (tests/io/check_svg.py) and rendered once by headless Chromium, whose PNG is decoded with zlib
// and struct only (tests/io/check_png.py) to find the curves' colours.
#include <doctest/doctest.h>  // TEST_CASE, CHECK, REQUIRE

#include <cmath>       // std::nan, std::fmod, std::abs, std::log10, std::pow
#include <csignal>       // std::signal(SIGXFSZ, SIG_IGN): a full disk without the signal
#include <sys/resource.h>  // ::setrlimit(RLIMIT_FSIZE): a full disk for the write-error tests
#include <cstdlib>     // std::strtod
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ofstream
#include <limits>      // std::numeric_limits
#include <map>         // std::map
#include <sstream>     // std::istringstream
#include <string>      // std::string
#include <utility>     // std::pair
#include <vector>      // std::vector

#include <oar/io/svg_plot.hpp>  // under test

#include "support/faults.hpp"    // oar_test::open_fds, FileSizeLimit: the write-error paths
#include "support/errors.hpp"    // oar_test::message_of, contains
#include "support/files.hpp"     // oar_test::read_raw
#include "support/process.hpp"   // oar_test::run_command
#include "support/skip.hpp"     // oar_test::skip: no chromium
#include "support/temp_dir.hpp"  // oar_test::TempDir

namespace fs = std::filesystem;
using oar_test::contains;
using oar_test::TempDir;

namespace {

using oar_test::FileSizeLimit;
using oar_test::open_fds;

struct Polyline {
    int panel = 0;
    std::string stroke;
    std::vector<std::pair<double, double>> points;
};

/// What check_svg.py saw in a file.
struct Parsed {
    int status = -1;
    std::string output, root, title;
    int width = 0, height = 0;
    std::vector<std::string> panels, bad_numbers;
    std::vector<Polyline> curves;
    std::map<int, int> markers;                         // per panel
    std::map<int, std::vector<std::string>> legends;    // per panel
    std::map<int, std::vector<double>> xticks, yticks;  // per panel, as numbers
    std::map<int, std::vector<std::string>> xtick_texts;
    std::vector<int> nodata;
};

std::string unhex(const std::string& h) {
    std::string out;
    if (h == "-") return out;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
    return out;
}

Parsed parse(const std::string& path) {
    const auto run = oar_test::run_command(std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR + "/tests/io/check_svg.py '" + path + "' 2>&1");
    Parsed p;
    p.status = run.status;
    p.output = run.output;
    std::istringstream lines(run.output);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream in(line);
        std::string kind;
        in >> kind;
        if (kind == "root") in >> p.root;
        else if (kind == "size") in >> p.width >> p.height;
        else if (kind == "title") {
            std::string h;
            in >> h;
            p.title = unhex(h);
        } else if (kind == "panel") {
            int i = 0;
            std::string h;
            in >> i >> h;
            p.panels.push_back(unhex(h));
        } else if (kind == "curve") {
            Polyline c;
            std::string pt;
            in >> c.panel >> c.stroke;
            while (in >> pt) {
                const auto comma = pt.find(',');
                c.points.emplace_back(std::strtod(pt.substr(0, comma).c_str(), nullptr), std::strtod(pt.substr(comma + 1).c_str(), nullptr));
            }
            p.curves.push_back(c);
        } else if (kind == "marker") {
            int i = 0;
            in >> i;
            ++p.markers[i];
        } else if (kind == "legend") {
            int i = 0;
            std::string h;
            in >> i >> h;
            p.legends[i].push_back(unhex(h));
        } else if (kind == "tick") {
            int i = 0;
            std::string axis, text;
            in >> i >> axis >> text;
            (axis == "x" ? p.xticks : p.yticks)[i].push_back(std::strtod(text.c_str(), nullptr));
            if (axis == "x") p.xtick_texts[i].push_back(text);
        } else if (kind == "nodata") {
            int i = 0;
            in >> i;
            p.nodata.push_back(i);
        } else if (kind == "bad_number") {
            p.bad_numbers.push_back(line);
        }
    }
    return p;
}

/// Ticks are evenly spaced by 1, 2 or 5 times a power of ten.
void check_round_ticks(const std::vector<double>& t) {
    REQUIRE(t.size() >= 2);
    CHECK(t.size() <= 12);
    const double step = t[1] - t[0];
    REQUIRE(step > 0);
    for (std::size_t i = 1; i < t.size(); ++i) CHECK(std::abs((t[i] - t[i - 1]) - step) <= 1e-9 * std::abs(step) + 1e-12);
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    const bool round = std::abs(mantissa - 1) < 1e-6 || std::abs(mantissa - 2) < 1e-6 || std::abs(mantissa - 5) < 1e-6;
    CHECK_MESSAGE(round, "tick step " << step);
    for (double v : t) CHECK(std::abs(v / step - std::round(v / step)) < 1e-6);  // on multiples of the step
}

oar::io::TrainingCurves five_epochs() {
    oar::io::TrainingCurves h;
    for (int i = 0; i < 5; ++i) {
        h.train_loss.push_back(0.5 / (i + 1));
        h.valid_loss.push_back(0.4 / (i + 1) + 0.02);
        h.train_accuracy.push_back(0.9 + 0.015 * i);
        h.valid_accuracy.push_back(0.92 + 0.013 * i);
    }
    return h;
}

}  // namespace

TEST_CASE("write_training_curves draws loss and accuracy panels with a polyline, markers and a legend entry per curve") {
    TempDir dir;
    const std::string path = dir.file("curves.svg");
    const auto h = five_epochs();
    oar::io::write_training_curves(path, h, "MNIST cnn");
    Parsed p = parse(path);
    INFO(p.output);
    REQUIRE(p.status == 0);
    CHECK(p.root == "svg");
    CHECK(p.title == "MNIST cnn");
    CHECK(p.panels == std::vector<std::string>{"Loss", "Accuracy"});
    CHECK(p.bad_numbers.empty());
    REQUIRE(p.curves.size() == 4);
    CHECK(p.legends[0] == std::vector<std::string>{"train loss", "valid loss"});
    CHECK(p.legends[1] == std::vector<std::string>{"train accuracy", "valid accuracy"});
    CHECK(p.markers[0] == 10);
    CHECK(p.markers[1] == 10);
    const std::vector<double>* ys[] = {&h.train_loss, &h.valid_loss, &h.train_accuracy, &h.valid_accuracy};
    for (std::size_t c = 0; c < 4; ++c) {
        const Polyline& line = p.curves[c];
        CHECK(line.panel == static_cast<int>(c / 2));
        CHECK(line.stroke == std::string(c % 2 ? oar::io::svg_valid_color : oar::io::svg_train_color));
        REQUIRE(line.points.size() == 5);
        for (std::size_t i = 1; i < 5; ++i) {
            CHECK(line.points[i].first > line.points[i - 1].first);  // epochs left to right
            // SVG y grows downwards: a larger value is drawn higher, proportionally.
            const double dv = (*ys[c])[i] - (*ys[c])[i - 1], dy = line.points[i].second - line.points[i - 1].second;
            CHECK(dv * dy < 0);
        }
        // Linear mapping: equal value steps are equal pixel steps (accuracy rises linearly).
        if (c >= 2) CHECK(std::abs((line.points[2].second - line.points[1].second) - (line.points[1].second - line.points[0].second)) < 0.02);
        for (const auto& [x, y] : line.points) {
            CHECK(x >= 0);
            CHECK(x <= p.width);
            CHECK(y >= 0);
            CHECK(y <= p.height);
        }
    }
    for (int panel = 0; panel < 2; ++panel) {
        check_round_ticks(p.xticks[panel]);
        check_round_ticks(p.yticks[panel]);
        CHECK(p.xtick_texts[panel].front() == "1");  // whole epochs, no decimals
        CHECK(p.xtick_texts[panel].back() == "5");
    }
    // The y ticks span the data.
    CHECK(p.yticks[0].front() <= 0.1);
    CHECK(p.yticks[0].back() >= 0.5);
    CHECK(p.yticks[1].front() <= 0.9);
    CHECK(p.yticks[1].back() >= 0.972);
}

TEST_CASE("write_training_curves after one epoch draws each value as a marker and whole-number epoch ticks") {
    TempDir dir;
    const std::string path = dir.file("one.svg");
    oar::io::TrainingCurves h;
    h.train_loss = {0.7};
    h.valid_loss = {0.6};
    h.train_accuracy = {0.8};
    h.valid_accuracy = {0.85};
    oar::io::write_training_curves(path, h);
    Parsed p = parse(path);
    INFO(p.output);
    REQUIRE(p.status == 0);
    CHECK(p.curves.empty());  // a polyline of one point would be invisible
    CHECK(p.markers[0] == 2);
    CHECK(p.markers[1] == 2);
    CHECK(p.bad_numbers.empty());
    for (int panel = 0; panel < 2; ++panel) {
        check_round_ticks(p.xticks[panel]);
        for (const auto& t : p.xtick_texts[panel]) CHECK(t.find('.') == std::string::npos);
        check_round_ticks(p.yticks[panel]);
    }
}

TEST_CASE("write_training_curves over 500 epochs draws plain polylines with a handful of round ticks") {
    TempDir dir;
    const std::string path = dir.file("many.svg");
    oar::io::TrainingCurves h;
    h.first_epoch = 11;  // a resumed run
    for (int i = 0; i < 500; ++i) {
        h.train_loss.push_back(3.0 * std::exp(-i / 80.0) + 0.01 * std::sin(i));
        h.train_accuracy.push_back(1.0 - 0.9 * std::exp(-i / 60.0));
    }
    oar::io::write_training_curves(path, h);
    Parsed p = parse(path);
    INFO(p.output);
    REQUIRE(p.status == 0);
    REQUIRE(p.curves.size() == 2);  // no validation: no valid curves
    CHECK(p.curves[0].points.size() == 500);
    CHECK(p.curves[1].points.size() == 500);
    CHECK(p.markers.empty());
    CHECK(p.legends[0] == std::vector<std::string>{"train loss"});
    check_round_ticks(p.xticks[0]);
    CHECK(p.xticks[0].front() <= 11);
    CHECK(p.xticks[0].back() >= 510);
    check_round_ticks(p.yticks[1]);
}

TEST_CASE("render_svg skips NaN, infinite and absurdly large points, breaks the line there and says so in the legend") {
    TempDir dir;
    const std::string path = dir.file("nan.svg");
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    oar::io::Panel panel{"Loss", "loss", {}};
    panel.curves.push_back({"gappy", {1, 2, 3, 4, 5, 6, 7}, {1.0, 0.9, nan, 0.7, 0.6, inf, 0.4}, ""});
    panel.curves.push_back({"huge", {1, 2, 3}, {1.0, 1e308, -1e305}, ""});
    panel.curves.push_back({"x nan", {1, nan, 3}, {0.5, 0.5, 0.5}, ""});
    oar::io::Panel empty{"Nothing", "y", {}};
    empty.curves.push_back({"all nan", {1, 2}, {nan, -inf}, ""});
    oar::io::write_svg(path, "non-finite", {panel, empty});
    Parsed p = parse(path);
    INFO(p.output);
    REQUIRE(p.status == 0);
    CHECK(p.bad_numbers.empty());
    CHECK(!contains(oar_test::read_text(path), "nan\""));
    CHECK(!contains(oar_test::read_text(path), "inf\""));
    // gappy: runs [1,0.9], [0.7,0.6], [0.4] -> two polylines and a lone marker.
    REQUIRE(p.curves.size() == 2);
    CHECK(p.curves[0].points.size() == 2);
    CHECK(p.curves[1].points.size() == 2);
    CHECK(p.markers[0] == 5 + 1 + 2);  // gappy's 5 points, huge's 1, "x nan"'s 2
    CHECK(p.legends[0] == std::vector<std::string>{"gappy (2 non-finite skipped)", "huge (2 non-finite skipped)",
                                                   "x nan (1 non-finite skipped)"});
    CHECK(p.legends[1] == std::vector<std::string>{"all nan (2 non-finite skipped)"});
    CHECK(p.nodata == std::vector<int>{1});
    CHECK(p.markers[1] == 0);
    check_round_ticks(p.yticks[0]);
    CHECK(p.yticks[0].back() < 10);  // 1e308 did not stretch the axis
    check_round_ticks(p.yticks[1]);
}

TEST_CASE("render_svg escapes markup and replaces control characters and invalid UTF-8, so the document stays well-formed") {
    TempDir dir;
    const std::string path = dir.file("esc.svg");
    const std::string title = "a<b & c>d \"q\" 'a' \x01 \xc3\xa4 \xff\xfe end \xe2\x82";  // cut 3-byte sequence
    oar::io::Panel panel{"</text><script>x</script>", "y & \"z\"", {}};
    panel.curves.push_back({"<&>\"'", {1, 2}, {1, 2}, ""});
    panel.curves.push_back({"surrogate \xed\xa0\x80 overlong \xc0\xaf", {1, 2}, {2, 1}, ""});
    oar::io::write_svg(path, title, {panel});
    Parsed p = parse(path);
    INFO(p.output);
    REQUIRE(p.status == 0);
    const std::string fffd = "\xef\xbf\xbd";
    CHECK(p.title == "a<b & c>d \"q\" 'a' " + fffd + " \xc3\xa4 " + fffd + fffd + " end " + fffd + fffd);
    REQUIRE(p.panels.size() == 1);
    CHECK(p.panels[0] == "</text><script>x</script>");
    CHECK(p.legends[0] == std::vector<std::string>{"<&>\"'", "surrogate " + fffd + fffd + fffd + " overlong " + fffd + fffd});
    CHECK(!contains(oar_test::read_text(path), "<script>"));
}

TEST_CASE("write_svg replaces the previous file atomically and leaves no temporary file behind") {
    TempDir dir;
    const std::string path = dir.file("sub/curves.svg");  // the folder is created
    auto h = five_epochs();
    oar::io::write_training_curves(path, h, "first");
    CHECK(parse(path).title == "first");
    h.train_loss.push_back(0.05);
    oar::io::write_training_curves(path, h, "second");
    Parsed p = parse(path);
    CHECK(p.title == "second");
    REQUIRE(p.curves.size() == 4);
    CHECK(p.curves[0].points.size() == 6);
    int entries = 0;
    for (const auto& e : fs::directory_iterator(dir.path / "sub")) {
        ++entries;
        CHECK(e.path().filename() == "curves.svg");
    }
    CHECK(entries == 1);
}

TEST_CASE("write_svg refuses mismatched curves before touching the file, and names paths it cannot write") {
    TempDir dir;
    const std::string path = dir.file("keep.svg");
    oar::io::write_training_curves(path, five_epochs(), "kept");
    oar::io::Panel bad{"Loss", "loss", {}};
    bad.curves.push_back({"short", {1, 2, 3}, {1, 2}, ""});
    std::string msg = oar_test::message_of<oar::value_error>([&] { oar::io::write_svg(path, "t", {bad}); });
    CHECK(contains(msg, "\"short\""));
    CHECK(contains(msg, "3 x values but 2 y values"));
    CHECK(parse(path).title == "kept");
    // A folder where the file should be: the rename fails, the temporary file is removed.
    fs::create_directory(dir.path / "is_a_dir.svg");
    fs::create_directory(dir.path / "is_a_dir.svg" / "x");  // non-empty: rename() cannot replace it
    msg = oar_test::message_of<oar::io_error>([&] { oar::io::write_training_curves(dir.file("is_a_dir.svg"), five_epochs()); });
    CHECK(contains(msg, "is_a_dir.svg"));
    int stray = 0;
    for (const auto& e : fs::directory_iterator(dir.path)) stray += contains(e.path().filename().string(), ".tmp.");
    CHECK(stray == 0);
    {
        std::ofstream blocker(dir.file("file"));
        blocker << "x";
    }
    msg = oar_test::message_of<oar::io_error>([&] { oar::io::write_training_curves(dir.file("file") + "/c.svg", five_epochs()); });
    CHECK(contains(msg, "file/c.svg"));
}

TEST_CASE("headless Chromium renders the curves SVG with both curve colours in both panels") {
    if (sizeof(OAR_CHROMIUM) == 1) {  // "": CMake found no chromium
        oar_test::skip("no chromium or chromium-browser was found at configure time: the SVG is not rendered "
                       "(run scripts/test.sh, or scripts/setup.sh then reconfigure: it installs chromium)");
        return;
    }
    TempDir dir;
    const std::string svg = dir.file("curves.svg");
    const std::string png = dir.file("curves.png");
    oar::io::write_training_curves(svg, five_epochs(), "Chromium check");
    const auto run = oar_test::run_command("cd '" + dir.path.string() + "' && HOME='" + dir.path.string() + "' " +
                                           std::string(OAR_CHROMIUM) +
                                           " --headless --no-sandbox --disable-gpu --hide-scrollbars --screenshot='" + png +
                                           "' --window-size=800,600 'file://" + svg + "' 2>&1");
    INFO(run.output);
    REQUIRE(fs::exists(png));
    const auto check = oar_test::run_command(std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR + "/tests/io/check_png.py '" + png +
                                             "' 1f77b4 ff7f0e d62728 2>&1");
    INFO(check.output);
    REQUIRE(check.status == 0);
    std::istringstream in(check.output);
    std::string kind, color;
    int w = 0, hgt = 0;
    long nonwhite = 0;
    std::map<std::string, std::pair<long, long>> counts;
    while (in >> kind) {
        if (kind == "size") in >> w >> hgt;
        else if (kind == "nonwhite") in >> nonwhite;
        else if (kind == "color") in >> color >> counts[color].first >> counts[color].second;
    }
    CHECK(w == 800);
    CHECK(hgt == 600);
    CHECK(nonwhite > 5000);
    CHECK(nonwhite < 800 * 600 / 4);  // a white page with a plot, not a black or error page
    // Both curves, in both panels: many pixels of each colour in each half of the picture.
    CHECK(counts["1f77b4"].first > 300);
    CHECK(counts["1f77b4"].second > 300);
    CHECK(counts["ff7f0e"].first > 300);
    CHECK(counts["ff7f0e"].second > 300);
    // A colour the plot does not use stays (nearly) absent: the counting is not fooled by grey.
    CHECK(counts["d62728"].first + counts["d62728"].second < 20);
}

TEST_CASE("write_svg on a full disk throws io_error, keeps the previous file, removes its temporary file and leaks no handle") {
    TempDir dir;
    const std::string path = dir.file("curves.svg");
    oar::io::write_training_curves(path, five_epochs(), "before");
    const std::string before = oar_test::read_text(path);
    const int fds = open_fds();
    std::string msg;
    {
        FileSizeLimit limit(1000);  // the document is several KB
        msg = oar_test::message_of<oar::io_error>([&] { oar::io::write_training_curves(path, five_epochs(), "after"); });
    }
    CHECK(contains(msg, "curves.svg"));
    CHECK(oar_test::read_text(path) == before);
    int entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++entries;
    CHECK(entries == 1);
    CHECK(open_fds() == fds);
}

TEST_CASE("write_svg lays the panels out in the requested size and refuses sizes it cannot draw in") {
    TempDir dir;
    const std::string path = dir.file("big.svg");
    const auto panels = oar::io::training_panels(five_epochs());
    oar::io::write_svg(path, "big", panels, 1200, 800);
    Parsed p = parse(path);
    INFO(p.output);
    REQUIRE(p.status == 0);
    CHECK(p.width == 1200);
    CHECK(p.height == 800);
    REQUIRE(p.curves.size() == 4);
    for (const auto& c : p.curves)
        for (const auto& [x, y] : c.points) {
            CHECK(x >= (c.panel == 0 ? 0.0 : 600.0));  // each panel in its half
            CHECK(x <= (c.panel == 0 ? 600.0 : 1200.0));
            CHECK(y <= 800);
        }
    CHECK(p.curves[0].points.back().first > 450);  // the plot uses the width it was given
    const std::string msg = oar_test::message_of<oar::value_error>([&] { oar::io::write_svg(dir.file("tiny.svg"), "t", panels, 10, 10); });
    CHECK(contains(msg, "10x10"));
    CHECK(!fs::exists(dir.file("tiny.svg")));
}
