// `vocablens tuned-lens train` as a new user meets it: defaults scaled to the model and corpus (the package's
// GPU recipe, 250 steps of 2^18 tokens, took hours on stories260K), the schedule and an estimate of the time
// said up front, progress with an ETA also when stderr is a file, a warning when a small corpus is read many
// times over, and a lens stopped early (--stop-after, Ctrl-C: see interrupt_test) marked unfinished in its
// files so that `lens --tuned` warns about it.
//
// The expected numbers come from the rule as documented (tuned_lens_train.hpp), not from a run: windows per
// step = min(2^18, 256 * d_model) / window, at most the corpus's windows (stories260K: d_model 64).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <regex>
#include <string>

#include "fixtures.hpp"

using namespace vl_test;

namespace {

struct Corpora {
  std::string root, model, small, large;
};

// stories260K's own text: 4000 tokens (about 62 windows of 64), and that text five times over, 20000 tokens
// (about 312 windows). The tests read only how many windows a corpus has (the schedule, the reuse warning), not
// what they say: the large corpus need not be sampled anew (a 20000-token sample cost most of this test's CPU).
const Corpora& corpora() {
  static Corpora c = [] {
    Corpora k;
    k.model = fixture("stories260K/stories260K.bin");
    REQUIRE(!k.model.empty());
    k.root = temp_dir("tuned-ux");
    k.small = k.root + "/small.txt";
    k.large = k.root + "/large.txt";
    std::string out;
    REQUIRE(run_command(
                cli_path() + " tuned-lens sample " + shq(k.model) + " --tokens 4000 --seed 3 --max-len 64 --out " + shq(k.small),
                out) == 0);
    const std::string text = read_file(k.small);
    REQUIRE(!text.empty());
    REQUIRE(text.back() == '\n');  // whole lines: the copies do not run into each other
    write_file(k.large, text + text + text + text + text);
    return k;
  }();
  return c;
}

// "(W windows of 64; S per step)" from the summary line.
std::pair<int64_t, int64_t> windows_and_step(const std::string& out) {
  std::smatch m;
  const std::string s = out;
  REQUIRE(std::regex_search(s, m, std::regex(R"(\((\d+) windows of 64; (\d+) per step)")));
  return {std::stoll(m[1]), std::stoll(m[2])};
}

}  // namespace

TEST_CASE("tuned-lens train: tokens per step scaled to d_model and the corpus, the schedule said up front", "[tuned_lens][ux]") {
  const auto& c = corpora();
  std::string out;
  // Large corpus: 256 x 64 = 16384 tokens per step = 256 windows of 64 (the package's 2^18 would be 4096).
  const std::string d1 = c.root + "/lens-large";
  REQUIRE(run_command(cli_path() + " tuned-lens train " + shq(c.model) + " --corpus " + shq(c.large) + " --out " + shq(d1) +
                          " --window 64 --stop-after 1",
                      out) == 0);
  INFO(out);
  auto [windows, per_step] = windows_and_step(out);
  CHECK(windows > 256);
  CHECK(per_step == 256);
  CHECK(out.find("256 windows x 64 tokens = 16384 tokens per step (scaled to d_model 64 and the corpus") != std::string::npos);
  // Small corpus: a step never holds more windows than the corpus has.
  const std::string d2 = c.root + "/lens-small";
  REQUIRE(run_command(cli_path() + " tuned-lens train " + shq(c.model) + " --corpus " + shq(c.small) + " --out " + shq(d2) +
                          " --window 64 --stop-after 1",
                      out) == 0);
  INFO(out);
  auto [w2, s2] = windows_and_step(out);
  CHECK(w2 < 256);
  CHECK(s2 == w2);
  // The package's recipe stays one flag away.
  const std::string d3 = c.root + "/lens-recipe";
  REQUIRE(run_command(cli_path() + " tuned-lens train " + shq(c.model) + " --corpus " + shq(c.small) + " --out " + shq(d3) +
                          " --window 64 --tokens-per-step 128 --steps 3 --quiet",
                      out) == 0);
  CHECK(windows_and_step(out).second == 2);
  CHECK(run_command(cli_path() + " tuned-lens train " + shq(c.model) + " --corpus " + shq(c.small) + " --out " + shq(d3) +
                        "x --tokens-per-step 0",
                    out) == 2);  // 0 is not a count (the default is the scaled one)
}

TEST_CASE("tuned-lens train: the corpus read many times over is said, with how many", "[tuned_lens][ux]") {
  const auto& c = corpora();
  std::string out;
  // 250 steps of all ~62 windows: the corpus is read 250 times over.
  REQUIRE(run_command(cli_path() + " tuned-lens train " + shq(c.model) + " --corpus " + shq(c.small) + " --out " +
                          shq(c.root + "/lens-reuse") + " --window 64 --stop-after 1 --quiet",
                      out) == 0);
  INFO(out);
  CHECK(out.find("vocablens: warning: the schedule reads the corpus 250 times over") != std::string::npos);
  // 2 steps of 8 windows out of ~312: less than one pass, no warning.
  REQUIRE(run_command(cli_path() + " tuned-lens train " + shq(c.model) + " --corpus " + shq(c.large) + " --out " +
                          shq(c.root + "/lens-once") + " --window 64 --tokens-per-step 512 --steps 2 --quiet",
                      out) == 0);
  CHECK(out.find("reads the corpus") == std::string::npos);
}

