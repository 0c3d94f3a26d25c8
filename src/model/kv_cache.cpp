// KVCache's storage (vocablens/kv_cache.hpp, src/model/kv_cache_access.hpp); the pass itself is
// forward_cached in src/model/forward.cpp.
#include "model/kv_cache_access.hpp"

#include <algorithm>

namespace vocablens {

KVCache::KVCache() = default;
KVCache::~KVCache() = default;
KVCache::KVCache(const KVCache&) = default;
KVCache::KVCache(KVCache&&) noexcept = default;
KVCache& KVCache::operator=(const KVCache&) = default;
KVCache& KVCache::operator=(KVCache&&) noexcept = default;

void KVCache::clear() {
  length_ = batch_ = 0;
  k_.clear();
  v_.clear();
}

std::pair<at::Tensor, at::Tensor> KVCacheAccess::put(KVCache& c, int64_t l, const at::Tensor& k, const at::Tensor& v, int64_t p0,
                                                     int64_t n_ctx) {
  if (c.k_.size() <= static_cast<size_t>(l)) {
    c.k_.resize(static_cast<size_t>(l) + 1);
    c.v_.resize(static_cast<size_t>(l) + 1);
  }
  at::Tensor& K = c.k_[static_cast<size_t>(l)];
  at::Tensor& V = c.v_[static_cast<size_t>(l)];
  const int64_t n = k.size(2), need = p0 + n;
  if (!K.defined() || K.size(2) < need || K.size(0) != k.size(0)) {  // batch: a first call after one that threw
    const int64_t cap = std::min(n_ctx, std::max({need, c.reserve_, K.defined() ? 2 * K.size(2) : int64_t{16}}));
    at::Tensor K2 = at::empty({k.size(0), k.size(1), cap, k.size(3)}, k.options());
    at::Tensor V2 = at::empty({v.size(0), v.size(1), cap, v.size(3)}, v.options());
    if (p0 > 0) {
      K2.narrow(2, 0, p0).copy_(K.narrow(2, 0, p0));
      V2.narrow(2, 0, p0).copy_(V.narrow(2, 0, p0));
    }
    K = K2;
    V = V2;
  }
  K.narrow(2, p0, n).copy_(k);
  V.narrow(2, p0, n).copy_(v);
  return {K.narrow(2, 0, need), V.narrow(2, 0, need)};
}

}  // namespace vocablens
