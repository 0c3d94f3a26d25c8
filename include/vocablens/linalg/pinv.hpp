// vocablens/linalg/pinv.hpp — the Moore–Penrose pseudo-inverse of a tall matrix, cached on disk by content.
//
// E [V, d] with V >= d (an unembedding, an embedding): E = U S Wᵀ from the float64 eigen-decomposition of
// EᵀE (d×d, one streamed pass over E), E⁺ = W S⁻¹ Uᵀ [d, V] over the singular values s > rtol · s_max.
// With use_cache, E⁺ and the singular values are stored as .npy files in default_cache_dir(), named by
// hash_tensor(E), V, d and rtol, written atomically; a later call with the same E reads them back (a few
// seconds saved for GPT-2's 50257×768). Cache problems (read-only disk, corrupt file) are never errors:
// E⁺ is recomputed and Pinv::cache_note says why. vocablens/unembed.hpp applies this to a model's E.
//
//   vocablens::Pinv p = vocablens::pseudo_inverse(E);        // E [V, d] float32
//   at::Tensor Ep = p.pinv;                                  // [d, V] float32; p.rank, p.singular_values
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vocablens {

struct PinvOptions {
  /// Singular values s <= rtol · s_max count as zero (their directions are left out of E⁺).
  double rtol = 1e-6;
  bool use_cache = true;
  /// "" = default_cache_dir().
  std::string cache_dir;
};

struct Pinv {
  at::Tensor pinv;                      ///< E⁺ [d, V] float32 contiguous
  std::vector<double> singular_values;  ///< singular values of E, descending (d of them, zeros included)
  int64_t rank = 0;                     ///< number of singular values kept
  double rtol = 0;
  uint64_t hash = 0;       ///< hash_tensor(E)
  std::string cache_path;  ///< the .npy file read or written ("" when none)
  bool from_cache = false;
  std::string cache_note;  ///< why the cache was not used, if it was not
};

/// The pseudo-inverse of any float32 matrix E [V, d] with V >= d (no cache unless opts.use_cache).
Pinv pseudo_inverse(const at::Tensor& E, const PinvOptions& opts = {});

/// $VOCABLENS_CACHE, else $XDG_CACHE_HOME/vocablens, else $HOME/.cache/vocablens.
std::string default_cache_dir();

/// XXH64 of a float32 tensor's values in C order, seeded with its shape.
uint64_t hash_tensor(const at::Tensor& t);

}  // namespace vocablens
