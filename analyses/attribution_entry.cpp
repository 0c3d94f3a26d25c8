// `attribute`: its options, declared once, and the call every surface makes (vocablens/analysis_registry.hpp).
#include "entry_common.hpp"
#include <fmt/format.h>

#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/cache.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/attribution.hpp"
#include "declared_options.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

AttributionOptions attribution_options(const AnalysisRequest& q) {
  const auto& o = q.options;
  AttributionOptions ao;
  ao.target = entry::token_of(q, o.at("target"), "target");
  if (!o.at("wrong").is_null()) ao.wrong = entry::token_of(q, o.at("wrong"), "wrong");
  ao.position = o.at("position").get<int64_t>();
  ao.layer = o.at("layer").get<int64_t>();
  return ao;
}

void register_attribution_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "attribute";
  d.input = "prompt";
  d.summary = "Direct logit attribution: a logit (difference) split into embedding, every head, every MLP and the biases";
  d.options = entry::prompt_decls();
  entry::append(
      d.options,
      {
          OptionDecl{"target", OptionType::Token, nullptr, "Token whose logit is attributed (its text, e.g. \" Paris\", or #ID)"}
              .as_required(),
          {"wrong", OptionType::Token, nullptr, "Attribute logit(target) - logit(wrong) instead"},
          {"position", OptionType::Integer, -1, "Position whose logit is attributed (-1: the last)"},
          {"layer", OptionType::Integer, -1,
           "Residual read: the stream before block LAYER (0 = the embedding alone, n_layers = the final "
           "residual), through the final norm frozen at that residual — the logit lens's row LAYER, split into "
           "the blocks before it (-1: the final residual, the model's logits)",
           -1},
      });
  entry::append(d.options, entry::expert_ablation_decls());
  d.reads_forward_only = true;  // the split of the lens's logit: the server replays the lens's forward of the prompt
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           const auto ids = entry::prompt_of(q);
           AttributionOptions ao = attribution_options(q);
           const auto edits = entry::expert_interventions_of(q);
           ao.interventions = edits.hooks;
           auto r = attribute_logit(q.model, ids, ao).to_result(q.tok, entry::prompt_text(q, ids));
           r.settings.update(edits.settings);  // the split of an edited forward: it says which edits
           if (q.tok) r.provenance["tokenizer"] = q.tok->source();
           return r;
         },
         // One forward of the prompt recording the residual points, and each head's output at the position.
         [](const AnalysisRequest& q) {
           const auto T = static_cast<int64_t>(entry::prompt_of(q).size());
           const auto& cf = q.model.config();
           CacheSpec spec;
           spec.resid_pre = spec.resid_mid = spec.resid_post = spec.attn_out = spec.mlp_out = true;
           return entry::one_forward_estimate(q, T, spec, true, "attribute: per-head outputs at the position",
                                              static_cast<double>(cf.n_layers * cf.n_heads) * static_cast<double>(cf.d_model) * 4,
                                              false, fmt::format("the attribution of {} tokens of {}", T, q.model.source()),
                                              "give a shorter " + q.spelled("prompt"));
         }});
}

}  // namespace vocablens::entries
