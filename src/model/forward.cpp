// The transformer forward pass shared by both families (and by the trainer, which calls it with grad).
#include <ATen/ATen.h>

#include <cmath>
#include <optional>

#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"

namespace vocablens {
namespace detail {

at::Tensor activation(const at::Tensor& x, Activation a) {
  switch (a) {
    case Activation::GeluNew: return at::gelu(x, "tanh");
    case Activation::Gelu: return at::gelu(x);
    case Activation::Relu: return at::relu(x);
    case Activation::SiLU: return at::silu(x);
  }
  return x;
}

// cos/sin tables [T, d_head/2] for rotary positions; angles in double for accuracy, stored as float.
std::pair<at::Tensor, at::Tensor> rotary_tables(int64_t T, int64_t d_head, double theta, const at::Device& dev) {
  auto pos = at::arange(T, at::TensorOptions().dtype(at::kDouble));
  auto i = at::arange(0, d_head, 2, at::TensorOptions().dtype(at::kDouble));
  auto inv_freq = at::pow(theta, -i / static_cast<double>(d_head));
  auto ang = at::outer(pos, inv_freq);
  return {at::cos(ang).to(at::kFloat).to(dev), at::sin(ang).to(at::kFloat).to(dev)};
}

// x: [B, H, T, d_head]. Rotates feature pairs by position-dependent angles.
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  const int64_t dh = x.size(-1);
  if (interleaved) {
    // pairs (2i, 2i+1), as llama2.c's run.c and Meta's reference code.
    auto xs = x.reshape({x.size(0), x.size(1), x.size(2), dh / 2, 2});
    auto x0 = xs.select(-1, 0), x1 = xs.select(-1, 1);
    auto r0 = x0 * cos - x1 * sin;
    auto r1 = x0 * sin + x1 * cos;
    return at::stack({r0, r1}, -1).reshape(x.sizes());
  }
  // Hugging Face rotate_half: pairs (i, i + d_head/2).
  auto x1 = x.narrow(-1, 0, dh / 2), x2 = x.narrow(-1, dh / 2, dh / 2);
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

// Sinusoidal position table [T, d] (Vaswani et al.): sin on even features, cos on odd ones.
at::Tensor sinusoidal_table(int64_t T, int64_t d) {
  auto pos = at::arange(T, at::TensorOptions().dtype(at::kDouble)).unsqueeze(1);
  auto i = at::arange(0, d, 2, at::TensorOptions().dtype(at::kDouble));
  auto ang = pos * at::pow(10000.0, -i / static_cast<double>(d));
  auto pe = at::zeros({T, d}, at::TensorOptions().dtype(at::kDouble));
  pe.index_put_({at::indexing::Slice(), at::indexing::Slice(0, at::indexing::None, 2)}, at::sin(ang));
  pe.index_put_({at::indexing::Slice(), at::indexing::Slice(1, at::indexing::None, 2)},
                at::cos(ang).narrow(1, 0, d / 2));
  return pe.to(at::kFloat);
}

// ALiBi head slopes (Press et al.): geometric sequence 2^(-8/n) ..., with the standard interpolation
// when the head count is not a power of two.
std::vector<double> alibi_slopes(int64_t n) {
  auto pow2 = [](int64_t m) {
    std::vector<double> s;
    double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(m)) - 3)));
    for (int64_t i = 0; i < m; ++i) s.push_back(start * std::pow(start, static_cast<double>(i)));
    return s;
  };
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  auto s = pow2(p);
  if (p != n) {
    auto extra = pow2(2 * p);
    for (int64_t i = 0; static_cast<int64_t>(s.size()) < n; i += 2) s.push_back(extra[static_cast<size_t>(i)]);
  }
  return s;
}

// x [..., in] @ w [in, out] (+ b) -> [..., out], with one GEMM over all rows.
at::Tensor proj(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  auto x2 = x.reshape({-1, x.size(-1)});
  auto y = b.defined() ? at::addmm(b, x2, w) : at::mm(x2, w);
  auto sizes = x.sizes().vec();
  sizes.back() = w.size(1);
  return y.view(sizes);
}

}  // namespace detail

bool CacheSpec::wants_layer(int64_t layer) const {
  if (layers.empty()) return true;
  for (auto l : layers)
    if (l == layer) return true;
  return false;
}

const at::Tensor& ResidualCache::get(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw UsageError("activation '" + name + "' was not recorded (ask for it in CacheSpec)");
  return it->second;
}

at::Tensor apply_norm(const at::Tensor& x, NormKind kind, double eps, const at::Tensor& w, const at::Tensor& b) {
  if (kind == NormKind::LayerNorm) return at::layer_norm(x, {x.size(-1)}, w, b, eps);
  auto y = x * at::rsqrt(x.pow(2).mean(-1, true) + eps);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}

namespace detail {
at::Tensor segment_embedding(const ModelWeights& w, const at::Tensor& segment_ids, int64_t B, int64_t T);  // segments.cpp
}

