// vocablens/detail/sha256.hpp — SHA-256 (FIPS 180-4), for provenance hashes of model configs.
//
//   std::string h = vocablens::sha256_hex("abc");   // "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
//   std::string f = vocablens::sha256_file_hex("gpt2/config.json");
//   std::string hdr = vocablens::sha256_file_hex("stories15M.bin", 28);   // first 28 bytes only
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace vocablens {

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  /// Finishes and returns the 32-byte digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  /// Finishes and returns the digest as 64 lowercase hex digits.
  std::string hex_digest();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

/// SHA-256 of `data` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

/// SHA-256 of the first `max_bytes` bytes of a file (the whole file by default), lowercase hex.
/// Throws FormatError(path, "cannot open") when unreadable.
std::string sha256_file_hex(const std::string& path, size_t max_bytes = std::numeric_limits<size_t>::max());

}  // namespace vocablens
