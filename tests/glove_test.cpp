// GloVe (vocablens/glove.hpp) against Stanford's reference implementation: co-occurrence counts identical to
// its cooccurrence.bin and the cost after the same number of epochs within a few percent of its cost, on the
// committed fixture tests/glove_reference/ (README.md there: provenance and the exact invocations); and the
// `train --model glove` run end to end, bad input included.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/glove.hpp"
#include "vocablens/tensor_store.hpp"
#include "vocablens/train.hpp"

namespace {

const std::string kRef = std::string(VOCABLENS_SOURCE_DIR) + "/tests/glove_reference";

// The corpus as GloVe reads it: words split on spaces and tabs, one line = one document; ids by first
// appearance (any numbering works: the comparison goes through the words).
struct WordCorpus {
  vocablens::TokenStream stream;
  std::vector<std::string> words;
};

WordCorpus read_word_corpus(const std::string& path) {
  WordCorpus c;
  std::map<std::string, int64_t> id;
  std::istringstream in(vl_test::read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    c.stream.line_starts.push_back(static_cast<int64_t>(c.stream.ids.size()));
    std::istringstream ls(line);
    std::string w;
    while (ls >> w) {
      auto it = id.find(w);
      if (it == id.end()) {
        it = id.emplace(w, static_cast<int64_t>(c.words.size())).first;
        c.words.push_back(w);
      }
      c.stream.ids.push_back(it->second);
      c.stream.target.push_back(1);
    }
    c.stream.line_ends.push_back(static_cast<int64_t>(c.stream.ids.size()));
  }
  return c;
}

std::map<std::string, std::string> read_params() {
  std::map<std::string, std::string> p;
  std::istringstream in(vl_test::read_file(kRef + "/params.txt"));
  std::string k, v;
  while (in >> k >> v) p[k] = v;
  return p;
}

}  // namespace

TEST_CASE("glove: co-occurrence counts are identical to the reference cooccur's", "[glove]") {
  auto P = read_params();
  WordCorpus c = read_word_corpus(kRef + "/corpus.txt");
  const int64_t window = std::stoll(P.at("window"));
  vocablens::GloveCounts X = vocablens::glove_cooccurrence(c.stream, static_cast<int64_t>(c.words.size()), window);
  // reference: "word1 word2 value" (%.17g), every nonzero entry of cooccurrence.bin
  std::map<std::pair<std::string, std::string>, double> ref;
  {
    std::istringstream in(vl_test::read_file(kRef + "/cooccurrence.txt"));
    std::string a, b;
    double x;
    while (in >> a >> b >> x) ref[{a, b}] = x;
  }
  REQUIRE(ref.size() > 1000);
  CHECK(X.entries.size() == ref.size());
  size_t missing = 0, exact = 0;
  double worst = 0;
  for (const auto& e : X.entries) {
    auto it = ref.find({c.words[static_cast<size_t>(e.row)], c.words[static_cast<size_t>(e.col)]});
    if (it == ref.end()) {
      ++missing;
      continue;
    }
    if (it->second == e.x) ++exact;
    worst = std::max(worst, std::abs(it->second - e.x) / it->second);
  }
  INFO("entries " << X.entries.size() << ", bit-identical " << exact << ", worst relative difference " << worst);
  CHECK(missing == 0);
  CHECK(worst <= 1e-15);  // the same sums in the same order: identical doubles
  CHECK(exact == X.entries.size());
  CHECK(X.tokens == static_cast<int64_t>(c.stream.ids.size()));
}

TEST_CASE("glove: the cost after N epochs is within a few percent of the reference glove's", "[glove]") {
  auto P = read_params();
  WordCorpus c = read_word_corpus(kRef + "/corpus.txt");
  const int64_t V = static_cast<int64_t>(c.words.size());
  vocablens::GloveCounts X = vocablens::glove_cooccurrence(c.stream, V, std::stoll(P.at("window")));
  vocablens::GloveFitOptions fo;
  fo.x_max = std::stod(P.at("x_max"));
  fo.alpha = std::stod(P.at("alpha"));
  fo.eta = std::stod(P.at("eta"));
  const int64_t dim = std::stoll(P.at("vector_size")), epochs = std::stoll(P.at("epochs"));
  // reference costs: one line per seed, the cost printed after each epoch
  std::vector<std::vector<double>> ref;
  {
    std::istringstream in(vl_test::read_file(kRef + "/costs.txt"));
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ls(line);
      std::string seed;
      ls >> seed;
      std::vector<double> v;
      double x;
      while (ls >> x) v.push_back(x);
      REQUIRE(static_cast<int64_t>(v.size()) == epochs);
      ref.push_back(v);
    }
  }
  REQUIRE(ref.size() >= 3);
  for (uint64_t seed : {1u, 2u, 3u}) {
    fo.seed = seed;
    vocablens::GloveFit fit(X, fo);
    vocablens::GloveParams p = vocablens::glove_init(V, dim, seed);
    std::vector<double> ours;
    for (int64_t e = 0; e < epochs; ++e) ours.push_back(fit.epoch(p));
    for (int64_t e : {int64_t(0), epochs / 2, epochs - 1}) {
      double lo = 1e300, hi = 0, mean = 0;
      for (auto& r : ref) {
        lo = std::min(lo, r[static_cast<size_t>(e)]);
        hi = std::max(hi, r[static_cast<size_t>(e)]);
        mean += r[static_cast<size_t>(e)] / static_cast<double>(ref.size());
      }
      INFO("seed " << seed << " epoch " << e + 1 << ": vocablens " << ours[static_cast<size_t>(e)] << ", reference " << lo
                   << " .. " << hi << " (mean " << mean << ")");
      if (e == 0)  // the first epoch depends much on the initial values: inside the reference seeds' range
        CHECK((ours[0] >= 0.8 * lo && ours[0] <= 1.2 * hi));
      else  // later: within 3% of the reference seeds' mean (their own spread is about 3%)
        CHECK(std::abs(ours[static_cast<size_t>(e)] - mean) <= 0.03 * mean);
    }
    // the cost decreases; the objective after the last epoch is below that epoch's running cost (taken
    // before each update) but of its order
    CHECK(ours.back() < 0.5 * ours.front());
    CHECK(fit.cost(p) <= ours.back());
    CHECK(fit.cost(p) >= 0.7 * ours.back());
  }
}

