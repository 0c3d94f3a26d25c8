// `experts`: its options, declared once, and the call every surface makes (vocablens/analysis_registry.hpp):
// a mixture of experts' experts in vocabulary space over one prompt or a corpus (vocablens/experts.hpp).
#include <fmt/format.h>

#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/cache.hpp"
#include "vocablens/error.hpp"
#include "vocablens/experts.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

namespace {

ExpertsOptions experts_options(const AnalysisRequest& q) {
  const auto& o = q.options;
  ExpertsOptions eo;
  eo.top_k = o.at("top_k").get<int64_t>();
  eo.top_routed = o.at("top_routed").get<int64_t>();
  eo.per_token = o.at("per_token").get<bool>();
  if (!o.at("layers").is_null()) eo.layers = o.at("layers").get<std::vector<int64_t>>();
  if (!o.at("window").is_null()) eo.window = o.at("window").get<int64_t>();
  if (!o.at("max_tokens").is_null()) eo.max_tokens = o.at("max_tokens").get<int64_t>();
  entry::expert_ablations_of(q, eo.ablate, eo.mode);
  eo.scale = entry::expert_scales_of(q);
  return eo;
}

// Which input: exactly one of the prompt and the corpus.
bool experts_corpus_input(const AnalysisRequest& q) {
  const bool prompt = !q.options.at("prompt").is_null(), corpus = !q.options.at("corpus").is_null();
  if (prompt == corpus)
    throw UsageError("experts: give " + q.spelled("prompt") + " or " + q.spelled("corpus") +
                     (prompt ? ", not both" : " (the text whose routing is read)"));
  return corpus;
}

}  // namespace

void register_experts_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "experts";
  d.input = "prompt";
  d.summary =
      "Mixture-of-experts experts in vocabulary space: each expert's load, the tokens routed to it, and "
      "what it writes through W_U";
  d.options = {
      {"prompt", OptionType::Prompt, nullptr, "Text to run (tokenised with the model's tokenizer), or token ids"},
      {"bos", OptionType::Flag, nullptr, "Prepend the BOS token (default: the tokenizer's convention; llama2.c adds it)"},
      OptionDecl{"corpus", OptionType::Text, nullptr,
                 "A text file (UTF-8) read in windows instead of a prompt: load and routed tokens over all of it"},
      {"window", OptionType::Integer, nullptr, "Corpus: tokens per window (default: the model's context)", 2, 1e9},
      {"max_tokens", OptionType::Integer, nullptr, "Corpus: stop after this many tokens (default: the whole file)", 1},
      {"layers", OptionType::Indices, nullptr, "Layers to report, e.g. 0,2-3 (default: all)"},
      {"top_k", OptionType::Integer, 10, "Tokens listed per written direction (top and bottom)", 1, 1e6},
      {"top_routed", OptionType::Integer, 10, "Routed tokens listed per expert", 1, 1e6},
      {"per_token", OptionType::Flag, true, "Prompt: what each chosen expert writes at each position"},
  };
  entry::append(d.options, entry::expert_ablation_decls());
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           const bool corpus = experts_corpus_input(q);
           require_experts(q.model.config(), q.model.source(), "experts");
           ExpertsOptions eo = experts_options(q);
           Result res;
           if (corpus) {
             if (!q.tok) throw UsageError("experts: the model has no tokenizer to read the corpus with");
             eo.progress = q.progress;
             res = analyze_experts_corpus(q.model, *q.tok, q.options.at("corpus").get<std::string>(), eo).to_result(q.tok);
           } else {
             const auto ids = entry::prompt_of(q);
             auto rep = analyze_experts(q.model, ids, eo);
             res = rep.to_result(q.tok);
             res.settings["prompt"] = entry::prompt_text(q, ids);
           }
           if (q.tok) res.provenance["tokenizer"] = q.tok->source();
           return res;
         },
         // Prompt: one forward recording the router's points (expert_out: k outputs of d_model per token and
         // layer), a second without hooks when ablating, and the per-position written lists. Corpus: one window's.
         [](const AnalysisRequest& q) {
           const auto& c = q.model.config();
           require_experts(c, q.model.source(), "experts");
           const bool corpus = experts_corpus_input(q);
           const int64_t T = corpus ? (q.options.at("window").is_null() ? c.n_ctx : q.options.at("window").get<int64_t>())
                                    : static_cast<int64_t>(entry::prompt_of(q).size());
           CacheSpec spec;
           spec.router = true;
           const double d = static_cast<double>(c.d_model), E = static_cast<double>(c.n_experts),
                        V = static_cast<double>(c.vocab_size);
           // The expert directions [E, d] in float64 per layer, W_U in float32 and one [E, V] block of scores.
           const double extra = static_cast<double>(c.n_layers) * E * d * 8 + d * V * 4 + E * V * 4 * 2;
           return entry::one_forward_estimate(
               q, T, spec, !q.options.at("ablate_expert").is_null() || !q.options.at("scale_expert").is_null(),
               "experts: directions, W_U and their scores", extra, false,
               fmt::format("the experts of {} over {} tokens{}", q.model.source(), T, corpus ? " per window" : ""),
               corpus ? "give a smaller " + q.spelled("window") : "give a shorter " + q.spelled("prompt"));
         }});
}

}  // namespace vocablens::entries
