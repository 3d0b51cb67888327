// Tests of include/oar/io/tensorboard.hpp: event files written here are read back by TensorBoard's
// own EventAccumulator and by an independent TFRecord walk (bitwise CRC-32C in python + the
// protobuf runtime's Event parser), both in tests/io/read_tfevents.py run with OAR_PYTHON.
#include <doctest/doctest.h>  // TEST_CASE, CHECK, REQUIRE

#include <cmath>       // std::isnan, std::isinf
#include <csignal>       // std::signal(SIGXFSZ, SIG_IGN): a full disk without the signal
#include <sys/resource.h>  // ::setrlimit(RLIMIT_FSIZE): a full disk for the write-error tests
#include <cstdint>     // std::int64_t
#include <cstdlib>     // std::strtod: hexadecimal floats
#include <filesystem>  // std::filesystem: listing and corrupting files
#include <fstream>     // std::fstream: flipping a byte
#include <map>         // std::map: events by (tag, step)
#include <set>         // std::set: distinct file names
#include <sstream>     // std::istringstream: parsing the reader's lines
#include <string>      // std::string
#include <tuple>       // std::tuple
#include <utility>     // std::pair
#include <vector>      // std::vector

#include <oar/io/tensorboard.hpp>  // under test

#include "support/faults.hpp"    // oar_test::open_fds, FileSizeLimit: the write-error paths
#include "support/errors.hpp"    // oar_test::message_of, contains
#include "support/process.hpp"   // oar_test::run_command: the python readers
#include "support/python.hpp"   // oar_test::skip_without_python: no test venv
#include "support/temp_dir.hpp"  // oar_test::TempDir

namespace fs = std::filesystem;
using oar_test::contains;
using oar_test::TempDir;

namespace {

using oar_test::FileSizeLimit;
using oar_test::open_fds;

struct Seen {
    std::int64_t step = 0;
    double wall_time = 0;
    double value = 0;
};

/// What read_tfevents.py printed, split by the reader that saw it.
struct Readback {
    std::map<std::string, std::vector<Seen>> acc;  // EventAccumulator, by tag
    std::map<std::string, std::vector<Seen>> raw;  // the TFRecord walk, by tag
    std::vector<std::pair<double, std::string>> versions;
    std::vector<std::string> files, problems;  // problems: crc_error / truncated / other lines
    std::string output;
    int status = -1;
};

double hex_double(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

Readback read_back(const fs::path& target) {
    const auto run = oar_test::run_command("PYTHONIOENCODING=utf-8 " + std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR +
                                           "/tests/io/read_tfevents.py '" + target.string() + "' 2>&1");
    Readback r;
    r.output = run.output;
    r.status = run.status;
    std::istringstream lines(run.output);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream in(line);
        std::string kind;
        in >> kind;
        if (kind == "acc" || kind == "raw") {
            Seen s;
            std::string wall, value, tag;
            in >> s.step >> wall >> value;
            std::getline(in >> std::ws, tag);
            s.wall_time = hex_double(wall);
            s.value = hex_double(value);
            (kind == "acc" ? r.acc : r.raw)[tag].push_back(s);
        } else if (kind == "version") {
            std::string wall, v;
            in >> wall >> v;
            r.versions.emplace_back(hex_double(wall), v);
        } else if (kind == "file") {
            std::string name;
            in >> name;
            r.files.push_back(name);
        } else if (kind == "crc_error" || kind == "truncated" || kind == "other") {
            r.problems.push_back(line);
        }
    }
    return r;
}

/// A clock that starts at `t0` and advances 0.25 s per reading: exact in binary, distinct per event.
oar::io::TensorBoardWriter::Clock stepping_clock(double t0) {
    return [t = t0]() mutable {
        const double now = t;
        t += 0.25;
        return now;
    };
}

std::vector<fs::path> event_files(const fs::path& dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find("tfevents") != std::string::npos) out.push_back(e.path());
    return out;
}

}  // namespace

