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

enum class HookPoint {
  Embed, PosEmbed, ResidPre, Q, K, V, AttnScores, Pattern, Z, Result, AttnOut, ResidMid, MlpPre, MlpPost,
  RouterLogits, ExpertIndices, ExpertWeights,  // mixtures of experts only (ModelConfig::n_experts > 0)
  MlpOut, ResidPost, FinalNorm
};
constexpr int kHookPointCount = 20;

/// One hook point of one layer (layer = -1 for hook_embed, hook_pos_embed, ln_final.hook_normalized).
struct HookSite {
  HookPoint point = HookPoint::ResidPre;
  int64_t layer = -1;
  /// "blocks.3.attn.hook_z"
  std::string tl_name() const;
  /// "z.3"
  std::string short_name() const;
  bool operator==(const HookSite& o) const { return point == o.point && layer == o.layer; }
};

/// Every hook site this model has, in forward order: pos_embed only with learned positions; on a mixture of
/// experts the router points, and mlp_pre / mlp_post only where a dense MLP (Qwen2-MoE's shared expert) runs.
std::vector<HookSite> hook_sites(const ModelConfig& cfg);

/// Parses a TransformerLens name ("blocks.3.hook_resid_pre", "blocks.3.attn.hook_z", "hook_embed",
/// "ln_final.hook_normalized") or a short one ("resid_pre.3", "z.3", "final_norm"). Throws UsageError
/// listing the valid names when `name` is none of them or its layer is not in [0, cfg.n_layers), and naming
/// the model's MLP when the point is not one of its sites (router points of a dense model, mlp_pre of a
/// mixture without a dense MLP).
HookSite parse_hook_name(const std::string& name, const ModelConfig& cfg);

/// The same parse without a model (no layer bound, no check of learned positions); nullopt when `name` is
/// neither spelling of any point.
std::optional<HookSite> hook_site_from_name(const std::string& name);

/// Every valid hook name pattern, for help texts and errors (one per line, "blocks.L.hook_resid_pre  resid_pre.L").
std::string hook_name_list(const ModelConfig& cfg);

}  // namespace vocablens
