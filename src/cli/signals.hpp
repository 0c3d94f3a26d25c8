// src/cli/signals.hpp — what the CLI does on Ctrl-C (SIGINT) and SIGTERM.
//
// Outputs are written through vocablens::write_file_atomic / AtomicWriter (a temporary file beside the
// target, renamed over it when complete). On SIGINT or SIGTERM the handler removes every temporary
// file still in flight, prints "vocablens: interrupted" on stderr and exits with 128 + the signal number
// (130 for SIGINT, 143 for SIGTERM): the target is either absent, or the old file, or the whole new one.
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
