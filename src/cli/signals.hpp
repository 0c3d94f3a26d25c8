// src/cli/signals.hpp — what the CLI does on Ctrl-C (SIGINT) and SIGTERM.
//
// Outputs are written through vocablens::write_file_atomic / AtomicWriter (a temporary file beside the
// target, renamed over it when complete). On SIGINT or SIGTERM the handler removes every temporary
// file still in flight, prints "vocablens: interrupted" on stderr and exits with 128 + the signal number
// (130 for SIGINT, 143 for SIGTERM): the target is either absent, or the old file, or the whole new one.
// Inside a vocablens::InterruptScope (train) the first signal is only recorded and the work stops at its
// next safe point by throwing vocablens::Interrupted (main prints it, exit 128 + signal); a second signal
// exits at once as above (vocablens/interrupt.hpp).
//
//   int main(int argc, char** argv) {
//     ...
//     vocablens::cli::install_signal_handlers();   // before dispatching to a subcommand
//   }
#pragma once

namespace vocablens::cli {

/// Installs the SIGINT/SIGTERM handler described above (sigaction; async-signal-safe: unlink, write, _exit).
void install_signal_handlers();

}  // namespace vocablens::cli
