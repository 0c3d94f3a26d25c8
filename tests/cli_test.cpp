// The `vocablens` CLI end to end: greedy generation reproduces llama2.c's published output byte for
// byte, inspect describes every fixture, and --help explains.
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

TEST_CASE("inspect: every fixture model", "[cli]") {
  for (const char* m : {"gpt2-tiny", "gpt2-tiny-prefixed", "gpt2-tiny-torchbin", "stories260K/stories260K.bin",
                        "stories260K-hf", "llama2xs/model.bin", "llama2xs/ckpt.pt"}) {
    std::string p = vl_test::fixture(m);
    if (p.empty()) continue;
    std::string out = run_ok("inspect '" + p + "'");
    INFO(out);
    CHECK(out.find("layers") != std::string::npos);
    CHECK(out.find("parameters") != std::string::npos);
  }
  std::string p = vl_test::fixture("gpt2-tiny-prefixed");
  if (p.empty()) return;
  std::string out = run_ok("inspect '" + p + "' --json");
  CHECK(out.find("\"weight_dtype\": \"F16\"") != std::string::npos);
  CHECK(out.find("\"parameters\": 3374720") != std::string::npos);
}

TEST_CASE("--help lists the commands and explains MODEL", "[cli]") {
  std::string out = run_ok("--help");
  CHECK(out.find("inspect") != std::string::npos);
  CHECK(out.find("generate") != std::string::npos);
  CHECK(out.find("llama2.c") != std::string::npos);
}

TEST_CASE("--help of every analysis command (and demo) shows --no-color, not CLI11's --no-color{false}", "[cli]") {
  // The default-value syntax of the flag's definition leaked into every command's help.
  for (const char* cmd : {"lens", "heads", "neurons", "project", "spectrum", "neighbours", "knn", "positions", "demo",
                          "compare", "compare-embeddings"}) {
    INFO(cmd);
    std::string out = run_ok(std::string(cmd) + " --help");
    if (std::string(cmd) != "demo") CHECK(out.find("--no-color") != std::string::npos);
    CHECK(out.find("{false}") == std::string::npos);
    CHECK(out.find("{true}") == std::string::npos);
  }
}
