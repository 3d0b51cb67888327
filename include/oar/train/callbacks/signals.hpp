// Stopping training cleanly on Ctrl-C or a scheduler's SIGTERM: while a StopOnSignal lives, the
// first SIGINT/SIGTERM only raises a flag (fit finishes the current step, then stops, so the
// caller can save a checkpoint and say so); a second one ends the process at once, as the
// default action would. The previous handlers come back when it is destroyed.
#pragma once

#include <csignal>  // std::sig_atomic_t, SIGINT, SIGTERM, raise
#include <cstring>  // std::strlen

#include <signal.h>  // sigaction
#include <unistd.h>  // write: the only output a signal handler may make

#include "../../core/error.hpp"  // io_error
#include "callback.hpp"          // Logs

namespace oar {

/// A fit callback and an RAII guard. Only one may live at a time (it owns the process's
/// SIGINT/SIGTERM handlers); a second is refused with io_error.
class StopOnSignal {
public:
    StopOnSignal() {
        if (active_) throw io_error("StopOnSignal: another one already handles SIGINT/SIGTERM");
        received_ = 0;
        struct sigaction sa {};
        sa.sa_handler = &StopOnSignal::handle;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;  // reads and writes in progress go on
        if (sigaction(SIGINT, &sa, &old_int_) != 0 || sigaction(SIGTERM, &sa, &old_term_) != 0)
            throw io_error("StopOnSignal: cannot install the SIGINT/SIGTERM handlers");
        active_ = true;
    }
    StopOnSignal(const StopOnSignal&) = delete;
    StopOnSignal& operator=(const StopOnSignal&) = delete;
    ~StopOnSignal() {
        sigaction(SIGINT, &old_int_, nullptr);
        sigaction(SIGTERM, &old_term_, nullptr);
        active_ = false;
    }

    /// The signal received (SIGINT or SIGTERM), 0 if none.
    static int received() { return received_; }
    static const char* name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

    /// fit's hook: after the step in which a signal came, ask the model to stop.
    template <class M>
    void on_train_batch_end(M& model, const Logs&) {
        if (received_) model.stop_training();
    }
    template <class M>
    void on_epoch_begin(M& model, const Logs&) {  // a signal during validation stops before the next epoch
        if (received_) model.stop_training();
    }

private:
    static void handle(int sig) {
        if (received_) {  // the second: end now, by the default action of this signal
            signal(sig, SIG_DFL);
            raise(sig);
            return;
        }
        received_ = sig;
        const char* msg = sig == SIGINT ? "\noar: SIGINT received: stopping after this step (send it again to stop at once)\n"
                                        : "\noar: SIGTERM received: stopping after this step (send it again to stop at once)\n";
        [[maybe_unused]] const auto n = ::write(2, msg, std::strlen(msg));
    }

    static inline volatile std::sig_atomic_t received_ = 0;
    static inline bool active_ = false;
    struct sigaction old_int_ {}, old_term_ {};
};

}  // namespace oar
