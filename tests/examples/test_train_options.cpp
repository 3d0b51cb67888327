// train_mnist's flags (examples/app/train_options.hpp): defaults, every flag, and each bad value
// named with the flag.
#include <doctest/doctest.h>

#include "app/train_options.hpp"  // under test (examples/app/, through oar_app)

#include <oar/kernels/cuda/device.hpp>  // parse_device_spec: must coexist with the --device parser

#include <string>
#include <vector>

namespace {

oar::TrainOptions parse(const std::vector<std::string>& args) {
    auto o = oar::parse_train_options(args);
    REQUIRE(o.has_value());
    return *o;
}

std::string error_of(const std::vector<std::string>& args) {
    try {
        (void)oar::parse_train_options(args);
    } catch (const oar::usage_error& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("no flags give the defaults: CNN, Adam 1e-3 (x0.1 for the last fifth), L2Decay 1e-5, batch 100, 5 epochs, CPU") {
    const auto o = parse({});
    CHECK(o.model == "cnn");
    CHECK(o.optimizer == "adam");
    CHECK(o.lr == 1e-3f);
    CHECK(o.l2 == 1e-5f);
    CHECK(o.batch_size == 100);
    CHECK(o.epochs == 5);
    CHECK(o.seed == 0);
    CHECK(o.init == "torch");  // the main job's default; Network's own default stays Paddle's
    CHECK(o.workers == 0);
    CHECK(o.device == oar::DeviceOption{});
    CHECK(o.precision == "fp32");
    // The main job's default schedule: MultiStepDecay by 0.1 at four fifths of the epochs, stepped
    // per epoch: epochs 0-3 at 1e-3, epoch 4 at 1e-4.
    CHECK(o.lr_schedule.kind == oar::ScheduleOption::Kind::multistep);
    CHECK(o.lr_schedule.milestones.empty());  // from --epochs
    CHECK(o.lr_schedule.gamma == 0.1);
    CHECK(o.lr_schedule.milestones_for(o.epochs) == std::vector<std::int64_t>{4});
    CHECK(o.lr_schedule == oar::parse_schedule("multistep"));
    CHECK_FALSE(o.lr_step_per_batch);
    CHECK(parse({"--lr-schedule", "none"}).lr_schedule.kind == oar::ScheduleOption::Kind::none);
    CHECK(o.resume.empty());
}

TEST_CASE("every flag is read, as --flag value and as --flag=value") {
    const auto o = parse({"--data", "/d", "--model=mlp", "--epochs", "7", "--batch-size=64", "--optimizer", "momentum",
                          "--lr", "0.05", "--l2=0", "--workers", "2", "--seed", "42", "--init", "paddle", "--device", "gpu:1",
                          "--checkpoint-dir", "/ck", "--resume", "latest", "--log-dir", "/logs", "--log-every", "0",
                          "--lr-schedule", "multistep:2,4:0.5"});
    CHECK(o.data == "/d");
    CHECK(o.model == "mlp");
    CHECK(o.epochs == 7);
    CHECK(o.batch_size == 64);
    CHECK(o.optimizer == "momentum");
    CHECK(o.lr == 0.05f);
    CHECK(o.l2 == 0.0f);
    CHECK(o.workers == 2);
    CHECK(o.seed == 42);
    CHECK(o.init == "paddle");
    CHECK(o.device == oar::DeviceOption{oar::DeviceOption::Kind::gpu, 1});
    CHECK(o.checkpoint_dir == "/ck");
    CHECK(o.resume == "latest");
    CHECK(o.log_dir == "/logs");
    CHECK(o.log_every == 0);
    CHECK(o.lr_schedule.kind == oar::ScheduleOption::Kind::multistep);
    CHECK(o.lr_schedule.milestones == std::vector<std::int64_t>{2, 4});
    CHECK(o.lr_schedule.gamma == 0.5);
    CHECK(parse({"--precision", "bf16"}).precision == "bf16");
    CHECK(parse({"--precision=fp32"}).precision == "fp32");
    CHECK_FALSE(oar::parse_train_options({"--epochs", "3", "--help", "--bogus"}).has_value());  // --help wins
    CHECK_FALSE(oar::parse_train_options({"-h"}).has_value());
}

TEST_CASE("--recipe course: Paddle init, a constant rate, no L2, the course's optimizer per model; flags given win") {
    const auto best = parse({});
    CHECK(best.recipe == "best");
    CHECK(best.log_style == "auto");
    const auto cnn = parse({"--recipe", "course"});
    CHECK(cnn.recipe == "course");
    CHECK(cnn.init == "paddle");
    CHECK(cnn.lr_schedule.kind == oar::ScheduleOption::Kind::none);
    CHECK(cnn.l2 == 0.0f);
    CHECK(cnn.optimizer == "adam");  // the tuning lesson's Adam(learning_rate=0.001)
    CHECK(cnn.lr == 1e-3f);
    CHECK(cnn.log_style == "auto");  // the lines are their own flag
    for (const std::string m : {"linear", "sigmoid-mlp"}) {  // the network-structure lesson's SGD(0.001)
        const auto o = parse({"--model", m, "--recipe=course"});
        CHECK(o.optimizer == "sgd");
        CHECK(o.lr == 1e-3f);
    }
    CHECK(parse({"--recipe", "course", "--model", "mlp"}).optimizer == "adam");  // the launch lesson's Adam()
    CHECK(parse({"--model", "linear"}).optimizer == "adam");                     // best: today's default
    // A flag given keeps its value before or after --recipe.
    const auto asked = parse({"--l2", "1e-5", "--recipe", "course", "--optimizer", "momentum", "--lr", "0.01",
                              "--init", "torch", "--lr-schedule", "cosine"});
    CHECK(asked.l2 == 1e-5f);
    CHECK(asked.optimizer == "momentum");
    CHECK(asked.lr == 0.01f);
    CHECK(asked.init == "torch");
    CHECK(asked.lr_schedule.kind == oar::ScheduleOption::Kind::cosine);
    CHECK(parse({"--recipe", "course", "--model", "linear", "--lr", "0.01"}).optimizer == "sgd");
    CHECK(parse({"--log-style", "course"}).log_style == "course");
}

TEST_CASE("the LR schedules' forms") {
    using K = oar::ScheduleOption::Kind;
    CHECK(oar::parse_schedule("none").kind == K::none);
    const auto st = oar::parse_schedule("step:3");
    CHECK((st.kind == K::step && st.step_size == 3 && st.gamma == 0.1));
    CHECK(oar::parse_schedule("step:2:0.5").gamma == 0.5);
    CHECK(oar::parse_schedule("cosine").t_max == 0);
    CHECK(oar::parse_schedule("cosine:12").t_max == 12);
    const auto pl = oar::parse_schedule("plateau:2:0.3");
    CHECK((pl.kind == K::plateau && pl.patience == 2 && pl.gamma == 0.3));
    CHECK(oar::parse_schedule("plateau").patience == 10);
    const auto ms = oar::parse_schedule("multistep:2,5:0.3");
    CHECK((ms.kind == K::multistep && ms.milestones == std::vector<std::int64_t>{2, 5} && ms.gamma == 0.3));
    CHECK(ms.milestones_for(100) == std::vector<std::int64_t>{2, 5});  // given milestones are kept
}

TEST_CASE("multistep without milestones: one at round(4/5 of the run), at least 1") {
    const auto m = oar::parse_schedule("multistep");
    CHECK(m.kind == oar::ScheduleOption::Kind::multistep);
    CHECK(m.gamma == 0.1);
    using V = std::vector<std::int64_t>;
    CHECK(m.milestones_for(5) == V{4});    // the default run: epoch 4 of 0..4 at 1e-4
    CHECK(m.milestones_for(10) == V{8});
    CHECK(m.milestones_for(4) == V{3});    // 3.2
    CHECK(m.milestones_for(3) == V{2});    // 2.4
    CHECK(m.milestones_for(2) == V{2});    // 1.6: the end of the run, a constant rate
    CHECK(m.milestones_for(1) == V{1});
    CHECK(m.milestones_for(0) == V{1});
    CHECK(m.milestones_for(2500) == V{2000});  // per batch: 5 epochs of 500 batches
    CHECK(m.milestones_for(7) == V{6});    // 5.6 rounds up
}

TEST_CASE("--lr-step-per batch makes the schedule step per batch, before or after --lr-schedule") {
    using K = oar::ScheduleOption::Kind;
    const auto after = parse({"--lr-schedule", "cosine:7", "--lr-step-per", "batch"});
    CHECK((after.lr_schedule.kind == K::cosine && after.lr_schedule.t_max == 7 && after.lr_step_per_batch));
    const auto before = parse({"--lr-step-per=batch", "--lr-schedule=step:3:0.5"});
    CHECK((before.lr_schedule.kind == K::step && before.lr_schedule.step_size == 3 && before.lr_step_per_batch));
    CHECK_FALSE(parse({"--lr-schedule", "cosine", "--lr-step-per", "epoch"}).lr_step_per_batch);
    CHECK_FALSE(parse({"--lr-step-per", "batch", "--lr-step-per", "epoch", "--lr-schedule", "cosine"}).lr_step_per_batch);
}

TEST_CASE("bad flags and values are usage errors that name the flag and the value") {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"--model", "resnet"}, "--model must be linear, sigmoid-mlp, mlp or cnn, got 'resnet'"},
        {{"--epochs", "0"}, "--epochs needs an integer >= 1, got '0'"},
        {{"--epochs", "1e3"}, "--epochs needs an integer >= 1, got '1e3'"},
        {{"--epochs", "+3"}, "--epochs needs an integer >= 1, got '+3'"},
        {{"--epochs", "99999999999999999999999"}, "--epochs needs an integer >= 1, got '99999999999999999999999'"},
        {{"--epochs", "2000000"}, "--epochs 2000000 is more than 1000000"},
        {{"--batch-size", "-5"}, "--batch-size needs an integer >= 1, got '-5'"},
        {{"--batch-size", "100000000"}, "--batch-size 100000000 is more than 16777216"},
        {{"--lr", "nan"}, "--lr needs a finite number >= 0, got 'nan'"},
        {{"--lr", "1e39"}, "--lr needs a finite number >= 0, got '1e39'"},  // not a float
        {{"--lr", "-1"}, "--lr needs a finite number >= 0, got '-1'"},
        {{"--l2", "0.1x"}, "--l2 needs a finite number >= 0, got '0.1x'"},
        {{"--optimizer", "rmsprop"}, "--optimizer must be sgd, momentum, adagrad or adam, got 'rmsprop'"},
        {{"--init", "xavier"}, "--init must be paddle or torch, got 'xavier'"},
        {{"--device", "tpu"}, "--device must be cpu, gpu or gpu:N (N a device number), got 'tpu'"},
        {{"--device", "gpu:"}, "got 'gpu:'"},
        {{"--device", "gpu:-1"}, "got 'gpu:-1'"},
        {{"--precision", "fp16"}, "--precision must be fp32 or bf16, got 'fp16'"},
        {{"--lr-schedule", "exp:3"}, "--lr-schedule 'exp:3': unknown schedule"},
        {{"--lr-schedule", "step"}, "--lr-schedule 'step': unknown schedule"},
        {{"--lr-schedule", "step:0"}, "--lr-schedule step size needs an integer >= 1, got '0'"},
        {{"--lr-schedule", "step:2:1.5"}, "the factor must be in (0, 1)"},
        {{"--lr-schedule", "multistep:4,2"}, "milestones must increase"},
        {{"--lr-schedule", "multistep:2,,4"}, "--lr-schedule milestone needs an integer >= 1, got ''"},
        {{"--lr-schedule", "multistep:"}, "--lr-schedule milestone needs an integer >= 1, got ''"},
        {{"--lr-schedule", "multistep::0.5"}, "--lr-schedule milestone needs an integer >= 1, got ''"},
        {{"--lr-step-per", "step"}, "--lr-step-per must be epoch or batch, got 'step'"},
        {{"--lr-schedule", "plateau", "--lr-step-per", "batch"},
         "--lr-step-per batch: plateau steps on the validation loss, once per epoch"},
        {{"--resume", "latest"}, "--resume latest needs --checkpoint-dir"},
        {{"--data="}, "--data needs a folder of IDX files or a mnist.json(.gz) file, got ''"},
        {{"--checkpoint-dir", ""}, "--checkpoint-dir needs a folder, got ''"},
        {{"--log-dir="}, "--log-dir needs a folder, got ''"},
        {{"--resume="}, "--resume needs latest, DIR/STEM or DIR, got ''"},
        {{"--export-onnx="}, "--export-onnx needs a file path such as model.onnx, got ''"},
        {{"--a-sync=yes"}, "--a-sync takes no value (or =1 / =0), got 'yes'"},
        {{"--max-staleness", "5000"}, "--max-staleness 5000 is more than 1000"},
        {{"--workers", "5000"}, "--workers 5000 is more than 1024"},
        {{"--log-every", "-1"}, "--log-every needs an integer >= 0, got '-1'"},
        {{"--seed", "x"}, "--seed needs an integer >= 0, got 'x'"},
        {{"--frobnicate", "1"}, "unknown flag '--frobnicate' (see --help)"},
        {{"--data"}, "--data needs a value (see --help)"},
        {{"stray"}, "unexpected argument 'stray' (see --help)"},
        {{"--"}, "unexpected argument '--'"},
        {{"--recipe", "paddle"}, "--recipe must be best or course, got 'paddle'"},
        {{"--log-style", "bar"}, "--log-style must be auto or course, got 'bar'"},
    };
    for (const auto& c : cases) {
        const std::string got = error_of(c.first);
        INFO(c.first[0], " -> ", got);
        CHECK(got.find(c.second) != std::string::npos);
        CHECK(got.rfind("oar: ", 0) == 0);
    }
}

TEST_CASE("the CUDA device strings and the main job's --device parser coexist without ambiguity") {
    CHECK(oar::parse_device_spec("gpu:2") == oar::DeviceSpec{true, 2});
    CHECK(oar::parse_device(std::string("gpu:2")).index == 2);
}
