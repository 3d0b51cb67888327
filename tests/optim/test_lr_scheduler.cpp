// LR schedules (optim/lr_scheduler.hpp): every schedule against torch 1.13's
// torch.optim.lr_scheduler (or a transcription of Paddle's formula where torch has none or
// differs) over 50+ steps, exact resume through state()/load_state(), apply() on an optimizer,
// and named errors for bad arguments and bad state.
#include <oar/optim/lr_scheduler.hpp>

#include <doctest/doctest.h>

#include <oar/optim/sgd.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {
using namespace oar;

static_assert(LRSchedule<StepDecay>);
static_assert(LRSchedule<MultiStepDecay>);
static_assert(LRSchedule<CosineAnnealingDecay>);
static_assert(LRSchedule<LinearWarmup<>>);
static_assert(LRSchedule<LinearWarmup<CosineAnnealingDecay>>);
static_assert(!LRSchedule<ReduceOnPlateau>);  // stepped with a metric
static_assert(std::is_same_v<decltype(LinearWarmup(1, 5, 0.0, 0.1)), LinearWarmup<double>>);  // Paddle takes ints too

/// One cross-check: our rates (epoch 0, then after each step) and the JSON case for lr_reference.py.
struct Case {
    std::string label;
    std::string json;
    std::vector<double> ours;
};

template <LRSchedule S>
std::vector<double> run(S s, int steps) {
    std::vector<double> out{s.last_lr()};
    for (int i = 0; i < steps; ++i) {
        s.step();
        out.push_back(s.last_lr());
    }
    return out;
}

std::vector<double> run_plateau(ReduceOnPlateau s, const std::vector<double>& metrics) {
    std::vector<double> out{s.last_lr()};
    for (double m : metrics) {
        s.step(m);
        out.push_back(s.last_lr());
    }
    return out;
}

std::string list(const std::vector<double>& v) {
    std::ostringstream os;
    os.precision(17);
    os << "[";
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
    return os.str() + "]";
}

/// A validation loss that falls, then wanders on a plateau, with deterministic noise.
std::vector<double> plateau_metrics(int n, double sign) {
    std::vector<double> m;
    for (int i = 0; i < n; ++i) {
        const double base = 1.0 / (1.0 + 0.4 * std::min(i, 12));
        const double noise = 0.01 * std::sin(1.7 * i) * std::cos(0.3 * i * i);
        m.push_back(sign * (base + noise));
    }
    return m;
}

/// Runs lr_reference.py on all cases at once; one vector of rates per case.
std::vector<std::vector<double>> references(const std::vector<Case>& cases) {
    oar_test::TempDir dir;
    {
        std::ofstream f(dir.file("cases.json"));
        f << "[";
        for (std::size_t i = 0; i < cases.size(); ++i) f << (i ? ",\n" : "") << cases[i].json;
        f << "]";
    }
    const auto r = oar_test::run_command(std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR +
                                         "/tests/optim/lr_reference.py " + dir.file("cases.json") + " 2>&1");
    REQUIRE_MESSAGE(r.status == 0, r.output);
    std::vector<std::vector<double>> out;
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);) {
        std::istringstream ls(line);
        std::vector<double> v;
        for (double x; ls >> x;) v.push_back(x);
        out.push_back(v);
    }
    return out;
}

double max_relative_difference = 0;

void check_close(const Case& c, const std::vector<double>& ref) {
    INFO(c.label);
    REQUIRE(ref.size() == c.ours.size());
    for (std::size_t i = 0; i < ref.size(); ++i) {
        if (ref[i] != 0)
            max_relative_difference = std::max(max_relative_difference, std::abs(c.ours[i] - ref[i]) / std::abs(ref[i]));
        INFO("epoch ", i, ": ours ", c.ours[i], ", reference ", ref[i]);
        CHECK(std::abs(c.ours[i] - ref[i]) <= 1e-6 * std::abs(ref[i]) + 1e-15);
    }
}

std::string plateau_json(double lr, const ReduceOnPlateauOptions& o, const std::vector<double>& metrics,
                         const char* reference) {
    std::ostringstream os;
    os.precision(17);
    os << R"({"kind": "plateau", "reference": ")" << reference << R"(", "lr": )" << lr << R"(, "mode": ")" << o.mode
       << R"(", "factor": )" << o.factor << R"(, "patience": )" << o.patience << R"(, "threshold": )" << o.threshold
       << R"(, "threshold_mode": ")" << o.threshold_mode << R"(", "cooldown": )" << o.cooldown << R"(, "min_lr": )"
       << o.min_lr << R"(, "epsilon": )" << o.epsilon << R"(, "metrics": )" << list(metrics) << "}";
    return os.str();
}
}  // namespace

