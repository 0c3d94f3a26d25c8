// The options every command takes (--timings, --allow-nonfinite) after a nested command (`tuned-lens sample`,
// `tuned-lens train`, `tuned-lens eval`), and the message for an option no command there knows: it names the
// nested command and that option (it used to blame the nested command's first own option, '--corpus').
#include <catch2/catch.hpp>

#include <string>

#include "fixtures.hpp"

using vl_test::shq;

TEST_CASE("--timings and --allow-nonfinite after a nested command") {
  const std::string cli = vl_test::require_cli();
  REQUIRE(!cli.empty());
  const std::string model = vl_test::fixture("stories260K/stories260K.bin");
  REQUIRE(!model.empty());
  const std::string tmp = vl_test::temp_dir("nested-options");
  std::string out;
  int rc = vl_test::run_command(shq(cli) + " tuned-lens sample " + shq(model) + " --tokens 300 --max-len 32 --out " +
                                    shq(tmp + "/corpus.txt") + " --timings --allow-nonfinite 2>&1",
                                out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK_THAT(out, Catch::Contains("phase") && Catch::Contains("forward") && Catch::Contains("total"));
  rc = vl_test::run_command(shq(cli) + " tuned-lens train " + shq(model) + " --corpus " + shq(tmp + "/corpus.txt") + " --out " +
                                shq(tmp + "/lens") + " --window 32 --tokens-per-step 256 --steps 2 --timings 2>&1",
                            out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK_THAT(out, Catch::Contains("phase") && Catch::Contains("total"));
  CHECK(vl_test::file_exists(tmp + "/lens/config.json"));
}

TEST_CASE("an unknown option after a nested command is named, with its command") {
  const std::string cli = vl_test::require_cli();
  REQUIRE(!cli.empty());
  const std::string model = vl_test::fixture("stories260K/stories260K.bin");
  REQUIRE(!model.empty());
  std::string out;
  const int rc = vl_test::run_command(
      shq(cli) + " tuned-lens train " + shq(model) + " --corpus x.txt --out /nonexistent/x --stepz 3 2>&1", out);
  INFO(out);
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains("tuned-lens train: unknown option '--stepz'; did you mean '--steps'?"));
  CHECK_THAT(out, !Catch::Contains("'--corpus'"));
}
