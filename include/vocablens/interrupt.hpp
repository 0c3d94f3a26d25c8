// vocablens/interrupt.hpp — stop a long loop cleanly on Ctrl-C instead of dying in the middle of it.
//
// The CLI's SIGINT/SIGTERM handler (src/cli/signals.cpp) normally removes temporary files in flight and
// exits at once (128 + signal). Work that can stop in a consistent state — a training loop that can write
// a resumable checkpoint, a loop whose failure should remove the directory it created — opens an
// InterruptScope: while one is alive, the FIRST signal only records itself and the work polls
// interrupt_signal() at its safe points, then throws Interrupted (the CLI prints its message and exits
// 128 + signal). A SECOND signal falls back to the immediate exit, so a stuck loop can still be stopped.
//
//   vocablens::InterruptScope scope;            // Ctrl-C now means "stop at the next step"
//   for (int64_t step = 0; step < steps; ++step) {
//     if (int sig = vocablens::interrupt_signal()) {
//       save_checkpoint();
//       throw vocablens::Interrupted(sig, "interrupted at step " + std::to_string(step) + "; resume with --resume");
//     }
//     ...
//   }
//
// Outside the CLI (tests, the Python module) no handler is installed: interrupt_signal() stays 0.
#pragma once
#include <string>

#include "vocablens/error.hpp"

namespace vocablens {

/// While alive, a first SIGINT/SIGTERM is recorded instead of exiting (scopes nest; thread-safe).
class InterruptScope {
 public:
  InterruptScope() noexcept;
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

/// The signal recorded inside an InterruptScope (SIGINT = 2, SIGTERM = 15), or 0.
int interrupt_signal() noexcept;

/// Thrown by work that stopped at a safe point after a signal; the CLI exits with exit_code().
class Interrupted : public Error {
 public:
  Interrupted(int signal, const std::string& what) : Error(what), signal_(signal) {}
  int signal() const noexcept { return signal_; }
  int exit_code() const noexcept { return 128 + signal_; }

 private:
  int signal_;
};

namespace detail {
/// Called by the signal handler: true when an InterruptScope is open and this is the first signal
/// (it is then recorded and the handler returns); false means "exit now". Async-signal-safe.
bool record_interrupt(int sig) noexcept;
/// Clears a recorded signal (tests).
void clear_interrupt() noexcept;
}  // namespace detail

}  // namespace vocablens