TEST_CASE("every schedule matches torch 1.13 (or Paddle's formula) over 50 steps to 1e-6 relative") {
    constexpr int N = 50;
    std::vector<Case> cases;
    cases.push_back({"StepDecay(0.1, 7, 0.5)", R"({"kind": "step", "lr": 0.1, "step_size": 7, "gamma": 0.5, "steps": 50})",
                     run(StepDecay(0.1, 7, 0.5), N)});
    cases.push_back({"StepDecay(0.05, 1) (gamma 0.1)",
                     R"({"kind": "step", "lr": 0.05, "step_size": 1, "gamma": 0.1, "steps": 50})", run(StepDecay(0.05, 1), N)});
    cases.push_back({"MultiStepDecay(0.1, {5, 12, 30}, 0.3)",
                     R"({"kind": "multistep", "lr": 0.1, "milestones": [5, 12, 30], "gamma": 0.3, "steps": 50})",
                     run(MultiStepDecay(0.1, {5, 12, 30}, 0.3), N)});
    cases.push_back({"MultiStepDecay(0.02, {1, 2, 49})",
                     R"({"kind": "multistep", "lr": 0.02, "milestones": [1, 2, 49], "gamma": 0.1, "steps": 50})",
                     run(MultiStepDecay(0.02, {1, 2, 49}), N)});
    cases.push_back({"CosineAnnealingDecay(0.1, 10, 0.001): five half-periods",
                     R"({"kind": "cosine", "lr": 0.1, "T_max": 10, "eta_min": 0.001, "steps": 50})",
                     run(CosineAnnealingDecay(0.1, 10, 0.001), N)});
    cases.push_back({"CosineAnnealingDecay(0.5, 7)", R"({"kind": "cosine", "lr": 0.5, "T_max": 7, "eta_min": 0.0, "steps": 50})",
                     run(CosineAnnealingDecay(0.5, 7), N)});
    cases.push_back({"CosineAnnealingDecay(0.01, 60, 1e-4): not yet at the minimum",
                     R"({"kind": "cosine", "lr": 0.01, "T_max": 60, "eta_min": 0.0001, "steps": 50})",
                     run(CosineAnnealingDecay(0.01, 60, 1e-4), N)});
    cases.push_back({"LinearWarmup(0.1, 10, 0, 0.1)",
                     R"({"kind": "warmup", "inner": 0.1, "warmup_steps": 10, "start_lr": 0.0, "end_lr": 0.1, "steps": 50})",
                     run(LinearWarmup(0.1, 10, 0.0, 0.1), N)});
    cases.push_back({"LinearWarmup(CosineAnnealingDecay(0.1, 20, 0.001), 5, 0.01, 0.1)",
                     R"({"kind": "warmup", "inner": {"kind": "cosine", "lr": 0.1, "T_max": 20, "eta_min": 0.001},
                         "warmup_steps": 5, "start_lr": 0.01, "end_lr": 0.1, "steps": 50})",
                     run(LinearWarmup(CosineAnnealingDecay(0.1, 20, 0.001), 5, 0.01, 0.1), N)});
    cases.push_back({"LinearWarmup(StepDecay(0.1, 5, 0.5), 3, 0.001, 0.05)",
                     R"({"kind": "warmup", "inner": {"kind": "step", "lr": 0.1, "step_size": 5, "gamma": 0.5},
                         "warmup_steps": 3, "start_lr": 0.001, "end_lr": 0.05, "steps": 50})",
                     run(LinearWarmup(StepDecay(0.1, 5, 0.5), 3, 0.001, 0.05), N)});
    cases.push_back({"LinearWarmup(MultiStepDecay(0.1, {4, 20}), 8, 0, 0.1)",
                     R"({"kind": "warmup", "inner": {"kind": "multistep", "lr": 0.1, "milestones": [4, 20], "gamma": 0.1},
                         "warmup_steps": 8, "start_lr": 0.0, "end_lr": 0.1, "steps": 50})",
                     run(LinearWarmup(MultiStepDecay(0.1, {4, 20}), 8, 0.0, 0.1), N)});

    const auto loss = plateau_metrics(60, 1.0), acc = plateau_metrics(60, -1.0);
    const ReduceOnPlateauOptions defaults_but_patience{.patience = 3};
    const ReduceOnPlateauOptions max_abs{.mode = "max", .factor = 0.5, .patience = 2, .threshold = 0.005,
                                         .threshold_mode = "abs", .min_lr = 0.004};
    const ReduceOnPlateauOptions min_abs_eps{.factor = 0.3, .patience = 1, .threshold = 0.0, .threshold_mode = "abs",
                                             .min_lr = 0.0, .epsilon = 1e-3};
    const ReduceOnPlateauOptions with_cooldown{.factor = 0.5, .patience = 1, .cooldown = 3};
    cases.push_back({"ReduceOnPlateau(0.1, patience=3) on a falling loss", plateau_json(0.1, defaults_but_patience, loss, "torch"),
                     run_plateau(ReduceOnPlateau(0.1, defaults_but_patience), loss)});
    cases.push_back({"ReduceOnPlateau(0.1, mode=max, abs, min_lr) on a rising accuracy",
                     plateau_json(0.1, max_abs, acc, "torch"), run_plateau(ReduceOnPlateau(0.1, max_abs), acc)});
    cases.push_back({"ReduceOnPlateau(0.01, epsilon=1e-3): cuts smaller than epsilon are skipped",
                     plateau_json(0.01, min_abs_eps, loss, "torch"), run_plateau(ReduceOnPlateau(0.01, min_abs_eps), loss)});
    cases.push_back({"ReduceOnPlateau(0.1, cooldown=3) against Paddle's step()",
                     plateau_json(0.1, with_cooldown, loss, "paddle"), run_plateau(ReduceOnPlateau(0.1, with_cooldown), loss)});

    const auto ref = references(cases);
    REQUIRE(ref.size() == cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i) check_close(cases[i], ref[i]);
    MESSAGE("largest relative difference from the references over ", cases.size(), " schedules: ",
            max_relative_difference);

    // the comparisons are not vacuous: each schedule actually moved, and the plateau ones cut the rate
    for (const auto& c : cases) {
        INFO(c.label);
        CHECK(c.ours.front() != c.ours.back());
    }
}