namespace {

// What every block of one forward pass shares: position tables, the causal mask and the score scale.
struct BlockContext {
  at::Tensor cos, sin, alibi, causal;
  double scale = 1.0;
};

BlockContext block_context(const ModelConfig& cfg, int64_t T, const at::Device& dev) {
  using namespace detail;
  BlockContext c;
  const int64_t H = cfg.n_heads;
  if (cfg.positions == PositionKind::Rotary) std::tie(c.cos, c.sin) = rotary_tables(T, cfg.d_head, cfg.rope_theta, dev);
  if (cfg.positions == PositionKind::ALiBi) {
    auto slopes = alibi_slopes(H);
    auto dist = (at::arange(T).unsqueeze(0) - at::arange(T).unsqueeze(1)).to(at::kFloat);  // k - q (<= 0 below diag)
    auto sl = at::tensor(std::vector<float>(slopes.begin(), slopes.end())).view({H, 1, 1});
    c.alibi = sl * dist.unsqueeze(0);  // [H, T, T]
  }
  c.causal = at::ones({T, T}, at::TensorOptions().dtype(at::kBool)).triu(1);
  c.scale = 1.0 / std::sqrt(static_cast<double>(cfg.d_head));
  return c;
}

// One transformer block on x [B, T, d]; records the block's activations into `cache` when it is given.
// `hk` (may be null) holds hooks that read or write activations (vocablens/hooks.hpp); a hook point runs
// its hooks, then records.
at::Tensor apply_block(const ModelConfig& cfg, const LayerWeights& L, const BlockContext& ctx, const at::Tensor& x_in,
                       int64_t l, ResidualCache* cache, const CacheSpec* spec, const hook_detail::HookTable* hk) {
  using namespace detail;
  at::Tensor x = x_in;
  const int64_t B = x.size(0), T = x.size(1), H = cfg.n_heads, Hkv = cfg.n_kv_heads, dh = cfg.d_head;
  auto hook = [&](HookPoint p, at::Tensor& t) {
    if (hk) hk->apply(p, l, t);
  };
  auto record = [&](bool wanted, const char* name, const at::Tensor& t) {
    if (cache && wanted) cache->set(ResidualCache::key(name, l), t);
  };
  const bool keep = cache && spec && spec->wants_layer(l);
  hook(HookPoint::ResidPre, x);
  record(keep && spec->resid_pre, "resid_pre", x);

  at::Tensor h = apply_norm(x, cfg.norm, cfg.norm_eps, L.ln1_w, L.ln1_b);
  at::Tensor q = proj(h, L.w_q, L.b_q).view({B, T, H, dh});
  at::Tensor k = proj(h, L.w_k, L.b_k).view({B, T, Hkv, dh});
  at::Tensor v = proj(h, L.w_v, L.b_v).view({B, T, Hkv, dh});
  hook(HookPoint::Q, q);
  hook(HookPoint::K, k);
  hook(HookPoint::V, v);
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  v = v.transpose(1, 2);
  if (ctx.cos.defined()) {
    q = apply_rotary(q, ctx.cos, ctx.sin, cfg.rope_interleaved);
    k = apply_rotary(k, ctx.cos, ctx.sin, cfg.rope_interleaved);
  }
  if (Hkv != H) {  // grouped-query attention: query head h reads kv head h / (H / Hkv)
    k = k.repeat_interleave(H / Hkv, 1);
    v = v.repeat_interleave(H / Hkv, 1);
  }
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * ctx.scale;  // [B, H, T, T]
  if (ctx.alibi.defined()) scores = scores + ctx.alibi;
  scores = scores.masked_fill(ctx.causal, -std::numeric_limits<float>::infinity());
  hook(HookPoint::AttnScores, scores);
  at::Tensor pattern = at::softmax(scores, -1);
  hook(HookPoint::Pattern, pattern);
  record(keep && spec->pattern, "pattern", pattern);
  at::Tensor z = at::matmul(pattern, v).transpose(1, 2);  // [B, T, H, dh]
  hook(HookPoint::Z, z);
  at::Tensor attn_out;
  if (hk && hk->has(HookPoint::Result, l)) {  // per-head outputs only when a hook asks for them
    at::Tensor result = hook_detail::head_results(z, L.w_o);
    hook(HookPoint::Result, result);
    attn_out = L.b_o.defined() ? result.sum(2) + L.b_o : result.sum(2);
  } else {
    attn_out = proj(z.reshape({B, T, H * dh}), L.w_o, L.b_o);
  }
  hook(HookPoint::AttnOut, attn_out);
  record(keep && spec->attn_out, "attn_out", attn_out);
  at::Tensor mid = x + attn_out;
  hook(HookPoint::ResidMid, mid);
  record(keep && spec->resid_mid, "resid_mid", mid);

  at::Tensor h2 = apply_norm(mid, cfg.norm, cfg.norm_eps, L.ln2_w, L.ln2_b);
  at::Tensor pre = proj(h2, L.w_in, L.b_in);
  at::Tensor gate = L.w_gate.defined() ? proj(h2, L.w_gate, L.b_gate) : at::Tensor();
  hook(HookPoint::MlpPre, gate.defined() ? gate : pre);  // gated MLPs: the gate is the pre-activation
  at::Tensor act = gate.defined() ? activation(gate, cfg.activation) * pre : activation(pre, cfg.activation);
  hook(HookPoint::MlpPost, act);
  at::Tensor mlp_out = proj(act, L.w_out, L.b_out);
  hook(HookPoint::MlpOut, mlp_out);
  record(keep && spec->mlp_out, "mlp_out", mlp_out);
  at::Tensor out = mid + mlp_out;
  hook(HookPoint::ResidPost, out);
  record(keep && spec->resid_post, "resid_post", out);
  return out;
}

}  // namespace

