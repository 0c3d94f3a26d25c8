// libvocablens-cli.so's one exported symbol, which the `vocablens` loader (src/cli/main.cpp) calls.
#include "cli/run_main.hpp"

extern "C" __attribute__((visibility("default"))) int vocablens_cli_main(int argc, char** argv) {
  return vocablens::cli::run_main(argc, argv);
}
