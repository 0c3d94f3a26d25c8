// `--dry-run` on every command that loads a model: the expected peak memory is printed and nothing is
// computed (no result is written, exit 0); without it, a run whose estimate exceeds the limit
// (VOCABLENS_MEMORY_LIMIT, standing in for /proc/meminfo's MemAvailable) is refused before any work with
// one line naming the option that reduces it.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fixtures.hpp"

namespace {

std::string q(const std::string& s) { return "'" + s + "'"; }

// Something was written at p: a file, or a directory with an entry (commands create --out DIR before
// the work, so that an unwritable one fails early; an empty DIR is no result).
// The MiB figure of the estimate's first line containing `label` (-1 when none).
double mib_of(const std::string& out, const std::string& label) {
  const size_t at = out.find(label);
  if (at == std::string::npos) return -1;
  const size_t end = out.find(" MiB", at);
  if (end == std::string::npos) return -1;
  const size_t start = out.find_last_of(' ', end - 1) + 1;
  return std::stod(out.substr(start, end - start));
}

bool wrote(const std::string& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return false;
  if (!S_ISDIR(st.st_mode)) return true;
  DIR* d = ::opendir(p.c_str());
  if (!d) return true;
  bool any = false;
  while (dirent* e = ::readdir(d))
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") any = true;
  ::closedir(d);
  return any;
}

struct DryRunCommand {
  std::string name;     // what the test reports
  std::string args;     // after `vocablens`, without --dry-run
  std::string reduce;   // the option the refusal names
  std::string out_dir;  // a directory the real run would write ("" = none)
};

std::vector<DryRunCommand> dry_run_commands(const std::string& gpt2, const std::string& sae, const std::string& tmp) {
  const std::string M = " " + q(gpt2) + " ";
  const std::string corpus = tmp + "/corpus.txt";
  vl_test::write_file(corpus, "The quick brown fox jumps over the lazy dog. A second sentence follows the first one.\n");
  return {
      {"lens", "lens" + M + "--prompt 'The cat sat on the mat' --out " + q(tmp + "/lens"), "--corpus", tmp + "/lens"},
      {"lens --two-pass", "lens" + M + "--prompt 'The cat sat on the mat' --two-pass --out " + q(tmp + "/lens2"), "--corpus",
       tmp + "/lens2"},
      {"generate", "generate" + M + "--prompt 'Once upon' --steps 3", "--steps", ""},
      {"heads", "heads" + M + "--layer 0 --head 0 --top-k 5 --out " + q(tmp + "/heads"), "--inverse transpose", tmp + "/heads"},
      {"neurons", "neurons" + M + "--layer 0 --out " + q(tmp + "/neurons"), "nothing reduces it", tmp + "/neurons"},
      {"project", "project" + M + "--prompt 'The cat sat' --hook resid_post.0 --out " + q(tmp + "/project"), "--position",
       tmp + "/project"},
      {"attribute", "attribute" + M + "--prompt 'The Eiffel Tower is in' --target ' Paris' --out " + q(tmp + "/attribute"),
       "--prompt", tmp + "/attribute"},
      {"patch",
       "patch" + M +
           "--clean 'The Eiffel Tower is in the city of' --corrupt 'The Colosseum is in the city of' --target ' Paris' --out " +
           q(tmp + "/patch"),
       "--clean", tmp + "/patch"},
      {"ablate", "ablate" + M + "--prompt 'The cat sat on the' --head 0.0 --out " + q(tmp + "/ablate"), "--prompt",
       tmp + "/ablate"},
      {"features", "features" + M + "--sae " + q(sae) + " --features 0-3 --out " + q(tmp + "/features"), "--features",
       tmp + "/features"},
      {"features (lens)", "features" + M + "--sae " + q(sae) + " --prompt 'The cat sat' --out " + q(tmp + "/features-lens"),
       "--prompt", tmp + "/features-lens"},
      {"features (corpus)",
       "features" + M + "--sae " + q(sae) + " --corpus " + q(corpus) + " --window 8 --out " + q(tmp + "/features-corpus"),
       "--window", tmp + "/features-corpus"},
      {"features (Neuronpedia, corpus)",
       "features" + M + "--sae " + q(sae) + " --corpus " + q(corpus) + " --window 8 --neuronpedia " + q(tmp + "/np.json"),
       "--contexts", tmp + "/np.json"},
      {"knn", "knn" + M + "--k 3 --out " + q(tmp + "/knn"), "--block", tmp + "/knn"},
      {"neighbours", "neighbours" + M + "' the' --k 3 --out " + q(tmp + "/neighbours"), "--matrix", tmp + "/neighbours"},
      {"spectrum", "spectrum" + M + "--k 4 --out " + q(tmp + "/spectrum"), "--k", tmp + "/spectrum"},
      {"positions", "positions" + M + "--out " + q(tmp + "/positions"), "--max-positions", tmp + "/positions"},
      {"compare-embeddings", "compare-embeddings" + M + q(gpt2) + " --out " + q(tmp + "/compare"), "--matrix", tmp + "/compare"},
      {"tuned-lens train",
       "tuned-lens train" + M + "--corpus " + q(corpus) + " --out " + q(tmp + "/tuned") + " --steps 1 --window 8 --quiet",
       "--micro-batch", tmp + "/tuned"},
      {"tuned-lens sample", "tuned-lens sample" + M + "--tokens 5 --out " + q(tmp + "/sample.txt"), "--max-len",
       tmp + "/sample.txt"},
  };
}

}  // namespace

