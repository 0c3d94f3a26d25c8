// The transformer forward pass shared by every family (and by the trainer, which calls it with grad).
// One block = the recipe of block(): q, k, v -> attention -> W_O -> MLP over row ranges, as ModelConfig says. The forward
// memo's recording and replaying of a pass are in forward_replay.cpp.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <tuple>

#include "vocablens/arch.hpp"
#include "vocablens/attention.hpp"

#include "model/attention_blocks.hpp"
#include "model/attention_step.hpp"
#include "model/block_context.hpp"
#include "model/nonfinite.hpp"
#include "model/position_encodings.hpp"
#include "vocablens/error.hpp"
#include "vocablens/forward_memo.hpp"
#include "model/forward_memo_active.hpp"
#include "model/forward_replay.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/interrupt.hpp"
#include "model/hook_table.hpp"
#include "model/kv_cache_access.hpp"
#include "vocablens/kv_cache.hpp"
#include "vocablens/model.hpp"
#include "vocablens/timings.hpp"
#include "vocablens/weight.hpp"
#include "model/forward_work.hpp"
#include "model/moe.hpp"
#include "util/mapped_file.hpp"
#include "util/parallel.hpp"

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

// A gated MLP's neurons from its gate and up projections: act(gate) * up, or GPT-OSS's clamped SwiGLU
// (ModelConfig::glu_limit): gate clamped above, up on both sides, gate * sigmoid(alpha gate) * (up + offset).
at::Tensor gated(const ModelConfig& cfg, const at::Tensor& gate, const at::Tensor& up) {
  if (cfg.glu_limit <= 0) return activation(gate, cfg.activation) * up;
  const at::Tensor g = gate.clamp_max(cfg.glu_limit);
  return (up.clamp(-cfg.glu_limit, cfg.glu_limit) + cfg.glu_up_offset) * (g * at::sigmoid(g * cfg.glu_alpha));
}

// x [..., in] @ w [in, out] (+ b) -> [..., out], with one GEMM over all rows. `w` may be float32, a
// float16/bfloat16 view of the file or packed ggml blocks (vocablens/weight.hpp): weight_matmul upcasts
// or dequantizes it one tile at a time.
at::Tensor proj(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  auto x2 = x.reshape({-1, x.size(-1)});
  auto y = weight_matmul(x2, w, b);  // float32 weights: one GEMM there too
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
  if (it == entries_.end()) {
    // TransformerLens's spelling of the same site ("blocks.3.hook_resid_post" for "resid_post.3").
    if (const auto site = hook_site_from_name(name)) it = entries_.find(site->short_name());
  }
  if (it == entries_.end()) throw UsageError("activation '" + name + "' was not recorded (ask for it in CacheSpec)");
  return it->second;
}

