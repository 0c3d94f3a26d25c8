// The normalizer steps of a BPE model (Hugging Face tokenizer.json "normalizer", Metaspace's replacement):
// Unicode normal forms and lower-casing by Debian's utf8proc, Prepend / Replace by hand.
// Bytes that are not valid UTF-8 are kept as they are (only valid stretches are normalized).
#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

#include "tokenizer/bpe_model.hpp"
#include "vocablens/error.hpp"

namespace vocablens::detail {
namespace {

/// Applies `fn` to every maximal valid-UTF-8 stretch of s that is not pure ASCII... (ASCII is already in every
/// normal form, so it is copied; lower-casing handles ASCII itself).
std::string map_unicode(std::string_view s, int options) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    // the next stretch of valid UTF-8
    size_t j = i;
    uint32_t cp;
    size_t k;
    while (j < s.size() && (k = utf8_char(s, j, cp)) != 0) {
      // utf8proc 2.8 composes a Hangul LV syllable with U+11A7 (the jamo *before* the first trailing
      // consonant), which Unicode's composition excludes (ICU and Rust's unicode-normalization do not):
      // U+11A7 is a starter, so normalizing the text on either side of it separately is exact.
      if (cp == 0x11A7 && j > i) break;
      j += k;
      if (cp == 0x11A7) break;
    }
    if (j > i) {
      bool ascii = true;
      for (size_t t = i; t < j && ascii; ++t) ascii = static_cast<unsigned char>(s[t]) < 0x80;
      if (ascii) {
        out.append(s.data() + i, j - i);
      } else {
        utf8proc_uint8_t* dst = nullptr;
        utf8proc_ssize_t n =
            utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i), static_cast<utf8proc_ssize_t>(j - i), &dst,
                         static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
        if (n >= 0 && dst) {
          out.append(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
        } else {
          out.append(s.data() + i, j - i);
        }
        std::free(dst);
      }
    }
    if (j == i && j < s.size()) out += s[j++];  // an invalid byte: kept
    i = j;
  }
  return out;
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t k = utf8_char(s, i, cp);
    if (k == 0) {
      out += s[i++];
      continue;
    }
    append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    i += k;
  }
  return out;
}

// Stops once the output passes `limit` (the caller refuses the text): one Replace of "a" by a long string
// must not build terabytes first.
std::string replace_all(std::string_view s, const std::string& from, const std::string& to, size_t limit) {
  std::string out;
  out.reserve(std::min(limit, s.size() + s.size() / 4));
  size_t i = 0;
  for (;;) {
    size_t k = s.find(from, i);
    if (k == std::string_view::npos) break;
    if (out.size() > limit) return out;
    out.append(s.data() + i, k - i);
    out += to;
    i = k + from.size();
  }
  out.append(s.data() + i, s.size() - i);
  return out;
}

}  // namespace

std::string BpeModel::normalize(std::string_view text, bool at_start) const {
  std::string s(text);
  // What a normaliser can do to a text is bounded: Unicode forms grow a character at most 18-fold
  // (utf8proc's longest decomposition), a Replace by its two lengths' ratio. A chain built to grow the text
  // without end (24 Replace "a" -> "aa" make 2^24 bytes of each "a") is refused once the text is past
  // 64 times its input (and 1 MB), before it is gigabytes.
  const size_t limit = std::max<size_t>(size_t{1} << 20, 64 * text.size());
  for (const NormStep& st : norm) {
    if (s.size() > limit)
      throw FormatError(source, "the normalizer turns " + std::to_string(text.size()) + " bytes of text into more than " +
                                    std::to_string(limit) + " bytes (a chain of Replace steps that keeps growing it?); refused");
    if (s.empty()) break;  // HF: normalizers leave an empty stretch empty (Prepend included)
    switch (st.kind) {
      case NormStep::kNfc: s = map_unicode(s, UTF8PROC_COMPOSE); break;
      case NormStep::kNfd: s = map_unicode(s, UTF8PROC_DECOMPOSE); break;
      case NormStep::kNfkc: s = map_unicode(s, UTF8PROC_COMPOSE | UTF8PROC_COMPAT); break;
      case NormStep::kNfkd: s = map_unicode(s, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT); break;
      case NormStep::kLowercase: s = lowercase(s); break;
      case NormStep::kPrepend: s = st.a + s; break;
      case NormStep::kReplace: s = replace_all(s, st.a, st.b, limit); break;
      case NormStep::kMetaPrepend:
        if ((!st.first_only || at_start) && s.compare(0, st.a.size(), st.a) != 0) s = st.a + s;
        break;
    }
  }
  if (s.size() > limit)
    throw FormatError(source, "the normalizer turns " + std::to_string(text.size()) + " bytes of text into more than " +
                                  std::to_string(limit) + " bytes (a chain of Replace steps that keeps growing it?); refused");
  return s;
}

}  // namespace vocablens::detail
