// tests/readme_core_test.cpp — every command of README.md runs as written (a new user's first day).
//
// The commands are read from README.md itself: each line of a fenced block that starts with
// "./build/vocablens " or "mpirun " (with its "\" continuation lines), in order, in one sandbox laid out as
// the README assumes: the checkout's docs/ and build/ beside ../shared/fixtures. Each must exit 0. The one
// other command in a block, ./scripts/setup.sh (installs Debian packages and builds), is listed below and
// not run; anything else is a failure, so a new command cannot be skipped silently.
//
// The sandbox is build/readme-run (made afresh, kept afterwards) and each command's output is kept in
// build/readme-run/logs/NN.txt (the command on its first line): demo_test checks the README's own demo run
// there instead of training the demo a second time (a CTest fixture, tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.hpp"

namespace fs = std::filesystem;

TEST_CASE("README: every command runs as written", "[readme]") {
  const std::string readme = vl_test::read_file(std::string(VOCABLENS_SOURCE_DIR) + "/README.md");
  REQUIRE(!readme.empty());
  const std::string fixtures = vl_test::fixtures_root();
  REQUIRE(!fixtures.empty());
  std::vector<std::string> commands, not_run;
  std::istringstream in(readme);
  bool in_block = false;
  std::string line, pending;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) {
      in_block = !in_block;
      continue;
    }
    if (!in_block) continue;
    if (!pending.empty()) {
      pending += "\n" + line;
    } else if (line.rfind("./build/vocablens ", 0) == 0 || line.rfind("mpirun ", 0) == 0) {
      pending = line;
    } else if (line.rfind("./", 0) == 0 || line.rfind("vocablens ", 0) == 0) {
      not_run.push_back(line);
      continue;
    } else {
      continue;  // Python, CMake, JSON and other non-shell lines of the README's blocks
    }
    if (!pending.empty() && pending.back() != '\\') {
      commands.push_back(pending);
      pending.clear();
    }
  }
  // The only command not run, and why: it installs packages and rebuilds the project.
  REQUIRE(not_run ==
          std::vector<std::string>{
              "./scripts/setup.sh                      # installs the Debian packages, builds build/vocablens (Release)"});
  REQUIRE(commands.size() >= 20);

  // The sandbox: T/repo/{build, docs} and T/shared/fixtures, so "./build/vocablens", "docs/examples/..." and
  // "../shared/fixtures/..." resolve as in a checkout.
  const fs::path T = fs::path(VOCABLENS_BINARY_DIR) / "readme-run";
  fs::remove_all(T);
  fs::create_directories(T / "repo");
  fs::create_directories(T / "logs");
  // build/ holds the build's files, but where the suite runs its CLI server (VOCABLENS_CLI is the fork client,
  // docs/testing.md) `vocablens` is that client: a worker of the server with LibTorch already loaded, which
  // cli_fork_server_core_test shows indistinguishable from the real binary, ~0.6 CPU-s cheaper per command.
  // mpirun's ranks run the real binary (below). By hand, without a server, build/vocablens is the real one.
  fs::create_directories(T / "repo" / "build");
  const fs::path client = vl_test::cli_path();
  const char* server = std::getenv("VOCABLENS_CLI_SERVER");
  const bool served = server && *server && client.filename() == "vl_cli_client";
  for (const auto& e : fs::directory_iterator(fs::path(VOCABLENS_BINARY_DIR))) {
    const fs::path name = e.path().filename();
    if (name == "readme-run") continue;
    fs::create_symlink(served && name == "vocablens" ? client : e.path(), T / "repo" / "build" / name);
  }
  fs::create_symlink(fs::path(VOCABLENS_SOURCE_DIR) / "docs", T / "repo" / "docs");
  fs::create_symlink(fs::path(fixtures).parent_path(), T / "shared");
  REQUIRE(fs::exists(T / "shared" / fs::path(fixtures).filename()));
  int n = 0;
  for (const auto& cmd : commands) {
    std::string out;
    const auto t0 = std::chrono::steady_clock::now();
    // mpirun refuses root unless told; the environment says so (the command stays as written).
    const int rc = vl_test::run_command(
        "cd '" + (T / "repo").string() + "' && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 VOCABLENS_PROGRESS=0 " +
            // the fork client with no server named runs the real binary: an MPI rank starts as mpirun made it
            std::string(cmd.rfind("mpirun ", 0) == 0 ? "VOCABLENS_CLI_SERVER= " : "") + "bash -c " +
            [&] {
              std::string q = "'";
              for (char c : cmd) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
              return q + "'";
            }(),
        out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char name[16];
    std::snprintf(name, sizeof name, "%02d.txt", ++n);
    std::ofstream(T / "logs" / name) << cmd << "\n" << out;
    INFO(cmd << "\n-> exit " << rc << " after " << s << " s\n" << out.substr(out.size() > 4000 ? out.size() - 4000 : 0));
    CHECK(rc == 0);
  }
}
