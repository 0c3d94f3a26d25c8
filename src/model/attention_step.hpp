// model/attention_step.hpp — internal: step 2 of the block recipe (model/forward.cpp, "the block recipe"), the
// attention: q, k, v of a block's rows (step 1's projections, q/k norms, rotary), the attention itself over the
// whole sequence's q, k, v (blocked or materialising; incremental decoding reads the cached keys), and z through
// W_O. block() calls them in that order, whole or by row blocks.
//
//   Qkv qkv = qkv_rows(cfg, L, ctx, normalised_rows, 0, l, hk);
//   attend(cfg, L, ctx, std::move(qkv), l, false, nullptr, hk, nullptr, [&](int64_t q0, at::Tensor z) {
//     at::Tensor a = attention_out(cfg, L, std::move(z), l, hk);   // [B, n, d_model], query rows q0 ...
//   });
//
// Shapes: rows [B, n, d_model]; q [B, H, n, d_head], k, v [B, Hkv, n, d_head]; z [B, n, H, d_head].
// Guarantees: the hook points q, k, v, attn_scores, pattern, z, result, attn_out run where block() documents them.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>

#include "model/block_context.hpp"
#include "model/hook_table.hpp"
#include "vocablens/attention.hpp"
#include "vocablens/model_config.hpp"

namespace vocablens {
struct LayerWeights;
class KVCache;
}  // namespace vocablens

namespace vocablens::detail {

/// Layer l's variant of the blocked attention (block size, scale, soft-cap, window, ALiBi, sinks).
AttentionSpec attention_spec(const ModelConfig& cfg, const LayerWeights& L, const BlockContext& ctx, const AttentionPolicy& pol,
                             int64_t l);
/// Whether layer l's attention over T positions takes the blocked loop (no grad, more than one block, nobody
/// reading its scores or pattern).
bool use_blocked_attention(const AttentionPolicy& pol, int64_t T, const at::Tensor* pattern_out, const hook_detail::HookTable* hk,
                           int64_t l);

struct Qkv {
  at::Tensor q, k, v;  ///< [B, H, n, dh], [B, Hkv, n, dh] (views; made contiguous where the attention wants it)
};

/// Step 1 on rows r0 .. r0 + n - 1: q, k, v of `h` (the rows, normalised by the caller where the block has input
/// norms; released once projected), hook points q, k, v, then the q/k norms and the layer's rotary.
Qkv qkv_rows(const ModelConfig& cfg, const LayerWeights& L, const BlockContext& ctx, at::Tensor h, int64_t r0, int64_t l,
             const hook_detail::HookTable* hk);

/// Receives z [B, n, H, dh] of query rows q0 .. q0 + n - 1.
using AttentionOut = std::function<void(int64_t q0, at::Tensor z)>;
/// The attention on the whole sequence's q, k, v (taken over: released before `out` runs): by query block where
/// `by_rows`, else once; attn_scores and pattern on the materialising path, the pattern kept in *pattern_out when
/// asked for. With `kv`, the new keys and values join the cached ones.
void attend(const ModelConfig& cfg, const LayerWeights& L, const BlockContext& ctx, Qkv a, int64_t l, bool by_rows,
            at::Tensor* pattern_out, const hook_detail::HookTable* hk, KVCache* kv, const AttentionOut& out);

/// z [B, n, H, dh] through W_O (and Gemma-2's post norm) -> [B, n, d_model]; hook points z, result, attn_out.
at::Tensor attention_out(const ModelConfig& cfg, const LayerWeights& L, at::Tensor z, int64_t l,
                         const hook_detail::HookTable* hk);

}  // namespace vocablens::detail
