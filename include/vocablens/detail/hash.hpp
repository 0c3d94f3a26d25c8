// vocablens/detail/hash.hpp — a fast 64-bit hash of bytes (XXH64), for naming cache files by their content.
//
// Not cryptographic (vocablens/detail/sha256.hpp is); equal to the reference XXH64 on little-endian hosts.
//
//   uint64_t h = vocablens::hash_bytes(data, n);          // seed 0
//   uint64_t h2 = vocablens::hash_bytes(&shape, sizeof shape, h);   // chain: the previous hash as seed
#pragma once
#include <cstddef>
#include <cstdint>

namespace vocablens {

/// 64-bit xxHash (XXH64) of a byte range.
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed = 0);

}  // namespace vocablens
