// cli/text_fit.hpp — fitting token text into fixed-width table columns (heads and lens tables).
//
//   fmt::print("{} → {}", vocablens::cli::fit(a, 16), vocablens::cli::fit(b, 16));  // padded or cut with "…"
//
// Widths count UTF-8 code points (not bytes), one column each; a cut string ends in "…" and is exactly
// `width` columns wide.
#pragma once
#include <cstddef>
#include <string>

namespace vocablens::cli {

/// Code points of a UTF-8 string (continuation bytes not counted).
inline size_t columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

/// `s` padded with spaces to `width` columns, or cut to `width` - 1 columns and "…".
inline std::string fit(const std::string& s, size_t width) {
  if (columns(s) <= width) return s + std::string(width - columns(s), ' ');
  std::string out;
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80) {
      if (n == width - 1) break;
      ++n;
    }
    out.push_back(s[i]);
  }
  return out + "…";
}

}  // namespace vocablens::cli
