// src/cli/run_main.hpp — the whole `vocablens` command line as one function.
//
// main() (src/cli/main.cpp) is `return vocablens::cli::run_main(argc, argv);`. The CLI's objects are built
// once (the vocablens_cli_objects library, CMakeLists.txt) and linked into two programs: the product binary
// `vocablens` and the test suite's fork server (tests/support/cli_server.cpp, docs/testing.md), whose workers
// call run_main() after fork() instead of starting a new process.
//
// run_main() is called at most once per process: it installs the signal handlers, sets malloc's thresholds and
// the thread count, and may re-exec the process (/proc/self/exe with the same argv) to pin OpenBLAS's kernels
// (cli/blas_kernels.hpp). Returns the process's exit code (0 ok, 1 error, 2 usage, 3 internal, 128+N signal).
#pragma once

namespace vocablens::cli {

int run_main(int argc, char** argv);

}  // namespace vocablens::cli
