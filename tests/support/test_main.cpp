// The shared main() of every test program (Catch2 v2). The LibTorch programs also serve their own runs from a
// fork server (fork_server.hpp; CTest runs them through vl_test_client): `PROGRAM --vl-test-server start|stop ...`.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>

#include "fork_server.hpp"
#include "fork_wire.hpp"

namespace {
int run_tests(int argc, char** argv) { return Catch::Session().run(argc, argv); }
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], vl_fork_wire::kTestServerFlag) == 0)
    return vl_fork_server::command(argv[0], run_tests, argc - 2, argv + 2);
  return run_tests(argc, argv);
}
