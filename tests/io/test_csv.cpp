// Tests of include/oar/io/csv.hpp: logs written here are read back with python's csv module
// (tests/io/read_csv.py, run with OAR_PYTHON), which also parses every number with float().
#include <doctest/doctest.h>  // TEST_CASE, CHECK, REQUIRE

#include <cmath>       // std::nextafter, std::isnan
#include <csignal>       // std::signal(SIGXFSZ, SIG_IGN): a full disk without the signal
#include <sys/resource.h>  // ::setrlimit(RLIMIT_FSIZE): a full disk for the write-error tests
#include <cstdint>     // std::int64_t, std::uint64_t
#include <cstdlib>     // std::strtod, std::_Exit
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ofstream: hand-made existing logs
#include <limits>      // std::numeric_limits
#include <optional>    // std::optional: a field's number
#include <sstream>     // std::istringstream
#include <string>      // std::string
#include <sys/wait.h>  // ::waitpid
#include <unistd.h>    // ::fork
#include <vector>      // std::vector

#include <oar/io/csv.hpp>  // under test

#include "support/faults.hpp"    // oar_test::open_fds, FileSizeLimit: the write-error paths
#include "support/errors.hpp"    // oar_test::message_of, contains
#include "support/files.hpp"     // oar_test::read_raw
#include "support/process.hpp"   // oar_test::run_command
#include "support/temp_dir.hpp"  // oar_test::TempDir

namespace fs = std::filesystem;
using oar_test::contains;
using oar_test::TempDir;

namespace {

using oar_test::FileSizeLimit;
using oar_test::open_fds;

struct Field {
    std::string text;
    std::optional<double> number;  // python's float(text), when it parses
};
using Record = std::vector<Field>;

std::string csv_unhex(const std::string& h) {
    std::string out;
    if (h == "-") return out;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
    return out;
}

/// The records of `path` as python's csv module reads them.
std::vector<Record> python_read(const std::string& path) {
    const auto run = oar_test::run_command(std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR + "/tests/io/read_csv.py '" + path + "' 2>&1");
    INFO(run.output);
    REQUIRE(run.status == 0);
    std::vector<Record> records;
    std::istringstream lines(run.output);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream in(line);
        std::string kind, item;
        in >> kind;
        REQUIRE(kind == "row");
        Record r;
        while (in >> item) {
            Field f;
            const auto colon = item.find(':');
            f.text = csv_unhex(item.substr(0, colon));
            if (colon != std::string::npos) f.number = std::strtod(item.substr(colon + 1).c_str(), nullptr);
            r.push_back(f);
        }
        records.push_back(r);
    }
    return records;
}

std::vector<std::string> texts(const Record& r) {
    std::vector<std::string> out;
    for (const auto& f : r) out.push_back(f.text);
    return out;
}

}  // namespace

TEST_CASE("CsvWriter rows read back through python's csv module with every number round-tripping exactly") {
    TempDir dir;
    const std::string path = dir.file("log.csv");
    std::vector<double> doubles;
    std::vector<float> floats;
    {
        oar::io::CsvWriter csv(path, {"epoch", "step", "loss", "acc", "lr"});
        double d = 2.302585092994046;
        float f = 0.1f;
        for (int epoch = 0; epoch < 40; ++epoch) {
            d = d * 0.93 + 1e-17 * epoch;  // full 17-digit doubles
            f = std::nextafter(f * 1.37f, 1.0f);
            const std::uint64_t step = (std::uint64_t(1) << 63) + static_cast<std::uint64_t>(epoch);  // beyond int64
            csv.row(epoch - 3, step, d, f, 1e-300 * (epoch + 1));
            doubles.push_back(d);
            floats.push_back(f);
        }
    }
    const auto records = python_read(path);
    REQUIRE(records.size() == 41);
    CHECK(texts(records[0]) == std::vector<std::string>{"epoch", "step", "loss", "acc", "lr"});
    for (int epoch = 0; epoch < 40; ++epoch) {
        const Record& r = records[static_cast<std::size_t>(epoch) + 1];
        REQUIRE(r.size() == 5);
        CHECK(r[0].text == std::to_string(epoch - 3));
        CHECK(r[1].text == std::to_string((std::uint64_t(1) << 63) + static_cast<std::uint64_t>(epoch)));
        REQUIRE(r[2].number);
        CHECK(*r[2].number == doubles[static_cast<std::size_t>(epoch)]);
        REQUIRE(r[3].number);
        CHECK(static_cast<float>(*r[3].number) == floats[static_cast<std::size_t>(epoch)]);
        CHECK(r[3].text.size() <= 15);  // shortest float text, not 17 digits of its double
        REQUIRE(r[4].number);
        CHECK(*r[4].number == 1e-300 * (epoch + 1));
    }
}

