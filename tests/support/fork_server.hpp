// tests/support/fork_server.hpp — a program of the test suite serving its own runs from a warm fork server.
//
// Test infrastructure only (docs/testing.md, "The fork servers"). A program whose start-up is expensive (LibTorch:
// ~0.5 s of CPU before main) gives its main() a server mode; fork_client.cpp then hands each run's process state
// to that server, whose forked worker calls `entry` as if the program had just started:
//
//   int main(int argc, char** argv) {
//     if (argc > 1 && std::strcmp(argv[1], "--vl-fork-server") == 0)
//       return vl_fork_server::command("my_program", real_main, argc - 2, argv + 2);
//     return real_main(argc, argv);
//   }
//
// The server runs none of the program's code before it forks (no thread may exist at a fork); what a worker
// cannot reproduce (load-time environment variables that differ, a rebuilt binary) makes the client run the
// real binary instead. The protocol: fork_wire.hpp.
#pragma once

namespace vl_fork_server {

/// The program's own main, run by each worker.
using Entry = int (*)(int argc, char** argv);

/// argv = {"start", SOCKET, PIDFILE, IDLE_SECONDS}: (re)starts the daemon, returns 0 once it listens;
/// {"stop", SOCKET, PIDFILE}: stops it. Anything else: a usage line on stderr, 2. `program` names it in messages.
int command(const char* program, Entry entry, int argc, char** argv);

/// Stops the server of PIDFILE if it runs `program` (a path), from another process — one that does not load
/// the program's libraries (vl_test_client --stop). Returns 0.
int stop(const char* socket_path, const char* pid_file, const char* program);

}  // namespace vl_fork_server
