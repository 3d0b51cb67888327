// ProgBarLogger: a line every log_freq steps when the output is not a terminal, one bar redrawn
// in place per epoch when it is (an injected flag, and a real pseudo-terminal from openpty).
#include <doctest/doctest.h>

#include <oar/train/callbacks/progress.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include <fcntl.h>  // fcntl: the pty master read without blocking
#include <pty.h>    // openpty
#include <unistd.h>

#include <oar/oar.hpp>  // Adam

#include "support/text.hpp"       // oar_test::read_all, count: what the callbacks printed
#include "support/toy_model.hpp"  // oar_test::toy_set, ToyNet

namespace {

using oar_test::count;
using oar_test::read_all;

/// Remembers each batch's logs, to compare with what the logger printed.
struct Keep {
    std::vector<oar::Logs> batches, epochs;
    void on_train_batch_end(const oar::Logs& l) { batches.push_back(l); }
    void on_epoch_end(const oar::Logs& l) { epochs.push_back(l); }
};

/// Two epochs of 10 steps on the toy set, validated on 40 samples.
template <class... Cbs>
void fit_two_epochs(Cbs&... cbs) {
    const auto train = oar_test::toy_set(100), valid = oar_test::toy_set(40, 7);
    oar_test::ToyNet net(1);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::Model model(net);
    model.prepare(opt, oar::CrossEntropyLoss<>{}, {oar::top_k_accuracy()});
    model.fit(train, &valid, {.epochs = 2, .batch_size = 10}, cbs...);
}

std::string f4(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4f", v);
    return b;
}

}  // namespace

TEST_CASE("not on a terminal, ProgBarLogger prints Paddle's line every log_freq steps and the validation per epoch") {
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    oar::ProgBarLogger bar({.log_freq = 4, .out = f});
    CHECK_FALSE(bar.is_tty());  // a file is not a terminal
    Keep keep;
    fit_two_epochs(bar, keep);
    const std::string out = read_all(f);
    std::fclose(f);
    INFO(out);
    CHECK(count(out, "Epoch 1/2\n") == 1);
    CHECK(count(out, "Epoch 2/2\n") == 1);
    CHECK(count(out, "\r") == 0);
    // steps 4, 8 and the last (10) of each epoch, with the batch's loss and the running accuracy:
    // "step  4/10 - loss: 1.2345 - acc: 0.5000 - 3ms/step" kept as " 4 1.2345 0.5000"
    std::vector<std::string> steps;
    std::size_t at = 0;
    for (std::size_t nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1) {
        const std::string l = out.substr(at, nl - at);
        if (l.rfind("step ", 0) != 0) continue;
        const auto loss = l.find(" - loss: "), acc = l.find(" - acc: "), ms = l.rfind(" - ");
        REQUIRE(l.substr(7, 4) == "/10 ");
        REQUIRE(loss == 10);
        REQUIRE(acc == loss + 9 + 6);
        CHECK(l.substr(ms + 3).find("ms/step") != std::string::npos);
        steps.push_back(l.substr(5, 2) + " " + l.substr(loss + 9, 6) + " " + l.substr(acc + 8, 6));
    }
    REQUIRE(steps.size() == 6);
    REQUIRE(keep.batches.size() == 20);
    const auto expect = [&](std::size_t i) {
        const auto& l = keep.batches[i];
        std::string s(l.step < 10 ? 1 : 0, ' ');  // the step is right-aligned to the width of "10"
        s += std::to_string(l.step);
        for (const double v : {l.loss, l.metrics[0].second}) (s += ' ') += f4(v);
        return s;
    };
    CHECK(steps[0] == expect(3));
    CHECK(steps[1] == expect(7));
    CHECK(steps[2] == expect(9));
    CHECK(steps[5] == expect(19));
    CHECK(count(out, "Eval samples: 40 - loss: " + f4(keep.epochs[1].eval_loss) + " - acc: " +
                         f4(keep.epochs[1].eval_metrics[0].second) + "\n") == 1);
}

TEST_CASE("on a terminal (injected), ProgBarLogger redraws one bar per epoch in place with an ETA") {
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    oar::ProgBarLogger bar({.log_freq = 4, .out = f, .tty = true, .bar_width = 10});
    Keep keep;
    fit_two_epochs(bar, keep);
    const std::string out = read_all(f);
    std::fclose(f);
    INFO(out);
    CHECK(count(out, "\rstep ") == 20);        // every step redraws
    CHECK(count(out, "\033[K") == 20);         // and clears the rest of the line
    CHECK(count(out, " - ETA: ") == 18);       // all but each epoch's last step
    CHECK(count(out, "\rstep  3/10 [===>......] - loss: " + f4(keep.batches[2].loss) + " - acc: ") == 1);
    CHECK(count(out, "\rstep 10/10 [==========] - loss: " + f4(keep.batches[19].loss)) == 1);
    // one line per epoch: the bar's line ends once, after the epoch's last step
    const auto last = out.find("\rstep 10/10 [==========]");
    REQUIRE(last != std::string::npos);
    const auto end = out.find('\n', last);
    REQUIRE(end != std::string::npos);
    CHECK(out.substr(last + 1, end - last - 1).find('\r') == std::string::npos);
    CHECK(out.compare(end - 10, 10 + 1 + 16, "ms/step\033[K\nEval samples: 40") == 0);
}

TEST_CASE("on a real pseudo-terminal, ProgBarLogger finds the terminal itself and draws the bar") {
    int master = -1, slave = -1;
    REQUIRE(openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
    std::FILE* f = fdopen(slave, "w");
    REQUIRE(f);
    oar::ProgBarLogger bar({.out = f});
    CHECK(bar.is_tty());
    fit_two_epochs(bar);
    std::fflush(f);
    fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = read(master, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    std::fclose(f);
    close(master);
    INFO(out);
    CHECK(count(out, "\rstep ") == 20);
    CHECK(count(out, " - ETA: ") == 18);
    CHECK(count(out, "Epoch 2/2") == 1);
}

TEST_CASE("verbose 0 prints nothing, and log_freq 0 is refused") {
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    oar::ProgBarLogger bar({.verbose = 0, .out = f});
    fit_two_epochs(bar);
    CHECK(read_all(f).empty());
    std::fclose(f);
    CHECK_THROWS_WITH_AS(oar::ProgBarLogger({.log_freq = 0}), "oar: ProgBarLogger: log_freq must be at least 1",
                         oar::value_error);
}