TEST_CASE("CsvWriter quotes text with commas, quotes and line breaks per RFC 4180, and python reads it back") {
    TempDir dir;
    const std::string path = dir.file("text.csv");
    const std::vector<std::string> nasty = {"plain", "a,b", "say \"hi\"", "two\nlines", "cr\r\nlf", "", " padded ",
                                            "\xc3\xa4\xe2\x9c\x93 utf-8", "\"", ",,,"};
    {
        oar::io::CsvWriter csv(path, {"name, with comma", "value \"q\""});
        for (std::size_t i = 0; i < nasty.size(); ++i) csv.row(nasty[i], static_cast<int>(i));
        csv.row(std::string_view("view"), "c-string");
    }
    const auto records = python_read(path);
    REQUIRE(records.size() == nasty.size() + 2);
    CHECK(texts(records[0]) == std::vector<std::string>{"name, with comma", "value \"q\""});
    for (std::size_t i = 0; i < nasty.size(); ++i) CHECK(texts(records[i + 1]) == std::vector<std::string>{nasty[i], std::to_string(i)});
    CHECK(texts(records.back()) == std::vector<std::string>{"view", "c-string"});
    CHECK(contains(oar_test::read_text(path), "\"say \"\"hi\"\"\""));  // inner quotes doubled
    CHECK(contains(oar_test::read_text(path), "\nplain,0\n"));         // plain text stays unquoted
}

TEST_CASE("CsvWriter writes NaN and infinities as nan, inf and -inf, which python's float() reads") {
    TempDir dir;
    const std::string path = dir.file("odd.csv");
    {
        oar::io::CsvWriter csv(path, {"a", "b", "c", "d"});
        csv.row(std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                -std::numeric_limits<float>::infinity(), -0.0);
    }
    const auto records = python_read(path);
    REQUIRE(records.size() == 2);
    REQUIRE(records[1].size() == 4);
    CHECK(texts(records[1]) == std::vector<std::string>{"nan", "inf", "-inf", "-0"});
    CHECK(std::isnan(*records[1][0].number));
    CHECK(*records[1][1].number == std::numeric_limits<double>::infinity());
    CHECK(*records[1][2].number == -std::numeric_limits<double>::infinity());
    CHECK(std::signbit(*records[1][3].number));
}

TEST_CASE("CsvWriter::row_fields writes rows whose length is known at run time") {
    TempDir dir;
    const std::string path = dir.file("dyn.csv");
    const std::vector<std::string> cols = {"epoch", "loss", "optimizer"};
    {
        oar::io::CsvWriter csv(path, cols);
        std::vector<oar::io::CsvField> fields = {1, 0.5, "adam"};
        csv.row_fields(fields);
        csv.row_fields({2, 0.25f, std::string("sgd")});
        std::vector<oar::io::CsvField> built;  // from temporaries that are gone when the row is written
        built.emplace_back(3u);
        built.emplace_back(-1.5);
        built.emplace_back(std::string(100, 'x') + ",y");
        csv.row_fields(built);
    }
    const auto records = python_read(path);
    REQUIRE(records.size() == 4);
    CHECK(texts(records[1]) == std::vector<std::string>{"1", "0.5", "adam"});
    CHECK(texts(records[2]) == std::vector<std::string>{"2", "0.25", "sgd"});
    CHECK(texts(records[3]) == std::vector<std::string>{"3", "-1.5", std::string(100, 'x') + ",y"});
}

TEST_CASE("each CsvWriter row is on disk when row() returns: a process that dies without cleanup loses nothing written") {
    TempDir dir;
    const std::string path = dir.file("crash.csv");
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        oar::io::CsvWriter csv(path, {"epoch", "loss"});
        for (int i = 0; i < 5; ++i) csv.row(i, 1.0 / (i + 1));
        std::_Exit(0);  // no destructors, no stdio flush at exit: like a crash right after a row
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    const auto records = python_read(path);
    REQUIRE(records.size() == 6);
    CHECK(*records[5][1].number == 1.0 / 5);
}

TEST_CASE("CsvWriter in append mode continues a log with the same header without repeating it") {
    TempDir dir;
    const std::string path = dir.file("sub/resume.csv");  // the folder is created
    {
        oar::io::CsvWriter csv(path, {"epoch", "loss"}, oar::io::CsvMode::append);  // missing file: new log
        csv.row(1, 0.5);
        csv.row(2, 0.25);
    }
    {
        oar::io::CsvWriter csv(path, {"epoch", "loss"}, oar::io::CsvMode::append);
        csv.row(3, 0.125);
    }
    const auto records = python_read(path);
    REQUIRE(records.size() == 4);
    CHECK(texts(records[0]) == std::vector<std::string>{"epoch", "loss"});
    CHECK(texts(records[3]) == std::vector<std::string>{"3", "0.125"});
    {
        oar::io::CsvWriter csv(path, {"epoch", "loss"});  // truncate mode starts over
        csv.row(9, 9);
    }
    CHECK(python_read(path).size() == 2);
}

