// The attention step of the block recipe (model/forward.cpp, "the block recipe"): q, k, v of a block's rows, the
// attention (blocked or materialising, incremental decoding's cached keys), and z through W_O. Moved out of
// forward.cpp as it was; the same operations in the same order.
#include "model/attention_step.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <limits>
#include <tuple>

#include "model/attention_blocks.hpp"
#include "model/kv_cache_access.hpp"
#include "model/position_encodings.hpp"
#include "vocablens/kv_cache.hpp"
#include "vocablens/model.hpp"

namespace vocablens::detail {

at::Tensor proj(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);  // forward.cpp

namespace {
inline void run_hook(const hook_detail::HookTable* hk, HookPoint p, int64_t l, at::Tensor& t) {
  if (hk) hk->apply(p, l, t);
}
}  // namespace

// Blocked attention (vocablens/attention.hpp) never forms the [B, H, T, T] scores. It serves every pass
// without grad over more than one block of positions, unless this layer's scores or pattern are asked
// for (a hook on attn_scores / pattern, or the cache's pattern). Those, passes with grad (training: the
// blocked loop updates in place) and inputs of at most one block (where the scores are no larger than one
// tile) take the materialising path, so short inputs give the same bits whether or not a hook reads the
// pattern. The block (1024) and VOCABLENS_ATTENTION=materialize: AttentionPolicy (vocablens/attention.hpp).
// Layer l's variant of the blocked attention (block size, scale, soft-cap, window, ALiBi).
AttentionSpec attention_spec(const ModelConfig& cfg, const LayerWeights& L, const BlockContext& ctx, const AttentionPolicy& pol,
                             int64_t l) {
  AttentionSpec spec;
  spec.block = pol.block;
  spec.scale = ctx.scale;
  spec.softcap = cfg.attn_softcap;
  spec.window = attention_window(cfg, l);
  spec.alibi_slopes = ctx.alibi_slopes;
  spec.sinks = L.sinks;
  return spec;
}

bool use_blocked_attention(const AttentionPolicy& pol, int64_t T, const at::Tensor* pattern_out, const hook_detail::HookTable* hk,
                           int64_t l) {
  if (!pol.blocked || T <= pol.block || pattern_out || at::GradMode::is_enabled()) return false;
  return !(hk && (hk->has(HookPoint::AttnScores, l) || hk->has(HookPoint::Pattern, l)));
}

// Step 1 on the stream's rows r0 .. r0 + n - 1 (h [B, n, d]: those rows, normalised by the caller in a block with
// input norms; the query positions ctx.offset + r0 ...).
// Hook points q, k, v after their projections (before Qwen3's q/k norm and the rotary). The normalised
// input is released once projected: at long T every [B, T, d] held through the attention is a sizeable
// part of the forward's peak.
Qkv qkv_rows(const ModelConfig& cfg, const LayerWeights& L, const BlockContext& ctx, at::Tensor h, int64_t r0, int64_t l,
             const hook_detail::HookTable* hk) {
  const int64_t B = h.size(0), n = h.size(1), H = cfg.n_heads, Hkv = cfg.n_kv_heads, dh = cfg.d_head;
  Qkv r;
  r.q = proj(h, L.w_q, L.b_q).view({B, n, H, dh});
  r.k = proj(h, L.w_k, L.b_k).view({B, n, Hkv, dh});
  r.v = proj(h, L.w_v, L.b_v).view({B, n, Hkv, dh});
  h.reset();
  run_hook(hk, HookPoint::Q, l, r.q);
  run_hook(hk, HookPoint::K, l, r.k);
  run_hook(hk, HookPoint::V, l, r.v);
  r.v = r.v.transpose(1, 2);
  if (cfg.qk_norm_full) {  // OLMo 2: one norm over every head's features at once
    r.q = apply_norm(r.q.reshape({B, n, H * dh}), NormKind::RMSNorm, cfg.norm_eps, L.q_norm_w, at::Tensor()).view({B, n, H, dh});
    r.k = apply_norm(r.k.reshape({B, n, Hkv * dh}), NormKind::RMSNorm, cfg.norm_eps, L.k_norm_w, at::Tensor())
              .view({B, n, Hkv, dh});
  } else if (L.q_norm_w.defined()) {  // per head (Qwen3, Gemma 3)
    r.q = apply_norm(r.q, NormKind::RMSNorm, cfg.norm_eps, L.q_norm_w, at::Tensor());
    r.k = apply_norm(r.k, NormKind::RMSNorm, cfg.norm_eps, L.k_norm_w, at::Tensor());
  }
  r.q = r.q.transpose(1, 2);
  r.k = r.k.transpose(1, 2);
  if (ctx.cos.defined() && rotary_layer(cfg, l)) {  // SmolLM3's no-rotary layers skip it
    const bool local = local_rotary(cfg, l);        // Gemma 3's sliding layers: their own base
    const at::Tensor& cs = local ? ctx.cos_local : ctx.cos;
    const at::Tensor& sn = local ? ctx.sin_local : ctx.sin;
    const at::Tensor c = cs.narrow(0, ctx.offset + r0, n), si = sn.narrow(0, ctx.offset + r0, n);
    r.q = apply_rotary(r.q, c, si, cfg.rope_interleaved);
    r.k = apply_rotary(r.k, c, si, cfg.rope_interleaved);
  }
  return r;
}

// Step 2's attention on the whole sequence's q, k, v (taken over: released before `out` runs). Hands z
// [B, n, H, dh] of query rows q0 .. q0 + n - 1 to out(q0, z): by query block where `by_rows` (the blocked
// loop), else once for every row — then hook points attn_scores (scaled, soft-capped, masked) and pattern
// run on the materialising path, whose pattern is kept in *pattern_out when asked for. Incremental decoding
// (kv): the new positions' keys and values join the cached ones, which the queries read.
void attend(const ModelConfig& cfg, const LayerWeights& L, const BlockContext& ctx, Qkv a, int64_t l, bool by_rows,
            at::Tensor* pattern_out, const hook_detail::HookTable* hk, KVCache* kv, const AttentionOut& out) {
  const int64_t H = cfg.n_heads, Hkv = cfg.n_kv_heads, T = a.q.size(2);
  if (kv) std::tie(a.k, a.v) = KVCacheAccess::put(*kv, l, a.k, a.v, ctx.offset, cfg.n_ctx);
  const AttentionPolicy pol = attention_policy();
  // Blocked attention pairs query and key positions one to one, so only a first call (offset 0) takes it.
  if (ctx.offset == 0 && use_blocked_attention(pol, T, pattern_out, hk, l)) {
    const AttentionSpec spec = attention_spec(cfg, L, ctx, pol, l);
    if (by_rows) {
      detail::blocked_causal_attention_each(a.q, a.k, a.v, spec, [&](int64_t q0, const at::Tensor& z) { out(q0, z); });
      return;
    }
    // The loop reads k and v contiguous in [B, Hkv, T, d_head]: made so here, the originals are released
    // instead of held beside the loop's copies (same values, same bits).
    a.k = a.k.contiguous();
    a.v = a.v.contiguous();
    at::Tensor z = blocked_causal_attention(a.q, a.k, a.v, spec);  // GQA by head groups, no repeated keys
    a = Qkv();
    out(0, std::move(z));
    return;
  }
  if (Hkv != H) {  // grouped-query attention: query head h reads kv head h / (H / Hkv)
    a.k = a.k.repeat_interleave(H / Hkv, 1);
    a.v = a.v.repeat_interleave(H / Hkv, 1);
  }
  at::Tensor z;
  {
    at::Tensor scores = at::matmul(a.q, a.k.transpose(-2, -1)) * ctx.scale;  // [B, H, T, offset + T]
    scores = soft_cap(scores, cfg.attn_softcap);                             // Gemma-2, before the mask
    if (ctx.alibi_slopes.defined()) scores = scores + ctx.alibi();
    scores = scores.masked_fill(ctx.mask(cfg, l), -std::numeric_limits<float>::infinity());
    run_hook(hk, HookPoint::AttnScores, l, scores);
    at::Tensor pattern;
    if (L.sinks.defined()) {  // GPT-OSS: each head's sink logit joins the softmax as one more column, then leaves
      const int64_t S = scores.size(-1);
      const at::Tensor sk = L.sinks.to(scores.scalar_type()).view({1, H, 1, 1}).expand({scores.size(0), H, scores.size(2), 1});
      pattern = at::softmax(at::cat({scores, sk}, -1), -1).narrow(-1, 0, S);
    } else {
      pattern = at::softmax(scores, -1);
    }
    scores.reset();
    run_hook(hk, HookPoint::Pattern, l, pattern);
    if (pattern_out) *pattern_out = pattern;
    z = at::matmul(pattern, a.v).transpose(1, 2);
  }
  a = Qkv();
  out(0, std::move(z));
}

// Step 2's output for query rows: z [B, n, H, dh] through W_O, then Gemma-2's post norm. Hook points z,
// result (the per-head outputs, made only when hooked) and attn_out (what is added to the stream).
at::Tensor attention_out(const ModelConfig& cfg, const LayerWeights& L, at::Tensor z, int64_t l,
                         const hook_detail::HookTable* hk) {
  const int64_t B = z.size(0), n = z.size(1);
  run_hook(hk, HookPoint::Z, l, z);
  at::Tensor a;
  if (hk && hk->has(HookPoint::Result, l)) {
    at::Tensor result = hook_detail::head_results(z, L.w_o);
    z.reset();
    run_hook(hk, HookPoint::Result, l, result);
    a = L.b_o.defined() ? result.sum(2) + L.b_o : result.sum(2);
  } else {
    a = proj(z.reshape({B, n, cfg.n_heads * cfg.d_head}), L.w_o, L.b_o);
    z.reset();
  }
  if (L.post_attn_norm_w.defined()) a = apply_norm(a, cfg.norm, cfg.norm_eps, L.post_attn_norm_w, at::Tensor());
  run_hook(hk, HookPoint::AttnOut, l, a);
  return a;
}

}  // namespace vocablens::detail
