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
//
// The same stop, asked by a caller instead of a signal: a server whose client went away sets a flag, and
// work run on the thread that opened a CancelScope over that flag stops at its next poll of
// throw_if_cancelled() with Interrupted (signal 0). The forward pass polls between blocks and the logit
// lens between its blocks of positions, so every analysis built on them (lens, lens_batch, lens_corpus,
// attribute, ...) stops within one block; the flag is per thread, so one request's cancel stops only its own
// work. A signal is not a cancel: InterruptScope's work keeps its own safe points.
//
//   std::atomic<bool> cancel{false};                          // set from another thread
//   vocablens::CancelScope scope(&cancel);                    // on the thread that does the work
//   auto lens = vocablens::logit_lens(model, ids);            // throws Interrupted once `cancel` is set
#pragma once
#include <atomic>
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

/// While alive, throw_if_cancelled() on this thread throws once *flag is true (null: never). Scopes nest: the
/// innermost one's flag is polled; closing it restores the outer one.
class CancelScope {
 public:
  explicit CancelScope(const std::atomic<bool>* flag) noexcept;
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  const std::atomic<bool>* outer_;
};

/// True when this thread's CancelScope flag is set.
bool cancel_requested() noexcept;

[[noreturn]] void throw_cancelled(const char* where);

/// Throws Interrupted(0, "cancelled: the client went away (" + where + ")") when cancel_requested(). One
/// thread-local load when no scope is open: cheap enough for every block of a forward pass.
inline void throw_if_cancelled(const char* where) {
  if (cancel_requested()) throw_cancelled(where);
}

}  // namespace vocablens
