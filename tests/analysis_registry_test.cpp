// The registry of declared analyses: every declaration is well formed, each surface gets the same Result
// (the CLI's --format json equals run_analysis's JSON), and bad names or options are one clear message.
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/analysis_inputs.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

using json = nlohmann::json;

namespace {

// The parts of a result's JSON that say when and how it was made, not what it is.
json without_provenance(json j) {
  j.erase("provenance");
  if (j.contains("summary") && j["summary"].is_object()) j["summary"].erase("seconds");  // wall time (spectrum)
  return j;
}

}  // namespace

TEST_CASE("every declared analysis is registered once with a schema", "[registry]") {
  const auto& all = vocablens::analysis_registry().all();
  REQUIRE(all.size() >= 5);
  for (const char* name : {"lens", "heads", "neurons", "neighbours", "attribute", "feature_logits", "feature_lens",
                           "feature_corpus", "patch", "ablate", "spectrum", "project", "steer", "compare_embeddings"}) {
    INFO(name);
    CHECK(vocablens::analysis_registry().find(name) != nullptr);
  }
  const json schema = vocablens::analyses_schema();
  REQUIRE(schema.size() == all.size());
  for (const auto& s : schema) {
    INFO(s.dump());
    CHECK(!s["summary"].get<std::string>().empty());
    for (const auto& o : s["options"]) CHECK(!o["help"].get<std::string>().empty());
  }
  CHECK_THROWS_WITH(vocablens::find_analysis("neuron"), Catch::Matchers::StartsWith("no analysis named 'neuron' (known: "));
}

TEST_CASE("the CLI's --format json is run_analysis's Result: every declared command", "[registry][cli]") {
  const std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  const std::string cli = vl_test::require_cli();
  if (cli.empty()) return;
  vocablens::Model m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  struct Case {
    std::string analysis;
    json options;
    std::string args;
  };
  const std::vector<Case> cases = {
      {"neurons",
       {{"layer", 1}, {"neurons", "0-3"}, {"top_k", 4}, {"bottom", true}},
       "neurons " + vl_test::shq(dir) + " --layer 1 --neurons 0-3 --top-k 4 --bottom"},
      {"lens",
       {{"prompt", "The Eiffel Tower is in"}, {"top_k", 3}},
       "lens " + vl_test::shq(dir) + " --prompt 'The Eiffel Tower is in' --top-k 3"},
      {"neighbours",
       {{"query", "king - man + woman"}, {"k", 5}, {"prefix_space", true}},
       "neighbours " + vl_test::shq(dir) + " 'king - man + woman' --k 5 --prefix-space"},
      {"attribute",
       {{"prompt", "The Eiffel Tower is in"}, {"target", " the"}},
       "attribute " + vl_test::shq(dir) + " --prompt 'The Eiffel Tower is in' --target ' the'"},
      {"patch",
       {{"clean", "When John and Mary went"}, {"corrupt", "When Mary and John went"}, {"target", " to"}, {"over", "mlp"}},
       "patch " + vl_test::shq(dir) +
           " --clean 'When John and Mary went' --corrupt 'When Mary and John went' "
           "--target ' to' --over mlp"},
      {"ablate",
       {{"prompt", "The Eiffel Tower is in"},
        {"head", json::array({"1.2", "0.1"})},
        {"top_k", 4},
        {"mode", "mean"},
        {"mean_over", json::array({"Hello, world", "Paris is"})}},
       "ablate " + vl_test::shq(dir) +
           " --prompt 'The Eiffel Tower is in' --head 1.2 --head 0.1 --top-k 4 "
           "--mode mean --mean-over 'Hello, world' --mean-over 'Paris is'"},
      {"spectrum",
       {{"matrix", "W_U"}, {"k", 5}, {"remove_top", "1,2"}, {"loadings", 3}},
       "spectrum " + vl_test::shq(dir) + " --matrix W_U --k 5 --remove-top 1,2 --loadings 3"},
      {"project",
       {{"prompt", "The Eiffel Tower is in"},
        {"hook", "mlp_out.1"},
        {"top_k", 3},
        {"positions", json::array({0, -1})},
        {"read", true}},
       "project " + vl_test::shq(dir) +
           " --prompt 'The Eiffel Tower is in' --hook mlp_out.1 --top-k 3 "
           "--position 0 --position -1 --read"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const auto& a = vocablens::find_analysis(c.analysis);
    // --format json inlines the arrays' values
    const json ours = json::parse(
        vocablens::result_to_json(vocablens::run_analysis(a, m, tok.get(), c.options, vocablens::Surface::Http), true));
    std::string out;
    // stdout alone (patch warns on stderr when the corruption barely moves the metric)
    REQUIRE(vl_test::run_command(vl_test::shq(cli) + " " + c.args + " --format json 2>/dev/null | cat", out) == 0);
    const json theirs = json::parse(out);
    CHECK(without_provenance(ours) == without_provenance(theirs));
  }
}

TEST_CASE("compare-embeddings: a path on the CLI and a loaded model through the registry give one Result", "[registry][cli]") {
  const std::string dir = vl_test::fixture("stories260K-hf");
  if (dir.empty()) return;
  const std::string cli = vl_test::require_cli();
  if (cli.empty()) return;
  vocablens::Model m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  vocablens::AnalysisInputs in;  // what Python hands over: the second model itself
  in.models["model_b"] = {&m, tok.get()};
  const auto& a = vocablens::find_analysis("compare_embeddings");
  const json given = {{"model_b", dir}, {"k", 3}, {"moved", 5}, {"spectra", false}};
  const json ours = json::parse(vocablens::result_to_json(
      vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Python, {}, nullptr, &in), true));
  // without the object, the analysis opens the path itself
  const json by_path =
      json::parse(vocablens::result_to_json(vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli), true));
  std::string out;
  REQUIRE(vl_test::run_command(vl_test::shq(cli) + " compare-embeddings " + vl_test::shq(dir) + " " + vl_test::shq(dir) +
                                   " --k 3 --moved 5 --no-spectra --format json 2>/dev/null | cat",
                               out) == 0);
  CHECK(without_provenance(ours) == without_provenance(json::parse(out)));
  CHECK(without_provenance(by_path) == without_provenance(ours));
  CHECK(ours["summary"]["cka"].get<double>() == Approx(1.0).margin(1e-6));  // a model against itself
}

