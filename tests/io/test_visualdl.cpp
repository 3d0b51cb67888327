// Tests of include/oar/io/visualdl.hpp: record files written here are read back by VisualDL's own
// LogReader (tests/io/read_visualdl.py run with OAR_PYTHON); skipped when visualdl is missing.
#include <doctest/doctest.h>  // TEST_CASE, CHECK, REQUIRE

#include <cstdint>     // std::int64_t
#include <cstdlib>     // std::strtod: hexadecimal floats
#include <filesystem>  // std::filesystem: listing files
#include <fstream>     // std::ofstream: a file where a folder should be
#include <map>         // std::map: values by tag
#include <set>         // std::set: distinct file names
#include <sstream>     // std::istringstream: parsing the reader's lines
#include <string>      // std::string
#include <tuple>       // std::tuple
#include <vector>      // std::vector

#include <oar/io/visualdl.hpp>  // under test

#include "support/errors.hpp"    // oar_test::contains
#include "support/process.hpp"   // oar_test::run_command: the python reader
#include "support/skip.hpp"      // oar_test::skip
#include "support/temp_dir.hpp"  // oar_test::TempDir

namespace fs = std::filesystem;
using oar_test::TempDir;

namespace {

/// (step, timestamp ms, value) per tag, and the files with VisualDL's validity check, as read back.
struct VdlReadback {
    std::map<std::string, std::vector<std::tuple<std::int64_t, std::int64_t, double>>> scalars;
    std::vector<std::pair<std::string, std::string>> files;
    std::string output;
    int status = -1;
};

VdlReadback vdl_read_back(const fs::path& target) {
    const auto run = oar_test::run_command(std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR +
                                           "/tests/io/read_visualdl.py '" + target.string() + "' 2>&1");
    VdlReadback r;
    r.output = run.output;
    r.status = run.status;
    std::istringstream lines(run.output);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream in(line);
        std::string kind;
        in >> kind;
        if (kind == "scalar") {
            std::int64_t step = 0, ms = 0;
            std::string value, tag;
            in >> step >> ms >> value;
            std::getline(in >> std::ws, tag);
            r.scalars[tag].emplace_back(step, ms, std::strtod(value.c_str(), nullptr));
        } else if (kind == "file") {
            std::string name, valid;
            in >> name >> valid;
            r.files.emplace_back(name, valid);
        }
    }
    return r;
}

constexpr const char* kMissing = "the visualdl package is not in the test venv (scripts/setup.sh installs it)";

}  // namespace

TEST_CASE("VisualDL's LogReader reads back every scalar with its step, wall time and float32 value") {
    TempDir tmp;
    fs::path file;
    {
        std::int64_t ms = 1700000000123;
        oar::io::VisualDLWriter w(tmp.path / "run", [&] { return ms++; });
        file = w.path();
        for (std::int64_t s = 1; s <= 5; ++s) w.add_scalar("train/loss", 2.0 / static_cast<double>(s), s * 10);
        w.add_scalar("eval/acc", 0.1, 1, 1700000009000);
        w.add_scalar("train/lr", 1e-3, 0);
    }
    CHECK(file.filename().string().rfind("vdlrecords.1700000000.log.", 0) == 0);
    VdlReadback r = vdl_read_back(file);
    if (r.status == 3) {
        oar_test::skip(kMissing);
        return;
    }
    INFO(r.output);
    REQUIRE(r.status == 0);
    REQUIRE(r.files.size() == 1);
    CHECK(r.files[0].second == "True");  // the meta-data record VisualDL checks for is first
    REQUIRE(r.scalars["train/loss"].size() == 5);
    for (std::size_t i = 0; i < 5; ++i) {
        const auto [step, ms, v] = r.scalars["train/loss"][i];
        CHECK(step == static_cast<std::int64_t>(10 * (i + 1)));
        CHECK(ms == 1700000000124 + static_cast<std::int64_t>(i));  // the clock's value at each call
        CHECK(v == static_cast<double>(static_cast<float>(2.0 / static_cast<double>(i + 1))));
    }
    REQUIRE(r.scalars["eval/acc"].size() == 1);
    CHECK(r.scalars["eval/acc"][0] == std::tuple<std::int64_t, std::int64_t, double>{1, 1700000009000, static_cast<double>(0.1f)});
    REQUIRE(r.scalars["train/lr"].size() == 1);
    CHECK(std::get<2>(r.scalars["train/lr"][0]) == static_cast<double>(1e-3f));
    CHECK(r.scalars.size() == 3);
}

TEST_CASE("two VisualDL writers in one folder and second write to separate files, both readable") {
    TempDir tmp;
    std::set<std::string> names;
    {
        oar::io::VisualDLWriter a(tmp.path, [] { return std::int64_t{5000}; });
        oar::io::VisualDLWriter b(tmp.path, [] { return std::int64_t{5000}; });
        a.add_scalar("x", 1.0, 1);
        b.add_scalar("x", 2.0, 1);
        names = {a.path().filename().string(), b.path().filename().string()};
    }
    CHECK(names.size() == 2);
    VdlReadback r = vdl_read_back(tmp.path);
    if (r.status == 3) {
        oar_test::skip(kMissing);
        return;
    }
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.files.size() == 2);
    REQUIRE(r.scalars["x"].size() == 2);
    CHECK(std::get<2>(r.scalars["x"][0]) + std::get<2>(r.scalars["x"][1]) == 3.0);
}

TEST_CASE("VisualDL writer refuses an empty tag, a tag with '%', and an uncreatable folder, naming them") {
    TempDir tmp;
    oar::io::VisualDLWriter w(tmp.path);
    CHECK_THROWS_WITH_AS(w.add_scalar("", 1.0, 7), doctest::Contains("empty VisualDL tag at step 7"), oar::value_error);
    CHECK_THROWS_WITH_AS(w.add_scalar("a%b", 1.0, 1), doctest::Contains("tag 'a%b' contains '%'"), oar::value_error);
    {
        std::ofstream(tmp.path / "plain") << "x";
    }
    CHECK_THROWS_WITH_AS(oar::io::VisualDLWriter(tmp.path / "plain" / "sub"),
                         doctest::Contains("cannot create the log directory"), oar::io_error);
}
