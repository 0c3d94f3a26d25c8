// Hook sites (vocablens/hook_site.hpp): the 20 points, their two spellings and shapes, parsing and listing.
#include "vocablens/hook_site.hpp"

#include <cctype>

#include "vocablens/error.hpp"

namespace vocablens {
namespace {

struct PointName {
  HookPoint point;
  const char* tl;     // TransformerLens name after "blocks.L." (or the whole name for model-level points)
  const char* short_; // our short name (before ".L" for block points)
  bool block;
  const char* shape;
};

const PointName kPoints[] = {
    {HookPoint::Embed, "hook_embed", "embed", false, "[B, T, d_model]"},
    {HookPoint::PosEmbed, "hook_pos_embed", "pos_embed", false, "[B, T, d_model] (learned positions only)"},
    {HookPoint::ResidPre, "hook_resid_pre", "resid_pre", true, "[B, T, d_model]"},
    {HookPoint::Q, "attn.hook_q", "q", true, "[B, T, n_heads, d_head]"},
    {HookPoint::K, "attn.hook_k", "k", true, "[B, T, n_kv_heads, d_head]"},
    {HookPoint::V, "attn.hook_v", "v", true, "[B, T, n_kv_heads, d_head]"},
    {HookPoint::AttnScores, "attn.hook_attn_scores", "attn_scores", true, "[B, n_heads, T, T]"},
    {HookPoint::Pattern, "attn.hook_pattern", "pattern", true, "[B, n_heads, T, T]"},
    {HookPoint::Z, "attn.hook_z", "z", true, "[B, T, n_heads, d_head]"},
    {HookPoint::Result, "attn.hook_result", "result", true, "[B, T, n_heads, d_model]"},
    {HookPoint::AttnOut, "hook_attn_out", "attn_out", true, "[B, T, d_model]"},
    {HookPoint::ResidMid, "hook_resid_mid", "resid_mid", true, "[B, T, d_model]"},
    {HookPoint::MlpPre, "mlp.hook_pre", "mlp_pre", true, "[B, T, d_mlp]"},
    {HookPoint::MlpPost, "mlp.hook_post", "mlp_post", true, "[B, T, d_mlp]"},
    {HookPoint::RouterLogits, "mlp.hook_router_logits", "router_logits", true, "[B, T, n_experts] (mixtures of experts)"},
    {HookPoint::ExpertIndices, "mlp.hook_expert_indices", "expert_indices", true, "[B, T, k] int64: the chosen experts, best first"},
    {HookPoint::ExpertWeights, "mlp.hook_expert_weights", "expert_weights", true, "[B, T, k]: the chosen experts' weights"},
    {HookPoint::MlpOut, "hook_mlp_out", "mlp_out", true, "[B, T, d_model]"},
    {HookPoint::ResidPost, "hook_resid_post", "resid_post", true, "[B, T, d_model]"},
    {HookPoint::FinalNorm, "ln_final.hook_normalized", "final_norm", false, "[B, T, d_model]"},
};

const PointName& info(HookPoint p) { return kPoints[static_cast<int>(p)]; }

bool parse_layer(const std::string& s, int64_t& out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  out = std::stoll(s);
  return true;
}

// Whether a block of this model has the point: the router's only in mixtures of experts, the dense MLP's only
// where one runs (every dense model; Qwen2-MoE's shared expert).
bool has_point(const ModelConfig& cfg, HookPoint p) {
  const bool router = p == HookPoint::RouterLogits || p == HookPoint::ExpertIndices || p == HookPoint::ExpertWeights;
  if (router) return cfg.n_experts > 0;
  if (p == HookPoint::MlpPre || p == HookPoint::MlpPost) return cfg.n_experts == 0 || cfg.shared_expert;
  return true;
}

}  // namespace

std::string HookSite::tl_name() const {
  const auto& i = info(point);
  if (!i.block) return i.tl;
  return "blocks." + std::to_string(layer) + "." + i.tl;
}

std::string HookSite::short_name() const {
  const auto& i = info(point);
  if (!i.block) return i.short_;
  return std::string(i.short_) + "." + std::to_string(layer);
}

std::string hook_name_list(const ModelConfig& cfg) {
  std::string s;
  const std::string Ls = "L = 0.." + std::to_string(cfg.n_layers - 1);
  for (const auto& p : kPoints) {
    std::string tl = p.block ? std::string("blocks.L.") + p.tl : p.tl;
    std::string sh = p.block ? std::string(p.short_) + ".L" : p.short_;
    s += "  " + tl + std::string(tl.size() < 32 ? 32 - tl.size() : 1, ' ') + sh +
         std::string(sh.size() < 14 ? 14 - sh.size() : 1, ' ') + p.shape + "\n";
  }
  return s + "  (" + Ls + ")";
}

std::optional<HookSite> hook_site_from_name(const std::string& name) {
  for (const auto& p : kPoints)
    if (!p.block && (name == p.tl || name == p.short_)) return HookSite{p.point, -1};
  // blocks.L.<tl>
  const std::string pre = "blocks.";
  if (name.compare(0, pre.size(), pre) == 0) {
    size_t dot = name.find('.', pre.size());
    int64_t layer = 0;
    if (dot != std::string::npos && parse_layer(name.substr(pre.size(), dot - pre.size()), layer)) {
      const std::string rest = name.substr(dot + 1);
      for (const auto& p : kPoints)
        if (p.block && rest == p.tl) return HookSite{p.point, layer};
    }
    return std::nullopt;
  }
  // <short>.L
  size_t dot = name.rfind('.');
  int64_t layer = 0;
  if (dot != std::string::npos && parse_layer(name.substr(dot + 1), layer)) {
    const std::string head = name.substr(0, dot);
    for (const auto& p : kPoints)
      if (p.block && head == p.short_) return HookSite{p.point, layer};
  }
  return std::nullopt;
}

HookSite parse_hook_name(const std::string& name, const ModelConfig& cfg) {
  auto fail = [&](const std::string& why) -> HookSite {
    // Errors are one line: the names only (hook_name_list() has the shapes, one per line).
    std::string names;
    for (const auto& p : kPoints)
      names += std::string(names.empty() ? "" : ", ") + (p.block ? "blocks.L." : "") + p.tl + " (" + p.short_ +
               (p.block ? ".L" : "") + ")";
    throw UsageError(why + "; valid hook names (short form in parentheses), L = 0.." + std::to_string(cfg.n_layers - 1) +
                     ": " + names);
  };
  const std::optional<HookSite> s = hook_site_from_name(name);
  if (!s) return fail("unknown hook '" + name + "'");
  if (!info(s->point).block) {
    if (s->point == HookPoint::PosEmbed && cfg.positions != PositionKind::Learned)
      fail("hook '" + name + "': this model has no learned position embeddings");
    return *s;
  }
  if (s->layer < 0 || s->layer >= cfg.n_layers)
    fail("hook '" + name + "': layer " + std::to_string(s->layer) + " is out of range (the model has " +
         std::to_string(cfg.n_layers) + " layers)");
  if (!has_point(cfg, s->point))  // one line naming the point and what this model's MLP is instead
    throw UsageError("hook '" + name + "': " +
                     (cfg.n_experts > 0 ? "this model's MLP is a mixture of experts without a dense MLP (its points: "
                                          "mlp.hook_router_logits, mlp.hook_expert_indices, mlp.hook_expert_weights)"
                                        : std::string("this model's MLP is not a mixture of experts (no router points)")));
  return *s;
}

std::vector<HookSite> hook_sites(const ModelConfig& cfg) {
  std::vector<HookSite> out;
  for (const auto& p : kPoints)
    if (!p.block && (p.point != HookPoint::PosEmbed || cfg.positions == PositionKind::Learned) && p.point != HookPoint::FinalNorm)
      out.push_back({p.point, -1});
  for (int64_t l = 0; l < cfg.n_layers; ++l)
    for (const auto& p : kPoints)
      if (p.block && has_point(cfg, p.point)) out.push_back({p.point, l});
  out.push_back({HookPoint::FinalNorm, -1});
  return out;
}

}  // namespace vocablens
