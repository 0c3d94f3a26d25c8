// vocablens/attribution.hpp — direct logit attribution: one logit (or logit difference) of one position
// split into what every part of the model wrote into the residual stream.
//
// The final residual at position p is a sum of components: the token embedding, the position embedding
// (learned or sinusoidal models), each head's output z_h @ W_O[h], each layer's attention bias b_O, each
// MLP's output act @ W_out and its bias b_out. The final norm is linear once its scale is frozen at the
// value it had in this run (TransformerLens's apply_ln_to_stack):
//   LayerNorm: c -> (c - mean(c)) / s * w,   s = sqrt(var(x) + eps) of the full residual x
//   RMSNorm:   c -> c / s * w,               s = sqrt(mean(x²) + eps)
// so with u = W_U[:, target] - W_U[:, wrong] (or W_U[:, target]) each component contributes
// (normed c) · u, and the norm's bias (b · u) and the unembedding bias (b_U[target] - b_U[wrong]) are two
// more parts. The parts sum to the model's own logit (difference) — `check` holds |sum - model|, within
// 1e-4 in float32 (tested on gpt2-tiny and stories260K).
//
//   vocablens::AttributionOptions o;  o.target = 5335;  o.wrong = 1757;
//   auto a = vocablens::attribute_logit(model, ids, o);
//   for (auto& c : a.components) printf("%s %.3f\n", c.name.c_str(), c.value);
//   double head_1_3 = a.heads[1 * a.n_heads + 3];
//
// AttributionOptions::layer reads an earlier residual the same way (the final norm with its scale frozen at
// that residual's value, i.e. the logit lens's row `layer`); model_value is then that lens row's logit.
//
// Computed in float64 from one float32 forward pass. Models whose blocks add a normalised output
// (post-norm families) are refused: their parts are not a linear sum.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

class Model;
class Tokenizer;
class HookList;

struct AttributionOptions {
  int64_t target = -1;    ///< required
  int64_t wrong = -1;     ///< -1: attribute logit[target] itself
  int64_t position = -1;  ///< -1 = the last position
  /// Which residual is read: the stream before block `layer` (0 = the embedding alone, n_layers = the final
  /// residual; -1 = n_layers, the model's own logits), as the logit lens reads its row `layer` and
  /// TransformerLens's decompose_resid(layer) splits it. Only blocks < layer are parts.
  int64_t layer = -1;
  /// Hooks that edit the forward whose logit is split (`attribute --ablate-expert L.E`, `--scale-expert L.E=F`:
  /// vocablens/experts.hpp), added before the attribution's own, so that it reads what they leave: an expert's
  /// part "L2E5" is its edited router weight times its output, and the parts sum to the edited forward's logit.
  /// They may edit only the tensor they are handed. Null: the model's own forward.
  std::shared_ptr<const HookList> interventions;
};

struct AttributionComponent {
  /// "embed", "pos_embed", "L1H3", "L1 b_O", "MLP2", "MLP2 b_out", "ln_final bias", "b_U"; in a mixture of
  /// experts "L2E5" (expert 5 of block 2: its router weight times its output) and "MLP2 shared" (Qwen2-MoE's shared
  /// expert) instead of "MLP2"
  std::string name;
  /// "embed" | "pos_embed" | "head" | "attn_bias" | "mlp" | "mlp_bias" | "expert" | "norm_bias" | "unembed_bias"
  std::string kind;
  int64_t layer = -1;
  int64_t head = -1;
  double value = 0;
  int64_t expert = -1;  ///< kind "expert": the expert's index
};

struct AttributionResult {
  std::vector<int64_t> tokens;
  std::string model_source;
  AttributionOptions options;
  int64_t position = 0;
  int64_t n_layers = 0, n_heads = 0;
  int64_t layer = 0;                             ///< the residual read: before block `layer` (n_layers = the final one)
  double norm_scale = 0;                         ///< the final norm's frozen scale s at the position
  double model_value = 0;                        ///< the model's own logit (difference), from its float32 logits
  double sum = 0;                                ///< sum of the components
  double check = 0;                              ///< |sum - model_value|
  std::vector<AttributionComponent> components;  ///< in model order
  std::vector<double> heads;                     ///< [layer, n_heads]: the blocks before `layer` (all of them by default)
  std::vector<double> mlps;                      ///< [layer] (MLP output without its bias)

  /// kind "logit_attribution": settings, summary (values, check, the largest parts), arrays "heads"
  /// [n_layers, n_heads] and "mlps" [n_layers], table "components".
  Result to_result(const Tokenizer* tok, const std::string& prompt = "") const;
};

/// Throws UsageError on bad ids/target/position; UsageError for a norm kind the decomposition does not cover.
AttributionResult attribute_logit(const Model& m, const std::vector<int64_t>& ids, const AttributionOptions& opts);

}  // namespace vocablens
