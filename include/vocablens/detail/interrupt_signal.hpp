// vocablens/detail/interrupt_signal.hpp — the signal side of vocablens/interrupt.hpp (not a stable interface).
//
// The CLI's SIGINT/SIGTERM handler (src/cli/signals.cpp) asks record_interrupt whether to return (an
// InterruptScope is open and this is the first signal: it is recorded, and interrupt_signal() reports it) or
// to exit at once; tests record and clear a signal by hand.
//
//   if (!vocablens::detail::record_interrupt(sig)) _exit(128 + sig);   // in a signal handler
#pragma once

namespace vocablens {
namespace detail {
/// Called by the signal handler: true when an InterruptScope is open and this is the first signal
/// (it is then recorded and the handler returns); false means "exit now". Async-signal-safe.
bool record_interrupt(int sig) noexcept;
/// Clears a recorded signal (tests).
void clear_interrupt() noexcept;
}  // namespace detail
}  // namespace vocablens