bool ResidualCache::has(const std::string& name) const {
  if (entries_.count(name)) return true;
  const auto site = hook_site_from_name(name);
  return site && entries_.count(site->short_name()) != 0;
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

at::Tensor soft_cap(const at::Tensor& x, double c) { return c > 0 ? at::tanh(x / c) * c : x; }

namespace {

using detail::attend;
using detail::attention_out;
using detail::block_context;
using detail::BlockContext;
using detail::Qkv;
using detail::qkv_rows;
using detail::use_blocked_attention;

// Runs the hooks of (point, layer) on t when there are any (vocablens/hooks.hpp); `hk` may be null.
inline void run_hook(const hook_detail::HookTable* hk, HookPoint p, int64_t l, at::Tensor& t) {
  if (hk) hk->apply(p, l, t);
}

// ---- the block recipe ------------------------------------------------------------------------------------------
// One transformer block of any family is one recipe, `block()` below, applied to row ranges of the stream:
//   1. q, k, v of the rows (norm1 before them in pre-norm blocks with input norms; the q/k norms, per head as
//      Qwen3's and Gemma 3's or over every head as OLMo 2's; the rotary of the layer: the global table, the
//      sliding layers' own (Gemma 3) or none (SmolLM3's no-rotary layers)), written into tensors that hold
//      every position's;
//   2. the attention, whose z arrives by query block; each block's z goes through W_O (and Gemma-2's post
//      norm) and is added to its rows of the stream: mid = x + attn_out (post-norm blocks: norm1 of that);
//   3. the MLP over the same rows (norm2 before it in pre-norm blocks with input norms, Gemma-2's post norm
//      after), added:
//      out = mid + mlp_out (post-norm blocks: norm2 of that). A parallel-residual block's MLP reads x.
// Every step acts on each position alone except the attention itself, which reads k and v whole. So when
// nobody reads the block's insides, a long block runs by row blocks of the attention's block size: at most
// four [B, T, d] tensors live at once (the input stream, k, v, and one buffer that holds q, then mid, then
// the output) instead of ~11 (at the model's context, T = 32 768 and d = 2048, each is 256 MiB). Otherwise
// the row range is the whole sequence, one step each, and the hook points run on whole tensors. Either way
// the same operations on the same values, the residual adds in the same order (by rows each GEMM runs over
// fewer rows). A new operation of a family lands once, in the step it belongs to.

// Hook points of the MLP step that read its insides (the neurons, the router).
bool mlp_inside_hooked(const hook_detail::HookTable* hk, int64_t l) {
  if (!hk) return false;
  for (HookPoint p : {HookPoint::MlpPre, HookPoint::MlpPost, HookPoint::RouterLogits, HookPoint::ExpertIndices,
                      HookPoint::ExpertWeights, HookPoint::ExpertOut})
    if (hk->has(p, l)) return true;
  return false;
}

// Whether layer l's block runs by row blocks: the pass has no grad, the attention would be blocked anyway
// (more than one block of positions, no hook or cache on the scores or pattern), it is not a step of
// incremental decoding, and no hook or cache reads q, k, v, z, the per-head results, attn_out, resid_mid,
// the norms' points, the MLP's input, its neurons or mlp_out: their tensors never exist whole.
bool block_by_rows(int64_t T, int64_t l, bool keep, const CacheSpec* spec, const hook_detail::HookTable* hk, const KVCache* kv) {
  if (kv || !use_blocked_attention(attention_policy(), T, nullptr, hk, l)) return false;
  if (keep && (spec->attn_out || spec->resid_mid || spec->mlp_out || spec->pattern || spec->router || spec->wants_norm_points()))
    return false;
  if (hk)
    for (HookPoint p : {HookPoint::Q, HookPoint::K, HookPoint::V, HookPoint::Z, HookPoint::Result, HookPoint::AttnOut,
                        HookPoint::ResidMid, HookPoint::MlpOut, HookPoint::Ln1Scale, HookPoint::Ln1Normalized,
                        HookPoint::Ln2Scale, HookPoint::Ln2Normalized, HookPoint::MlpIn})
      if (hk->has(p, l)) return false;
  return !mlp_inside_hooked(hk, l);
}

at::Tensor norm1(const ModelConfig& cfg, const LayerWeights& L, const at::Tensor& x) {
  return apply_norm(x, cfg.norm, cfg.norm_eps, L.ln1_w, L.ln1_b);
}

// The hook points of one norm that a sublayer reads (ln1 / ln2 / the final norm) and whether the cache keeps them.
struct NormPoints {
  HookPoint scale, normalized;
  bool has_normalized;  // the final norm's normalised point is its output (ln_final.hook_normalized), hooked by the caller
  int64_t layer;
  ResidualCache* cache;
  bool keep_scale, keep_normalized;
};

// apply_norm with the norm's hook points, TransformerLens's definitions: scale = sqrt(mean(c²) + eps) [.., 1]
// with c = x - mean(x) (LayerNorm) or x (RMSNorm), normalized = c / scale (before weight and bias), the output
// normalized * w + b. Nobody asking, it is apply_norm itself. When hooks only read (or leave the values as
// they were), the output is apply_norm's too, so that reading a norm changes no bit of the pass; an edited scale
// or normalised vector is what the output is then made of.
at::Tensor tapped_norm(const ModelConfig& cfg, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const NormPoints& p,
                       const hook_detail::HookTable* hk) {
  const bool hook_scale = hk && hk->has(p.scale, p.layer);
  const bool hook_norm = p.has_normalized && hk && hk->has(p.normalized, p.layer);
  if (!hook_scale && !hook_norm && !p.keep_scale && !p.keep_normalized) return apply_norm(x, cfg.norm, cfg.norm_eps, w, b);
  const at::Tensor c = cfg.norm == NormKind::LayerNorm ? x - x.mean(-1, true) : x;
  at::Tensor scale = (c.pow(2).mean(-1, true) + cfg.norm_eps).sqrt();
  // A hooked value is "edited" when it changed, or when a hook marked it for gradients (Python's gradients()):
  // then the output must be made of it, or the gradient would not reach it.
  auto changed = [](const at::Tensor& now, const at::Tensor& seen) {
    return (at::GradMode::is_enabled() && now.requires_grad()) || !at::equal(now, seen);
  };
  const at::Tensor scale_seen = scale;
  run_hook(hk, p.scale, p.layer, scale);
  bool edited = hook_scale && changed(scale, scale_seen);
  const HookSite at_scale{p.scale, p.layer}, at_norm{p.normalized, p.layer};
  if (p.cache && p.keep_scale) p.cache->set(at_scale.short_name(), scale);
  at::Tensor normalized;
  if (p.has_normalized && (hook_norm || p.keep_normalized || edited)) {
    normalized = c / scale;
    const at::Tensor normalized_seen = normalized;
    run_hook(hk, p.normalized, p.layer, normalized);
    edited = edited || (hook_norm && changed(normalized, normalized_seen));
    if (p.cache && p.keep_normalized) p.cache->set(at_norm.short_name(), normalized);
  }
  if (!edited) return apply_norm(x, cfg.norm, cfg.norm_eps, w, b);
  at::Tensor y = normalized.defined() ? normalized : c / scale;
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}
at::Tensor norm2(const ModelConfig& cfg, const LayerWeights& L, const at::Tensor& x) {
  return apply_norm(x, cfg.norm, cfg.norm_eps, L.ln2_w, L.ln2_b);
}

// The MLP of one block on its (normalised) input: plain act(x W_in) or gated act(x W_gate) * (x W_in); in a
// mixture of experts, the routed experts (model/moe.hpp) plus the dense MLP where there is one (Qwen2-MoE's
// shared expert, scaled by sigmoid(x W_shared_gate)). Hook points: mlp_pre (gated MLPs: the gate), mlp_post (the
// neurons, gated: act(gate) * up), the router's; `record` takes the router's (may be empty).
at::Tensor mlp(const ModelConfig& cfg, const LayerWeights& L, const at::Tensor& h, int64_t l, const hook_detail::HookTable* hk,
               const detail::MoeRecord& record = {}) {
  using namespace detail;
  // Without grad and without hooks on the neurons, a long input goes through in blocks of rows: the MLP
  // acts on each position alone, and its [rows, d_mlp] intermediates (three of them for a gated MLP) are
  // what would otherwise dominate the activations' memory at long T.
  constexpr int64_t kRows = kRowBlock;
  const int64_t rows = h.numel() / h.size(-1);
  if (rows > kRows && !at::GradMode::is_enabled() && !mlp_inside_hooked(hk, l) && !record) {
    const at::Tensor h2 = h.reshape({rows, h.size(-1)});
    at::Tensor out;
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      at::Tensor part = mlp(cfg, L, h2.narrow(0, r0, std::min(kRows, rows - r0)), l, nullptr);
      if (!out.defined()) out = at::empty({rows, part.size(-1)}, part.options());
      out.narrow(0, r0, part.size(0)).copy_(part);
    }
    auto sizes = h.sizes().vec();
    sizes.back() = out.size(-1);
    return out.view(sizes);
  }
  at::Tensor experts = cfg.n_experts > 0 ? moe_mlp(cfg, L, h, l, hk, record) : at::Tensor();
  if (!L.w_in.defined()) return experts;
  at::Tensor pre = proj(h, L.w_in, L.b_in);
  at::Tensor gate = L.w_gate.defined() ? proj(h, L.w_gate, L.b_gate) : at::Tensor();
  if (hk) run_hook(hk, HookPoint::MlpPre, l, gate.defined() ? gate : pre);
  at::Tensor act = gate.defined() ? gated(cfg, gate, pre) : activation(pre, cfg.activation);
  run_hook(hk, HookPoint::MlpPost, l, act);
  at::Tensor dense = proj(act, L.w_out, L.b_out);
  if (L.w_shared_gate.defined()) dense = dense * at::sigmoid(proj(h, L.w_shared_gate, at::Tensor()));
  return experts.defined() ? experts + dense : dense;
}

// One transformer block on x [B, T, d] (the recipe above); records the block's activations into `cache` when it
// is given. `hk` (may be null) holds hooks that read or write activations (vocablens/hooks.hpp); a hook point
// runs its hooks, then records. attn_out and mlp_out are what is added to the stream (after Gemma-2's post
// norms). x is read, never written.
at::Tensor block(const ModelConfig& cfg, const LayerWeights& L, const BlockContext& ctx, const at::Tensor& x_in, int64_t l,
                 ResidualCache* cache, const CacheSpec* spec, const hook_detail::HookTable* hk, KVCache* kv = nullptr) {
  at::Tensor x = x_in;
  auto record = [&](bool wanted, const char* hook, const at::Tensor& t) {
    if (cache && wanted) cache->set(ResidualCache::key(hook, l), t);
  };
  const bool keep = cache && spec && spec->wants_layer(l);
  const NormPoints ln1{HookPoint::Ln1Scale,     HookPoint::Ln1Normalized,    true, l, cache,
                       keep && spec->ln1_scale, keep && spec->ln1_normalized};
  const NormPoints ln2{HookPoint::Ln2Scale,     HookPoint::Ln2Normalized,    true, l, cache,
                       keep && spec->ln2_scale, keep && spec->ln2_normalized};
  run_hook(hk, HookPoint::ResidPre, l, x);
  record(keep && spec->resid_pre, "resid_pre", x);
  const int64_t B = x.size(0), T = x.size(1), d = x.size(2), H = cfg.n_heads, Hkv = cfg.n_kv_heads, dh = cfg.d_head;
  const bool by_rows = block_by_rows(T, l, keep, spec, hk, kv);
  // By rows: the attention's query blocks of R rows; the products (steps 1 and 3, W_O) over Rp rows, whole
  // query blocks (model/forward_work.hpp, kRowBlock).
  const int64_t R = by_rows ? attention_policy().block : T;
  const int64_t Rp = by_rows ? std::max(R, kRowBlock / R * R) : T;
  const auto opt = x.options().dtype(at::kFloat);

  // Step 1. Whole: the projections themselves. By rows: each row block's written into tensors of every
  // position — q in the rows hook_q lays out (the loop reads [B, H, T, dh] views), k and v in the loop's.
  Qkv qkv;
  at::Tensor mid;  // the stream after the attention
  if (!by_rows) {
    qkv =
        qkv_rows(cfg, L, ctx, cfg.norm_before && cfg.input_norms ? tapped_norm(cfg, x, L.ln1_w, L.ln1_b, ln1, hk) : x, 0, l, hk);
  } else {
    at::Tensor q = at::empty({B, T, H * dh}, opt);
    qkv.k = at::empty({B, Hkv, T, dh}, opt);
    qkv.v = at::empty({B, Hkv, T, dh}, opt);
    for (int64_t r0 = 0; r0 < T; r0 += Rp) {
      const int64_t n = std::min(Rp, T - r0);
      const at::Tensor x_rows = x.narrow(1, r0, n);
      Qkv rows = qkv_rows(cfg, L, ctx,
                          cfg.norm_before && cfg.input_norms
                              ? tapped_norm(cfg, x_rows, L.ln1_w, L.ln1_b,
                                            NormPoints{ln1.scale, ln1.normalized, true, l, nullptr, false, false}, nullptr)
                              : x_rows,
                          r0, l, nullptr);
      q.narrow(1, r0, n).view({B, n, H, dh}).copy_(rows.q.transpose(1, 2));
      qkv.k.narrow(2, r0, n).copy_(rows.k);
      qkv.v.narrow(2, r0, n).copy_(rows.v);
    }
    qkv.q = q.view({B, T, H, dh}).transpose(1, 2);
    // mid is written over q's rows once their query block is done (when the heads fill d_model exactly).
    if (H * dh == d) mid = q.view({B, T, d});
  }

  // Step 2: mid = x + attn_out by query rows; post-norm blocks normalise the sum. By rows, the z of consecutive
  // query blocks is gathered into Rp rows (zbuf) and goes through W_O at once; mid's rows are written only
  // after their query blocks are done, as before.
  at::Tensor pattern, zbuf;
  int64_t z0 = 0, zn = 0;  // zbuf holds positions z0 .. z0 + zn - 1
  auto out_rows = [&](int64_t q0, at::Tensor z) {
    const int64_t n = z.size(1);
    at::Tensor a = attention_out(cfg, L, std::move(z), l, hk);
    record(keep && spec->attn_out, "attn_out", a);
    // parallel residual: x + attn_out too (the MLP reads x). Whole (which includes every pass with grad:
    // out= operations do not differentiate), a new tensor, made only now that q, k, v are released.
    if (!by_rows) {
      mid = x + a;
      if (!cfg.norm_before) mid = norm1(cfg, L, mid);
      return;
    }
    if (!mid.defined()) mid = at::empty({B, T, d}, opt);
    at::Tensor rows = mid.narrow(1, q0, n);
    at::add_out(rows, x.narrow(1, q0, n), a);
    if (!cfg.norm_before) rows.copy_(norm1(cfg, L, rows));
  };
  auto flush = [&] {
    if (zn > 0) out_rows(z0, zbuf.narrow(1, 0, zn));
    zn = 0;
  };
  attend(cfg, L, ctx, std::move(qkv), l, by_rows, keep && spec->pattern ? &pattern : nullptr, hk, kv,
         [&](int64_t q0, at::Tensor z) {
           if (!by_rows) return out_rows(q0, std::move(z));
           const int64_t n = z.size(1);
           if (zn + n > Rp) flush();
           if (!zbuf.defined()) zbuf = at::empty({B, Rp, H, dh}, opt);
           if (zn == 0) z0 = q0;
           zbuf.narrow(1, zn, n).copy_(z);
           zn += n;
         });
  flush();
  zbuf.reset();
  record(keep && spec->pattern, "pattern", pattern);
  run_hook(hk, HookPoint::ResidMid, l, mid);
  record(keep && spec->resid_mid, "resid_mid", mid);

  // Step 3: out = mid + mlp_out by rows. By rows the sum is written over mid's rows (nobody reads mid);
  // whole, a tensor of its own, made after the MLP (the cache or a hook may hold mid).
  const at::Tensor& mlp_stream = cfg.parallel_residual ? x : mid;
  at::Tensor out = by_rows ? mid : at::Tensor();
  for (int64_t r0 = 0; r0 < T; r0 += Rp) {
    const int64_t n = std::min(Rp, T - r0);
    const at::Tensor in = by_rows ? mlp_stream.narrow(1, r0, n) : mlp_stream;
    detail::MoeRecord moe_record;
    if (keep && spec->router && cfg.n_experts > 0)
      moe_record = [&](const char* point, const at::Tensor& t) { cache->set(ResidualCache::key(point, l), t); };
    // The MLP's input: ln2's output (its points hooked and kept on the whole path only: by rows nobody reads them).
    at::Tensor h = cfg.norm_before && cfg.input_norms ? tapped_norm(cfg, in, L.ln2_w, L.ln2_b, ln2, by_rows ? nullptr : hk) : in;
    if (!by_rows) run_hook(hk, HookPoint::MlpIn, l, h);
    record(keep && spec->mlp_in, "mlp_in", h);
    at::Tensor m = mlp(cfg, L, h, l, hk, moe_record);
    h.reset();
    if (L.post_mlp_norm_w.defined()) m = apply_norm(m, cfg.norm, cfg.norm_eps, L.post_mlp_norm_w, at::Tensor());
    run_hook(hk, HookPoint::MlpOut, l, m);
    record(keep && spec->mlp_out, "mlp_out", m);
    if (!by_rows) {
      out = mid + m;
      if (!cfg.norm_before) out = norm2(cfg, L, out);
      continue;
    }
    at::Tensor rows = out.narrow(1, r0, n);
    at::add_out(rows, mid.narrow(1, r0, n), m);
    if (!cfg.norm_before) rows.copy_(norm2(cfg, L, rows));
  }
  mid.reset();
  run_hook(hk, HookPoint::ResidPost, l, out);
  record(keep && spec->resid_post, "resid_post", out);
  return out;
}
// After a block, the stream is checked for NaN/Inf (no-grad passes only; see nonfinite.hpp). On
// a hit the block is run again with its hooks recorded, to name the first hook that went non-finite.
// Returns false when the stream is non-finite (policy Warn), so that the caller stops checking this pass.
bool check_block_output(const ModelConfig& cfg, const LayerWeights& L, const BlockContext& ctx, const at::Tensor& in,
                        const at::Tensor& out, int64_t l, const hook_detail::HookTable* hk, KVCache* kv) {
  if (at::GradMode::is_enabled() || detail::first_nonfinite(out) < 0) return true;
  ResidualCache c;
  CacheSpec s = CacheSpec::all();
  s.layers = {l};
  block(cfg, L, ctx, in, l, &c, &s, hk, kv);  // rewrites the same cache rows with the same values
  const std::string ctx_msg = " (layer " + std::to_string(l) + "; its input resid_pre." + std::to_string(l) + " was finite)";
  for (const char* hook : {"attn_out", "resid_mid", "mlp_out", "resid_post"})
    if (!detail::check_activation_finite(c.get(hook, l), ResidualCache::key(hook, l), ctx_msg)) return false;
  return detail::check_activation_finite(out, ResidualCache::key("resid_post", l), ctx_msg);
}

}  // namespace

