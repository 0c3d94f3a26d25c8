// The CLI's commands describe themselves: inspect describes every fixture model, and every analysis
// command's --help is clean. Moved out of cli_test.cpp (which keeps the real binary for what depends on the
// process start: generate, --help): here the CLI runs through the tests' fork server, which runs the same
// run_main() in a forked process, 19 runs without LibTorch's ~0.45 s start each.
#include "fixtures.hpp"

namespace {
// The CLI's stdout (stderr to a file, shown on failure); the run must succeed.
std::string cli_stdout(const std::string& args) {
  std::string cli = vl_test::cli_path();
  REQUIRE_FALSE(cli.empty());
  std::string dir = vl_test::temp_dir("cli-commands");
  std::string out;
  int rc = vl_test::run_command(cli + " " + args + " 2>" + dir + "/err", out);
  INFO("args: " << args << "\nstderr: " << vl_test::read_file(dir + "/err"));
  REQUIRE(rc == 0);
  return out;
}
}  // namespace

TEST_CASE("inspect: every fixture model", "[cli]") {
  for (const char* m : {"gpt2-tiny", "gpt2-tiny-prefixed", "gpt2-tiny-torchbin", "stories260K/stories260K.bin", "stories260K-hf",
                        "llama2xs/model.bin", "llama2xs/ckpt.pt"}) {
    std::string p = vl_test::fixture(m);
    if (p.empty()) continue;
    std::string out = cli_stdout("inspect '" + p + "'");
    INFO(out);
    CHECK(out.find("layers") != std::string::npos);
    CHECK(out.find("parameters") != std::string::npos);
  }
  std::string p = vl_test::fixture("gpt2-tiny-prefixed");
  if (p.empty()) return;
  std::string out = cli_stdout("inspect '" + p + "' --json");
  CHECK(out.find("\"weight_dtype\": \"F16\"") != std::string::npos);
  CHECK(out.find("\"parameters\": 3374720") != std::string::npos);
}

TEST_CASE("--help of every analysis command (and demo) shows --no-color, not CLI11's --no-color{false}", "[cli]") {
  // The default-value syntax of the flag's definition leaked into every command's help.
  for (const char* cmd : {"lens", "heads", "neurons", "project", "spectrum", "neighbours", "knn", "positions", "demo", "compare",
                          "compare-embeddings"}) {
    INFO(cmd);
    std::string out = cli_stdout(std::string(cmd) + " --help");
    if (std::string(cmd) != "demo") CHECK(out.find("--no-color") != std::string::npos);
    CHECK(out.find("{false}") == std::string::npos);
    CHECK(out.find("{true}") == std::string::npos);
  }
}
