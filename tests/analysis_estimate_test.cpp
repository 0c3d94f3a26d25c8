// The estimate an analysis declares beside its run (vocablens/analysis_estimate.hpp): what every surface's
// `--dry-run`, refusal and budget read. Checked against the shapes it must count (not against itself), the
// CLI's own dry run, and the surfaces' spellings.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

using json = nlohmann::json;

TEST_CASE("the lens's declared estimate counts its prompt's stack and logit block, in the surface's spelling") {
  const std::string dir = vl_test::fixture("gpt2-tiny");
  REQUIRE(!dir.empty());
  auto m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir, "");
  const auto& lens = vocablens::find_analysis("lens");
  REQUIRE(lens.estimate);
  const auto& c = m.config();
  const double base = vocablens::model_memory(m).total();
  auto est = [&](json given, vocablens::Surface s = vocablens::Surface::Python) {
    return vocablens::estimate_analysis(lens, m, tok.get(), given, s);
  };
  const auto one = est({{"prompt", std::vector<int64_t>{1, 2, 3, 4}}});
  // T = 4 ids, n = layers + 1 lens rows of d floats, and at least one logit block of n * 4 rows of V + d floats.
  const double T = 4, n = static_cast<double>(c.n_layers + 1), d = static_cast<double>(c.d_model),
               V = static_cast<double>(c.vocab_size);
  CHECK(one.memory.total() >= base + n * T * d * 4 + n * T * (V + d) * 4);
  CHECK(one.what.find("the lens of 4 tokens") != std::string::npos);
  // Longer prompts need more; text is tokenised as the run tokenises it.
  const auto longer = est({{"prompt", std::vector<int64_t>(100, 7)}});
  CHECK(longer.memory.total() > one.memory.total());
  const auto text = est({{"prompt", "The Eiffel Tower is in"}});
  CHECK(text.what.find("the lens of " + std::to_string(tok->encode("The Eiffel Tower is in").size()) + " tokens") !=
        std::string::npos);
  // save_probs keeps every layer's [T, V] distribution: exactly n T V float32 more.
  const auto probs = est({{"prompt", std::vector<int64_t>(100, 7)}, {"save_probs", true}});
  CHECK(probs.memory.total() - longer.memory.total() == Approx(n * 100 * V * 4).epsilon(1e-9));
  // How to need less names the option as the surface spells it.
  CHECK(probs.reduce.find("save_probs") != std::string::npos);
  const auto cli = est({{"prompt", std::vector<int64_t>(100, 7)}, {"save_probs", true}}, vocablens::Surface::Cli);
  CHECK(cli.reduce.find("--save-probs") != std::string::npos);
  CHECK(cli.reduce.find("--corpus FILE") != std::string::npos);
  // A bad option is refused by the same resolution the run uses.
  CHECK_THROWS_AS(est({{"prompt", "x"}, {"top_k", -1}}), vocablens::UsageError);
  // An analysis that declares no estimate: the runtime and the weights as stored (spectrum's declaration and run,
  // without whatever estimate it may declare one day).
  const auto& spectrum = vocablens::find_analysis("spectrum");
  const vocablens::DeclaredAnalysis bare(spectrum.decl, spectrum.run);
  CHECK(vocablens::estimate_analysis(bare, m, tok.get(), json::object(), vocablens::Surface::Python).memory.total() ==
        Approx(base));
}

TEST_CASE("the CLI's lens --dry-run prints the declared estimate") {
  const std::string dir = vl_test::fixture("gpt2-tiny");
  REQUIRE(!dir.empty());
  auto m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir, "");
  const auto e = vocablens::estimate_analysis(vocablens::find_analysis("lens"), m, tok.get(),
                                              {{"prompt", std::vector<int64_t>{5, 6, 7}}}, vocablens::Surface::Cli);
  const std::string cli = vl_test::cli_path();
  REQUIRE(!cli.empty());
  std::string out;
  const int rc = vl_test::run_command(cli + " lens '" + dir + "' --prompt-ids 5,6,7 --dry-run", out);
  INFO(out);
  REQUIRE(rc == 0);
  // The table's total row, in MiB with one decimal.
  char total[64];
  std::snprintf(total, sizeof total, "%.1f MiB", e.memory.total() / 1048576.0);
  CHECK(out.find(total) != std::string::npos);
  CHECK(out.find(e.what) != std::string::npos);
}

TEST_CASE("every declared analysis declares its estimate, and each counts more than the weights") {
  // The server admits a request against its memory budget by this estimate, and Python's estimate() and the
  // CLI's --dry-run print it: an analysis without one would count as needing nothing beyond the model.
  for (const auto& a : vocablens::analysis_registry().all()) {
    INFO(a.decl.name);
    CHECK(static_cast<bool>(a.estimate));
  }
  const std::string dir = vl_test::fixture("gpt2-tiny");
  REQUIRE(!dir.empty());
  const vocablens::Model m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  const double weights = vocablens::model_memory(m).total();
  const double V = static_cast<double>(m.config().vocab_size), d = static_cast<double>(m.config().d_model);
  struct Case {
    const char* name;
    json given;
    double at_least;  // what the analysis must hold beyond the weights, from its shapes
  };
  const std::vector<Case> cases = {
      {"knn", json::object(), 2 * V * d * 4},              // the vectors and their normalised copy
      {"neighbours", {{"query", "king"}}, 2 * V * d * 4},  // the same
      {"neurons", {{"layer", 0}}, V * d * 4},              // W_U in float32
      {"spectrum", json::object(), 2 * V * d * 4},         // W_E and its centred copy
      {"steer", {{"prompt", "The cat"}, {"plus", " dog"}, {"minus", " cat"}, {"steps", 4}}, 6 * V * 4},  // logits
      {"lens_corpus",
       {{"path", std::string(VOCABLENS_SOURCE_DIR) + "/docs/examples/heldout.txt"}, {"window", 64}},
       64 * V * 4},  // one window's logit block
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const auto e =
        vocablens::estimate_analysis(vocablens::find_analysis(c.name), m, tok.get(), c.given, vocablens::Surface::Python);
    CHECK(e.memory.total() >= weights + c.at_least);
    CHECK(!e.what.empty());
  }
}
