// `vocablens report --example DIR`: the example of every registered kind (each slice's own, in its
// analyses/<slice>_report.cpp) plus one kind the report does not know, and the helpers those examples share.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "notebooks-export/report_examples.hpp"
#include "vocablens/report.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens {

nlohmann::json example_provenance(const std::string& cmd) {
  return {{"model_path", "fixtures/gpt2-tiny"},
          {"config_sha256", "3f1c2ab4e5d6978812345678abcdef0123456789abcdef0123456789abcdef01"},
          {"config_hashed", "config.json"},
          {"model",
           {{"architecture", "GPT2LMHeadModel"},
            {"n_layers", 4},
            {"d_model", 64},
            {"n_heads", 4},
            {"d_mlp", 256},
            {"vocab_size", 512},
            {"n_ctx", 64}}},
          {"vocablens_version", VOCABLENS_VERSION},
          {"command_line", cmd},
          {"created_utc", "2024-05-01T12:00:00Z"}};
}

const std::vector<std::string> kExampleVocab = {" the",  " Paris", " France", " Tower", ",",      " is",  " in",      " of",
                                                " a",    " city",  "\"",      " <",     "script", ">",    " capital", "\n",
                                                " Eiff", "el",     " \"",     " it",    " and",   " was", "'s",       " ©"};

namespace {

Result unknown_example() {
  Result r;
  r.kind = "mystery_analysis";
  r.settings = {{"note", "a kind the report has no renderer for: shown generically"}};
  r.provenance = example_provenance("vocablens mystery");
  std::vector<double> curve(30);
  for (size_t i = 0; i < curve.size(); ++i) curve[i] = std::sin(i / 4.0);
  r.arrays["curve"] = NdArray::f64({30}, curve.data());
  std::vector<float> m(12 * 20);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i % 20) / 20.0f;
  r.arrays["matrix"] = NdArray::f32({12, 20}, m.data());
  std::vector<int32_t> cube(2 * 3 * 4, 1);
  r.arrays["cube"] = NdArray::i32({2, 3, 4}, cube.data());
  r.tables.push_back({"rows", {"name", "value", "flag"}, {{"a, b", 1.5, true}, {"<b>bold?</b>", nullptr, false}}});
  r.summary = {{"answer", 42}, {"nested", {{"a", {1, 2, 3}}, {"b", "text"}}}};
  return r;
}

}  // namespace

std::vector<Result> example_results(const std::string& prompt) {
  // Tokens of the prompt as a byte-level BPE would split them, whatever the prompt is: the default one
  // carries markup and quotes on purpose (the report must show them as text).
  std::vector<std::string> toks;
  std::string cur;
  for (char c : prompt) {
    if ((c == ' ' || c == '<' || c == '"' || c == '\'' || c == '>' || c == '(') && !cur.empty()) {
      toks.push_back(cur);
      cur.clear();
    }
    cur.push_back(c);
  }
  if (!cur.empty()) toks.push_back(cur);
  if (toks.empty()) toks.push_back("");
  std::vector<Result> out;
  for (const ResultKind* k : result_kinds().all())
    if (k->example) out.push_back(k->example({prompt, toks}));
  out.push_back(unknown_example());
  return out;
}

}  // namespace vocablens