TEST_CASE("scalars written by TensorBoardWriter read back identically through EventAccumulator and a raw TFRecord walk") {
    TempDir dir;
    const fs::path logs = dir.path / "run1";  // created by the writer
    // Expected values, as the float32 TensorBoard stores.
    std::map<std::string, std::vector<std::tuple<std::int64_t, double, float>>> expected;
    {
        oar::io::TensorBoardWriter tb(logs, stepping_clock(1.7e9));
        for (std::int64_t step = 0; step < 50; ++step) {
            const double loss = 2.302585092994046 * std::exp(-0.05 * static_cast<double>(step)) + 1e-9 * step;
            const double acc = 0.1 + 0.0171717171717 * static_cast<double>(step);
            const double wall = 1.7e9 + 0.25 * static_cast<double>(1 + 2 * step);  // the clock read once per scalar
            tb.add_scalar("train/loss", loss, step);
            tb.add_scalar("train/accuracy", acc, step);
            expected["train/loss"].emplace_back(step, wall, static_cast<float>(loss));
            expected["train/accuracy"].emplace_back(step, wall + 0.25, static_cast<float>(acc));
        }
        for (std::int64_t epoch = 1; epoch <= 3; ++epoch) {
            const double wall = 1.8e9 + 0.5 * static_cast<double>(epoch);
            tb.add_scalar("valid/loss", 1.0 / static_cast<double>(epoch), epoch * 1000, wall);
            expected["valid/loss"].emplace_back(epoch * 1000, wall, static_cast<float>(1.0 / static_cast<double>(epoch)));
        }
    }
    const auto files = event_files(logs);
    REQUIRE(files.size() == 1);
    if (oar_test::skip_without_python("tensorboard")) return;
    const Readback r = read_back(logs);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.problems.empty());
    REQUIRE(r.versions.size() == 1);
    CHECK(r.versions[0].first == 1.7e9);  // the first clock reading
    CHECK(r.versions[0].second == "brain.Event:2");
    for (const auto* seen : {&r.acc, &r.raw}) {
        REQUIRE(seen->size() == expected.size());
        for (const auto& [tag, events] : expected) {
            REQUIRE(seen->count(tag) == 1);
            const auto& got = seen->at(tag);
            REQUIRE(got.size() == events.size());
            for (std::size_t i = 0; i < events.size(); ++i) {
                CHECK(got[i].step == std::get<0>(events[i]));
                CHECK(got[i].wall_time == std::get<1>(events[i]));
                CHECK(got[i].value == static_cast<double>(std::get<2>(events[i])));  // float32-equal
            }
        }
    }
}

TEST_CASE("TensorBoardWriter names its file events.out.tfevents.<unix time>.<hostname>... and two writers in one folder never share a file") {
    TempDir dir;
    {
        oar::io::TensorBoardWriter a(dir.path, [] { return 1700000123.75; });
        oar::io::TensorBoardWriter b(dir.path, [] { return 1700000123.75; });
        oar::io::TensorBoardWriter c(dir.path);
        CHECK(a.path() != b.path());
        const std::string name = a.path().filename().string();
        CHECK(name.rfind("events.out.tfevents.1700000123.", 0) == 0);
        CHECK(a.path().parent_path() == dir.path);
        a.add_scalar("x", 1.0, 1);
        b.add_scalar("x", 2.0, 2);
        c.add_scalar("y", 3.0, 3);
    }
    const auto files = event_files(dir.path);
    CHECK(files.size() == 3);
    if (oar_test::skip_without_python("tensorboard")) return;
    const Readback r = read_back(dir.path);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.files.size() == 3);
    CHECK(r.problems.empty());
    CHECK(r.versions.size() == 3);
    REQUIRE(r.raw.count("x") == 1);
    CHECK(r.raw.at("x").size() == 2);
    REQUIRE(r.acc.count("y") == 1);
    CHECK(r.acc.at("y").size() == 1);
    CHECK(r.acc.at("y")[0].value == 3.0);
}

TEST_CASE("TensorBoardWriter encodes extreme steps, long and non-ASCII tags, NaN and infinities exactly") {
    TempDir dir;
    const std::string long_tag = "layer/" + std::string(300, 'w');         // 2-byte length varint
    const std::string huge_tag = "h/" + std::string(20000, 'q');           // 3-byte length varint
    const std::string utf8_tag = "valid/Genauigkeit \xc3\xa4\xe2\x9c\x93";  // spaces and UTF-8 survive
    {
        oar::io::TensorBoardWriter tb(dir.path, [] { return 1.5e9; });
        tb.add_scalar("steps", 1.0, -1);
        tb.add_scalar("steps", 2.0, std::int64_t(1) << 62);
        tb.add_scalar("steps", 3.0, 0);
        tb.add_scalar(long_tag, 0.5, 1);
        tb.add_scalar(huge_tag, 0.25, 1);
        tb.add_scalar(utf8_tag, 0.875, 7);
        tb.add_scalar("odd", std::nan(""), 1);
        tb.add_scalar("odd", HUGE_VAL, 2);
        tb.add_scalar("odd", -HUGE_VAL, 3);
        tb.add_scalar("odd", 1e300, 4);  // beyond float: stored as float infinity
    }
    if (oar_test::skip_without_python("tensorboard")) return;
    const Readback r = read_back(dir.path);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.problems.empty());
    REQUIRE(r.raw.count("steps") == 1);
    const auto& steps = r.raw.at("steps");
    REQUIRE(steps.size() == 3);
    CHECK(steps[0].step == -1);
    CHECK(steps[1].step == (std::int64_t(1) << 62));
    CHECK(steps[2].step == 0);
    REQUIRE(r.raw.count(long_tag) == 1);
    CHECK(r.raw.at(long_tag)[0].value == 0.5);
    REQUIRE(r.raw.count(huge_tag) == 1);
    CHECK(r.raw.at(huge_tag)[0].value == 0.25);
    REQUIRE(r.acc.count(utf8_tag) == 1);
    CHECK(r.acc.at(utf8_tag)[0].value == 0.875);
    CHECK(r.acc.at(utf8_tag)[0].step == 7);
    REQUIRE(r.raw.count("odd") == 1);
    const auto& odd = r.raw.at("odd");
    REQUIRE(odd.size() == 4);
    CHECK(std::isnan(odd[0].value));
    CHECK((std::isinf(odd[1].value) && odd[1].value > 0));
    CHECK((std::isinf(odd[2].value) && odd[2].value < 0));
    CHECK((std::isinf(odd[3].value) && odd[3].value > 0));
}

