// vocablens/cache_spec.hpp — which activations a forward pass records (the points vocablens/cache.hpp lists).
//
//   vocablens::CacheSpec spec;                 // nothing recorded
//   spec.resid_post = true;                    // the stream after each block
//   spec.layers = {2, 3};                      // only there (empty: every layer)
//   auto out = model.forward(ids, spec);       // out.cache.get("resid_post", 2): [B, T, d_model] float32
//
// Apart from cache.hpp so that what only names a request (the memory estimate, hooks, the KV cache) does not
// include LibTorch. Guarantees: a default CacheSpec records nothing; all() records every point.
#pragma once
#include <cstdint>
#include <vector>

namespace vocablens {

/// Which activations forward() keeps. Memory is B*T*d_model*4 bytes per kept stream per layer
/// (B*H*T*T*4 for patterns): choose on long inputs.
struct CacheSpec {
  bool resid_pre = false;
  bool attn_out = false;
  bool resid_mid = false;
  bool mlp_out = false;
  bool resid_post = false;
  bool pattern = false;
  bool final_norm = false;
  bool router = false;  ///< mixtures of experts: router_logits, expert_indices, expert_weights, expert_out per layer
  bool ln1_scale = false, ln1_normalized = false, ln2_scale = false, ln2_normalized = false, mlp_in = false;
  bool final_scale = false;
  /// Layers to record; empty = all layers.
  std::vector<int64_t> layers;

  static CacheSpec none() { return {}; }
  static CacheSpec all() {
    CacheSpec s;
    s.resid_pre = s.attn_out = s.resid_mid = s.mlp_out = s.resid_post = s.pattern = s.final_norm = s.router = true;
    s.ln1_scale = s.ln1_normalized = s.ln2_scale = s.ln2_normalized = s.mlp_in = s.final_scale = true;
    return s;
  }
  bool wants_layer(int64_t layer) const;
  /// Whether any of the norm points or mlp_in is asked for (a forward memo's record holds none of them).
  bool wants_norm_points() const { return ln1_scale || ln1_normalized || ln2_scale || ln2_normalized || mlp_in || final_scale; }
};

}  // namespace vocablens