TEST_CASE("with cooldown, ReduceOnPlateau follows Paddle where torch's ReduceLROnPlateau differs") {
    // Paddle ignores metrics during cooldown; torch keeps recording a new best. A best seen only
    // during the cooldown (0.5) separates them: for Paddle 0.8 then improves on 1.0, for torch not.
    const std::vector<double> m{1.0, 1.0, 1.0, 0.5, 1.0, 0.8, 0.8, 0.8, 0.8, 0.8};
    const ReduceOnPlateauOptions o{.factor = 0.5, .patience = 1, .cooldown = 2};
    Case ours{"cooldown", "", run_plateau(ReduceOnPlateau(1.0, o), m)};
    const auto ref = references({{"paddle", plateau_json(1.0, o, m, "paddle"), {}}, {"torch", plateau_json(1.0, o, m, "torch"), {}}});
    REQUIRE(ref.size() == 2);
    check_close(ours, ref[0]);
    CHECK(ref[0] != ref[1]);
}

TEST_CASE("a schedule restored from state() continues exactly like one that never stopped") {
    auto check_resume = [](auto make, int stop, int total) {
        auto a = make();
        auto b = make();
        for (int i = 0; i < stop; ++i) a.step();
        const LRState saved = a.state();
        auto c = make();  // a fresh schedule, as a resumed program builds it
        c.load_state(saved);
        CHECK(c.last_epoch() == stop);
        for (int i = stop; i < total; ++i) {
            a.step();
            c.step();
        }
        for (int i = 0; i < total; ++i) b.step();
        CHECK(c.last_lr() == b.last_lr());  // bitwise
        CHECK(a.last_lr() == b.last_lr());
        CHECK(c.last_epoch() == total);
        return saved;
    };
    const LRState s = check_resume([] { return StepDecay(0.1, 7, 0.5); }, 20, 50);
    CHECK(s.at("scheduler") == "StepDecay");
    CHECK(s.at("last_epoch") == "20");
    CHECK(std::stod(s.at("last_lr")) == 0.1 * 0.25);
    check_resume([] { return MultiStepDecay(0.1, {5, 12, 30}, 0.3); }, 13, 50);
    // the cosine recursion depends on last_lr, so it must round-trip exactly
    check_resume([] { return CosineAnnealingDecay(0.1, 9, 0.001); }, 23, 60);
    const LRState w = check_resume([] { return LinearWarmup(CosineAnnealingDecay(0.1, 20, 0.001), 5, 0.01, 0.1); }, 17, 50);
    CHECK(w.at("LinearWarmup_LR.last_epoch") == "12");
    check_resume([] { return LinearWarmup(0.1, 10, 0.0, 0.1); }, 4, 30);

    const auto loss = plateau_metrics(60, 1.0);
    const ReduceOnPlateauOptions o{.factor = 0.5, .patience = 1, .cooldown = 2};
    ReduceOnPlateau a(0.1, o), b(0.1, o);
    for (int i = 0; i < 25; ++i) a.step(loss[i]);
    ReduceOnPlateau c(0.1, o);
    CHECK(ReduceOnPlateau(0.1, o).state().at("best") == "None");
    c.load_state(a.state());
    CHECK(c.best() == a.best());
    for (int i = 0; i < 60; ++i) b.step(loss[i]);
    for (int i = 25; i < 60; ++i) c.step(loss[i]);
    CHECK(c.last_lr() == b.last_lr());
    CHECK(c.last_lr() < 0.1);
    CHECK(c.num_bad_epochs() == b.num_bad_epochs());
    CHECK(c.cooldown_counter() == b.cooldown_counter());
}

