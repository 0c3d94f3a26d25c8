// The E⁺ cache's three steps, shared by pinv.cpp (which asks) and pinv_cache.cpp (which reads and writes the
// .npy files): private to the library, see vocablens/linalg/pinv.hpp for the cache's contract.
#pragma once
#include <cstdint>
#include <string>

#include "vocablens/linalg/pinv.hpp"

namespace vocablens {
namespace detail {
/// The cache files' common path (without ".npy") for E of shape [V, d] hashed to `hash`.
std::string pinv_cache_base(const std::string& dir, uint64_t hash, int64_t V, int64_t d, double rtol);
/// Fills out.pinv, singular_values, rank, cache_path, from_cache from the cache; false when absent or unusable.
bool read_pinv_cache(const std::string& base, int64_t V, int64_t d, double rtol, Pinv& out);
/// Stores out.pinv and out.singular_values; sets out.cache_path, or out.cache_note when that failed.
void write_pinv_cache(const std::string& dir, const std::string& base, Pinv& out);
}  // namespace detail
}  // namespace vocablens
