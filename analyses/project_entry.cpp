// `project`: hidden states at a hook point projected to tokens; its options declared once, and the call every
// surface makes (vocablens/analysis_registry.hpp). `vocablens project` takes its flags from here
// (src/cli/cmd_project.cpp).
#include <fmt/format.h>

#include <string>

#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/cache.hpp"
#include "vocablens/memory_estimate.hpp"
#include "declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/project.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

HiddenProjectionOptions projection_options(const AnalysisRequest& q) {
  const auto& o = q.options;
  HiddenProjectionOptions po;
  // "resid_post.2" -> ("resid_post", 2); "resid_post" -> every layer.
  std::string hook = o.at("hook").get<std::string>();
  int64_t layer = -1;
  if (const auto dot = hook.rfind('.'); dot != std::string::npos) {
    const std::string num = hook.substr(dot + 1);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 9)
      throw UsageError("project: " + q.spelled("hook") + " '" + hook + "': expected NAME or NAME.LAYER, e.g. resid_post.2");
    layer = std::stoll(num);
    hook = hook.substr(0, dot);
  }
  if (!o.at("layer").is_null()) layer = o.at("layer").get<int64_t>();
  if (hook == "final_norm" && layer >= 0) throw UsageError("project: " + q.spelled("hook") + " final_norm takes no layer");
  po.hook = hook;
  po.layer = layer;
  po.top_k = o.at("top_k").get<int64_t>();
  if (!o.at("positions").is_null())
    for (const auto& p : o.at("positions")) {
      if (p.is_number_integer()) {
        po.positions.push_back(p.get<int64_t>());
        continue;
      }
      const std::string all = p.get<std::string>();  // "0,-1" as one value: each part a position
      for (size_t start = 0; start <= all.size();) {
        size_t comma = all.find(',', start);
        if (comma == std::string::npos) comma = all.size();
        const std::string t = all.substr(start, comma - start);
        start = comma + 1;
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(t, &used);
        } catch (const std::exception&) { used = 0; }
        if (used == 0 || used != t.size())
          throw UsageError("project: " + q.spelled("positions") + ": '" + t +
                           "' is not a position (an integer; negative counts from the end)");
        po.positions.push_back(v);
      }
    }
  po.apply_final_norm = o.at("final_norm").get<bool>();
  po.read = o.at("read").get<bool>();
  po.inverse = entry::inverse_of(o);
  po.pinv.rtol = o.at("pinv_rtol").get<double>();
  po.filter = entry::token_filter_of(o);
  return po;
}

void register_project_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "project";
  d.input = "prompt";
  d.summary = "Hidden states at a hook point projected to tokens (x W_U, or read through E+ / E^T)";
  d.options = entry::prompt_decls();
  entry::append(
      d.options,
      {
          {"hook", OptionType::Text, "resid_post",
           "resid_pre|resid_mid|resid_post|attn_out|mlp_out[.LAYER] or final_norm (no .LAYER: every layer)"},
          {"layer", OptionType::Integer, nullptr, "Layer (instead of the hook's .LAYER; default: every layer)", 0},
          {"top_k", OptionType::Integer, 10, "Tokens per vector", 1, 1e6},
          OptionDecl{"positions", OptionType::Texts, nullptr,
                     "Positions to show (negative = from the end; default all); repeatable"}
              .spelled("--position"),
          {"final_norm", OptionType::Flag, false, "Apply the model's final norm first (logit-lens style)"},
          {"read", OptionType::Flag, false, "Project as a vector the model reads (x R, R from inverse) instead of x W_U"},
      });
  entry::append(d.options, entry::inverse_decls("With read, the vectors"));
  entry::append(d.options, entry::token_filter_decls());
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           const auto ids = entry::prompt_of(q);
           auto r = project_hidden(q.model, ids, projection_options(q), q.tok).to_result(q.tok);
           r.settings["prompt"] = entry::prompt_text(q, ids);
           if (entry::prompt_is_ids(q.options)) r.settings["prompt_ids"] = ids;
           if (q.tok) r.provenance["tokenizer"] = q.tok->source();
           return r;
         },
         // One forward recording the residual points; then the read side (E⁺ or W_U) and the positions' logits.
         [](const AnalysisRequest& q) {
           const auto T = static_cast<int64_t>(entry::prompt_of(q).size());
           const auto& cf = q.model.config();
           const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
           CacheSpec spec;
           spec.resid_pre = spec.resid_mid = spec.resid_post = spec.attn_out = spec.mlp_out = true;
           return entry::one_forward_estimate(q, T, spec, false, "project: the read side (E+ or W_U) and the positions' logits",
                                              (2 * d * V + static_cast<double>(T) * V) * 4, true,
                                              fmt::format("the projection of {} tokens of {}", T, q.model.source()),
                                              "give a shorter " + q.spelled("prompt") + ", or fewer " + q.spelled("positions"));
         }});
}

}  // namespace vocablens::entries