TEST_CASE("apply sets the optimizer's learning rate to the schedule's") {
    std::vector<ParamEntry> entries{{"0.weight", make_dims(4), 0, 4}};
    ParameterSet p(16, entries);
    SGD<> sgd(p, {.learning_rate = 1.0f});
    CosineAnnealingDecay cos(0.1, 10);
    for (int i = 0; i < 3; ++i) cos.step();
    cos.apply(sgd);
    CHECK(sgd.learning_rate() == static_cast<float>(cos.last_lr()));
    CHECK(sgd.learning_rate() < 0.1f);
    ReduceOnPlateau plateau(0.25);
    plateau.apply(sgd);
    CHECK(sgd.learning_rate() == 0.25f);
}

TEST_CASE("step(epoch) jumps with Paddle's closed form") {
    CosineAnnealingDecay seq(0.1, 10, 0.001), jump(0.1, 10, 0.001);
    for (int i = 0; i < 17; ++i) seq.step();
    jump.step(17);
    CHECK(jump.last_epoch() == 17);
    CHECK(jump.last_lr() == doctest::Approx(seq.last_lr()).epsilon(1e-12));
    StepDecay s(1.0, 3, 0.5);
    s.step(7);
    CHECK(s.last_lr() == 0.25);
    CHECK_THROWS_WITH_AS(s.step(std::int64_t{-1}), "oar: StepDecay: step(epoch): epoch must be >= 0, got -1", value_error);
}

