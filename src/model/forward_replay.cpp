// Recording a forward pass into a ForwardRecord and replaying one from it (model/forward_replay.hpp says why
// this is apart from forward.cpp, which calls both).
#include "model/forward_replay.hpp"

#include <string>

#include "model/hook_table.hpp"
#include "vocablens/hook_site.hpp"
#include "vocablens/interrupt.hpp"

namespace vocablens {

namespace detail {
at::Tensor proj(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);  // forward.cpp
}

namespace forward_memo_detail {

namespace {

// A record holds, for every layer, what these hook points saw (besides resid_pre.0 and final_norm).
const char* const kRecordedPoints[] = {"z", "resid_mid", "mlp_out", "resid_post"};

}  // namespace

// The recording hooks, after the pass's own: each keeps the tensor the rest of the pass goes on with.
void add_recorders(const ModelConfig& cfg, ForwardRecord* rec, HookList& hooks) {
  auto keep = [rec](const std::string& name) { return [rec, name](at::Tensor& t) { rec->acts[name] = t; }; };
  hooks.add("resid_pre.0", keep("resid_pre.0"));
  for (int64_t l = 0; l < cfg.n_layers; ++l)
    for (const char* p : kRecordedPoints) hooks.add(ResidualCache::key(p, l), keep(ResidualCache::key(p, l)));
  hooks.add("final_norm", keep("final_norm"));
}

// The pass, from a record: its hooks run on the recorded tensors in forward order (each hook point copies
// before its callbacks, so the record is never written), its cache is filled with copies. Empty when the
// pass asks for something a record does not hold: it then runs.
std::optional<ForwardOutput> replay_forward(const ModelConfig& cfg, const ModelWeights& w, const ForwardRecord& rec,
                                            const CacheSpec& spec, bool compute_logits, const HookList* hooks) {
  using namespace detail;
  if (spec.attn_out || spec.pattern || (spec.router && cfg.n_experts > 0) || spec.wants_norm_points()) return std::nullopt;
  if (hooks)
    for (const auto& it : hooks->items()) {
      const HookPoint p = parse_hook_name(it.name, cfg).point;
      if (p != HookPoint::ResidPre && p != HookPoint::Z && p != HookPoint::ResidMid && p != HookPoint::MlpOut &&
          p != HookPoint::ResidPost && p != HookPoint::FinalNorm)
        return std::nullopt;
    }
  auto get = [&rec](const std::string& name) -> const at::Tensor* {
    auto it = rec.acts.find(name);
    return it == rec.acts.end() ? nullptr : &it->second;
  };
  if (!get("resid_pre.0") || !get("final_norm")) return std::nullopt;
  for (int64_t l = 0; l < cfg.n_layers; ++l)
    for (const char* p : kRecordedPoints)
      if (!get(ResidualCache::key(p, l))) return std::nullopt;

  std::optional<hook_detail::HookTable> table;
  if (hooks && !hooks->empty()) table.emplace(*hooks, cfg);
  const hook_detail::HookTable* hk = table ? &*table : nullptr;
  ForwardOutput out;
  auto point = [&](HookPoint p, int64_t l, const std::string& name, bool wanted, const std::string& cache_name) {
    at::Tensor t = *get(name);
    if (hk) hk->apply(p, l, t);
    if (wanted) out.cache.set(cache_name, t.clone());
  };
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    throw_if_cancelled("the forward pass");
    const bool keep = spec.wants_layer(l);
    point(HookPoint::ResidPre, l, l == 0 ? "resid_pre.0" : ResidualCache::key("resid_post", l - 1), keep && spec.resid_pre,
          ResidualCache::key("resid_pre", l));
    point(HookPoint::Z, l, ResidualCache::key("z", l), false, "");
    point(HookPoint::ResidMid, l, ResidualCache::key("resid_mid", l), keep && spec.resid_mid, ResidualCache::key("resid_mid", l));
    point(HookPoint::MlpOut, l, ResidualCache::key("mlp_out", l), keep && spec.mlp_out, ResidualCache::key("mlp_out", l));
    point(HookPoint::ResidPost, l, ResidualCache::key("resid_post", l), keep && spec.resid_post,
          ResidualCache::key("resid_post", l));
  }
  if (spec.final_norm || compute_logits) {
    at::Tensor fin = *get("final_norm");
    if (hk) hk->apply(HookPoint::FinalNorm, -1, fin);
    if (spec.final_norm) out.cache.set("final_norm", fin.clone());
    if (compute_logits) out.logits = soft_cap(proj(fin, w.W_U, w.b_U), cfg.final_softcap);
  }
  return out;
}

}  // namespace forward_memo_detail
}  // namespace vocablens
