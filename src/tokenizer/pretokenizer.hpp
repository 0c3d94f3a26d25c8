// src/tokenizer/pretokenizer.hpp — regex pre-tokenisation with PCRE2 (UTF + UCP + JIT), private to src/tokenizer.
//
//   detail::Pretokenizer pre(detail::kGpt2Pattern, "vocab.json");
//   auto md = pre.make_match_data();
//   pre.split(text, md.get(), [&](const char* p, size_t n) { ... });   // pieces cover `text` exactly
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

namespace vocablens::detail {

/// GPT-2's pre-tokenizer expression, as published (encoder.py, tiktoken "gpt2", HF ByteLevel).
/// \s / \S are rewritten to the White_Space property by translate_regex() before compiling.
inline constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Rewrites \s and \S (outside and inside character classes) to \p{White_Space} / \P{White_Space}.
/// Why: PCRE2's \s under UCP also matches U+180E (it follows Perl's \h), while the Rust regex crate
/// (tiktoken, HF tokenizers) and Python's `regex` (OpenAI's encoder.py) use Unicode White_Space.
std::string translate_regex(std::string_view pattern);

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

class Pretokenizer {
 public:
  /// Compiles `pattern` (after translate_regex) with UTF, UCP and MATCH_INVALID_UTF, JIT when available.
  /// Throws FormatError(source, "bad pre-tokenizer expression ...") when PCRE2 rejects it.
  Pretokenizer(std::string_view pattern, const std::string& source);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  /// Match data for one thread's use of split().
  MatchData make_match_data() const;

  /// Calls fn(ptr, len) for each piece of `text`, left to right. Pieces are the expression's matches;
  /// bytes between matches (only invalid UTF-8 for GPT-2's expression, which matches every valid
  /// character) come as pieces of their own, so the pieces always cover the text exactly.
  template <class F>
  void split(std::string_view text, pcre2_match_data* md, F&& fn) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    const size_t len = text.size();
    size_t pos = 0;    // everything before pos has been emitted
    size_t start = 0;  // where the next search starts
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    while (start < len) {
      int rc = jit_ ? pcre2_jit_match(code_, subject, len, start, 0, md, nullptr)
                    : pcre2_match(code_, subject, len, start, 0, md, nullptr);
      if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && jit_)  // JIT stack exhausted: the interpreter backtracks on the heap
        rc = pcre2_match(code_, subject, len, start, PCRE2_NO_JIT, md, nullptr);
      if (rc < 0) break;  // no further match (or a resource limit even so): the rest is one gap
      size_t s = ov[0], e = ov[1];
      if (e == s) {  // an empty match (only custom expressions can): step past one byte
        start = s + 1;
        continue;
      }
      if (s > pos) fn(text.data() + pos, s - pos);
      fn(text.data() + s, e - s);
      pos = start = e;
    }
    if (pos < len) fn(text.data() + pos, len - pos);
  }

 private:
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace vocablens::detail
