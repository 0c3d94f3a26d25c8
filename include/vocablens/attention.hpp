// vocablens/attention.hpp — causal attention in blocks, without the [B, H, T, T] score tensor.
//
// Attention of T queries over T keys is a softmax over each query's row of scores. Materialising every
// row at once costs B·H·T²·4 bytes per copy (a 16-head model at T = 8192: 4 GiB per copy, and a plain
// implementation makes several: scale, mask, softmax). Blocked ("flash") attention walks the rows in
// query blocks and, within a block, the keys in key blocks of the same size, keeping per row the running
// maximum m, the running sum l of exp(s - m) and the unnormalised output o (Milakov & Gimelshein 2018,
// "Online normalizer calculation for softmax"; Dao et al. 2022). When a new key block raises the
// maximum to m', the old sum and output are rescaled by exp(m - m'). At the end o / l is exactly the
// softmax-weighted sum of the values, up to float32 rounding in another order (measured against a
// float64 reference: tests/attention_test.cpp, tests/long_context_test.cpp).
//
//   vocablens::AttentionSpec s;
//   s.scale = 1.0 / std::sqrt(64.0);
//   s.window = 4096;                        // Mistral / Gemma-2 sliding layers; 0 = full causal
//   at::Tensor z = vocablens::blocked_causal_attention(q, k, v, s);   // [B, T, H, d_head]
//
// Shapes: q [B, H, T, d_head], k and v [B, H_kv, T, d_head], float32, H a multiple of H_kv (grouped-
// query attention: query head h reads key/value head h / (H / H_kv), as repeat_interleave would, but
// without copying the keys). Returns z [B, T, H, d_head] (contiguous), the layout of hook_z.
//
// Scores, in this order (the forward pass's definition, src/model/forward.cpp): s = scale · q·k, then
// soft-capping c · tanh(s / c) when softcap > 0 (Gemma-2), then the ALiBi bias slope_h · (k − q) when
// alibi_slopes is given, then the mask: query q sees keys k with k ≤ q and, when window > 0, k > q − window.
// Key blocks wholly outside a query block's visible range are skipped (causal attention does half the
// work of the full product; a sliding window makes the cost O(T · window)).
//
// Memory: a copy of one query block plus one score tile of B·H·block² floats (64 MiB for 16 heads and
// the default block of 1024); nothing grows with T². Each step is one batched GEMM or one elementwise pass
// over all heads: few, large operations, which keep the threads busy (docs/runner.md, "Long inputs"). Not differentiable in place (the running rescales are in-place
// updates): the forward pass uses it only without grad, and keeps the materialising path for training
// and for hooks or caches that read attn_scores or pattern.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace vocablens {

struct AttentionSpec {
  double scale = 1.0;       ///< score multiplier (1/sqrt(d_head) unless the model sets another)
  double softcap = 0.0;     ///< > 0: scores = softcap * tanh(scores / softcap), before bias and mask
  int64_t window = 0;       ///< > 0: query q sees keys q - window < k <= q; 0: every k <= q
  at::Tensor alibi_slopes;  ///< [H] float32: adds slope_h * (k - q) to the scores; undefined: none
  int64_t block = 0;        ///< edge of the query and key blocks; 0: the default (1024, or T when smaller)
  /// [H] float32: a logit per head that joins every query's softmax denominator with no value (attention
  /// sinks, GPT-OSS), so a row's weights sum to less than 1; undefined: none.
  at::Tensor sinks;
};

/// Causal softmax attention of q over k, v computed block by block (see above). Throws UsageError on
/// shapes that do not fit together.
at::Tensor blocked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionSpec& s);

/// Which attention the forward pass (src/model/forward.cpp) uses, process-wide. It takes the blocked path
/// for passes without grad over more than `block` positions whose scores and pattern no hook or cache
/// reads; otherwise it materialises the [B, H, T, T] scores.
struct AttentionPolicy {
  bool blocked = true;  ///< false: always materialise (VOCABLENS_ATTENTION=materialize at start-up)
  /// Tile edge, and the length up to which the forward materialises anyway. 256: on a GPT-2-small shape at
  /// 1024 tokens (2 threads, docs/benchmarks.md "Logit lens") the blocked, streamed forward took 1.6-1.8 s
  /// against 8 s materialised (a [12, 1024, 1024] score tensor written and read three times per layer, its
  /// elementwise passes alternating with GEMMs) and 1024-edge tiles; causal tiles above the diagonal are
  /// skipped and a tile stays in cache.
  int64_t block = 256;
};

/// The policy in effect: the default above, unless VOCABLENS_ATTENTION=materialize was set when it was
/// first read (benchmarks that compare the two paths in one build).
AttentionPolicy attention_policy();

/// Replaces the policy (tests: a small block sends short inputs through the blocked path). Not
/// synchronised with forward passes running on other threads.
void set_attention_policy(const AttentionPolicy& p);

}  // namespace vocablens