ForwardOutput run_forward(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& ids,
                          const CacheSpec& spec, bool compute_logits) {
  return run_forward(cfg, w, ids, spec, compute_logits, at::Tensor());
}

ForwardOutput run_forward(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& ids_in,
                          const CacheSpec& spec, bool compute_logits, const at::Tensor& segment_ids,
                          const HookList* hooks) {
  using namespace detail;
  at::Tensor ids = ids_in.dim() == 1 ? ids_in.unsqueeze(0) : ids_in;
  if (ids.dim() != 2) throw UsageError("token ids must be [T] or [B, T]");
  const int64_t B = ids.size(0), T = ids.size(1);
  if (T < 1) throw UsageError("empty input: at least one token is needed");
  if (T > cfg.n_ctx)
    throw UsageError("input of " + std::to_string(T) + " tokens is longer than the model's context of " +
                     std::to_string(cfg.n_ctx));
  ids = ids.to(at::kLong).contiguous();
  if (ids.numel() > 0) {
    int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    if (lo < 0 || hi >= cfg.vocab_size)
      throw UsageError("token id " + std::to_string(lo < 0 ? lo : hi) + " is outside the vocabulary [0, " +
                       std::to_string(cfg.vocab_size) + ")");
  }
  const int64_t d = cfg.d_model;
  ForwardOutput out;
  auto& cache = out.cache;

  std::optional<hook_detail::HookTable> table;
  if (hooks && !hooks->empty()) table.emplace(*hooks, cfg);
  const hook_detail::HookTable* hk = table ? &*table : nullptr;

  at::Tensor x = w.W_E.index_select(0, ids.view(-1)).view({B, T, d});
  if (hk) hk->apply(HookPoint::Embed, -1, x);
  if (cfg.positions == PositionKind::Learned) {
    at::Tensor pos = w.W_pos.narrow(0, 0, T);
    if (hk && hk->has(HookPoint::PosEmbed, -1)) {
      pos = pos.unsqueeze(0).expand({B, T, d});
      hk->apply(HookPoint::PosEmbed, -1, pos);
    }
    x = x + pos;
  } else if (cfg.positions == PositionKind::Sinusoidal) x = x + sinusoidal_table(T, d);
  if (w.W_seg.defined() || segment_ids.defined()) x = x + detail::segment_embedding(w, segment_ids, B, T);

  const BlockContext ctx = block_context(cfg, T, x.device());
  for (int64_t l = 0; l < cfg.n_layers; ++l)
    x = apply_block(cfg, w.layers[static_cast<size_t>(l)], ctx, x, l, &cache, &spec, hk);
  if (spec.final_norm || compute_logits) {
    at::Tensor fin = apply_norm(x, cfg.norm, cfg.norm_eps, w.lnf_w, w.lnf_b);
    if (hk) hk->apply(HookPoint::FinalNorm, -1, fin);
    if (spec.final_norm) cache.set("final_norm", fin);
    if (compute_logits) out.logits = proj(fin, w.W_U, w.b_U);
  }
  return out;
}

at::Tensor run_blocks(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& x, int64_t first, int64_t last) {
  if (x.dim() != 3 || x.size(2) != cfg.d_model)
    throw UsageError("run_blocks: the residual stream must be [B, T, " + std::to_string(cfg.d_model) + "]");
  if (first < 0 || first > last || last > cfg.n_layers)
    throw UsageError("run_blocks: blocks [" + std::to_string(first) + ", " + std::to_string(last) +
                     ") are not within [0, " + std::to_string(cfg.n_layers) + ")");
  if (x.size(1) < 1 || x.size(1) > cfg.n_ctx)
    throw UsageError("run_blocks: " + std::to_string(x.size(1)) + " positions, the context holds 1 to " +
                     std::to_string(cfg.n_ctx));
  const BlockContext ctx = block_context(cfg, x.size(1), x.device());
  at::Tensor h = x;
  for (int64_t l = first; l < last; ++l) h = apply_block(cfg, w.layers[static_cast<size_t>(l)], ctx, h, l, nullptr, nullptr, nullptr);
  return h;
}

}  // namespace vocablens