TEST_CASE("tuned-lens train: progress lines with an ETA when stderr is not a terminal, and an estimate up front",
          "[tuned_lens][ux]") {
  const auto& c = corpora();
  std::string out;
  // stderr is a pipe here (run_command). Interval 0: a line at every micro-batch (4 windows each, 64 per step).
  REQUIRE(run_command("VOCABLENS_PROGRESS_INTERVAL=0 " + cli_path() + " tuned-lens train " + shq(c.model) + " --corpus " +
                          shq(c.large) + " --out " + shq(c.root + "/lens-progress") +
                          " --window 64 --tokens-per-step 4096 --micro-batch 4 --steps 3",
                      out) == 0);
  INFO(out);
  const auto estimate = out.find("tuned-lens: estimated ");
  REQUIRE(estimate != std::string::npos);
  CHECK(out.find("for steps 1..3 of 3 (192 windows; measured on the first 4)") != std::string::npos);
  CHECK(estimate < out.find("tuned-lens step 1/3 ("));  // before any step has finished
  // Within a step: "tuned-lens step 1/3 (4.2 %): 8 of 192 windows  elapsed 1.2s  eta 30.1s"
  CHECK(std::regex_search(out, std::regex(R"(tuned-lens step 1/3 \([0-9.]+ %\): 8 of 192 windows  elapsed \S+  eta \S+)")));
  // At the end of each step, with the loss.
  for (int s = 1; s <= 3; ++s)
    CHECK(std::regex_search(out, std::regex("tuned-lens step " + std::to_string(s) +
                                            R"(/3 \([0-9.]+ %\)  loss [0-9.]+  lr \S+  elapsed \S+  eta \S+)")));
  // The default interval (30 s) on the same short run: the tenths of the steps only, still with the ETA.
  REQUIRE(run_command(cli_path() + " tuned-lens train " + shq(c.model) + " --corpus " + shq(c.large) + " --out " +
                          shq(c.root + "/lens-progress2") + " --window 64 --tokens-per-step 256 --micro-batch 4 --steps 3",
                      out) == 0);
  CHECK(std::regex_search(out, std::regex(R"(tuned-lens step 3/3 \(100.0 %\)  loss [0-9.]+  lr \S+  elapsed \S+  eta 0.0s)")));
  CHECK(out.find(" windows  elapsed") == std::string::npos);
}

TEST_CASE("tuned-lens train --stop-after: the lens is marked unfinished, lens --tuned warns, --resume clears the mark",
          "[tuned_lens][ux]") {
  const auto& c = corpora();
  const std::string dir = c.root + "/lens-unfinished";
  const std::string train = cli_path() + " tuned-lens train " + shq(c.model) + " --corpus " + shq(c.small) + " --out " +
                            shq(dir) + " --window 64 --tokens-per-step 256 --steps 3 --quiet";
  std::string out;
  REQUIRE(run_command(train + " --stop-after 1", out) == 0);
  INFO(out);
  CHECK(out.find("the lens is unfinished (1 of 3 steps)") != std::string::npos);
  auto cfg = nlohmann::json::parse(read_file(dir + "/config.json"));
  REQUIRE(cfg.contains("vocablens_unfinished"));
  CHECK(cfg["vocablens_unfinished"]["trained_steps"] == 1);
  CHECK(cfg["vocablens_unfinished"]["steps"] == 3);
  auto log = nlohmann::json::parse(read_file(dir + "/train_log.json"));
  CHECK(log["finished"] == false);
  CHECK(log["trained_steps"] == 1);
  // Every reader of the lens says so: lens --tuned and tuned-lens eval.
  const std::string warn = "is an unfinished tuned lens: trained 1 of 3 steps";
  REQUIRE(run_command(cli_path() + " lens " + shq(c.model) + " --tuned " + shq(dir) + " --prompt 'Once upon a time'", out) == 0);
  CHECK(out.find(warn) != std::string::npos);
  REQUIRE(run_command(cli_path() + " tuned-lens eval " + shq(c.model) + " --tuned " + shq(dir) + " --corpus " + shq(c.small) +
                          " --window 64 --max-tokens 200",
                      out) == 0);
  CHECK(out.find(warn) != std::string::npos);
  // Finished with --resume: no mark, no warning.
  REQUIRE(run_command(train + " --resume", out) == 0);
  cfg = nlohmann::json::parse(read_file(dir + "/config.json"));
  CHECK_FALSE(cfg.contains("vocablens_unfinished"));
  CHECK(nlohmann::json::parse(read_file(dir + "/train_log.json"))["finished"] == true);
  REQUIRE(run_command(cli_path() + " lens " + shq(c.model) + " --tuned " + shq(dir) + " --prompt 'Once upon a time'", out) == 0);
  CHECK(out.find("unfinished") == std::string::npos);
}
