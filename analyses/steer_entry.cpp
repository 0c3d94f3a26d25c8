// `steer`: greedy generation with an embedding-difference steering vector, its options declared once, and the call
// every surface makes (vocablens/analysis_registry.hpp). It has no subcommand of its own: `vocablens generate
// --steer PLUS-MINUS` reads its --steer-layer and --steer-scale defaults from this declaration
// (src/cli/cmd_generate.cpp), and prints text instead of a Result.
#include <fmt/format.h>

#include <algorithm>

#include "entry_common.hpp"
#include "vocablens/ablation.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/cache.hpp"
#include "vocablens/kv_cache.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

void register_steer_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = "steer";
  d.input = "prompt";
  d.summary =
      "Greedy generation with scale * (W_E[plus] - W_E[minus]) added to blocks.L.hook_resid_pre (and without, "
      "to compare)";
  d.options = entry::prompt_decls();
  entry::append(
      d.options,
      {
          OptionDecl{"plus", OptionType::Token, nullptr, "Token whose embedding is added (its text, or #ID)"}.as_required(),
          OptionDecl{"minus", OptionType::Token, nullptr, "Token whose embedding is subtracted (its text, or #ID)"}.as_required(),
          {"layer", OptionType::Integer, nullptr, "Block whose input is steered (default: n_layers / 2)"},
          {"scale", OptionType::Real, 4.0, "Multiplier of the steering vector (negative reverses it)"},
          {"steps", OptionType::Integer, 20, "Tokens generated", 0, 1e6},
      });
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           const auto& o = q.options;
           const auto ids = entry::prompt_of(q);
           const int64_t p = entry::token_of(q, o.at("plus"), "plus"), n = entry::token_of(q, o.at("minus"), "minus");
           const int64_t layer = o.at("layer").is_null() ? q.model.config().n_layers / 2 : entry::layer_of(q, "layer");
           const double scale = o.at("scale").get<double>();
           const int64_t steps = o.at("steps").get<int64_t>();
           const at::Tensor v = embedding_difference(q.model, p, n);
           const auto steered = generate_greedy_with_hooks(q.model, ids, steps, -1, steering_hooks(v, layer, scale));
           const auto plain = q.model.generate_greedy(ids, steps, -1);
           Result r;
           r.kind = "steering";
           r.settings = {{"plus", p},
                         {"minus", n},
                         {"layer", layer},
                         {"scale", scale},
                         {"steps", steps},
                         {"hook", "blocks." + std::to_string(layer) + ".hook_resid_pre"},
                         {"prompt", entry::prompt_text(q, ids)}};
           r.summary = {{"steered_ids", steered}, {"plain_ids", plain}};
           if (q.tok) {
             r.summary["steered_text"] = q.tok->decode(steered);
             r.summary["plain_text"] = q.tok->decode(plain);
           }
           return r;
         },
         // Steering runs full passes over up to T = prompt + steps positions (with logits), beside the keys and
         // values of every position of the plain continuation.
         [](const AnalysisRequest& q) {
           const auto& c = q.model.config();
           const int64_t T = std::min<int64_t>(
               static_cast<int64_t>(entry::prompt_of(q).size()) + q.options.at("steps").get<int64_t>(), c.n_ctx);
           AnalysisEstimate e;
           e.memory = estimate_forward_memory(q.model, 1, T, CacheSpec::none(), true);
           e.memory.add(fmt::format("KV cache [{} positions]", T), kv_cache_bytes(c, 1, T));
           e.what = fmt::format("steered generation up to {} positions with {}", T, q.model.source());
           e.reduce = "fewer " + q.spelled("steps") + " or a shorter " + q.spelled("prompt");
           return e;
         }});
}

}  // namespace vocablens::entries
