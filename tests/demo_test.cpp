// `vocablens demo`: trains the small GPT (and skip-gram vectors) on the synthetic corpus, runs every analysis,
// writes results and the report — and the analyses find the structure planted in the corpus:
//  1. logit lens: the attribute of a fact prompt ("the capital of france is" -> " paris") is the top-1
//     token at the last layer for >= 90% of the world's 118 facts, and at the embedding for none;
//  2. heads: at least one head's OV circuit (W_E W_V W_O W_U) has a copying score >= 0.7;
//  3. skip-gram: >= 80% of the 5 nearest neighbours of countries, cities, animals and fruits are of the
//     same class (chance: about 5%).
// One training run: the demo's own configuration with 1000 instead of 1200 steps (about a minute on 2 cores).
#include <filesystem>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/synthetic.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/train.hpp"

namespace fs = std::filesystem;

namespace {
constexpr const char* kDemoTestSteps = "1000";
}

TEST_CASE("demo: one directory of results, and the analyses find what was planted", "[demo]") {
  vocablens::init_runtime();
  std::string cli = vl_test::cli_path();
  REQUIRE_FALSE(cli.empty());
  const std::string dir = vl_test::temp_dir("demo");
  std::string out;
  const int rc = vl_test::run_command(cli + " demo --out " + dir + " --steps " + kDemoTestSteps, out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("Where to look") != std::string::npos);
  CHECK(out.find("report.html") != std::string::npos);
  for (const char* f : {"corpus.txt", "model/config.json", "model/model.safetensors", "model/vocab.json", "model/merges.txt",
                        "model/train_log.json", "skipgram/embeddings.safetensors", "results/training.json",
                        "results/logit_lens.json", "results/logit_lens_corpus.json", "results/heads.json",
                        "results/neurons.json", "results/spectrum.json", "results/anisotropy.json", "results/positions.json",
                        "results/neighbours.json", "results/planted_structure.json", "results/report.html"}) {
    INFO(f);
    CHECK(fs::exists(dir + "/" + f));
  }

  vocablens::Model m = vocablens::load_model(dir + "/model");
  auto tok = vocablens::load_tokenizer_for(dir + "/model");
  vocablens::SyntheticCorpus world = vocablens::synthetic_corpus({});
  auto word = [&](const std::string& w) {
    auto id = tok->token_to_id(" " + w);
    REQUIRE(id.has_value());
    return *id;
  };

  {  // 1. logit lens: attributes of fact prompts at the last layer, not at the embedding
    vocablens::EncodeOptions eo;
    eo.add_bos = false;
    int last = 0, embed = 0, n = 0;
    for (const auto& f : world.facts) {
      vocablens::LensOptions lo;
      lo.top_k = 1;
      lo.target = word(f.answer);
      auto L = vocablens::logit_lens(m, tok->encode(f.prompt, eo), lo);
      const int64_t T = L.n_positions();
      last += L.top_id(L.n_layers() - 1, T - 1, 0) == word(f.answer);
      embed += L.top_id(0, T - 1, 0) == word(f.answer);
      ++n;
    }
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
    auto a = vocablens::analyze_heads(m, ho, tok.get());
    double best = -1;
    for (auto& c : a.circuits) best = std::max(best, c.copying_score);
    INFO("best OV copying score " << best);
    CHECK(best >= 0.7);
  }

  {  // 3. skip-gram: neighbours of an entity are entities of its class
    auto wv = vocablens::load_word_vectors(dir + "/skipgram");
    for (const char* cls : {"country", "city", "animal", "fruit"}) {
      int same = 0, all = 0;
      for (const auto& w : vocablens::synthetic_class_members(cls)) {
        vocablens::NeighbourOptions no;
        no.k = 5;
        auto nb = vocablens::neighbours(wv.vectors, tok.get(), "#" + std::to_string(word(w)), no);
        for (auto& x : nb.neighbours) {
          std::string t = tok->token_bytes(x.id);
          if (!t.empty() && t[0] == ' ') t = t.substr(1);
          auto it = world.classes.find(t);
          same += it != world.classes.end() && it->second == cls;
          ++all;
        }
      }
      INFO(cls << ": " << same << "/" << all << " of the 5 nearest are of the same class");
      CHECK(same >= 0.8 * all);
    }
  }

  {  // the demo's own summary agrees
    auto j = nlohmann::json::parse(vl_test::read_file(dir + "/results/planted_structure.json"));
    auto s = j["summary"];
    CHECK(s["fact_top1_by_layer"]["embed"].get<double>() == 0.0);
    CHECK(s["best_ov_copying_score"].get<double>() >= 0.7);
  }
}

TEST_CASE("demo: --help explains the options", "[demo]") {
  std::string cli = vl_test::cli_path();
  REQUIRE_FALSE(cli.empty());
  std::string out;
  REQUIRE(vl_test::run_command(cli + " demo --help", out) == 0);
  for (const char* opt : {"--out", "--steps", "--report", "--positions", "--seed"}) CHECK(out.find(opt) != std::string::npos);
}
