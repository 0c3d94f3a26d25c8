// `lens` on one prompt: its options, declared once, and the call every surface makes
// (vocablens/analysis_registry.hpp). The corpus and batch forms (`lens --corpus`, `--prompts`) are their own
// analyses.
#include <memory>

#include "entry_common.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/compare.hpp"
#include "vocablens/error.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens.hpp"

namespace vocablens::entries {

void register_lens_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "lens";
  d.input = "prompt";
  d.summary = "Logit lens: every layer's residual through the final norm and unembedding (top-k, target rank, entropy, KL)";
  d.options = entry::prompt_decls();
  entry::append(d.options, {
      {"target", OptionType::Token, nullptr, "Target token for every position (its text, or #ID); default: the next token"},
      {"top_k", OptionType::Integer, 10, "Tokens reported per layer and position (0 = none)", 0, 1e6},
      {"resid_mid", OptionType::Flag, false, "Also lens the residual between attention and MLP of every block"},
      {"save_probs", OptionType::Flag, false,
       "Keep every layer's full log-distribution (log_probs [layers, T, V]) for compare's KL"},
      OptionDecl{"unembed", OptionType::Choice, "model",
                 "model (W_U) or pinv (E+, the pseudo-inverse of W_U^T; = pinv(W_E) when tied)"}
          .with_choices({"model", "pinv"}),
      {"decoder_blocks", OptionType::Integer, 0, "Treat the last k blocks as part of the decoder", 0, 1e6},
      {"tuned", OptionType::Text, nullptr, "A tuned lens directory (params.pt + config.json, or safetensors)"},
  });
  r.add({std::move(d), [](const AnalysisRequest& q) {
           const auto& o = q.options;
           const auto ids = entry::prompt_of(o, q.tok, q.model, "lens");
           LensOptions lo;
           lo.top_k = o.at("top_k").get<int64_t>();
           lo.resid_mid = o.at("resid_mid").get<bool>();
           lo.save_log_probs = o.at("save_probs").get<bool>();
           lo.unembed = o.at("unembed").get<std::string>() == "pinv" ? LensUnembed::PseudoInverse : LensUnembed::Model;
           lo.decoder_blocks = o.at("decoder_blocks").get<int64_t>();
           if (!o.at("target").is_null()) lo.target = entry::token_of(o.at("target"), q.tok, q.model, "lens", "target");
           if (!o.at("tuned").is_null()) {
             auto tuned = std::make_shared<TunedLens>(load_tuned_lens(o.at("tuned").get<std::string>()));
             tuned->check_model(q.model);
             lo.tuned = tuned;
           }
           auto r = logit_lens(q.model, ids, lo).to_result(q.tok, entry::prompt_text(o));
           if (q.tok) {  // what `compare` checks: two runs read with one vocabulary
             r.provenance["tokenizer"] = q.tok->source();
             r.provenance["vocab_sha256"] = vocabulary_sha256(*q.tok);
           }
           return r;
         }});
}

}  // namespace vocablens::entries
