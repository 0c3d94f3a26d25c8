// src/tokenizer/text_util.hpp — small helpers shared by the tokenizer readers (private to src/tokenizer).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace vocablens::detail {

/// Largest file read_file_bytes() accepts (hostile-input bound).
constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{256} << 20;

/// Whole file as bytes. Throws FormatError(path, "cannot open: <strerror>") when it cannot be read, and
/// FormatError(path, "file is N bytes; ... refused") when it is larger than kMaxTokenizerFileBytes.
std::string read_file_bytes(const std::string& path);

/// True when `path` names an existing regular file / directory.
bool is_regular_file(const std::string& path);
bool is_directory(const std::string& path);

/// Length of the valid UTF-8 character starting at s[i] (1..4), or 0 when the bytes there are not a valid
/// UTF-8 character (stray continuation byte, overlong form, surrogate, > U+10FFFF, truncated). cp receives
/// the code point when valid.
size_t utf8_char(std::string_view s, size_t i, uint32_t& cp);

/// Appends code point cp (<= U+10FFFF) as UTF-8.
void append_utf8(std::string& out, uint32_t cp);

/// Makes a string safe for a one-line error message: control bytes and invalid UTF-8 escaped, long
/// strings shortened with "...".
std::string printable(std::string_view s, size_t max_len = 60);

/// A fast non-cryptographic hash of a short byte string (8 bytes per step, then a final mix).
inline uint64_t hash_bytes(const char* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * 0x94D049BB133111EBull;
  }
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

}  // namespace vocablens::detail
