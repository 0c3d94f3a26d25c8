// SIGINT/SIGTERM: remove temporary output files, say so, exit 128 + signo. See signals.hpp.
#include "cli/signals.hpp"

#include <signal.h>
#include <unistd.h>

#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/detail/interrupt_signal.hpp"
#include "vocablens/interrupt.hpp"

namespace vocablens::cli {
namespace {

extern "C" void on_terminating_signal(int sig) {
  // Inside an InterruptScope (a training loop) the first signal is only recorded: the loop stops at its
  // next safe point (vocablens/interrupt.hpp). Say so at once, so the user knows the key was heard.
  if (vocablens::detail::record_interrupt(sig)) {
    static const char kStop[] = "vocablens: interrupt received; stopping at the next safe point (again to quit now)\n";
    ssize_t ignored = ::write(STDERR_FILENO, kStop, sizeof kStop - 1);
    (void)ignored;
    return;
  }
  // Only async-signal-safe calls here: unlink() (inside remove_pending_temp_files), write(), _exit().
  vocablens::remove_pending_temp_files();
  static const char kMsg[] = "vocablens: interrupted\n";
  ssize_t ignored = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  (void)ignored;
  ::_exit(128 + sig);
}

}  // namespace

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_terminating_signal;
  ::sigemptyset(&sa.sa_mask);
  // While the handler runs, the other signal waits (a second Ctrl-C must not interrupt the clean-up).
  ::sigaddset(&sa.sa_mask, SIGINT);
  ::sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_flags = 0;
  for (int sig : {SIGINT, SIGTERM}) {
    // A shell runs background jobs with SIGINT ignored; keep it that way (POSIX convention).
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace vocablens::cli
