// Hook points of the forward pass (see vocablens/hooks.hpp): names, the per-pass hook table, and the
// forward / greedy decoding with hooks.
#include "vocablens/hooks.hpp"

#include <ATen/core/grad_mode.h>

#include <cctype>

#include "vocablens/error.hpp"
#include "vocablens/weight.hpp"

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
  auto check_layer = [&](HookSite s) {
    if (s.layer < 0 || s.layer >= cfg.n_layers)
      fail("hook '" + name + "': layer " + std::to_string(s.layer) + " is out of range (the model has " +
           std::to_string(cfg.n_layers) + " layers)");
    return s;
  };
  for (const auto& p : kPoints)
    if (!p.block && (name == p.tl || name == p.short_)) {
      if (p.point == HookPoint::PosEmbed && cfg.positions != PositionKind::Learned)
        fail("hook '" + name + "': this model has no learned position embeddings");
      return {p.point, -1};
    }
  // blocks.L.<tl>
  const std::string pre = "blocks.";
  if (name.compare(0, pre.size(), pre) == 0) {
    size_t dot = name.find('.', pre.size());
    int64_t layer = 0;
    if (dot != std::string::npos && parse_layer(name.substr(pre.size(), dot - pre.size()), layer)) {
      const std::string rest = name.substr(dot + 1);
      for (const auto& p : kPoints)
        if (p.block && rest == p.tl) return check_layer({p.point, layer});
    }
    return fail("unknown hook '" + name + "'");
  }
  // <short>.L
  size_t dot = name.rfind('.');
  int64_t layer = 0;
  if (dot != std::string::npos && parse_layer(name.substr(dot + 1), layer)) {
    const std::string head = name.substr(0, dot);
    for (const auto& p : kPoints)
      if (p.block && head == p.short_) return check_layer({p.point, layer});
  }
  return fail("unknown hook '" + name + "'");
}

namespace hook_detail {

HookTable::HookTable(const HookList& hooks, const ModelConfig& cfg) : n_layers_(cfg.n_layers) {
  slots_.resize(static_cast<size_t>(kHookPointCount * (n_layers_ + 1)));
  for (const auto& it : hooks.items()) {
    HookSite s = parse_hook_name(it.name, cfg);
    if (!it.fn) throw UsageError("hook '" + it.name + "' has no callback");
    slots_[static_cast<size_t>(static_cast<int>(s.point) * (n_layers_ + 1) + s.layer + 1)].push_back(&it.fn);
  }
}

void HookTable::apply(HookPoint p, int64_t layer, at::Tensor& t) const {
  const auto& fns = slot(p, layer);
  if (fns.empty()) return;
  const auto sizes = t.sizes().vec();
  t = t.clone(at::MemoryFormat::Contiguous);  // writes in place stay local to this point
  for (const HookFn* f : fns) {
    (*f)(t);
    if (!t.defined() || t.sizes().vec() != sizes) {
      HookSite s{p, layer};
      throw UsageError("hook at " + s.tl_name() + " changed the activation's shape (or left it undefined)");
    }
  }
}

at::Tensor head_results(const at::Tensor& z, const at::Tensor& w_o) {
  const int64_t H = z.size(2), dh = z.size(3);
  const at::Tensor wf = materialize_weight(w_o);  // float32 (stored-dtype weights upcast, vocablens/weight.hpp)
  at::Tensor W = wf.reshape({H, dh, wf.size(1)});  // [H, dh, d]
  // [B, T, H, dh] x [H, dh, d] -> [B, T, H, d]: one batched GEMM over heads.
  at::Tensor zh = z.permute({2, 0, 1, 3}).reshape({H, -1, dh});  // [H, B*T, dh]
  at::Tensor r = at::bmm(zh, W);                                  // [H, B*T, d]
  return r.view({H, z.size(0), z.size(1), W.size(2)}).permute({1, 2, 0, 3}).contiguous();
}

}  // namespace hook_detail

ForwardOutput run_with_hooks(const Model& m, const at::Tensor& ids, const HookList& hooks, const CacheSpec& spec,
                             bool compute_logits) {
  at::NoGradGuard no_grad;
  return run_forward(m.config(), m.weights(), ids, spec, compute_logits, at::Tensor(), &hooks);
}

std::vector<int64_t> generate_greedy_with_hooks(const Model& m, std::vector<int64_t> tokens, int64_t steps,
                                                int64_t stop_token, const HookList& hooks) {
  if (tokens.empty()) throw UsageError("generation needs at least one prompt token (e.g. BOS)");
  if (static_cast<int64_t>(tokens.size()) > m.config().n_ctx)
    throw UsageError("the prompt has " + std::to_string(tokens.size()) + " tokens, longer than the model's context of " +
                     std::to_string(m.config().n_ctx));
  at::NoGradGuard no_grad;
  CacheSpec spec;
  spec.final_norm = true;
  // As Model::generate_greedy (run.c): the token predicted at position n_ctx - 1 is kept.
  for (int64_t s = 0; s < steps && static_cast<int64_t>(tokens.size()) <= m.config().n_ctx; ++s) {
    auto ids = at::tensor(tokens, at::kLong).unsqueeze(0);
    auto out = run_forward(m.config(), m.weights(), ids, spec, false, at::Tensor(), &hooks);
    int64_t next = m.unembed(out.cache.get("final_norm").select(1, -1)).argmax(-1).item<int64_t>();
    tokens.push_back(next);
    if (next == stop_token) break;
  }
  return tokens;
}

}  // namespace vocablens
