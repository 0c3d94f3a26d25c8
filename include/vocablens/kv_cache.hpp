// vocablens/kv_cache.hpp — incremental decoding: the keys and values of the positions already run.
//
// Decoding feeds one new token per step. Without a cache every step re-runs the whole prefix, so drawing a
// sequence of n tokens costs ~n²/2 positions; with one, each step runs only its new positions, whose queries
// attend to the cached keys and values of the earlier ones (as llama.cpp and llama2.c's run.c decode).
//
//   vocablens::KVCache kv;
//   auto out = vocablens::forward_cached(model, prompt_ids, kv);         // [B, T]: the prompt, kv.length() == T
//   at::Tensor next = out.logits.select(1, -1).argmax(-1);               // [B]
//   out = vocablens::forward_cached(model, next.unsqueeze(1), kv);       // [B, 1] at position T; length T + 1
//
// Shapes: ids [n] (B = 1) or [B, n] with the same B on every call of one cache; n >= 1 and
// kv.length() + n <= n_ctx. The output holds the logits [B, n, V] of the new positions only, and the
// activations `spec` asks for, of the new positions only (a pattern is [B, H, n, kv.length()]).
//
// Guarantees: the same operations as a full run_forward (vocablens/model.hpp) on the same values — position
// embeddings, rotary angles, ALiBi biases, causal and sliding-window masks taken at the absolute positions —
// so the logits equal the full pass's up to float32 rounding of GEMMs over fewer rows (kv_cache_test: every
// family, ALiBi, sinusoidal and learned positions, batches). No hooks (a hook would see only the new
// positions; interventions run full passes), no grad. A call that throws leaves the cache as it was.
#pragma once
#include <cstdint>
#include <vector>

#include "vocablens/cache_spec.hpp"
#include "vocablens/model_config.hpp"
#include "vocablens/tensor_fwd.hpp"

namespace vocablens {

class Model;
struct ForwardOutput;  // vocablens/model.hpp

/// Per layer, the keys (after Qwen3's k norm and the rotary) and values [B, H_kv, capacity, d_head] of the
/// positions run so far; rows beyond length() are unused room, grown by doubling up to n_ctx.
class KVCache {
 public:
  // Out of line (src/model/kv_cache.cpp): the tensors' class is only declared here (vocablens/tensor_fwd.hpp).
  KVCache();
  ~KVCache();
  KVCache(const KVCache&);
  KVCache(KVCache&&) noexcept;
  KVCache& operator=(const KVCache&);
  KVCache& operator=(KVCache&&) noexcept;
  /// Positions run so far (0 for a fresh or cleared cache).
  int64_t length() const { return length_; }
  /// Batch size fixed by the first call (0 while empty).
  int64_t batch() const { return batch_; }
  /// Room for `positions` positions at the first allocation (e.g. prompt + steps), instead of growing to it.
  void reserve(int64_t positions) { reserve_ = positions; }
  void clear();

 private:
  friend struct KVCacheAccess;  // the forward pass (src/model/forward.cpp)
  int64_t length_ = 0, batch_ = 0, reserve_ = 0;
  std::vector<at::Tensor> k_, v_;
};

/// The forward of `ids` at positions kv.length() .. kv.length() + n - 1 after the cached ones (no grad);
/// appends their keys and values to `kv`. Throws UsageError on bad shapes, a batch size other than the
/// cache's, ids outside the vocabulary, or positions beyond n_ctx (the cache is then unchanged).
ForwardOutput forward_cached(const Model& m, const at::Tensor& ids, KVCache& kv, const CacheSpec& spec = {},
                             bool compute_logits = true);

/// Bytes a KVCache holds for B sequences of T positions (float32 keys and values of every layer): the
/// memory estimate of a decoding command adds it.
inline double kv_cache_bytes(const ModelConfig& c, int64_t B, int64_t T) {
  return 2.0 * static_cast<double>(c.n_layers) * static_cast<double>(B) * static_cast<double>(T) *
         static_cast<double>(c.n_kv_heads) * static_cast<double>(c.d_head) * 4.0;
}

}  // namespace vocablens
