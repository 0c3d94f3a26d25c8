// The `vocablens` program: everything is in run_main() (src/cli/run_main.cpp), shared with the test suite's
// fork server.
#include "cli/run_main.hpp"

int main(int argc, char** argv) { return vocablens::cli::run_main(argc, argv); }
