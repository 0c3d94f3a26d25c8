// Hook sites (vocablens/hook_site.hpp): the points, their two spellings and shapes, which a model has, parsing and
// listing.
#include "vocablens/hook_site.hpp"

#include <cctype>
#include <stdexcept>

#include "vocablens/error.hpp"

namespace vocablens {
namespace {

struct PointName {
  HookPoint point;
  const char* tl;      // TransformerLens name after "blocks.L." (or the whole name for model-level points)
  const char* short_;  // our short name (before ".L" for block points)
  bool block;
  const char* shape;
};

// In forward order (the listing's and hook_sites()'s), which is not the enum's.
const PointName kPoints[] = {
    {HookPoint::Embed, "hook_embed", "embed", false, "[B, T, d_model]"},
    {HookPoint::PosEmbed, "hook_pos_embed", "pos_embed", false, "[B, T, d_model] (learned positions only)"},
    {HookPoint::ResidPre, "hook_resid_pre", "resid_pre", true, "[B, T, d_model]"},
    {HookPoint::Ln1Scale, "ln1.hook_scale", "ln1_scale", true, "[B, T, 1] (pre-norm blocks)"},
    {HookPoint::Ln1Normalized, "ln1.hook_normalized", "ln1_normalized", true, "[B, T, d_model] (pre-norm blocks)"},
    {HookPoint::Q, "attn.hook_q", "q", true, "[B, T, n_heads, d_head]"},
    {HookPoint::K, "attn.hook_k", "k", true, "[B, T, n_kv_heads, d_head]"},
    {HookPoint::V, "attn.hook_v", "v", true, "[B, T, n_kv_heads, d_head]"},
    {HookPoint::AttnScores, "attn.hook_attn_scores", "attn_scores", true, "[B, n_heads, T, T]"},
    {HookPoint::Pattern, "attn.hook_pattern", "pattern", true, "[B, n_heads, T, T]"},
    {HookPoint::Z, "attn.hook_z", "z", true, "[B, T, n_heads, d_head]"},
    {HookPoint::Result, "attn.hook_result", "result", true, "[B, T, n_heads, d_model]"},
    {HookPoint::AttnOut, "hook_attn_out", "attn_out", true, "[B, T, d_model]"},
    {HookPoint::ResidMid, "hook_resid_mid", "resid_mid", true, "[B, T, d_model]"},
    {HookPoint::Ln2Scale, "ln2.hook_scale", "ln2_scale", true, "[B, T, 1] (pre-norm blocks)"},
    {HookPoint::Ln2Normalized, "ln2.hook_normalized", "ln2_normalized", true, "[B, T, d_model] (pre-norm blocks)"},
    {HookPoint::MlpIn, "mlp.hook_in", "mlp_in", true, "[B, T, d_model]"},
    {HookPoint::MlpPre, "mlp.hook_pre", "mlp_pre", true, "[B, T, d_mlp]"},
    {HookPoint::MlpPost, "mlp.hook_post", "mlp_post", true, "[B, T, d_mlp]"},
    {HookPoint::RouterLogits, "mlp.hook_router_logits", "router_logits", true, "[B, T, n_experts] (mixtures of experts)"},
    {HookPoint::ExpertIndices, "mlp.hook_expert_indices", "expert_indices", true,
     "[B, T, k] int64: the chosen experts, best first"},
    {HookPoint::ExpertWeights, "mlp.hook_expert_weights", "expert_weights", true, "[B, T, k]: the chosen experts' weights"},
    {HookPoint::ExpertOut, "mlp.hook_expert_out", "expert_out", true,
     "[B, T, k, d_model]: each chosen expert's output, unweighted"},
    {HookPoint::MlpOut, "hook_mlp_out", "mlp_out", true, "[B, T, d_model]"},
    {HookPoint::ResidPost, "hook_resid_post", "resid_post", true, "[B, T, d_model]"},
    {HookPoint::FinalScale, "ln_final.hook_scale", "final_scale", false, "[B, T, 1] (with a final norm)"},
    {HookPoint::FinalNorm, "ln_final.hook_normalized", "final_norm", false, "[B, T, d_model]"},
};
static_assert(sizeof(kPoints) / sizeof(kPoints[0]) == kHookPointCount, "one row per HookPoint");

const PointName& info(HookPoint p) {
  for (const auto& i : kPoints)
    if (i.point == p) return i;
  throw std::logic_error("HookPoint without a row in kPoints");
}

bool parse_layer(const std::string& s, int64_t& out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  out = std::stoll(s);
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

std::string hook_point_missing(HookPoint p, const ModelConfig& cfg) {
  switch (p) {
    case HookPoint::PosEmbed:
      return cfg.positions == PositionKind::Learned ? "" : "this model has no learned position embeddings";
    case HookPoint::Ln1Scale:
    case HookPoint::Ln1Normalized:
    case HookPoint::Ln2Scale:
    case HookPoint::Ln2Normalized:
      // TransformerLens's ln1 / ln2 are the norms whose output the attention and the MLP read. A post-norm block
      // normalises the sums after them, OLMo 2's the sublayers' outputs: those norms are not what any matrix
      // reads, so they are no ln1 / ln2; the MLP's input is blocks.L.mlp.hook_in either way.
      if (!cfg.norm_before)
        return "this model normalises after each sublayer (post-norm), so no norm precedes its attention and MLP "
               "(the MLP's input is blocks.L.mlp.hook_in)";
      if (!cfg.input_norms)
        return "this model has no norm before its attention and MLP (it normalises their outputs; the MLP's input "
               "is blocks.L.mlp.hook_in)";
      return "";
    case HookPoint::FinalScale: return cfg.final_norm ? "" : "this model has no final norm";
    // The router's points only in mixtures of experts; the dense MLP's only where one runs (every dense model,
    // Qwen2-MoE's shared expert).
    case HookPoint::RouterLogits:
    case HookPoint::ExpertIndices:
    case HookPoint::ExpertWeights:
    case HookPoint::ExpertOut: return cfg.n_experts > 0 ? "" : "this model's MLP is not a mixture of experts (no router points)";
    case HookPoint::MlpPre:
    case HookPoint::MlpPost:
      return cfg.n_experts == 0 || cfg.shared_expert
                 ? ""
                 : "this model's MLP is a mixture of experts without a dense MLP (its points: mlp.hook_router_logits, "
                   "mlp.hook_expert_indices, mlp.hook_expert_weights, mlp.hook_expert_out)";
    default: return "";
  }
}

std::vector<HookSite> hook_sites(const ModelConfig& cfg) {
  std::vector<HookSite> out;
  for (const auto& p : kPoints)
    if (!p.block && hook_point_missing(p.point, cfg).empty() && p.point != HookPoint::FinalScale &&
        p.point != HookPoint::FinalNorm)
      out.push_back({p.point, -1});
  for (int64_t l = 0; l < cfg.n_layers; ++l)
    for (const auto& p : kPoints)
      if (p.block && hook_point_missing(p.point, cfg).empty()) out.push_back({p.point, l});
  for (HookPoint p : {HookPoint::FinalScale, HookPoint::FinalNorm})
    if (hook_point_missing(p, cfg).empty()) out.push_back({p, -1});
  return out;
}

std::string hook_name_list(const ModelConfig& cfg) {
  std::string s;
  const std::string Ls = "L = 0.." + std::to_string(cfg.n_layers - 1);
  for (const auto& p : kPoints) {
    if (!hook_point_missing(p.point, cfg).empty() && p.point != HookPoint::PosEmbed) continue;
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
    throw UsageError(why + "; valid hook names (short form in parentheses), L = 0.." + std::to_string(cfg.n_layers - 1) + ": " +
                     names);
  };
  const std::optional<HookSite> s = hook_site_from_name(name);
  if (!s) return fail("unknown hook '" + name + "'");
  // A point this model lacks: the reason alone (the list of names would name the point as if it were valid).
  const std::string missing = hook_point_missing(s->point, cfg);
  if (!missing.empty()) throw UsageError("hook '" + name + "': " + missing);
  if (!info(s->point).block) return *s;
  if (s->layer < 0 || s->layer >= cfg.n_layers)
    fail("hook '" + name + "': layer " + std::to_string(s->layer) + " is out of range (the model has " +
         std::to_string(cfg.n_layers) + " layers)");
  return *s;
}

}  // namespace vocablens
