// StopOnSignal: a real SIGINT/SIGTERM during fit ends it after the current step; a second signal
// ends the process at once (checked in a forked child); the old handlers come back afterwards.
// (train_mnist's test sends a real signal to a real training process and resumes from its checkpoint.)
#include <doctest/doctest.h>

#include <oar/train/callbacks/signals.hpp>

#include <csignal>
#include <cstdlib>

#include <sys/wait.h>
#include <unistd.h>

#include <oar/oar.hpp>  // SGD

#include "support/toy_model.hpp"  // oar_test::toy_set, ToyNet

namespace {

/// Sends `sig` to this process after global step `at`.
struct RaiseAt {
    std::uint64_t at;
    int sig;
    void on_train_batch_end(const oar::Logs& l) {
        if (l.global_step == at) ::kill(::getpid(), sig);
    }
};

void (*handler_of(int sig))(int) {
    struct sigaction now {};
    sigaction(sig, nullptr, &now);
    return now.sa_handler;
}

}  // namespace

TEST_CASE("a SIGINT or SIGTERM during fit stops it after the step it came in, and the old handlers come back") {
    const auto train = oar_test::toy_set(100);
    for (const int sig : {SIGINT, SIGTERM}) {
        oar_test::ToyNet net(1);
        oar::SGD opt(net.parameters(), {.learning_rate = 0.05f});
        oar::Model model(net);
        model.prepare(opt);
        const auto before = handler_of(sig);  // doctest's own, or the default
        {
            oar::StopOnSignal stop;
            const bool installed = handler_of(sig) != before;
            CHECK(installed);
            const auto h = model.fit(train, {.epochs = 3, .batch_size = 10}, RaiseAt{13, sig}, stop);
            CHECK(h.stopped_early);
            CHECK(model.interrupted());
            CHECK(oar::StopOnSignal::received() == sig);
            CHECK(model.progress() == oar::Progress{1, 3, 13});
            CHECK_THROWS_AS(oar::StopOnSignal{}, oar::io_error);  // one at a time
        }
        const bool restored = handler_of(sig) == before;
        CHECK(restored);
    }
}

TEST_CASE("a second signal ends the process at once, by that signal") {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        oar::StopOnSignal stop;
        ::kill(::getpid(), SIGTERM);  // the first: only noted
        if (oar::StopOnSignal::received() != SIGTERM) std::_Exit(3);
        ::kill(::getpid(), SIGTERM);  // the second: the default action, death by SIGTERM
        std::_Exit(4);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGTERM);
}
