// The interventions `patch` (activation patching) and `ablate` (zero / mean ablation), their options declared
// once each, and the call every surface makes (vocablens/analysis_registry.hpp). `vocablens patch` and
// `vocablens ablate` take their flags from these declarations (src/cli/cmd_patch.cpp, cmd_ablate.cpp).
#include <utility>

#include <fmt/format.h>

#include "entry_common.hpp"
#include "vocablens/ablation.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/cache.hpp"
#include "declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/model.hpp"
#include "vocablens/patching.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

namespace {

// A prompt's text for the Result's settings: as given, or the ids decoded.
std::string text_of(const AnalysisRequest& q, const nlohmann::json& v, const std::vector<int64_t>& ids) {
  if (v.is_string()) return v.get<std::string>();
  return q.tok ? q.tok->decode(ids) : "";
}

std::string as_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

PatchOptions patch_options(const AnalysisRequest& q) {
  const auto& o = q.options;
  PatchOptions po;
  po.over = parse_patch_over(o.at("over").get<std::string>());
  po.position = o.at("position").get<int64_t>();
  po.target = entry::token_of(q, o.at("target"), "target");
  if (!o.at("wrong").is_null()) po.wrong = entry::token_of(q, o.at("wrong"), "wrong");
  po.progress = q.progress;
  return po;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> patch_prompts(const AnalysisRequest& q) {
  auto clean = entry::prompt_ids_of(q, q.options.at("clean"), "clean");
  auto corrupt = entry::prompt_ids_of(q, q.options.at("corrupt"), "corrupt");
  if (clean.size() != corrupt.size())
    throw UsageError("patch: " + q.spelled("clean") + " is " + std::to_string(clean.size()) + " tokens and " +
                     q.spelled("corrupt") + " is " + std::to_string(corrupt.size()) +
                     " tokens: patching needs prompts of the same token length; reword one (`vocablens tokenize "
                     "MODEL TEXT` shows the tokens), e.g. swap a name for another single-token name");
  return {std::move(clean), std::move(corrupt)};
}

AblationOptions ablation_options(const AnalysisRequest& q) {
  const auto& o = q.options;
  AblationOptions ao;
  for (const char* kind : {"head", "neuron", "resid", "hook"})
    if (!o.at(kind).is_null())
      for (const auto& s : o.at(kind)) ao.sites.push_back(parse_ablation_site(kind, as_text(s)));
  if (ao.sites.empty())
    throw UsageError(q.surface == Surface::Cli
                         ? "nothing to ablate: give --head L.H, --neuron L.N, --resid L.P or --hook NAME (repeatable)"
                         : "ablate: nothing to ablate: give head, neuron, resid or hook (e.g. head=\"1.3\")");
  ao.mode = o.at("mode").get<std::string>() == "mean" ? AblationMode::Mean : AblationMode::Zero;
  if (!o.at("mean_over").is_null()) {
    if (ao.mode != AblationMode::Mean)
      throw UsageError("ablate: " + q.spelled("mean_over") + " has a meaning only with " + q.spelled("mode") + " mean");
    for (const auto& t : o.at("mean_over")) ao.reference.push_back(entry::prompt_ids_of(q, t, "mean_over"));
  }
  if (!o.at("target").is_null()) ao.target = entry::token_of(q, o.at("target"), "target");
  ao.position = o.at("position").get<int64_t>();
  ao.top_k = o.at("top_k").get<int64_t>();
  return ao;
}

void register_interventions_entry(AnalysisRegistry& r) {
  AnalysisDecl p;
  p.name = p.command = "patch";
  p.input = "prompts_pair";
  p.summary = "Activation patching: how much of a clean run's logit difference each layer x position (or head) restores";
  p.options = {
      OptionDecl{"clean", OptionType::Prompt, nullptr, "The prompt whose activations are copied in (text or token ids)"}
          .as_required(),
      OptionDecl{"corrupt", OptionType::Prompt, nullptr, "The prompt patched into (same number of tokens as clean)"}
          .as_required(),
      OptionDecl{"target", OptionType::Token, nullptr, "Token the clean run predicts (bytes, e.g. \" Mary\", or #ID)"}
          .as_required(),
      {"wrong", OptionType::Token, nullptr, "Token the corrupt run predicts: the metric becomes logit(target) - logit(wrong)"},
      OptionDecl{"over", OptionType::Choice, "resid",
                 "resid: blocks.L.hook_resid_pre per position; attn: hook_attn_out per position; mlp: hook_mlp_out per "
                 "position; heads: attn.hook_z per head, all positions"}
          .with_choices({"resid", "attn", "mlp", "heads"}),
      {"position", OptionType::Integer, -1, "Position whose logits are read (-1: the last)"},
      {"bos", OptionType::Flag, nullptr, "Prepend the BOS token to both prompts (default: the tokenizer's convention)"},
  };
  r.add({std::move(p),
         [](const AnalysisRequest& q) {
           const auto [clean, corrupt] = patch_prompts(q);
           auto res = activation_patching(q.model, clean, corrupt, patch_options(q));
           auto r = res.to_result(q.tok, text_of(q, q.options.at("clean"), clean), text_of(q, q.options.at("corrupt"), corrupt));
           if (q.tok) r.provenance["tokenizer"] = q.tok->source();
           return r;
         },
         // The clean run recording every residual point, the corrupt run's logits and one patched run's.
         [](const AnalysisRequest& q) {
           const auto T = static_cast<int64_t>(patch_prompts(q).first.size());
           CacheSpec spec;
           spec.resid_pre = spec.resid_mid = spec.resid_post = spec.attn_out = spec.mlp_out = true;
           return entry::one_forward_estimate(q, T, spec, true, "patch: the corrupt run's logits and one patched run's",
                                              static_cast<double>(T) * static_cast<double>(q.model.config().vocab_size) * 4 * 2,
                                              false, fmt::format("patching over {} tokens of {}", T, q.model.source()),
                                              "give shorter " + q.spelled("clean") + " and " + q.spelled("corrupt") + " prompts");
         }});

  AnalysisDecl a;
  a.name = a.command = "ablate";
  a.input = "prompt";
  a.summary =
      "Zero- or mean-ablate heads, MLP neurons, residual positions or any hook and show the prediction before "
      "and after";
  a.options = entry::prompt_decls();
  entry::append(
      a.options,
      {
          {"head", OptionType::Texts, nullptr, "Head LAYER.HEAD, e.g. 1.3 (blocks.L.attn.hook_z); repeatable"},
          {"neuron", OptionType::Texts, nullptr, "MLP neuron LAYER.NEURON, e.g. 0.17 (blocks.L.mlp.hook_post); repeatable"},
          {"resid", OptionType::Texts, nullptr, "Residual stream entering block LAYER at POSITION, LAYER.POSITION; repeatable"},
          {"hook", OptionType::Texts, nullptr,
           "A whole activation by hook name, e.g. blocks.1.hook_attn_out or mlp_out.1 (docs/interventions.md lists them); "
           "repeatable"},
          OptionDecl{"mode", OptionType::Choice, "zero",
                     "zero, or mean: the activation's mean over every position of the prompt (or of the mean_over prompts)"}
              .with_choices({"zero", "mean"}),
          OptionDecl{"mean_over", OptionType::Texts, nullptr, "Reference prompt for mode mean; repeatable"}.whole_on_cli(),
          {"target", OptionType::Token, nullptr, "Token to follow (default: the unablated run's top prediction)"},
          {"position", OptionType::Integer, -1, "Position whose prediction is shown (-1: the last)"},
          {"top_k", OptionType::Integer, 10, "Predictions listed", 1, 1e6},
      });
  r.add({std::move(a),
         [](const AnalysisRequest& q) {
           const auto ids = entry::prompt_of(q);
           auto r = ablate(q.model, ids, ablation_options(q)).to_result(q.tok, entry::prompt_text(q, ids));
           if (q.tok) r.provenance["tokenizer"] = q.tok->source();
           return r;
         },
         // The clean and the ablated forward (the residuals recorded), their logits and the mean references.
         [](const AnalysisRequest& q) {
           const auto T = static_cast<int64_t>(entry::prompt_of(q).size());
           CacheSpec spec;
           spec.resid_pre = spec.resid_post = true;
           return entry::one_forward_estimate(
               q, T, spec, true, "ablate: the clean run's logits and the mean references",
               static_cast<double>(T) * static_cast<double>(q.model.config().vocab_size) * 4 * 2, false,
               fmt::format("ablating over {} tokens of {}", T, q.model.source()),
               "give a shorter " + q.spelled("prompt") + " (and shorter " + q.spelled("mean_over") + " texts)");
         }});
}

}  // namespace vocablens::entries
