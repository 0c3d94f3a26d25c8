// SAE / transcoder features, their options declared once each, and the call every surface makes
// (vocablens/analysis_registry.hpp): `feature_logits` (the tokens each decoder direction promotes and
// suppresses), `feature_lens` (`features --prompt`: the features firing at each position of a prompt) and
// `feature_corpus` (`features --corpus FILE`: statistics over a text file). The `vocablens features` command
// offers the three through one set of flags (src/cli/cmd_features.cpp). The SAE is an option of type Sae: a
// path on the command line, a vocablens.Sae from Python.
#include <fmt/format.h>

#include <memory>

#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/cache.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/feature_encoder.hpp"
#include "vocablens/features.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/sae_corpus.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/unembed.hpp"

namespace vocablens::entries {

namespace {

// The SAE and the hook point it reads: every form's first options.
std::vector<OptionDecl> sae_decls() {
  return {
      OptionDecl{"sae", OptionType::Sae, nullptr,
                 "SAE or transcoder: SAELens folder, Gemma Scope params.npz / params.safetensors, Llama Scope folder, "
                 "circuit-tracer layer_N.safetensors (Python: a vocablens.Sae from load_sae)"}
          .as_required(),
      {"hook", OptionType::Text, nullptr, "Hook point the SAE reads (overrides the file's or the guessed one)"},
  };
}

void add_sae_provenance(Result& r, const Sae& sae, const Tokenizer* tok) {
  r.provenance["sae"] = sae.source;
  r.provenance["sae_layout"] = sae.layout;
  if (tok) r.provenance["tokenizer"] = tok->source();
}

// feature_logits' working set: with the int8 screen, W_U as int8 and a chunk of 1 024 decoder rows; else a
// float32 block of 1 024 x V logits (and a float32 copy of W_U when it is stored otherwise); the lists, N x 2k
// entries, either way.
void add_feature_logits_phase(MemoryEstimate& e, const Model& m, const Sae& sae, int64_t top_k) {
  const auto& cf = m.config();
  const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
  const double N = static_cast<double>(sae.d_sae), k = static_cast<double>(top_k);
  e.add_phase("features: W_U's screening copy, one chunk of decoder rows, the lists",
              feature_logits_int8_available() ? d * V + 24 * V + 1024 * (9 * d + 4096) + N * 2 * k * 40
                                              : (d * V + 1024 * V + 1024 * d) * 4 + N * 2 * k * 40);
}

}  // namespace

std::shared_ptr<const Sae> sae_option(const AnalysisRequest& q) { return entry::sae_of(q, "sae", "hook"); }

FeatureLogitsOptions feature_logits_options(const AnalysisRequest& q) {
  const auto& o = q.options;
  FeatureLogitsOptions fo;
  fo.top_k = o.at("top_k").get<int64_t>();
  if (!o.at("features").is_null()) fo.features = o.at("features").get<std::vector<int64_t>>();
  fo.bottom = o.at("bottom").get<bool>();
  fo.final_norm_scale = o.at("final_norm").get<bool>();
  fo.filter = entry::token_filter_of(o);
  fo.progress = q.progress;
  return fo;
}

FeatureLensOptions feature_lens_options(const nlohmann::json& o) {
  FeatureLensOptions fo;
  fo.top_features = o.at("top_features").get<int64_t>();
  fo.top_k = o.at("top_k").get<int64_t>();
  fo.final_norm_scale = o.at("final_norm").get<bool>();
  return fo;
}

SaeCorpusOptions feature_corpus_options(const nlohmann::json& o) {
  SaeCorpusOptions so;
  so.window = o.at("window").get<int64_t>();
  so.max_tokens = o.at("max_tokens").get<int64_t>();
  so.contexts = o.at("contexts").get<int64_t>();
  so.ce_metrics = o.at("ce").get<bool>();
  return so;
}

// The corpus pass and the feature logits run one after the other on one model and SAE, so the logits' working
// set is one more phase of the corpus pass's estimate (the larger counts), both as declared below.
AnalysisEstimate neuronpedia_corpus_estimate(const Model& m, const Tokenizer* tok, const nlohmann::json& logits_given,
                                             const nlohmann::json& corpus_given, Surface surface, const AnalysisInputs* inputs) {
  const auto& la = find_analysis("feature_logits");
  const auto& ca = find_analysis("feature_corpus");
  AnalysisEstimate e = estimate_analysis(ca, m, tok, corpus_given, surface, inputs);
  const AnalysisEstimate logits = estimate_analysis(la, m, tok, logits_given, surface, inputs);
  for (const auto& p : logits.memory.phases) e.memory.phases.push_back(p);
  e.what = logits.what;
  e.reduce = spelling(*la.decl.find("features"), surface) + " (fewer features), " + spelling(*ca.decl.find("window"), surface) +
             " or " + spelling(*ca.decl.find("contexts"), surface);
  return e;
}

void register_features_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = "feature_logits";
  d.command = "features";
  d.summary =
      "SAE / transcoder features in vocabulary space: the tokens each feature's decoder direction promotes "
      "and suppresses";
  d.options = sae_decls();
  entry::append(d.options,
                {
                    {"features", OptionType::Indices, nullptr, "Features, e.g. 0,5,10-20 (default: all)", 0},
                    {"top_k", OptionType::Integer, 10, "Tokens per feature and direction", 1, 1e6},
                    {"final_norm", OptionType::Flag, false, "Scale each decoder direction by the final norm's weight first"},
                    {"bottom", OptionType::Flag, true, "The lowest-scoring tokens of each feature"},
                    OptionDecl{"encoder", OptionType::Choice, nullptr,
                               "Also read each feature's ENCODER direction through a read projection: pinv (E+, Dar et al.), "
                               "transpose (W_U) or embed (W_E): the tokens that excite the feature most (arrays encoder_top_*)"}
                        .with_choices({"pinv", "transpose", "embed"}),
                });
  entry::append(d.options, entry::token_filter_decls());
  // The explorer page's feature view: a few features of the server's SAE at a time.
  d.http_aliases = {HttpAlias{"sae/features",
                              {"features", "top_k", "final_norm", "bottom"},
                              {"features"},
                              {{"sae", true}},
                              {{"features", 256}, {"top_k", 1000}}}};
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           auto sae = sae_option(q);
           const auto a = feature_logits(q.model, *sae, feature_logits_options(q), q.tok);
           auto r = a.to_result(q.tok);
           if (!q.options.at("encoder").is_null())
             feature_encoder_tokens(q.model, *sae, a.features, a.options.top_k,
                                    parse_inverse_kind(q.options.at("encoder").get<std::string>()))
                 .add_to(r);
           add_sae_provenance(r, *sae, q.tok);
           r.provenance["sae_stored_dtype"] = sae->stored_dtype;
           return r;
         },
         [](const AnalysisRequest& q) {
           auto sae = sae_option(q);
           AnalysisEstimate e;
           e.memory = model_memory(q.model);
           add_feature_logits_phase(e.memory, q.model, *sae, q.options.at("top_k").get<int64_t>());
           e.what = "the feature logits of " + sae->source;
           e.reduce = q.spelled("features") + " (fewer features)";
           return e;
         }});

  AnalysisDecl l;
  l.name = "feature_lens";
  l.command = "features";
  l.input = "prompt";
  l.summary = "Feature lens: the SAE's features firing at each position of a prompt, with the tokens each promotes";
  l.options = sae_decls();
  entry::append(l.options, entry::prompt_decls());
  l.options[2].help = "Run the model on this text (or token ids) and show the features firing at each position";
  entry::append(l.options,
                {
                    {"top_features", OptionType::Integer, 5, "Features shown per position", 1, 1e6},
                    {"top_k", OptionType::Integer, 5, "Tokens listed per feature shown", 1, 1e6},
                    {"final_norm", OptionType::Flag, false, "Scale each decoder direction by the final norm's weight first"},
                });
  // The explorer page's feature lens of its prompt, on the server's SAE.
  l.http_aliases = {HttpAlias{"sae/lens",
                              {"prompt", "top_features", "top_k", "final_norm"},
                              {"prompt"},
                              {{"sae", true}},
                              {{"top_features", 100}, {"top_k", 100}}}};
  // The answer's largest arrays: top_features per position, and top_k tokens of each feature shown.
  l.answer_size = [](const nlohmann::json& o, const ModelConfig&, double positions) {
    const double n = static_cast<double>(o.at("top_features").get<int64_t>()),
                 k = static_cast<double>(o.at("top_k").get<int64_t>());
    return AnswerSize{n * k * positions, fmt::format("top_features {:.0f} × top_k {:.0f} × {:.0f} positions", n, k, positions)};
  };
  r.add({std::move(l),
         [](const AnalysisRequest& q) {
           auto sae = sae_option(q);
           const auto ids = entry::prompt_of(q);
           auto r = feature_lens(q.model, *sae, ids, feature_lens_options(q.options), q.tok)
                        .to_result(q.tok, entry::prompt_text(q, ids));
           add_sae_provenance(r, *sae, nullptr);
           return r;
         },
         // The forward with the residual stream recorded, the SAE's weights and activations [T, d_sae], then W_U
         // and the positions' logits.
         [](const AnalysisRequest& q) {
           auto sae = sae_option(q);
           const auto ids = entry::prompt_of(q);
           const auto& cf = q.model.config();
           const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
           const double T = static_cast<double>(ids.size()), S = static_cast<double>(sae->d_sae);
           CacheSpec spec;
           spec.resid_pre = spec.resid_mid = spec.resid_post = true;
           AnalysisEstimate e;
           e.memory = estimate_forward_memory(q.model, 1, static_cast<int64_t>(ids.size()), spec, false);
           e.memory.add("features: the SAE and its activations [T, d_sae]", (2 * S * d + T * S) * 4);
           e.memory.add_phase("features: W_U and the positions' logits", (d * V + T * V) * 4);
           e.what = fmt::format("the feature lens of {} tokens", ids.size());
           e.reduce = "a shorter " + q.spelled("prompt");
           return e;
         }});

  AnalysisDecl c;
  c.name = "feature_corpus";
  c.command = "features";
  c.input = "corpus";
  c.summary =
      "An SAE over a text file: firing density, histograms, dead features, L0, max-activating contexts, MSE, "
      "explained variance, CE loss recovered";
  c.options = sae_decls();
  entry::append(
      c.options,
      {
          OptionDecl{"path", OptionType::Text, nullptr,
                     "Corpus statistics instead: stream this text file through the model with the SAE (firing density, "
                     "histograms, dead features, L0, max-activating contexts, MSE, explained variance, CE loss recovered)"}
              .as_required()
              .spelled("--corpus"),
          {"window", OptionType::Integer, 0, "Tokens per window (0: the model's context)", 0, 1e9},
          {"max_tokens", OptionType::Integer, 0, "Stop after this many scored tokens (0: all)", 0, 1e15},
          {"contexts", OptionType::Integer, 5, "Max-activating contexts kept per feature", 0, 1e6},
          {"ce", OptionType::Flag, true, "The spliced and zero-ablated forward passes (CE loss recovered, KL)"},
      });
  r.add({std::move(c),
         [](const AnalysisRequest& q) {
           auto sae = sae_option(q);
           if (!q.tok) throw UsageError("feature_corpus: the model has no tokenizer to read the corpus with");
           SaeCorpusOptions so = feature_corpus_options(q.options);
           if (q.progress) {
             auto p = q.progress;
             so.progress = [p](uint64_t done, uint64_t total) { p(static_cast<int64_t>(done), static_cast<int64_t>(total)); };
           }
           auto r = sae_corpus_stats(q.model, *sae, *q.tok, q.options.at("path").get<std::string>(), so).to_result(q.tok);
           add_sae_provenance(r, *sae, q.tok);
           return r;
         },
         [](const AnalysisRequest& q) {
           auto sae = sae_option(q);
           AnalysisEstimate e;
           e.memory = estimate_sae_corpus_memory(q.model, *sae, feature_corpus_options(q.options));
           e.what = fmt::format("the corpus statistics of {} ({} features)", sae->source, sae->d_sae);
           e.reduce = q.spelled("window") + " (fewer tokens per forward), " + q.spelled("contexts") + " or " +
                      (q.surface == Surface::Cli ? std::string("--no-ce") : q.spelled("ce") + " false");
           return e;
         }});
}

}  // namespace vocablens::entries
