// vocablens/cache.hpp — the residual stream recorded during a forward pass.
//
// Activations are keyed by their hook site (vocablens/hook_site.hpp): the short name below, TransformerLens's
// ("blocks.2.hook_resid_post") or a HookSite find the same tensor. The points the cache records:
//   resid_pre.L   [B, T, d_model]   stream entering block L (L = 0: embeddings incl. learned positions)
//   attn_out.L    [B, T, d_model]   attention sub-block output (after W_O and its bias)
//   resid_mid.L   [B, T, d_model]   resid_pre.L + attn_out.L
//   mlp_out.L     [B, T, d_model]   MLP sub-block output
//   resid_post.L  [B, T, d_model]   resid_mid.L + mlp_out.L  (== resid_pre.(L+1))
//   pattern.L     [B, n_heads, T, T] softmax attention probabilities (query, key); zero above the diagonal
//   final_norm    [B, T, d_model]   final norm applied to resid_post.(n_layers-1): the unembedding's input
//   router_logits.L, expert_indices.L, expert_weights.L, expert_out.L  (mixtures of experts, CacheSpec::router):
//                 the router's logits [B, T, n_experts] before the softmax, the chosen experts [B, T, k] (int64,
//                 best first), their weights [B, T, k] (renormalised where the family does) and outputs
//                 [B, T, k, d_model] (unweighted: mlp_out = sum over k of weight x output, plus a shared expert's)
// and, when asked for, the norms that the attention and the MLP read and the MLP's input (transcoders read these):
//   ln1_scale.L, ln2_scale.L  [B, T, 1]   the norm's denominator: sqrt(mean((x - mean x)²) + eps) for LayerNorm,
//                                         sqrt(mean(x²) + eps) for RMSNorm (x: resid_pre.L; ln2's: resid_mid.L, or
//                                         resid_pre.L in a parallel block); pre-norm blocks only
//   ln1_normalized.L, ln2_normalized.L  [B, T, d_model]  (x - mean x) / scale (RMSNorm: x / scale), before the
//                                         norm's weight and bias; pre-norm blocks only
//   mlp_in.L      [B, T, d_model]   what the MLP reads: ln2's output after weight and bias (resid_mid.L itself in
//                                   blocks without a norm before the MLP)
//   final_scale   [B, T, 1]         the final norm's denominator (models with a final norm)
// All tensors are float32, contiguous, owned by the cache (no views into model weights).
//
//   vocablens::CacheSpec spec;  spec.resid_post = true;           // keep only what you need
//   auto out = model.forward(ids, spec);
//   at::Tensor r = out.cache.get("resid_post", 2);                // == get("blocks.2.hook_resid_post")
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "vocablens/cache_spec.hpp"
#include "vocablens/hook_site.hpp"

namespace vocablens {

/// Activations by hook site, stored under the short name ("resid_pre.3", "pattern.0", "final_norm").
class ResidualCache {
 public:
  /// `name` in either spelling ("resid_pre.3" or "blocks.3.hook_resid_pre").
  bool has(const std::string& name) const;
  bool has(const std::string& hook, int64_t layer) const { return has(key(hook, layer)); }
  bool has(const HookSite& s) const { return entries_.count(s.short_name()) != 0; }
  /// Throws UsageError naming the hook when it was not recorded.
  const at::Tensor& get(const std::string& name) const;
  const at::Tensor& get(const std::string& hook, int64_t layer) const { return get(key(hook, layer)); }
  const at::Tensor& get(const HookSite& s) const { return get(s.short_name()); }
  void set(const std::string& name, at::Tensor t) { entries_[name] = std::move(t); }
  const std::map<std::string, at::Tensor>& entries() const { return entries_; }
  static std::string key(const std::string& hook, int64_t layer) { return hook + "." + std::to_string(layer); }

 private:
  std::map<std::string, at::Tensor> entries_;
};

}  // namespace vocablens
