#include "tokenizer/pretokenizer.hpp"

#include <new>

#include "vocablens/error.hpp"

namespace vocablens::detail {

std::string translate_regex(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
      char c = p[i + 1];
      if (c == 's') {
        out += "\\p{White_Space}";
      } else if (c == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += p[i];
        out += c;
      }
      ++i;  // an escaped character is never the start of another escape ("\\s" stays a backslash + s)
    } else {
      out += p[i];
    }
  }
  return out;
}

Pretokenizer::Pretokenizer(std::string_view pattern, const std::string& source) {
  std::string pat = translate_regex(pattern);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  // MATCH_INVALID_UTF: arbitrary bytes are allowed in the subject; invalid sequences simply never match,
  // which is what lets split() hand them over as gaps instead of failing the whole text.
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                        &err, &err_off, nullptr);
  if (!code_) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    throw FormatError(
        source, "bad pre-tokenizer expression at offset " + std::to_string(err_off) + ": " + reinterpret_cast<const char*>(buf));
  }
  // The JIT is several times faster than the interpreter; without it (unsupported CPU) we still work.
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() { pcre2_code_free(code_); }

MatchData Pretokenizer::make_match_data() const {
  MatchData md(pcre2_match_data_create_from_pattern(code_, nullptr));
  if (!md) throw std::bad_alloc();
  return md;
}

}  // namespace vocablens::detail
