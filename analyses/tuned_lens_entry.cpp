// `tuned_lens_eval` (`vocablens tuned-lens eval`): its options, declared once, and the call every surface makes
// (vocablens/analysis_registry.hpp). Training (`tuned-lens train`) writes files and is not an analysis.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/cache.hpp"
#include "vocablens/memory_estimate.hpp"
#include "declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens.hpp"

namespace vocablens::entries {

TunedLensEvalOptions tuned_lens_eval_options(const nlohmann::json& o) {
  TunedLensEvalOptions eo;
  if (!o.at("window").is_null()) eo.window = o.at("window").get<int64_t>();
  if (!o.at("max_tokens").is_null()) eo.max_tokens = o.at("max_tokens").get<int64_t>();
  return eo;
}

void register_tuned_lens_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = "tuned_lens_eval";
  d.command = "tuned-lens eval";
  d.input = "corpus";
  d.summary = "Per-layer cross-entropy, entropy and KL (bits per byte) of the logit and the tuned lens on held-out text";
  d.options = {
      OptionDecl{"path", OptionType::Text, nullptr, "Held-out text (not used in training)"}.as_required().spelled("--corpus"),
      OptionDecl{"tuned", OptionType::Text, nullptr, "Tuned lens directory (vocablens or the tuned-lens package's params.pt)"}
          .as_required(),
      {"window", OptionType::Integer, nullptr, "Tokens per window (default: the model's context)", 2, 1e9},
      {"max_tokens", OptionType::Integer, nullptr, "Stop after this many predicted tokens (default: the whole file)", 1},
  };
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           if (!q.tok) throw UsageError("tuned_lens_eval: the model has no tokenizer to read the text with");
           TunedLensEvalOptions eo = tuned_lens_eval_options(q.options);
           eo.progress = [&q](uint64_t done, uint64_t total) {
             if (q.progress) q.progress(static_cast<int64_t>(done), static_cast<int64_t>(total));
           };
           auto lens = std::make_shared<TunedLens>(load_tuned_lens(q.options.at("tuned").get<std::string>()));
           lens->check_model(q.model);
           auto res = evaluate_tuned_lens(q.model, *q.tok, lens, q.options.at("path").get<std::string>(), eo).to_result();
           res.provenance["tokenizer"] = q.tok->source();
           return res;
         },
         // One window at a time: its forward, every layer's normalised residual read logit and tuned, one block
         // of logits.
         [](const AnalysisRequest& q) {
           const auto& cf = q.model.config();
           const TunedLensEvalOptions eo = tuned_lens_eval_options(q.options);
           const int64_t W = eo.window > 0 ? std::min<int64_t>(eo.window, cf.n_ctx) : cf.n_ctx;
           const double n = static_cast<double>(cf.n_layers + 1), d = static_cast<double>(cf.d_model),
                        V = static_cast<double>(cf.vocab_size);
           AnalysisEstimate e;
           e.memory = estimate_forward_memory(q.model, 1, W, CacheSpec::none(), false);
           e.memory.add("eval: normalised residuals of one window, logit and tuned", 2 * n * static_cast<double>(W) * d * 4);
           e.memory.add_phase("eval: one logit block", std::max(n, 512.0) * (V + d) * 4);
           e.what = fmt::format("the evaluation in windows of {} tokens", W);
           e.reduce = q.spelled("window") + " (shorter windows)";
           return e;
         }});
}

}  // namespace vocablens::entries