ForwardOutput run_forward(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& ids, const CacheSpec& spec,
                          bool compute_logits) {
  return run_forward(cfg, w, ids, spec, compute_logits, at::Tensor(), nullptr);
}

ForwardOutput run_forward(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& ids, const CacheSpec& spec,
                          bool compute_logits, const at::Tensor& segment_ids) {
  return run_forward(cfg, w, ids, spec, compute_logits, segment_ids, nullptr);
}

namespace {

// The pass of run_forward and forward_cached: ids [B, T] at positions p0 .. p0 + T - 1, where p0 is the
// length of `kv` (0 without one).
ForwardOutput forward_impl(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& ids_in, const CacheSpec& spec,
                           bool compute_logits, const at::Tensor& segment_ids, const HookList* hooks, KVCache* kv) {
  using namespace detail;
  timings::Phase phase("forward");
  // A checkpoint truncated or written in place since it was mapped: one error, not SIGBUS or other weights.
  MappedFile::check_all_unchanged();
  at::Tensor ids = ids_in.dim() == 1 ? ids_in.unsqueeze(0) : ids_in;
  if (ids.dim() != 2) throw UsageError("token ids must be [T] or [B, T]");
  const int64_t B = ids.size(0), T = ids.size(1), p0 = kv ? kv->length() : 0;
  if (T < 1) throw UsageError("empty input: at least one token is needed");
  if (kv && p0 > 0 && B != kv->batch())
    throw UsageError("a batch of " + std::to_string(B) + " sequences, but the KV cache holds " + std::to_string(kv->batch()));
  if (p0 + T > cfg.n_ctx)
    throw UsageError(p0 > 0 ? std::to_string(T) + " more tokens after the " + std::to_string(p0) +
                                  " cached ones exceed the model's context of " + std::to_string(cfg.n_ctx)
                            : "input of " + std::to_string(T) + " tokens is longer than the model's context of " +
                                  std::to_string(cfg.n_ctx));
  // A pass too small to split (a small model's decoding step, a short prompt) runs on this thread alone.
  const detail::SerialBelow serial(forward_work(cfg, B * T, compute_logits));
  ids = ids.to(at::kLong).contiguous();
  if (ids.numel() > 0) {
    int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    if (lo < 0 || hi >= cfg.vocab_size)
      throw UsageError("token id " + std::to_string(lo < 0 ? lo : hi) + " is outside the vocabulary [0, " +
                       std::to_string(cfg.vocab_size) + ")");
  }
  const int64_t d = cfg.d_model;

  // The thread's forward memo (vocablens/forward_memo.hpp): one sequence's pass is replayed from its record,
  // or run and recorded.
  ForwardMemoScope* memo = forward_memo_detail::active();
  std::shared_ptr<ForwardRecord> rec;
  HookList with_recorders;
  if (memo && !kv && B == 1 && ids.device().is_cpu() && !segment_ids.defined() && !at::GradMode::is_enabled()) {
    std::vector<int64_t> key(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + T);
    if (auto found = memo->memo().find(key, &w)) {
      if (auto replayed = forward_memo_detail::replay_forward(cfg, w, *found, spec, compute_logits, hooks)) {
        memo->count(true);
        return std::move(*replayed);
      }
    }
    // What the record will hold, in float32: (3 L + 2) T d_model + L T H d_head. A pass it cannot keep is not
    // recorded (its activations would be held beside the pass's own for nothing).
    const size_t floats = static_cast<size_t>((3 * cfg.n_layers + 2) * T * d + cfg.n_layers * T * cfg.n_heads * cfg.d_head);
    if (memo->memo().would_keep(floats * sizeof(float))) {
      rec = std::make_shared<ForwardRecord>();
      rec->ids = std::move(key);
      rec->weights = &w;
      if (hooks) with_recorders = *hooks;
      forward_memo_detail::add_recorders(cfg, rec.get(), with_recorders);
      hooks = &with_recorders;
    }
  }

  ForwardOutput out;
  auto& cache = out.cache;

  std::optional<hook_detail::HookTable> table;
  if (hooks && !hooks->empty()) table.emplace(*hooks, cfg);
  const hook_detail::HookTable* hk = table ? &*table : nullptr;

  at::Tensor x = (w.W_E.scalar_type() == at::kFloat ? w.W_E.index_select(0, ids.view(-1)) : weight_rows(w.W_E, ids.view(-1)))
                     .view({B, T, d});
  if (cfg.embed_scale != 1.0) x = x * cfg.embed_scale;  // Gemma: sqrt(d_model), in float32 as Hugging Face does
  if (cfg.embed_norm) x = apply_norm(x, cfg.norm, cfg.norm_eps, w.emb_norm_w, w.emb_norm_b);  // BLOOM
  run_hook(hk, HookPoint::Embed, -1, x);  // the embedding as it enters the stream (scaled)
  if (cfg.positions == PositionKind::Learned) {
    at::Tensor pos = materialize_weight(w.W_pos.narrow(0, p0, T));
    if (hk && hk->has(HookPoint::PosEmbed, -1)) {
      pos = pos.unsqueeze(0).expand({B, T, d});
      hk->apply(HookPoint::PosEmbed, -1, pos);
    }
    x = x + pos;
  } else if (cfg.positions == PositionKind::Sinusoidal) {
    x = x + (p0 == 0 ? sinusoidal_table(T, d) : sinusoidal_table(p0 + T, d).narrow(0, p0, T));
  }
  if (w.W_seg.defined() || segment_ids.defined()) x = x + detail::segment_embedding(w, segment_ids, B, T);

  bool check = check_activation_finite(
      x, "resid_pre.0", " (the token embedding" + std::string(cfg.positions == PositionKind::Learned ? " plus positions)" : ")"));
  const BlockContext ctx = block_context(cfg, p0 + T, x.device(), p0);
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    throw_if_cancelled("the forward pass");  // a caller's CancelScope (vocablens/interrupt.hpp): stop between blocks
    at::Tensor next = block(cfg, w.layers[static_cast<size_t>(l)], ctx, x, l, &cache, &spec, hk, kv);
    if (check) check = check_block_output(cfg, w.layers[static_cast<size_t>(l)], ctx, x, next, l, hk, kv);
    x = next;
  }
  if (spec.final_norm || spec.final_scale || compute_logits || rec) {
    const NormPoints lnf{HookPoint::FinalScale, HookPoint::FinalNorm, false, -1, &cache, spec.final_scale, false};
    at::Tensor fin = cfg.final_norm ? tapped_norm(cfg, x, w.lnf_w, w.lnf_b, lnf, hk) : x;
    run_hook(hk, HookPoint::FinalNorm, -1, fin);
    const bool asked = spec.final_norm || compute_logits;  // a recording alone checks nothing more than before
    if (check && asked) check = check_activation_finite(fin, "final_norm", " (the last block's output was finite)");
    if (spec.final_norm) cache.set("final_norm", fin);
    if (compute_logits) out.logits = soft_cap(proj(fin, w.W_U, w.b_U), cfg.final_softcap);
    if (check && compute_logits) check_activation_finite(out.logits, "logits", " (final_norm was finite)");
  }
  if (rec) {
    for (const auto& a : rec->acts) rec->bytes += a.second.numel() * a.second.element_size();
    memo->memo().put(std::move(rec));
    memo->count(false);
  }
  if (kv) KVCacheAccess::advance(*kv, B, T);  // only now: a pass that threw leaves the cache's length as it was
  return out;
}

}  // namespace

