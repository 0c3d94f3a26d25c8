// The forward pass's side of KVCache (vocablens/kv_cache.hpp): writing a layer's new keys and values and
// moving the cache's length once a pass completed. Internal to the model layer (src/model/forward.cpp).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <utility>

#include "vocablens/kv_cache.hpp"

namespace vocablens {

struct KVCacheAccess {
  /// Writes layer l's keys and values k, v [B, H_kv, n, d_head] of positions p0 .. p0 + n - 1 and returns
  /// the cached ones of positions 0 .. p0 + n - 1 (views). Room grows by doubling (at least the reserved
  /// positions, at most n_ctx), so a sequence of steps copies each row O(1) times. Writing the same rows
  /// twice (the non-finite check re-runs a block) gives the same cache.
  static std::pair<at::Tensor, at::Tensor> put(KVCache& c, int64_t l, const at::Tensor& k, const at::Tensor& v, int64_t p0,
                                               int64_t n_ctx);
  /// After a completed pass of n positions of B sequences.
  static void advance(KVCache& c, int64_t B, int64_t n) {
    c.batch_ = B;
    c.length_ += n;
  }
};

}  // namespace vocablens
