// vocablens/hook_site.hpp — one name for one activation: the hook site (point + layer) that hooks, the
// residual cache, Python and the HTTP API all use.
//
// Every activation of a forward pass is a point of a block (or of the model) and has two spellings:
// TransformerLens's ("blocks.3.attn.hook_z", "hook_embed", "ln_final.hook_normalized") and our short one
// ("z.3", "embed", "final_norm"). Both parse to the same HookSite; tl_name() / short_name() print it back.
//
//   vocablens::HookSite s = vocablens::parse_hook_name("blocks.3.hook_resid_post", model.config());
//   s.short_name();                               // "resid_post.3" (the key ResidualCache stores it under)
//   cache.get(s);  cache.get("resid_post.3");  cache.get("blocks.3.hook_resid_post");   // one tensor
//
// The points, in forward order, with their shapes for a batch [B, T], are listed by hook_name_list() and in
// vocablens/hooks.hpp. No LibTorch here.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vocablens/model_config.hpp"

namespace vocablens {

/// The points. The enum's order is not the forward order (hook_sites() and hook_name_list() give that): later
/// additions go at its end, one run per change.
enum class HookPoint {
  Embed,
  PosEmbed,
  ResidPre,
  Q,
  K,
  V,
  AttnScores,
  Pattern,
  Z,
  Result,
  AttnOut,
  ResidMid,
  MlpPre,
  MlpPost,
  MlpOut,
  ResidPost,
  FinalNorm,
  // The norms before attention and MLP, and the MLP's input (what transcoders read): the norm's denominator
  // [B, T, 1], its normalised vector before weight and bias, the MLP's input after them; the final norm's
  // denominator.
  Ln1Scale,
  Ln1Normalized,
  Ln2Scale,
  Ln2Normalized,
  MlpIn,
  FinalScale,
  // Mixtures of experts only (ModelConfig::n_experts > 0): the router's logits before the softmax, the chosen
  // experts (int64, best first), their weights and each chosen expert's unweighted output [B, T, k, d_model].
  RouterLogits,
  ExpertIndices,
  ExpertWeights,
  ExpertOut
};
constexpr int kHookPointCount = 27;

/// One hook point of one layer (layer = -1 for hook_embed, hook_pos_embed, ln_final.hook_scale and
/// ln_final.hook_normalized).
struct HookSite {
  HookPoint point = HookPoint::ResidPre;
  int64_t layer = -1;
  /// "blocks.3.attn.hook_z"
  std::string tl_name() const;
  /// "z.3"
  std::string short_name() const;
  bool operator==(const HookSite& o) const { return point == o.point && layer == o.layer; }
};

/// Parses a TransformerLens name ("blocks.3.hook_resid_pre", "blocks.3.attn.hook_z", "hook_embed",
/// "ln_final.hook_normalized") or a short one ("resid_pre.3", "z.3", "final_norm"). Throws UsageError
/// listing the valid names when `name` is none of them or its layer is not in [0, cfg.n_layers), and one
/// naming why when the model has no such point (hook_point_missing).
HookSite parse_hook_name(const std::string& name, const ModelConfig& cfg);

/// Why the model has no point `p` ("" when it has): hook_pos_embed without learned positions; ln1 / ln2
/// points in a block with no norm before its attention and MLP (post-norm blocks, OLMo 2's); ln_final.hook_scale
/// without a final norm; the router points in a dense model; mlp_pre / mlp_post in a mixture of experts without
/// a dense MLP (Qwen2-MoE's shared expert is one). Every other point exists in every model.
std::string hook_point_missing(HookPoint p, const ModelConfig& cfg);

/// Every hook site of the model in forward order (the points hook_point_missing() allows, each block's in
/// turn).
std::vector<HookSite> hook_sites(const ModelConfig& cfg);

/// The same parse without a model (no layer bound, no check of learned positions); nullopt when `name` is
/// neither spelling of any point.
std::optional<HookSite> hook_site_from_name(const std::string& name);

/// Every valid hook name pattern, for help texts and errors (one per line, "blocks.L.hook_resid_pre  resid_pre.L").
std::string hook_name_list(const ModelConfig& cfg);

}  // namespace vocablens
