// `vocablens demo`: trains the small GPT (and skip-gram vectors) on the synthetic corpus, runs every analysis,
// writes results, the report and the notebook — and the analyses find the structure planted in the corpus:
//  1. logit lens: the attribute of a fact prompt ("the capital of france is" -> " paris") is the top-1
//     token at the last layer for >= 90% of the world's 118 facts, and at the embedding for none;
//  2. heads: at least one head's OV circuit (W_E W_V W_O W_U) has a copying score >= 0.5 (at initialisation
//     every head of the same architecture is below 0.3);
//  3. skip-gram: >= 80% of the 5 nearest neighbours of countries, cities, animals and fruits are of the
//     same class (chance: about 5%);
//  4. copying lines: the repeated words of held-out "repeat ... : ..." lines are top-1 at the last layer
//     for >= 90% of positions, and at layer 0 for <= 20% (copying needs the two layers to compose).
//  0. the training loss (mean of the last 50 steps) falls below 1.0 nats/token (from 6.66 at step 1).
// The checks are the planted-structure slice's own (vocablens/planted.hpp), run here on the demo's model.
// The run checked is README's own `./build/vocablens demo --out vocablens-demo` (the default 1200 steps), which
// readme_core_test runs in build/readme-run and keeps with its output (a CTest fixture: ctest runs
// readme_core_test first, also for `ctest -R demo_test`) — the demo is trained once per test run, not twice.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/planted.hpp"
#include "vocablens/synthetic.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/train.hpp"

namespace fs = std::filesystem;

namespace {
// README's demo command and its output, as readme_core_test ran and kept them (build/readme-run/logs/NN.txt:
// the command on the first line, then what it printed); `dir` is the directory it wrote.
struct DemoRun {
  std::string command, output, dir;
};
DemoRun readme_demo_run() {
  const fs::path run = fs::path(VOCABLENS_BINARY_DIR) / "readme-run";
  const std::string prefix = "./build/vocablens demo --out ";
  if (fs::is_directory(run / "logs"))
    for (const auto& e : fs::directory_iterator(run / "logs")) {
      const std::string text = vl_test::read_file(e.path().string());
      if (text.rfind(prefix, 0) != 0) continue;
      DemoRun d;
      d.command = text.substr(0, text.find('\n'));
      d.output = text.substr(d.command.size());
      const std::string out = d.command.substr(prefix.size());
      d.dir = (run / "repo" / out.substr(0, out.find(' '))).string();
      return d;
    }
  FAIL("no README demo run in " << run.string() << " (readme_core_test makes it: ctest -R 'readme_core_test|demo_test')");
  return {};
}
}  // namespace