TEST_CASE("--dry-run prints an estimate and runs nothing; a run over VOCABLENS_MEMORY_LIMIT is refused up front") {
  const std::string cli = vl_test::cli_path();
  REQUIRE(!cli.empty());
  const std::string gpt2 = vl_test::fixture("gpt2-tiny");
  REQUIRE(!gpt2.empty());
  const std::string tmp = vl_test::temp_dir("dry-run");
  // An SAE for gpt2-tiny's residual (the generator of tests/sae_test.cpp; its saelens_standard case alone: the
  // other layouts and the dense references cost 3-4 s of Python and torch, and a dry run needs one SAE to size).
  // Catch2 runs this test case once per SECTION below (23 times): the SAE is written on the first pass only.
  static const std::string sae_tmp = vl_test::temp_dir("dry-run-sae");
  static std::string log;
  static const int made = vl_test::run_command("/usr/bin/python3 " + std::string(VOCABLENS_SOURCE_DIR) +
                                                   "/tests/fixtures/sae/make_saes.py --standard-only " + q(sae_tmp + "/saes"),
                                               log);
  INFO(log);
  REQUIRE(made == 0);
  const std::string sae = sae_tmp + "/saes/saelens_standard";

  // Each command twice, under a limit of 1 MiB (smaller than the runtime alone, so every estimate exceeds it):
  // with --dry-run, then without. What a command does with --dry-run (its estimate, no work, no file) is the
  // same under any limit: the limit only picks the verdict line, in code common to every command
  // (src/cli/memory_check.cpp, check_memory()), so the dry run without a limit (the machine's available memory,
  // "it fits") is run for one command below, not for each (each run of the CLI costs ~0.15 s).
  for (const DryRunCommand& c : dry_run_commands(gpt2, sae, tmp)) {
    SECTION(c.name) {
      std::string out;
      const int rc = vl_test::run_command("VOCABLENS_MEMORY_LIMIT=1M " + q(cli) + " " + c.args + " --dry-run 2>&1", out);
      INFO(c.args << "\n" << out);
      CHECK(rc == 0);  // printed, with the verdict, still exit 0
      CHECK_THAT(out, Catch::Contains("--dry-run") && Catch::Contains("expected peak memory") &&
                          Catch::Contains("weights as stored") && Catch::Contains("total") &&
                          Catch::Contains("nothing was computed") && Catch::Contains("would NOT fit") &&
                          Catch::Contains(c.reduce));
      if (!c.out_dir.empty()) CHECK_FALSE(wrote(c.out_dir));  // nothing written: the run did not happen

      const int refused = vl_test::run_command("VOCABLENS_MEMORY_LIMIT=1M " + q(cli) + " " + c.args + " 2>&1", out);
      INFO(out);
      CHECK(refused == 1);
      CHECK_THAT(out,
                 Catch::Contains("MiB are available") && Catch::Contains("VOCABLENS_MEMORY_LIMIT") && Catch::Contains(c.reduce));
      CHECK(std::count(out.begin(), out.end(), '\n') == 1);  // one line
      if (!c.out_dir.empty()) CHECK_FALSE(wrote(c.out_dir));
    }
  }

  SECTION("graph: its estimate runs the forward and the encoders (to count the active features), and says so") {
    std::string out;
    const std::string dir = tmp + "/graph-dry";
    const int rc = vl_test::run_command(q(cli) + " graph " + q(gpt2) + " --transcoders " +
                                            q(std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/graph/gpt2-tiny") +
                                            " --prompt 'The Eiffel Tower is in' --out " + q(dir) + " --dry-run 2>&1",
                                        out);
    INFO(out);
    CHECK(rc == 0);
    CHECK_THAT(out, Catch::Contains("expected peak memory") &&
                        Catch::Contains("(dry run: forward and encoders only; no attribution computed)") &&
                        !Catch::Contains("nothing was computed"));
    CHECK_FALSE(wrote(dir));
  }

  SECTION("without VOCABLENS_MEMORY_LIMIT: the machine's available memory, and gpt2-tiny fits") {
    std::string out;
    const std::string dir = tmp + "/lens-nolimit";
    const int rc = vl_test::run_command("env -u VOCABLENS_MEMORY_LIMIT " + q(cli) + " lens " + q(gpt2) +
                                            " --prompt 'The cat sat on the mat' --out " + q(dir) + " --dry-run 2>&1",
                                        out);
    INFO(out);
    CHECK(rc == 0);
    CHECK_THAT(out, Catch::Contains("--dry-run") && Catch::Contains("expected peak memory") &&
                        Catch::Contains("weights as stored") && Catch::Contains("total") &&
                        Catch::Contains("nothing was computed") && Catch::Contains("available now:") &&
                        Catch::Contains("it fits") && !Catch::Contains("(VOCABLENS_MEMORY_LIMIT)"));
    CHECK_FALSE(wrote(dir));
  }

  SECTION("--two-pass: the final distribution [T, V] instead of the residual stack; one prompt only") {
    std::string out;
    REQUIRE(vl_test::run_command(q(cli) + " lens " + q(gpt2) + " --prompt 'The cat sat' --two-pass --dry-run 2>&1", out) == 0);
    CHECK_THAT(out, Catch::Contains("the final distribution [T, V]") && !Catch::Contains("normalised residuals"));
    CHECK(vl_test::run_command(q(cli) + " lens " + q(gpt2) + " --corpus " + q(tmp + "/corpus.txt") + " --two-pass 2>&1", out) ==
          2);
    CHECK_THAT(out, Catch::Contains("--two-pass applies to one prompt"));
  }

  SECTION("lens: the projection matrix the engine holds is counted (a copy of a W_U not stored as float32, E+)") {
    // gpt2-tiny-q8_0.gguf: d_model 64, vocabulary 50257, W_U tied to the Q8_0 embedding (its header and
    // tests/gguf_model_test.cpp); the sizes below are d·V·4 and d·V·2 bytes, in MiB with one decimal.
    const std::string q8 = std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/gpt2-tiny-q8_0.gguf";
    const std::string lens = " lens " + q(q8) + " --prompt 'The cat sat' --dry-run 2>&1";
    std::string out;
    REQUIRE(vl_test::run_command(q(cli) + lens, out) == 0);
    CHECK_THAT(out, Catch::Matches("[\\s\\S]*lens: W_U as float32 \\(stored as Q8_0\\) +12\\.3 MiB[\\s\\S]*"));
    const double block_f32 = mib_of(out, "lens: one logit block");
    REQUIRE(vl_test::run_command(q(cli) + " --dtype bfloat16" + lens, out) == 0);
    CHECK_THAT(out, Catch::Matches("[\\s\\S]*lens: W_U as bfloat16 \\(stored as Q8_0\\) +6\\.1 MiB[\\s\\S]*"));
    // the block's bf16 GEMM: its bf16 activations and result at least (rows·(V + d)·2 bytes: 1.5× the float32
    // block), and on CPUs without AVX-512 the float32 path's transients (src/model/bf16_gemm.hpp)
    const double block_bf16 = mib_of(out, "lens: one logit block (and its bfloat16 product)");
    INFO(out);
    REQUIRE(block_f32 > 0);
    CHECK(block_bf16 >= 1.5 * block_f32 - 0.1);
    REQUIRE(vl_test::run_command(q(cli) + lens.substr(0, lens.size() - 5) + " --unembed pinv 2>&1", out) == 0);
    CHECK_THAT(out, Catch::Matches("[\\s\\S]*lens: E⁺ \\[d, V\\] as float32 +12\\.3 MiB[\\s\\S]*") &&
                        Catch::Contains("E⁺ computed when not cached") && !Catch::Contains("W_U as"));
    // gpt2-tiny's safetensors are float32: W_U is used in place, no copy counted.
    REQUIRE(vl_test::run_command(q(cli) + " lens " + q(gpt2) + " --prompt 'The cat sat' --dry-run 2>&1", out) == 0);
    CHECK_THAT(out, !Catch::Contains("W_U as"));
  }

  SECTION("a bad VOCABLENS_MEMORY_LIMIT is named") {
    std::string out;
    CHECK(vl_test::run_command("VOCABLENS_MEMORY_LIMIT=lots " + q(cli) + " generate " + q(gpt2) + " --prompt x --steps 1 2>&1",
                               out) != 0);
    CHECK_THAT(out, Catch::Contains("VOCABLENS_MEMORY_LIMIT='lots'"));
  }
}