TEST_CASE("after flush() a running writer's scalars are readable by TensorBoard") {
    TempDir dir;
    oar::io::TensorBoardWriter tb(dir.path);
    for (int i = 0; i < 10; ++i) tb.add_scalar("train/loss", 1.0 / (1 + i), i);
    tb.flush();
    if (oar_test::skip_without_python("tensorboard")) return;
    const Readback r = read_back(tb.path());
    INFO(r.output);
    REQUIRE(r.status == 0);
    REQUIRE(r.acc.count("train/loss") == 1);
    CHECK(r.acc.at("train/loss").size() == 10);
    CHECK(r.acc.at("train/loss")[9].value == static_cast<double>(0.1f));
}

TEST_CASE("a flipped byte in a written event file fails the readers' CRC checks, so the checks above are real") {
    TempDir dir;
    fs::path file;
    {
        oar::io::TensorBoardWriter tb(dir.path, [] { return 1.6e9; });
        tb.add_scalar("a", 1.0, 1);
        tb.add_scalar("a", 2.0, 2);
        file = tb.path();
    }
    const auto size = fs::file_size(file);
    {
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(static_cast<std::streamoff>(size - 6));  // inside the last record's payload (its float)
        char c = 0;
        f.get(c);
        f.seekp(static_cast<std::streamoff>(size - 6));
        f.put(static_cast<char>(c ^ 0x40));
    }
    if (oar_test::skip_without_python("tensorboard")) return;
    const Readback r = read_back(file);
    INFO(r.output);
    REQUIRE(r.status == 0);
    REQUIRE(r.problems.size() == 1);
    CHECK(contains(r.problems[0], "crc_error 2 payload"));
    REQUIRE(r.acc.count("a") == 1);
    CHECK(r.acc.at("a").size() == 1);  // TensorBoard drops the corrupt record
}

TEST_CASE("TensorBoardWriter refuses an empty tag and a folder it cannot create, naming the path") {
    TempDir dir;
    {
        std::ofstream blocker(dir.file("not_a_dir"));
        blocker << "x";
    }
    const std::string msg = oar_test::message_of<oar::io_error>([&] { oar::io::TensorBoardWriter tb(dir.path / "not_a_dir" / "logs"); });
    CHECK(contains(msg, "not_a_dir"));
    CHECK(contains(msg, "oar:"));
    oar::io::TensorBoardWriter tb(dir.path);
    const std::string tag_msg = oar_test::message_of<oar::value_error>([&] { tb.add_scalar("", 1.0, 5); });
    CHECK(contains(tag_msg, "empty TensorBoard tag"));
    CHECK(contains(tag_msg, "step 5"));
}

TEST_CASE("TensorBoardWriter reports a failed write (a full disk) as io_error naming the file, and leaks no file handle") {
    TempDir dir;
    const int fds = open_fds();
    std::string msg;
    {
        oar::io::TensorBoardWriter tb(dir.path);
        for (int i = 0; i < 40; ++i) tb.add_scalar("train/loss", 1.0 / (1 + i), i);  // ~2 KB, still buffered
        FileSizeLimit limit(256);
        msg = oar_test::message_of<oar::io_error>([&] { tb.flush(); });
        CHECK(contains(msg, tb.path().filename().string()));
        CHECK(contains(msg, "cannot write"));
    }
    CHECK(open_fds() == fds);
}
