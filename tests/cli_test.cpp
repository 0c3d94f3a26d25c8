// The `vocablens` CLI end to end, as the real binary (process start included: this test runs no fork server):
// greedy generation reproduces llama2.c's published output byte for byte, and --help explains. The commands'
// output that does not depend on how the process started (inspect of every fixture, each command's --help)
// is checked by cli_commands_test.cpp, whose runs take the fork server (~0.45 s of CPU less each).
#include "fixtures.hpp"

namespace {
std::string run_ok(const std::string& args, std::string* err_out = nullptr) {
  std::string cli = vl_test::cli_path();
  REQUIRE_FALSE(cli.empty());
  std::string dir = vl_test::temp_dir("cli");
  std::string out;
  // stdout only (stderr to a file): generated text is compared byte for byte.
  int rc = vl_test::run_command(cli + " " + args + " 2>" + dir + "/err", out);
  std::string err = vl_test::read_file(dir + "/err");
  INFO("args: " << args << "\nstderr: " << err);
  REQUIRE(rc == 0);
  if (err_out) *err_out = err;
  return out;
}
}  // namespace

TEST_CASE("generate: stories260K greedy from BOS equals run.c -t 0 -n 200 byte for byte", "[cli]") {
  std::string dir = vl_test::fixture("stories260K");
  if (dir.empty()) return;
  std::string want = vl_test::read_file(dir + "/reference/runc_greedy_t0_n200.txt");
  CHECK(run_ok("generate '" + dir + "/stories260K.bin' --steps 200") == want);
}

TEST_CASE("generate: llama2xs model.bin and ckpt.pt equal run.c -n 128 byte for byte", "[cli]") {
  std::string dir = vl_test::fixture("llama2xs");
  if (dir.empty()) return;
  std::string want = vl_test::read_file(dir + "/reference/runc_greedy_t0_n128.txt");
  CHECK(run_ok("generate '" + dir + "/model.bin' -n 128") == want);
  CHECK(run_ok("generate '" + dir + "/ckpt.pt' -n 128") == want);
}

TEST_CASE("generate: --ids prints BOS and the greedy ids", "[cli]") {
  std::string dir = vl_test::fixture("stories260K");
  if (dir.empty()) return;
  CHECK(run_ok("generate '" + dir + "/stories260K.bin' --steps 4 --ids") == "1 403 407 261 378\n");
}

TEST_CASE("--help lists the commands and explains MODEL", "[cli]") {
  std::string out = run_ok("--help");
  CHECK(out.find("inspect") != std::string::npos);
  CHECK(out.find("generate") != std::string::npos);
  CHECK(out.find("llama2.c") != std::string::npos);
}

namespace {
// What libgomp's OMP_DISPLAY_ENV=VERBOSE printed last for `name` ('...' value), "" when absent: a process that
// executes itself again prints its block twice, and the last one is the process that did the work.
std::string last_omp_setting(const std::string& err, const std::string& name) {
  const std::string key = "  " + name + " = '";
  const size_t at = err.rfind(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size(), to = err.find('\'', from);
  return to == std::string::npos ? "" : err.substr(from, to - from);
}
}  // namespace

TEST_CASE("OpenMP's idle threads sleep: the CLI runs with OMP_WAIT_POLICY=PASSIVE unless told otherwise", "[cli]") {
  const std::string m = vl_test::fixture("gpt2-tiny");
  REQUIRE_FALSE(m.empty());
  const std::string cli = vl_test::cli_path();
  REQUIRE_FALSE(cli.empty());
  const std::string clean =
      "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u VOCABLENS_THREADS -u OMP_NUM_THREADS OMP_DISPLAY_ENV=VERBOSE ";
  std::string out;  // stdout and stderr, where libgomp prints its settings
  // May use two threads (this machine has 2 cores): libgomp spins 0 pauses before sleeping, set before it
  // loaded: one process start, so libgomp prints its settings once.
  REQUIRE(vl_test::run_command(clean + cli + " inspect '" + m + "'", out) == 0);
  INFO(out);
  CHECK(last_omp_setting(out, "OMP_WAIT_POLICY") == "PASSIVE");
  CHECK(last_omp_setting(out, "GOMP_SPINCOUNT") == "0");
  CHECK(out.find("OPENMP DISPLAY ENVIRONMENT BEGIN") == out.rfind("OPENMP DISPLAY ENVIRONMENT BEGIN"));
  // The user's own choice stands.
  REQUIRE(vl_test::run_command(clean + "OMP_WAIT_POLICY=ACTIVE " + cli + " inspect '" + m + "'", out) == 0);
  CHECK(last_omp_setting(out, "OMP_WAIT_POLICY") == "ACTIVE");
  CHECK(last_omp_setting(out, "GOMP_SPINCOUNT") != "0");
  // One thread: nothing to wait for, no second process start (one block, libgomp's default spin).
  REQUIRE(vl_test::run_command(clean + "VOCABLENS_THREADS=1 " + cli + " inspect '" + m + "'", out) == 0);
  CHECK(out.find("OPENMP DISPLAY ENVIRONMENT BEGIN") != std::string::npos);
  CHECK(out.find("OPENMP DISPLAY ENVIRONMENT BEGIN") == out.rfind("OPENMP DISPLAY ENVIRONMENT BEGIN"));
  CHECK(last_omp_setting(out, "GOMP_SPINCOUNT") != "0");
}