ForwardOutput run_forward(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& ids, const CacheSpec& spec,
                          bool compute_logits, const at::Tensor& segment_ids, const HookList* hooks) {
  return forward_impl(cfg, w, ids, spec, compute_logits, segment_ids, hooks, nullptr);
}

ForwardOutput forward_cached(const Model& m, const at::Tensor& ids, KVCache& kv, const CacheSpec& spec, bool compute_logits) {
  at::NoGradGuard no_grad;
  return forward_impl(m.config(), m.weights(), ids, spec, compute_logits, at::Tensor(), nullptr, &kv);
}

at::Tensor run_blocks(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& x, int64_t first, int64_t last) {
  if (x.dim() != 3 || x.size(2) != cfg.d_model)
    throw UsageError("run_blocks: the residual stream must be [B, T, " + std::to_string(cfg.d_model) + "]");
  if (first < 0 || first > last || last > cfg.n_layers)
    throw UsageError("run_blocks: blocks [" + std::to_string(first) + ", " + std::to_string(last) + ") are not within [0, " +
                     std::to_string(cfg.n_layers) + ")");
  if (x.size(1) < 1 || x.size(1) > cfg.n_ctx)
    throw UsageError("run_blocks: " + std::to_string(x.size(1)) + " positions, the context holds 1 to " +
                     std::to_string(cfg.n_ctx));
  const BlockContext ctx = block_context(cfg, x.size(1), x.device());
  at::Tensor h = x;
  for (int64_t l = first; l < last; ++l) h = block(cfg, w.layers[static_cast<size_t>(l)], ctx, h, l, nullptr, nullptr, nullptr);
  return h;
}

}  // namespace vocablens
