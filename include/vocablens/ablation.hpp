// vocablens/ablation.hpp — knock out heads, MLP neurons or residual positions and watch the prediction;
// steering vectors added at a layer.
//
// Ablation sites, each written through a hook (vocablens/hooks.hpp):
//   Head    L.h  blocks.L.attn.hook_z[:, :, h, :]      head h of layer L writes nothing (zero) or its mean z
//   Neuron  L.n  blocks.L.mlp.hook_post[:, :, n]        MLP neuron n's activation
//   Resid   L.t  blocks.L.hook_resid_pre[:, t, :]       the whole residual stream entering block L at position t
//   Hook    NAME any hook point (vocablens/hooks.hpp), the whole activation (mean: over positions; not for
//                the [B, H, T, T] attention points)
// Zero ablation sets the activation to 0. Mean ablation sets it to its mean over every position of the
// reference prompts (default: the prompt itself), as in TransformerLens's mean-ablation demos. Zeroing
// a head's z is exactly zeroing its rows of W_O (tests/ablation_test.cpp checks this against a modified
// copy of the checkpoint); b_O stays.
//
//   vocablens::AblationOptions o;
//   o.sites = {vocablens::parse_ablation_site("head", "1.3")};
//   o.target = 5335;
//   vocablens::AblationResult a = vocablens::ablate(model, ids, o);
//   printf("%f -> %f\n", a.before.target_logit, a.after.target_logit);
//
// Steering (Turner et al.'s activation addition, with a vocabulary-space vector):
//   at::Tensor v = vocablens::embedding_difference(model, love_id, hate_id);   // W_E[love] - W_E[hate]
//   vocablens::HookList h = vocablens::steering_hooks(v, /*layer=*/2, /*scale=*/4.0);
//   auto ids = vocablens::generate_greedy_with_hooks(model, prompt, 20, -1, h);
#pragma once
#include "vocablens/tensor_fwd.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/hooks.hpp"
#include "vocablens/result.hpp"

namespace vocablens {

class Tokenizer;

struct AblationSite {
  enum class Kind { Head, Neuron, Resid, Hook } kind = Kind::Head;
  int64_t layer = 0;
  int64_t index = 0;          ///< head, neuron or position
  std::string hook;           ///< Kind::Hook: the hook name as given
  std::string label() const;  ///< "head 1.3", "neuron 0.17", "resid 2.4", "hook blocks.1.hook_attn_out"
};

/// Parses "L.i" (e.g. "1.3") for kind "head" | "neuron" | "resid" (resid: layer.position), or a hook
/// name for kind "hook". Range and name checks happen in ablate()/ablation_hooks() against the model.
AblationSite parse_ablation_site(const std::string& kind, const std::string& spec);

enum class AblationMode { Zero, Mean };

struct AblationOptions {
  std::vector<AblationSite> sites;
  AblationMode mode = AblationMode::Zero;
  /// Mean ablation: the means are taken over every position of these sequences (empty: the prompt).
  std::vector<std::vector<int64_t>> reference;
  int64_t target = -1;    ///< token whose logit is followed; -1 = the unablated run's top-1
  int64_t position = -1;  ///< -1 = last position
  int64_t top_k = 10;
};

/// The hooks that ablate `sites` (with means from `reference`, or from `ids` when it is empty).
/// Throws UsageError when a site is outside the model (lists the valid range).
HookList ablation_hooks(const Model& m, const std::vector<AblationSite>& sites, AblationMode mode,
                        const std::vector<std::vector<int64_t>>& reference);

/// Predictions at the followed position of one run.
struct Prediction {
  double target_logit = 0, target_prob = 0;
  int64_t target_rank = 0;  ///< 1 = top
  std::vector<int64_t> top_ids;
  std::vector<double> top_probs;
};

struct AblationResult {
  std::vector<int64_t> tokens;
  std::string model_source;
  AblationOptions options;
  int64_t position = 0, target = -1;
  Prediction before, after;
  double kl = 0;                ///< KL(before || after) at the position, nats
  double max_logit_change = 0;  ///< max_v |logit_after - logit_before| at the position
  /// kind "ablation": settings, summary (before/after predictions, change), table "top_k".
  Result to_result(const Tokenizer* tok, const std::string& prompt = "") const;
};

AblationResult ablate(const Model& m, const std::vector<int64_t>& ids, const AblationOptions& opts);

/// W_E[plus] - W_E[minus] [d_model] (a copy). Throws UsageError on ids outside the vocabulary.
at::Tensor embedding_difference(const Model& m, int64_t plus, int64_t minus);

/// A hook adding scale * v ([d_model]) to blocks.L.hook_resid_pre at every position (the layer is
/// checked against the model when the hooks run: UsageError listing the valid names).
HookList steering_hooks(const at::Tensor& v, int64_t layer, double scale);

}  // namespace vocablens
