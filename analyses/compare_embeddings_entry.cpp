// `compare_embeddings`: two embedding spaces on their shared tokens; its options declared once, and the call every
// surface makes (vocablens/analysis_registry.hpp). The second model is an option of type Model: a path on the
// command line (`vocablens compare-embeddings MODEL_A MODEL_B`, src/cli/cmd_compare_embeddings.cpp), a
// vocablens.Model from Python; the HTTP API refuses it (a file on the server).
#include <algorithm>

#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/compare_embeddings.hpp"
#include "declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/spectrum.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

CompareEmbeddingsResult compare_two_models(const AnalysisRequest& q, const Model& b, const Tokenizer* tok_b) {
  const auto& o = q.options;
  if (!q.tok || !tok_b) throw UsageError("compare_embeddings: both models need a tokenizer (tokens are matched by their bytes)");
  const std::string matrix = o.at("matrix").get<std::string>();
  std::string kind_a, kind_b;
  const at::Tensor Ea = model_matrix(q.model, matrix, &kind_a);
  const at::Tensor Eb = model_matrix(b, matrix, &kind_b);
  auto pairs = shared_tokens(*q.tok, *tok_b);
  pairs.erase(
      std::remove_if(pairs.begin(), pairs.end(), [&](const auto& p) { return p.first >= Ea.size(0) || p.second >= Eb.size(0); }),
      pairs.end());
  CompareEmbeddingsOptions co;
  co.k = o.at("k").get<int64_t>();
  co.moved = o.at("moved").get<int64_t>();
  co.spectra = o.at("spectra").get<bool>();
  co.spectrum.k = o.at("spectrum_k").get<int64_t>();
  auto c = compare_embeddings(Ea, Eb, pairs, co);
  c.matrix = matrix;
  c.model_a = q.model.source();
  c.model_b = b.source();
  return c;
}

void register_compare_embeddings_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = "compare_embeddings";
  d.command = "compare-embeddings";
  d.summary =
      "Two embedding spaces on their shared tokens: Procrustes alignment, linear CKA, k-NN agreement, moved "
      "tokens, spectra";
  d.options = {
      OptionDecl{"model_b", OptionType::Model, nullptr,
                 "Second model, or a later checkpoint of the same run (model is aligned onto it)"}
          .as_required()
          .as_positional("MODEL_B"),
      OptionDecl{"matrix", OptionType::Choice, "W_E", "The rows compared (rows are tokens; as spectrum's matrix)"}.with_choices(
          {"W_E", "W_U"}),
      {"k", OptionType::Integer, 10, "Nearest neighbours per token for the agreement", 1, 1e6},
      {"moved", OptionType::Integer, 50, "Tokens listed in the 'moved' table", 0, 1e9},
      {"spectrum_k", OptionType::Integer, 32, "Top singular values of each matrix (all are kept when d <= 4096)", 1, 1e6},
      {"spectra", OptionType::Flag, true, "Both spectra"},
  };
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           const auto b = entry::model_of(q, "model_b");
           auto r = compare_two_models(q, *b.model, b.tok).to_result(b.tok);
           r.provenance["model_a"] = q.model.source();
           r.provenance["model_b"] = b.model->source();
           return r;
         },
         // Both models' weights, then both matrices normalised (and aligned) and one block of similarities.
         [](const AnalysisRequest& q) {
           const auto b = entry::model_of(q, "model_b");
           const auto& cf = q.model.config();
           const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
           AnalysisEstimate e;
           e.memory = model_memory(q.model);
           e.memory.add("weights of the second model", model_memory(*b.model).items.back().bytes);
           e.memory.add_phase("compare-embeddings: both matrices normalised, one block of similarities",
                              (4 * d * V + 2048 * V) * 4);
           e.what = "the comparison of " + q.model.source() + " and " + b.model->source();
           e.reduce = q.spelled("matrix") + " (one matrix at a time; nothing smaller)";
           return e;
         }});
}

}  // namespace vocablens::entries
