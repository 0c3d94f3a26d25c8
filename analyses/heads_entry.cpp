// `heads`: its options, declared once, and the call every surface makes (vocablens/analysis_registry.hpp).
#include <fmt/format.h>

#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/memory_estimate.hpp"
#include "declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

HeadsOptions heads_options(const AnalysisRequest& q) {
  const auto& o = q.options;
  const auto& cfg = q.model.config();
  HeadsOptions ho;
  const std::string kind = o.at("kind").get<std::string>();
  if (kind == "both") ho.kinds = {CircuitKind::OV, CircuitKind::QK};
  else ho.kinds = {parse_circuit_kind(kind)};
  ho.layers = entry::indices_below(q, "layers", cfg.n_layers, "layer");
  ho.heads = entry::indices_below(q, "heads", cfg.n_heads, "head");
  ho.top_k = o.at("top_k").get<int64_t>();
  ho.per_token_k = o.at("per_token_k").get<int64_t>();
  ho.inverse = entry::inverse_of(o);
  ho.pinv.rtol = o.at("pinv_rtol").get<double>();
  ho.drop_same_token = o.at("drop_same_token").get<bool>();
  ho.drop_same_normalized = o.at("drop_same_word").get<bool>();
  ho.spectra = o.at("spectra").get<bool>();
  ho.prune = o.at("prune").get<bool>();
  ho.filter = entry::token_filter_of(o);
  if (!o.at("tokens").is_null())
    for (const auto& t : o.at("tokens")) ho.source_tokens.push_back(entry::token_of(q, t, "tokens"));
  return ho;
}

void register_heads_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "heads";
  d.summary = "Attention heads in vocabulary space: exact top-k token pairs of each OV / QK circuit, spectra, copying scores";
  d.options = {
      OptionDecl{"layers", OptionType::Indices, nullptr, "Layers, e.g. 3 or 0,2-4 (default: all)", 0}.spelled("--layer"),
      OptionDecl{"heads", OptionType::Indices, nullptr, "Heads, e.g. 7 or 0-3 (default: all)", 0}.spelled("--head"),
      OptionDecl{"kind", OptionType::Choice, "both", "Circuits: ov, qk or both"}.with_choices({"both", "ov", "qk"}),
      {"top_k", OptionType::Integer, 50, "Token pairs per circuit", 1, 1e6},
  };
  entry::append(d.options, entry::inverse_decls("QK queries and OV sources"));
  entry::append(d.options,
                {
                    OptionDecl{"tokens", OptionType::Texts, nullptr,
                               "Also list the best targets (ov) / keys (qk) of these tokens (text or #ID; CLI: repeatable)"}
                        .spelled("--token"),
                    {"per_token_k", OptionType::Integer, 0, "Length of the per-token lists (0: top_k)", 0, 1e6},
                    {"drop_same_token", OptionType::Flag, false, "Drop pairs (t, t)"},
                    {"drop_same_word", OptionType::Flag, false, "Drop pairs equal up to leading spaces and case"},
                    {"spectra", OptionType::Flag, true, "Singular values, eigenvalues and copying scores"},
                    {"prune", OptionType::Flag, true, "Norm-bound pruning in the stream (exact either way; off for timing)"},
                });
  entry::append(d.options, entry::token_filter_decls());
  // The answer's largest array, pair_ids: two token ids per pair, top_k pairs (and per_token_k of each token
  // asked for) per circuit.
  d.answer_size = [](const nlohmann::json& o, const ModelConfig& cfg, double) {
    auto count = [&](const char* name, double all) {  // a list option as resolved, or every one when not given
      return o.at(name).is_array() ? static_cast<double>(o.at(name).size()) : all;
    };
    const double k = static_cast<double>(o.at("top_k").get<int64_t>()), layers = count("layers", cfg.n_layers),
                 heads = count("heads", cfg.n_heads), kinds = o.at("kind").get<std::string>() == "both" ? 2 : 1,
                 per_token = o.at("per_token_k").get<int64_t>() > 0 ? static_cast<double>(o.at("per_token_k").get<int64_t>()) : k,
                 tokens = count("tokens", 0);
    AnswerSize s;
    s.values = 2 * (k + tokens * per_token) * layers * heads * kinds;
    s.how = tokens > 0 ? fmt::format("2 × (top_k {:.0f} + {:.0f} tokens × {:.0f})", k, tokens, per_token)
                       : fmt::format("2 × top_k {:.0f}", k);
    s.how += fmt::format(" × {:.0f} layers × {:.0f} heads × {:.0f} kinds", layers, heads, kinds);
    return s;
  };
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           HeadsOptions ho = heads_options(q);
           ho.progress = q.progress;
           auto r = analyze_heads(q.model, ho, q.tok).to_result(q.tok);
           if (q.tok) r.provenance["tokenizer"] = q.tok->source();
           return r;
         },
         // No forward pass: the weights, the read side E⁺ [d, V] (with the SVD that makes it) and the streamed
         // tiles of the V x V circuit.
         [](const AnalysisRequest& q) {
           const auto& cf = q.model.config();
           const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
           const bool pinv = q.options.at("inverse").get<std::string>() == "pinv";
           AnalysisEstimate e;
           e.memory = model_memory(q.model);
           e.memory.add_phase(pinv ? "heads: E+ and its SVD, one tile of the V x V circuit"
                                   : "heads: the read side, one tile of the V x V circuit",
                              (3 * d * V + 4 * 256 * V) * 4);
           e.what = "the head circuits of " + q.model.source();
           e.reduce =
               pinv ? q.spelled("inverse") + (q.surface == Surface::Cli ? " transpose" : " 'transpose'") + " (no pseudo-inverse)"
                    : std::string();
           return e;
         }});
}

}  // namespace vocablens::entries