TEST_CASE("bad arguments are value_errors naming the schedule and the argument") {
    using F = std::function<void()>;
    const std::vector<std::pair<F, std::string>> bad{
        {[] { StepDecay(0.1, 0); }, "oar: StepDecay: step_size must be a positive integer, got 0"},
        {[] { StepDecay(0.1, 5, 1.0); }, "oar: StepDecay: gamma must be in [0, 1) so that the rate decays, got 1"},
        {[] { StepDecay(-0.1, 5); }, "oar: StepDecay: learning_rate must be finite and >= 0, got -0.1"},
        {[] { StepDecay(std::nan(""), 5); }, "oar: StepDecay: learning_rate must be finite and >= 0, got nan"},
        {[] { MultiStepDecay(0.1, {5, 5}); },
         "oar: MultiStepDecay: milestones must be strictly increasing, milestones[0] = 5 and milestones[1] = 5"},
        {[] { MultiStepDecay(0.1, {-1, 5}); }, "oar: MultiStepDecay: milestones must be >= 0, milestones[0] is -1"},
        {[] { MultiStepDecay(0.1, {2}, 1.5); }, "oar: MultiStepDecay: gamma must be in [0, 1) so that the rate decays, got 1.5"},
        {[] { CosineAnnealingDecay(0.1, 0); }, "oar: CosineAnnealingDecay: T_max must be a positive integer, got 0"},
        {[] { CosineAnnealingDecay(0.1, 5, -1.0); }, "oar: CosineAnnealingDecay: eta_min must be finite and >= 0, got -1"},
        {[] { LinearWarmup(0.1, 0, 0.0, 0.1); }, "oar: LinearWarmup: warmup_steps must be a positive integer, got 0"},
        {[] { LinearWarmup(0.1, 5, 0.1, 0.1); }, "oar: LinearWarmup: end_lr (0.1) must be greater than start_lr (0.1)"},
        {[] { LinearWarmup(-0.1, 5, 0.0, 0.1); }, "oar: LinearWarmup: learning_rate must be finite and >= 0, got -0.1"},
        {[] { ReduceOnPlateau(0.1, {.mode = "mean"}); }, "oar: ReduceOnPlateau: mode must be 'min' or 'max', got 'mean'"},
        {[] { ReduceOnPlateau(0.1, {.factor = 1.0}); },
         "oar: ReduceOnPlateau: factor must be in [0, 1) so that the rate decays, got 1"},
        {[] { ReduceOnPlateau(0.1, {.patience = -1}); }, "oar: ReduceOnPlateau: patience must be >= 0, got -1"},
        {[] { ReduceOnPlateau(0.1, {.threshold_mode = "relative"}); },
         "oar: ReduceOnPlateau: threshold_mode must be 'rel' or 'abs', got 'relative'"},
        {[] { ReduceOnPlateau(0.1, {.cooldown = -2}); }, "oar: ReduceOnPlateau: cooldown must be >= 0, got -2"},
        {[] { ReduceOnPlateau(0.1, {.min_lr = -1.0}); }, "oar: ReduceOnPlateau: min_lr must be finite and >= 0, got -1"},
        {[] { ReduceOnPlateau(0.1).step(std::nan("")); }, "oar: ReduceOnPlateau: step: the metric is nan at epoch 1"},
    };
    for (const auto& [f, msg] : bad) CHECK_THROWS_WITH_AS(f(), msg.c_str(), value_error);
    // Paddle lower-cases the modes
    CHECK(ReduceOnPlateau(0.1, {.mode = "MAX", .threshold_mode = "Abs"}).options().mode == "max");
}

TEST_CASE("load_state refuses a wrong, incomplete or garbled state and changes nothing") {
    StepDecay s(0.1, 5);
    for (int i = 0; i < 6; ++i) s.step();
    const LRState good = s.state();
    StepDecay t(0.1, 5);
    CHECK_THROWS_WITH_AS(t.load_state(CosineAnnealingDecay(0.1, 5).state()),
                         "oar: StepDecay: load_state: the state is a CosineAnnealingDecay's", value_error);
    LRState missing = good;
    missing.erase("last_lr");
    CHECK_THROWS_WITH_AS(t.load_state(missing), "oar: StepDecay: load_state: missing key 'last_lr'", value_error);
    LRState garbled = good;
    garbled["last_epoch"] = "6x";
    CHECK_THROWS_WITH_AS(t.load_state(garbled), "oar: StepDecay: load_state: key 'last_epoch' is '6x', not an integer",
                         value_error);
    garbled = good;
    garbled["last_lr"] = "inf";
    CHECK_THROWS_WITH_AS(t.load_state(garbled), "oar: StepDecay: load_state: key 'last_lr' is 'inf', not a finite number",
                         value_error);
    CHECK(t.last_epoch() == 0);
    CHECK(t.last_lr() == 0.1);

    LinearWarmup<CosineAnnealingDecay> w(CosineAnnealingDecay(0.1, 20), 5, 0.0, 0.1);
    for (int i = 0; i < 9; ++i) w.step();
    LRState ws = w.state();
    ws.erase("LinearWarmup_LR.last_lr");
    LinearWarmup<CosineAnnealingDecay> w2(CosineAnnealingDecay(0.1, 20), 5, 0.0, 0.1);
    CHECK_THROWS_WITH_AS(w2.load_state(ws), "oar: CosineAnnealingDecay: load_state: missing key 'last_lr'", value_error);
    CHECK(w2.last_epoch() == 0);
    CHECK(w2.inner().last_epoch() == 0);  // as built: the failed load left it alone

    ReduceOnPlateau p(0.1);
    LRState ps = p.state();
    ps["best"] = "lots";
    CHECK_THROWS_WITH_AS(p.load_state(ps), "oar: ReduceOnPlateau: load_state: key 'best' is 'lots', not a finite number",
                         value_error);
}
