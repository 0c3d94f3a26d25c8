// The context every block of one forward pass shares (src/model/forward.cpp): rotary tables (one per distinct
// base), ALiBi slopes, the score scale and the masks of the materialising path. Internal to the model layer.
#pragma once
#include <ATen/ATen.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "model/position_encodings.hpp"
#include "vocablens/model_config.hpp"

namespace vocablens::detail {

// What every block of one forward pass shares: position tables, the score scale and, built on first use,
// the masks and ALiBi biases of the materialising path (blocked attention derives its masks per tile from
// positions, so a long prompt never allocates them). The pass's queries are at positions offset .. T - 1
// and its keys at 0 .. T - 1: offset is 0 except for a step of incremental decoding (vocablens/kv_cache.hpp),
// whose keys include the cached positions.
struct BlockContext {
  at::Tensor cos, sin;              ///< [T, rotary_dim / 2] for every key position
  at::Tensor cos_local, sin_local;  ///< the same for the sliding layers' own base (Gemma 3), else undefined
  at::Tensor alibi_slopes;          ///< [H] float32 (ALiBi models), else undefined
  double scale = 1.0;
  int64_t T = 0;
  int64_t offset = 0;
  at::Device dev = at::kCPU;

  /// ALiBi bias [H, T - offset, T] (slope * (k - q)); undefined without ALiBi.
  const at::Tensor& alibi() const {
    if (alibi_slopes.defined() && !alibi_.defined()) {
      auto dist = (at::arange(T).unsqueeze(0) - at::arange(offset, T).unsqueeze(1)).to(at::kFloat).to(dev);  // k - q
      alibi_ = alibi_slopes.view({-1, 1, 1}) * dist.unsqueeze(0);
    }
    return alibi_;
  }
  /// Bool [T - offset, T], true where query q must not see key k: the future (k > q), and for a sliding
  /// layer the keys at distance >= its window (q - k >= window).
  const at::Tensor& mask(const ModelConfig& cfg, int64_t layer) const {
    // Built once per pass (every layer asks): k - q for keys k (columns) and queries q (rows).
    if (!causal_.defined()) {
      dist_ = at::arange(T, at::TensorOptions().device(dev)).unsqueeze(0) -
              at::arange(offset, T, at::TensorOptions().device(dev)).unsqueeze(1);
      causal_ = dist_ > 0;
    }
    const int64_t w = attention_window(cfg, layer);
    if (w <= 0 || w >= T) return causal_;
    if (!windowed_.defined()) windowed_ = causal_.logical_or(dist_ <= -w);  // q sees q - window < k <= q
    return windowed_;
  }

 private:
  mutable at::Tensor alibi_, causal_, windowed_, dist_;
};

inline BlockContext block_context(const ModelConfig& cfg, int64_t T, const at::Device& dev, int64_t offset = 0) {
  BlockContext c;
  c.T = T;
  c.offset = offset;
  c.dev = dev;
  if (cfg.positions == PositionKind::Rotary) {
    std::tie(c.cos, c.sin) = rotary_tables(cfg, T, dev);
    if (cfg.rope_theta_local > 0) {  // one more table, built once per pass: the local base, never rope-scaled
      ModelConfig local = cfg;
      local.rope_theta = cfg.rope_theta_local;
      local.rope_scaling = ModelConfig::RopeScaling::None;
      local.rope_attention_factor = 1.0;
      std::tie(c.cos_local, c.sin_local) = rotary_tables(local, T, dev);
    }
  }
  if (cfg.positions == PositionKind::ALiBi) {
    auto slopes = alibi_slopes(cfg.n_heads);
    c.alibi_slopes = at::tensor(std::vector<float>(slopes.begin(), slopes.end())).to(dev);
  }
  c.scale = cfg.attn_scale > 0 ? cfg.attn_scale : 1.0 / std::sqrt(static_cast<double>(cfg.d_head));
  return c;
}

}  // namespace vocablens::detail