TEST_CASE("bad options through the registry: one message, nothing run", "[registry]") {
  const std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  vocablens::Model m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  const auto& lens = vocablens::find_analysis("lens");
  auto message = [&](const json& given) {
    try {
      vocablens::run_analysis(lens, m, tok.get(), given, vocablens::Surface::Http);
    } catch (const vocablens::UsageError& e) { return std::string(e.what()); }
    return std::string();
  };
  CHECK(message({{"prompt", "Hi"}, {"top_k", 1000000000}}) == "lens: top_k: must be <= 1000000 (got 1000000000)");
  CHECK(message({{"prompt", "Hi"}, {"top_kk", 5}}) == "lens: unknown option 'top_kk'; did you mean 'top_k'?");
  CHECK(message({{"top_k", 5}}) == "lens: prompt: is required");
  CHECK(message({{"prompt", json::array({1, 50257})}}) == "lens: prompt: token id 50257 is outside the vocabulary (0..50256)");
  CHECK(message({{"prompt", "Hi"}, {"target", " Eiffel Tower"}}).rfind("lens: target ' Eiffel Tower' is ", 0) == 0);
  const auto& heads = vocablens::find_analysis("heads");
  CHECK_THROWS_WITH(vocablens::run_analysis(heads, m, tok.get(), {{"layers", json::array({7})}}, vocablens::Surface::Python),
                    Catch::Matchers::StartsWith("heads: layers: layer 7 is out of range"));
}

// An option is declared once: each command that runs declared analyses offers exactly their options (as the
// declarations spell them) plus the flags every command shares and the few aliases a command keeps for its own
// (listed here, so that a new hand-written flag fails this test until it is declared or listed on purpose).
TEST_CASE("each declared command's --help lists exactly the declared flags and the command-level ones", "[registry][cli]") {
  const std::string cli = vl_test::require_cli();
  if (cli.empty()) return;
  const std::set<std::string> common = {
      "--help",  "--tokenizer",       "--out",     "--format",  "--report", "--no-color",
      "--force", "--allow-nonfinite", "--timings", "--threads", "--dry-run"};  // every command that loads a model estimates its memory
  // Command-level aliases and display switches (not analysis parameters): each documented where it is added.
  const std::map<std::string, std::set<std::string>> own = {
      {"lens", {"--target-id"}},                                                    // ids for --target
      {"heads", {"--token-id", "--verbose"}},                                       // --token '#ID'; timing of the stream
      {"attribute", {"--show"}},                                                    // rows of the table
      {"features", {"--neuronpedia", "--neuronpedia-model", "--neuronpedia-set"}},  // an export file, as --out
      {"compare-embeddings", {"MODEL_A", "--tokenizer-a", "--tokenizer-b"}},        // MODEL and --tokenizer, twice
  };
  std::map<std::string, std::set<std::string>> declared;  // command -> flags and positionals of its analyses
  for (const auto& a : vocablens::analysis_registry().all()) {
    if (a.decl.command.empty()) continue;
    auto& flags = declared[a.decl.command];
    for (const auto& o : a.decl.options) {
      const std::string sp = vocablens::spelling(o, vocablens::Surface::Cli);
      flags.insert(sp);
      if (o.type == vocablens::OptionType::Flag && o.default_value.is_null()) flags.insert("--no-" + sp.substr(2));
      if (o.type == vocablens::OptionType::Prompt) flags.insert(sp + "-ids");  // the prompt as ids (DeclaredFlags)
    }
  }
  REQUIRE(declared.size() >= 5);
  const std::regex flag_line(R"(^  (?:-h,)?(--[a-z0-9-]+)\b)");
  const std::regex positional_line(R"(^  ([A-Z][A-Z_]*) )");
  for (const auto& [command, flags] : declared) {
    INFO("vocablens " << command << " --help");
    std::string out;
    REQUIRE(vl_test::run_command(vl_test::shq(cli) + " " + command + " --help 2>&1", out) == 0);
    std::set<std::string> listed;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (std::regex_search(line, m, flag_line) || std::regex_search(line, m, positional_line)) listed.insert(m[1]);
    }
    listed.erase("MODEL");
    for (const auto& f : flags) {
      INFO("declared " << f);
      CHECK(listed.count(f) == 1);
    }
    const auto it = own.find(command);
    for (const auto& f : listed) {
      INFO("listed " << f << ": not declared, not a command-level flag (declare it, or list it above on purpose)");
      CHECK((flags.count(f) || common.count(f) || (it != own.end() && it->second.count(f))));
    }
  }
}
