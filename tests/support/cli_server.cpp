// vl_cli_server — the `vocablens` CLI with a fork-server mode (test infrastructure; docs/testing.md).
//
// The same objects as the product binary (vocablens_cli_objects) with another main():
//   vl_cli_server ARGS...                                       the CLI itself, exactly as `vocablens ARGS...`
//                                                               (a worker may re-exec /proc/self/exe to pin
//                                                               OpenBLAS's kernels: cli/blas_kernels.cpp)
//   vl_cli_server --vl-cli-server start SOCKET PIDFILE IDLE_S   the fork server (fork_server.hpp), whose workers
//   vl_cli_server --vl-cli-server stop SOCKET PIDFILE           run the CLI's run_main for vl_cli_client
#include <cstring>

#include "cli/run_main.hpp"
#include "fork_server.hpp"
#include "fork_wire.hpp"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], vl_fork_wire::kCliServerFlag) == 0)
    return vl_fork_server::command("vl_cli_server", vocablens::cli::run_main, argc - 2, argv + 2);
  return vocablens::cli::run_main(argc, argv);
}
