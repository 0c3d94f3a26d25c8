// Hooks of the forward pass (see vocablens/hooks.hpp): the per-pass hook table, and the forward / greedy
// decoding with hooks. Hook names: hook_site.cpp.
#include "vocablens/hooks.hpp"

#include "model/forward_work.hpp"
#include "model/hook_table.hpp"
#include "util/parallel.hpp"
#include "vocablens/detail/hook_readonly.hpp"

#include <ATen/core/grad_mode.h>

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"

namespace vocablens {

namespace hook_detail {

namespace {
thread_local bool t_read_only = false;
}
ReadOnlyHooks::ReadOnlyHooks() : before_(t_read_only) { t_read_only = true; }
ReadOnlyHooks::~ReadOnlyHooks() { t_read_only = before_; }
bool hooks_read_only() { return t_read_only; }

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
  if (!hooks_read_only()) t = t.clone(at::MemoryFormat::Contiguous);  // writes in place stay local to this point
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
  const at::Tensor wf = materialize_weight(w_o);   // float32 (stored-dtype weights upcast, vocablens/weight.hpp)
  at::Tensor W = wf.reshape({H, dh, wf.size(1)});  // [H, dh, d]
  // [B, T, H, dh] x [H, dh, d] -> [B, T, H, d]: one batched GEMM over heads.
  at::Tensor zh = z.permute({2, 0, 1, 3}).reshape({H, -1, dh});  // [H, B*T, dh]
  at::Tensor r = at::bmm(zh, W);                                 // [H, B*T, d]
  return r.view({H, z.size(0), z.size(1), W.size(2)}).permute({1, 2, 0, 3}).contiguous();
}

}  // namespace hook_detail

ForwardOutput run_with_hooks(const Model& m, const at::Tensor& ids, const HookList& hooks, const CacheSpec& spec,
                             bool compute_logits) {
  at::NoGradGuard no_grad;
  return run_forward(m.config(), m.weights(), ids, spec, compute_logits, at::Tensor(), &hooks);
}

std::vector<int64_t> generate_greedy_with_hooks(const Model& m, std::vector<int64_t> tokens, int64_t steps, int64_t stop_token,
                                                const HookList& hooks) {
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
    // The step's unembedding and argmax: one row, on this thread alone when small (util/parallel.hpp).
    const detail::SerialBelow serial(forward_work(m.config(), 0, true));
    int64_t next = m.unembed(out.cache.get("final_norm").select(1, -1)).argmax(-1).item<int64_t>();
    tokens.push_back(next);
    if (next == stop_token) break;
  }
  return tokens;
}

}  // namespace vocablens
