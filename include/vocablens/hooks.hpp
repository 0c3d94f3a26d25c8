// vocablens/hooks.hpp — hook points in the forward pass that may READ or WRITE an activation.
//
// A hook is a callback run on one activation of one forward pass, at a hook point named as in
// TransformerLens. It receives the activation by reference and may modify it in place or assign a new
// tensor of the same shape: the rest of the forward pass (and the cache) sees the result. This is what
// ablation (zero / mean), activation patching (copy from a clean run) and steering (add a vector) are.
//
//   vocablens::HookList hooks;
//   hooks.add("blocks.1.attn.hook_z", [](at::Tensor& z) { z.select(2, 3).zero_(); });  // ablate head 1.3
//   hooks.add("resid_pre.2", [&](at::Tensor& x) { x.add_(steer * 4.0); });             // steer at layer 2
//   auto out = vocablens::run_with_hooks(model, ids, hooks);                           // out.logits [B,T,V]
//
// Hook points (vocablens/hook_site.hpp: L = block index; the short name is accepted too; shapes for a batch [B, T]):
//   hook_embed                    embed              [B, T, d_model]   token embeddings W_E[ids]
//   hook_pos_embed                pos_embed          [B, T, d_model]   learned positions (learned-position models)
//   blocks.L.hook_resid_pre       resid_pre.L        [B, T, d_model]   stream entering block L
//   blocks.L.attn.hook_q|k|v      q.L, k.L, v.L      [B, T, H(kv), d_head]  projections, before rotary
//   blocks.L.attn.hook_attn_scores attn_scores.L     [B, H, T, T]      scaled, masked scores (-inf above diagonal)
//   blocks.L.attn.hook_pattern    pattern.L          [B, H, T, T]      softmax probabilities (attention sinks: rows sum < 1)
//   blocks.L.attn.hook_z          z.L                [B, T, H, d_head] per-head value mix: z_h @ W_O[h] is head h's output
//   blocks.L.attn.hook_result     result.L           [B, T, H, d_model] per-head outputs (computed only when hooked)
//   blocks.L.hook_attn_out        attn_out.L         [B, T, d_model]   sum of head results + b_O
//   blocks.L.hook_resid_mid       resid_mid.L        [B, T, d_model]
//   blocks.L.mlp.hook_pre         mlp_pre.L          [B, T, d_mlp]     pre-activation (gated MLPs: the gate)
//   blocks.L.mlp.hook_post        mlp_post.L         [B, T, d_mlp]     neuron activations (gated: act(gate) * up)
//   blocks.L.mlp.hook_router_logits router_logits.L  [B, T, n_experts] mixtures of experts: the router (+ bias), pre-softmax
//   blocks.L.mlp.hook_expert_indices expert_indices.L [B, T, k] int64  the experts chosen, best first
//   blocks.L.mlp.hook_expert_weights expert_weights.L [B, T, k]        their weights (GPT-OSS: softmax of the k logits)
//   blocks.L.mlp.hook_expert_out  expert_out.L       [B, T, k, d_model] each chosen expert's output, unweighted
//   blocks.L.hook_mlp_out         mlp_out.L          [B, T, d_model]   mlp_post @ W_out + b_out
//   blocks.L.hook_resid_post      resid_post.L       [B, T, d_model]
//   ln_final.hook_normalized      final_norm         [B, T, d_model]   the unembedding's input
//
// A model has the points hook_sites() lists (vocablens/hook_site.hpp): the router's only in mixtures of experts,
// mlp_pre / mlp_post only where a dense MLP runs (Qwen2-MoE: the shared expert's).
// Cost: none when no hook is given (one pointer test per point). A hooked point's tensor is copied
// before the first callback, so a callback writing in place never changes another point's tensor or a
// weight it happens to view. Several hooks on one point run in the order they were added. The cache
// (CacheSpec) records each point's value after its hooks.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vocablens/cache_spec.hpp"
#include "vocablens/hook_site.hpp"
#include "vocablens/tensor_fwd.hpp"

namespace vocablens {

class Model;
struct ModelConfig;
struct ModelWeights;
struct ForwardOutput;  // vocablens/model.hpp

using HookFn = std::function<void(at::Tensor& activation)>;

/// Hooks for one forward pass. Names are parsed at run time against the model's config, so that an
/// unknown name or layer fails before any work with the list of valid ones.
class HookList {
 public:
  HookList& add(std::string name, HookFn fn) {
    items_.push_back({std::move(name), std::move(fn)});
    return *this;
  }
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  struct Item {
    std::string name;
    HookFn fn;
  };
  const std::vector<Item>& items() const { return items_; }

 private:
  std::vector<Item> items_;
};

/// run_forward (vocablens/model.hpp) with hooks that may read and write activations; null or empty
/// `hooks` costs nothing (the overloads in model.hpp call this one with null).
ForwardOutput run_forward(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& ids, const CacheSpec& spec,
                          bool compute_logits, const at::Tensor& segment_ids, const HookList* hooks);

/// Forward pass with hooks (no grad, float32). ids [T] or [B, T] as Model::forward. The hooks see the
/// batch: a callback may treat batch rows differently (activation patching puts one variant per row).
ForwardOutput run_with_hooks(const Model& m, const at::Tensor& ids, const HookList& hooks, const CacheSpec& spec = {},
                             bool compute_logits = true);

/// Greedy decoding as Model::generate_greedy, with `hooks` in every step's forward pass (steering).
std::vector<int64_t> generate_greedy_with_hooks(const Model& m, std::vector<int64_t> prompt, int64_t steps, int64_t stop_token,
                                                const HookList& hooks);

}  // namespace vocablens
