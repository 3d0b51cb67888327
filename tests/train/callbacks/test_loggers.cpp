// CSVLogger, TensorBoardLogger, VisualDLLogger and CurvesLogger on a real fit, read back by
// independent readers: python's csv module, TensorBoard's EventAccumulator (tests/io/read_tfevents.py),
// VisualDL's LogReader (tests/io/read_visualdl.py) and python's XML parser, each value compared with
// the History fit returned.
#include <doctest/doctest.h>

#include <oar/train/callbacks/loggers.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <oar/oar.hpp>  // Adam

#include "support/process.hpp"    // oar_test::run_command: the python readers
#include "support/python.hpp"   // oar_test::skip_without_python: no test venv
#include "support/skip.hpp"       // oar_test::skip: visualdl missing
#include "support/temp_dir.hpp"   // oar_test::TempDir
#include "support/toy_model.hpp"  // oar_test::toy_set, ToyNet

namespace fs = std::filesystem;

namespace {

std::vector<std::string> lines(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

std::string python(const std::string& code, const fs::path& file) {
    const auto r = oar_test::run_command(std::string(OAR_PYTHON) + " -c '" + code + "' '" + file.string() + "' 2>&1");
    INFO(r.output);
    REQUIRE(r.status == 0);
    return r.output;
}

/// Epochs [progress.epoch, epochs) of the toy fit with the given loggers, validation every 2nd epoch.
template <class... Cbs>
oar::History fit(oar_test::ToyNet& net, oar::Adam<>& opt, std::size_t epochs, Cbs&... cbs) {
    static const auto train = oar_test::toy_set(60), valid = oar_test::toy_set(20, 3);
    oar::Model model(net);
    model.prepare(opt, oar::CrossEntropyLoss<>{}, {oar::top_k_accuracy(), oar::top_k_accuracy(2)});
    model.set_progress({net.step() / 6, 0, net.step()});  // 6 steps an epoch: where an earlier fit stopped
    return model.fit(train, &valid, {.epochs = epochs, .batch_size = 10, .eval_freq = 2}, cbs...);
}

}  // namespace

TEST_CASE("CSVLogger writes a row per epoch that python's csv reads back to the same values, and appends on resume") {
    oar_test::TempDir tmp;
    const fs::path csv = tmp.path / "logs" / "train.csv";
    oar_test::ToyNet net(2);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::CSVLogger first(csv);
    const auto h1 = fit(net, opt, 3, first);
    oar::CSVLogger second(csv);  // a resumed run: the same file goes on
    const auto h2 = fit(net, opt, 5, second);
    std::vector<oar::Logs> all = h1.epochs;
    all.insert(all.end(), h2.epochs.begin(), h2.epochs.end());
    REQUIRE(all.size() == 5);

    const std::string out = python(
        "import csv, sys\n"
        "rows = list(csv.DictReader(open(sys.argv[1], newline=\"\")))\n"
        "print(\",\".join(rows[0].keys()))\n"
        "for r in rows:\n"
        "    print(\" \".join(r[k] if r[k] == \"\" else repr(float(r[k])) for k in r))\n",
        csv);
    const auto ls = lines(out);
    REQUIRE(ls.size() == 6);
    CHECK(ls[0] == "epoch,global_step,loss,acc,acc_top2,eval_loss,eval_acc,eval_acc_top2,lr,train_seconds");
    for (std::size_t e = 0; e < 5; ++e) {
        std::istringstream row(ls[e + 1]);
        std::vector<std::string> f;
        for (std::string x; row >> x;) f.push_back(x);
        const oar::Logs& l = all[e];
        INFO("epoch ", e, ": ", ls[e + 1]);
        const bool eval = e % 2 == 1 || e == 2 || e == 4;  // every 2nd epoch and each fit's last
        CHECK(l.has_eval == eval);
        REQUIRE(f.size() == (eval ? 10u : 7u));  // empty eval fields vanish in the split
        CHECK(std::strtod(f[0].c_str(), nullptr) == static_cast<double>(e + 1));
        CHECK(std::strtod(f[1].c_str(), nullptr) == static_cast<double>(l.global_step));
        CHECK(std::strtod(f[2].c_str(), nullptr) == l.loss);
        CHECK(std::strtod(f[3].c_str(), nullptr) == l.at("acc"));
        CHECK(std::strtod(f[4].c_str(), nullptr) == l.at("acc_top2"));
        if (eval) {
            CHECK(std::strtod(f[5].c_str(), nullptr) == l.eval_loss);
            CHECK(std::strtod(f[6].c_str(), nullptr) == l.at("eval_acc"));
        }
        CHECK(std::strtod(f[f.size() - 2].c_str(), nullptr) == static_cast<double>(static_cast<float>(l.lr)));
    }
}

TEST_CASE("TensorBoardLogger's event file reads back through TensorBoard's EventAccumulator with fit's values") {
    oar_test::TempDir tmp;
    oar_test::ToyNet net(5);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::TensorBoardLogger tb(tmp.path / "tb", 4);
    struct Keep {
        std::map<std::uint64_t, oar::Logs> steps;
        void on_train_batch_end(const oar::Logs& l) { steps[l.global_step] = l; }
    } keep;
    const auto h = fit(net, opt, 4, tb, keep);  // 24 steps: logged at 4, 8, ..., 24
    REQUIRE(fs::exists(tb.path()));
    if (oar_test::skip_without_python("tensorboard")) return;
    const auto r = oar_test::run_command(std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR + "/tests/io/read_tfevents.py '" +
                                         tb.path().string() + "' 2>&1");
    INFO(r.output);
    REQUIRE(r.status == 0);
    std::map<std::string, std::map<long, double>> acc;  // tag -> step -> value
    for (const auto& l : lines(r.output)) {
        std::istringstream in(l);
        std::string kind, wall, value, tag;
        long step = 0;
        in >> kind >> step >> wall >> value >> tag;
        if (kind == "acc") acc[tag][step] = std::strtod(value.c_str(), nullptr);
    }
    REQUIRE(acc["train/loss"].size() == 6);
    for (const auto& [step, v] : acc["train/loss"]) {
        REQUIRE(keep.steps.count(static_cast<std::uint64_t>(step)) == 1);
        const auto& l = keep.steps[static_cast<std::uint64_t>(step)];
        CHECK(step % 4 == 0);
        CHECK(v == static_cast<double>(static_cast<float>(l.loss)));
        CHECK(acc["train/acc"][step] == static_cast<double>(static_cast<float>(l.at("acc"))));
        CHECK(acc["train/lr"][step] == static_cast<double>(static_cast<float>(l.lr)));
    }
    // validation after epochs 2 and 4 (eval_freq 2), at step = epoch
    REQUIRE(acc["eval/loss"].size() == 2);
    CHECK(acc["eval/loss"][2] == static_cast<double>(static_cast<float>(h.epochs[1].eval_loss)));
    CHECK(acc["eval/acc_top2"][4] == static_cast<double>(static_cast<float>(h.epochs[3].at("eval_acc_top2"))));
    CHECK_THROWS_AS(oar::TensorBoardLogger(tmp.path, 0), oar::value_error);
}

TEST_CASE("CurvesLogger rewrites a valid SVG after every epoch with the train and valid curves") {
    oar_test::TempDir tmp;
    const fs::path svg = tmp.path / "curves.svg";
    oar_test::ToyNet net(7);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::CurvesLogger curves(svg);
    struct Watch {
        const fs::path* svg;
        std::vector<bool> existed;
        void on_epoch_end(const oar::Logs&) { existed.push_back(fs::exists(*svg)); }
    } watch{&svg, {}};
    const auto h = fit(net, opt, 4, curves, watch);
    CHECK(watch.existed == std::vector<bool>{true, true, true, true});  // written by each epoch's end
    const auto& c = curves.curves();
    REQUIRE(c.train_loss.size() == 4);
    CHECK(c.valid_loss.size() == 2);
    CHECK(c.train_accuracy[3] == h.epochs[3].at("acc"));
    CHECK(c.valid_accuracy[1] == h.epochs[3].at("eval_acc"));
    const std::string out = python(
        "import sys, xml.etree.ElementTree as ET\n"
        "root = ET.parse(sys.argv[1]).getroot()\n"
        "print(root.tag)\n"
        "print(sorted(set(t.text for t in root.iter() if t.tag.endswith(\"text\") and t.text and \" \" in t.text and "
        "(\"loss\" in t.text or \"accuracy\" in t.text))))\n",
        svg);
    INFO(out);
    CHECK(out.find("{http://www.w3.org/2000/svg}svg") != std::string::npos);
    for (const char* name : {"train loss", "valid loss", "train accuracy", "valid accuracy"})
        CHECK(out.find(std::string("'") + name + "'") != std::string::npos);
}

TEST_CASE("VisualDLLogger's record file reads back through VisualDL's LogReader with fit's values") {
    oar_test::TempDir tmp;
    oar_test::ToyNet net(5);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::VisualDLLogger vdl(tmp.path / "vdl", 4);
    struct Keep {
        std::map<std::uint64_t, oar::Logs> steps;
        void on_train_batch_end(const oar::Logs& l) { steps[l.global_step] = l; }
    } keep;
    const auto h = fit(net, opt, 4, vdl, keep);  // 24 steps: logged at 4, 8, ..., 24
    REQUIRE(fs::exists(vdl.path()));
    CHECK_THROWS_AS(oar::VisualDLLogger(tmp.path, 0), oar::value_error);
    const auto r = oar_test::run_command(std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR + "/tests/io/read_visualdl.py '" +
                                         vdl.path().string() + "' 2>&1");
    if (r.status == 3) {
        oar_test::skip("the visualdl package is not in the test venv (scripts/setup.sh installs it)");
        return;
    }
    INFO(r.output);
    REQUIRE(r.status == 0);
    std::map<std::string, std::map<long, double>> got;  // tag -> step -> value
    for (const auto& l : lines(r.output)) {
        std::istringstream in(l);
        std::string kind, ms, value, tag;
        long step = 0;
        in >> kind >> step >> ms >> value >> tag;
        if (kind == "scalar") got[tag][step] = std::strtod(value.c_str(), nullptr);
    }
    REQUIRE(got["train/loss"].size() == 6);
    for (const auto& [step, v] : got["train/loss"]) {
        REQUIRE(keep.steps.count(static_cast<std::uint64_t>(step)) == 1);
        const auto& l = keep.steps[static_cast<std::uint64_t>(step)];
        CHECK(step % 4 == 0);
        CHECK(v == static_cast<double>(static_cast<float>(l.loss)));
        CHECK(got["train/acc"][step] == static_cast<double>(static_cast<float>(l.at("acc"))));
        CHECK(got["train/lr"][step] == static_cast<double>(static_cast<float>(l.lr)));
    }
    REQUIRE(got["eval/loss"].size() == 2);
    CHECK(got["eval/loss"][2] == static_cast<double>(static_cast<float>(h.epochs[1].eval_loss)));
    CHECK(got["eval/acc"][4] == static_cast<double>(static_cast<float>(h.epochs[3].at("eval_acc"))));
}