TEST_CASE("glove: counts are symmetric, 1/distance weighted, and never cross a line", "[glove]") {
  vocablens::TokenStream s;
  // line 1: 0 1 2 0   line 2: 1 3
  s.ids = {0, 1, 2, 0, 9, 1, 3};
  s.line_starts = {0, 5};
  s.line_ends = {4, 7};
  s.target.assign(s.ids.size(), 1);
  vocablens::GloveCounts X = vocablens::glove_cooccurrence(s, 10, 2);
  std::map<std::pair<int, int>, double> m;
  for (auto& e : X.entries) m[{e.row, e.col}] = e.x;
  CHECK(m.at({0, 1}) == 1.0 + 0.5);  // distance 1 (pos 0-1) and distance 2 (pos 1-3)
  CHECK(m.at({1, 0}) == 1.5);
  CHECK(m.at({0, 2}) == 0.5 + 1.0);
  CHECK(m.count({0, 0}) == 0);  // positions 0 and 3 are 3 apart: outside window 2
  CHECK(m.at({1, 3}) == 1.0);   // line 2
  CHECK(m.count({0, 3}) == 0);  // never across the line break
  CHECK(m.count({2, 3}) == 0);
  CHECK(X.distinct == 4);
  CHECK(X.tokens == 6);
}

TEST_CASE("train --model glove: a model directory every geometry analysis reads; bad input", "[glove][cli]") {
  const std::string cli = vl_test::cli_path();
  REQUIRE_FALSE(cli.empty());
  const std::string dir = vl_test::temp_dir("glove_cli");
  std::string out;
  const std::string cmd =
      cli + " train --model glove -q --corpus " + kRef + "/corpus.txt --d-model 16 --steps 8 --window 5 --out " + dir;
  REQUIRE(vl_test::run_command(cmd + " 2>&1", out) == 0);
  CHECK(out.find("trained glove") != std::string::npos);
  CHECK(vocablens::is_embedding_directory(dir));
  at::Tensor E = vocablens::load_embedding_matrix(dir, "W_E");
  vocablens::TensorStore st = vocablens::read_safetensors(dir + "/embeddings.safetensors");
  CHECK(E.size(1) == 16);
  CHECK(at::allclose(E, st.get("word_vectors") + st.get("context_embeddings"), 1e-6, 1e-6));
  CHECK(at::equal(vocablens::load_embedding_matrix(dir, "W_U"), st.get("context_embeddings")));
  auto log = nlohmann::json::parse(vl_test::read_file(dir + "/train_log.json"));
  CHECK(log["losses"].size() == 8);
  CHECK(log["losses"][7].get<double>() < log["losses"][0].get<double>());
  // same options, same seed: identical vectors
  const std::string dir2 = vl_test::temp_dir("glove_cli2");
  REQUIRE(vl_test::run_command(cli + " train --model glove -q --corpus " + kRef +
                                   "/corpus.txt --d-model 16 --steps 8 --window 5 --out " + dir2 + " 2>&1",
                               out) == 0);
  CHECK(vl_test::read_file(dir + "/embeddings.safetensors") == vl_test::read_file(dir2 + "/embeddings.safetensors"));
  // the geometry analyses read it
  REQUIRE(vl_test::run_command(cli + " spectrum " + dir + " --matrix W_E 2>&1", out) == 0);
  // a glove run is not resumable: one clear line
  CHECK(vl_test::run_command(cli + " train --resume --out " + dir + " 2>&1", out) != 0);
  CHECK(out.find("not resumable") != std::string::npos);

  // Bad input: fewer distinct tokens than the vector size -> one line naming the corpus, nothing written.
  const std::string small = vl_test::temp_dir("glove_small") + "/tiny.txt";
  vl_test::write_file(small, "a b c a b c\nb c a\n");
  const std::string bad = vl_test::temp_dir("glove_bad");
  CHECK(vl_test::run_command(
            cli + " train --model glove -q --corpus " + small + " --d-model 64 --tokenizer " + dir + " --out " + bad + "/m 2>&1",
            out) != 0);
  INFO(out);
  CHECK(out.find("tiny.txt") != std::string::npos);
  CHECK(out.find("fewer than the vector size 64") != std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  CHECK_FALSE(std::filesystem::exists(bad + "/m"));  // the directory it created is gone
}