TEST_CASE("CsvWriter in append mode drops a last row cut short by a crash, even one inside a quoted field") {
    TempDir dir;
    const std::string path = dir.file("cut.csv");
    {
        std::ofstream f(path, std::ios::binary);
        f << "epoch,\"note, quoted\"\n1,\"multi\nline\"\n2,\"cut in the mid\ndle";  // no closing quote, no LF
    }
    {
        oar::io::CsvWriter csv(path, {"epoch", "note, quoted"}, oar::io::CsvMode::append);
        csv.row(2, "again");
    }
    const auto records = python_read(path);
    REQUIRE(records.size() == 3);
    CHECK(texts(records[1]) == std::vector<std::string>{"1", "multi\nline"});
    CHECK(texts(records[2]) == std::vector<std::string>{"2", "again"});
}

TEST_CASE("CsvWriter in append mode writes the header into an empty file or one cut inside its header") {
    TempDir dir;
    for (const char* existing : {"", "epo"}) {
        const std::string path = dir.file("h.csv");
        {
            std::ofstream f(path, std::ios::binary);
            f << existing;
        }
        {
            oar::io::CsvWriter csv(path, {"epoch", "loss"}, oar::io::CsvMode::append);
            csv.row(1, 2);
        }
        CHECK(oar_test::read_text(path) == "epoch,loss\n1,2\n");
    }
}

TEST_CASE("CsvWriter in append mode refuses a file with another header, naming the file and both headers") {
    TempDir dir;
    const std::string path = dir.file("other.csv");
    {
        oar::io::CsvWriter csv(path, {"epoch", "loss", "acc"});
        csv.row(1, 0.5, 0.9);
    }
    const std::string before = oar_test::read_text(path);
    const std::string msg = oar_test::message_of<oar::format_error>(
        [&] { oar::io::CsvWriter csv(path, {"epoch", "loss", "val_acc"}, oar::io::CsvMode::append); });
    CHECK(contains(msg, "oar:"));
    CHECK(contains(msg, path));
    CHECK(contains(msg, "epoch,loss,acc"));
    CHECK(contains(msg, "epoch,loss,val_acc"));
    CHECK(oar_test::read_text(path) == before);  // untouched
}

TEST_CASE("CsvWriter refuses rows of the wrong length, no columns, repeated columns and folders it cannot create") {
    TempDir dir;
    oar::io::CsvWriter csv(dir.file("n.csv"), {"a", "b"});
    std::string msg = oar_test::message_of<oar::value_error>([&] { csv.row(1, 2, 3); });
    CHECK(contains(msg, "n.csv"));
    CHECK(contains(msg, "3 values for 2 columns"));
    msg = oar_test::message_of<oar::value_error>([&] { csv.row_fields({1}); });
    CHECK(contains(msg, "1 values for 2 columns"));
    msg = oar_test::message_of<oar::value_error>([&] { oar::io::CsvWriter c(dir.file("e.csv"), {}); });
    CHECK(contains(msg, "e.csv"));
    msg = oar_test::message_of<oar::value_error>([&] { oar::io::CsvWriter c(dir.file("d.csv"), {"x", "y", "x"}); });
    CHECK(contains(msg, "\"x\" appears twice"));
    {
        std::ofstream blocker(dir.file("file"));
        blocker << "x";
    }
    msg = oar_test::message_of<oar::io_error>([&] { oar::io::CsvWriter c(dir.file("file") + "/log.csv", {"a"}); });
    CHECK(contains(msg, "file/log.csv"));
    csv.row(1, 2);  // still usable after refused rows
    CHECK(oar_test::read_text(dir.file("n.csv")) == "a,b\n1,2\n");
}

TEST_CASE("CsvWriter reports a failed write (a full disk) as io_error naming the file, and leaks no file handle on any error") {
    TempDir dir;
    const std::string path = dir.file("full.csv");
    const int fds = open_fds();
    {
        oar::io::CsvWriter csv(path, {"epoch", "note"});
        csv.row(1, "short");
        std::string msg;
        {
            FileSizeLimit limit(64);
            msg = oar_test::message_of<oar::io_error>([&] { csv.row(2, std::string(500, 'n')); });
        }
        CHECK(contains(msg, "full.csv"));
        CHECK(contains(msg, "cannot write"));
    }
    // The refused append (header mismatch) closes the file it read.
    oar_test::message_of<oar::format_error>([&] { oar::io::CsvWriter c(path, {"other"}, oar::io::CsvMode::append); });
    CHECK(open_fds() == fds);
}