TEST_CASE("demo: one directory of results, and the analyses find what was planted", "[demo]") {
  vocablens::init_runtime();
  const DemoRun run = readme_demo_run();
  const std::string& dir = run.dir;
  const std::string& out = run.output;
  INFO(run.command << "\n" << out);
  // The README's command as written: the default configuration (docs/train.md: 1200 steps).
  REQUIRE(run.command.find("--steps") == std::string::npos);
  CHECK(out.find("Where to look") != std::string::npos);
  CHECK(out.find("report.html") != std::string::npos);
  CHECK(out.find("vocablens.ipynb") != std::string::npos);  // The demo writes the notebook too
  for (const char* f : {"corpus.txt", "model/config.json", "model/model.safetensors", "model/vocab.json", "model/merges.txt",
                        "model/train_log.json", "skipgram/embeddings.safetensors", "results/training.json",
                        "results/logit_lens.json", "results/logit_lens_corpus.json", "results/heads.json", "results/neurons.json",
                        "results/spectrum.json", "results/anisotropy.json", "results/positions.json", "results/neighbours.json",
                        "results/planted_structure.json", "results/report.html", "results/vocablens.ipynb"}) {
    INFO(f);
    CHECK(fs::exists(dir + "/" + f));
  }

  {  // 0. the loss reaches the documented level (docs/train.md: 0.80 nats/token at 1200 steps; 6.66 at step 1)
    auto log = nlohmann::json::parse(vl_test::read_file(dir + "/model/train_log.json"));
    const double final_loss = log["final_loss"].get<double>();
    INFO("final loss " << final_loss);
    CHECK(final_loss < 1.0);
    CHECK(log["losses"].front().get<double>() > 6.0);
  }

  vocablens::Model m = vocablens::load_model(dir + "/model");
  auto tok = vocablens::load_tokenizer_for(dir + "/model");
  vocablens::SyntheticCorpus world = vocablens::synthetic_corpus({});
  // Every word of the world that the checks look up is one token of the trained BPE (" paris").
  for (const auto& f : world.facts) REQUIRE(tok->token_to_id(" " + f.answer).has_value());
  for (const char* cls : {"country", "city", "animal", "fruit"})
    for (const auto& w : vocablens::synthetic_class_members(cls)) REQUIRE(tok->token_to_id(" " + w).has_value());

  {  // 1. logit lens: attributes of fact prompts at the last layer, not at the embedding
    auto fc = vocablens::check_facts(m, *tok, world);
    const int64_t last = fc.correct_by_layer.back(), embed = fc.correct_by_layer.front(), n = fc.n;
    REQUIRE(n == static_cast<int64_t>(world.facts.size()));
    REQUIRE(fc.layer_labels.front() == "embed");
    INFO("top-1 at the last layer " << last << "/" << n << ", at the embedding " << embed << "/" << n);
    CHECK(last >= 0.9 * n);
    CHECK(embed == 0);
  }

  {  // 2. heads: a clearly positive OV copying score
    vocablens::HeadsOptions ho;
    ho.kinds = {vocablens::CircuitKind::OV};
    ho.top_k = 5;
    ho.inverse = vocablens::InverseKind::Embed;
    ho.pinv.use_cache = false;
    const double best = vocablens::check_ov_copying(vocablens::analyze_heads(m, ho, tok.get())).best;
    // The same architecture freshly initialised (seed 1): no head copies.
    vocablens::TrainOptions init;
    init.d_model = m.config().d_model;
    init.n_layers = m.config().n_layers;
    init.n_heads = m.config().n_heads;
    init.n_ctx = m.config().n_ctx;
    auto cfg0 = vocablens::gpt_config(init, m.config().vocab_size);
    vocablens::Model m0(cfg0, vocablens::init_gpt_parameters(cfg0, 1).weights, "init");
    const double best0 = vocablens::check_ov_copying(vocablens::analyze_heads(m0, ho, tok.get())).best;
    INFO("best OV copying score " << best << " (at initialisation " << best0 << ")");
    CHECK(best >= 0.5);
    CHECK(best0 < 0.3);
  }

  {  // 3. skip-gram: neighbours of an entity are entities of its class
    auto wv = vocablens::load_word_vectors(dir + "/skipgram");
    auto nc = vocablens::check_neighbours(wv.vectors, *tok, world, 5);
    for (const char* cls : {"country", "city", "animal", "fruit"}) {
      REQUIRE(nc.by_class.count(cls));
      const auto [same, all] = nc.by_class.at(cls);
      INFO(cls << ": " << same << "/" << all << " of the 5 nearest are of the same class");
      CHECK(all == 5 * static_cast<int64_t>(vocablens::synthetic_class_members(cls).size()));
      CHECK(same >= 0.8 * all);
    }
  }

  {  // 4. copying lines: the repeated words are predicted at the last layer only (two layers compose)
    auto j = nlohmann::json::parse(vl_test::read_file(dir + "/results/planted_structure.json"));
    auto c = j["summary"]["copy_top1_by_layer"];
    INFO(c.dump());
    CHECK(c["1"].get<double>() >= 0.9);
    CHECK(c["0"].get<double>() <= 0.2);
    // The check itself, run here on the same held-out lines as the demo (seed 1 + 2000, 100 lines).
    auto cc = vocablens::check_copying(m, *tok, 2001, 100);
    REQUIRE(cc.n > 100);
    REQUIRE(cc.layer_labels.size() == cc.correct_by_layer.size());
    CHECK(cc.accuracy().back() >= 0.9);
    CHECK(cc.by_label()["0"].get<double>() <= 0.2);
  }

  {  // the demo's own summary agrees
    auto j = nlohmann::json::parse(vl_test::read_file(dir + "/results/planted_structure.json"));
    auto s = j["summary"];
    CHECK(s["fact_top1_by_layer"]["embed"].get<double>() == 0.0);
    CHECK(s["best_ov_copying_score"].get<double>() >= 0.5);
  }
}

TEST_CASE("demo: --help explains the options", "[demo]") {
  std::string cli = vl_test::cli_path();
  REQUIRE_FALSE(cli.empty());
  std::string out;
  REQUIRE(vl_test::run_command(cli + " demo --help", out) == 0);
  for (const char* opt : {"--out", "--steps", "--report", "--positions", "--seed"}) CHECK(out.find(opt) != std::string::npos);
  // Both helps said "about 2 minutes"; the demo takes 35-40 s on 2 cores (docs/benchmarks.md).
  CHECK(out.find("about 35-40 s on 2 cores") != std::string::npos);
  CHECK(out.find("2 minutes") == std::string::npos);
  REQUIRE(vl_test::run_command(cli + " --help", out) == 0);
  CHECK(out.find("about 35-40 s on 2 cores") != std::string::npos);
  CHECK(out.find("2 minutes") == std::string::npos);
}
