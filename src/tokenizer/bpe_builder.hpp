// src/tokenizer/bpe_builder.hpp — collects a BPE vocabulary and its merges from any source (vocab.json +
// merges.txt, tokenizer.json, in-memory VocabSpec), checks them and freezes them into a BpeModel.
// Private to src/tokenizer. Every defect is a one-line FormatError naming the source (hostile input: ids and
// sizes are bounded before any table is sized from them).
#pragma once
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/bpe_model.hpp"

namespace vocablens::detail {

[[noreturn]] void bad(const std::string& path, const std::string& what);

/// The whole file parsed as JSON, or FormatError(path, "not valid JSON: ...") (depth-checked first).
nlohmann::json parse_json(const std::string& path);

/// GPT-2 spelling ("Ġthe") -> raw bytes; false if a character is outside the 256-character alphabet.
bool unicode_to_bytes(std::string_view s, std::string& out);

/// A literal string as a PCRE2 expression matching exactly it.
std::string escape_literal(const std::string& s);

/// "<0x0A>" -> 10; -1 when `s` is not of that form.
int byte_piece_value(std::string_view s);

struct Builder {
  std::shared_ptr<BpeModel> m = std::make_shared<BpeModel>();
  std::vector<std::array<int32_t, 3>> merges;           // {left, right, merged}; index = rank
  std::unordered_map<std::string, int32_t> spelled_id;  // character level: the file's spelling -> id

  // Found by fuzz_bpe_files: ids index dense tables sized id + 1, so a 20-byte vocab.json
  // {"a": 1073741823} allocated 4 x 2^30 entries (> 64 GB). Ids may now exceed the number of entries the
  // file holds by at most kIdSlack (holes); callers set max_id from their entry counts.
  static constexpr int64_t kIdSlack = int64_t{1} << 16;
  int64_t max_id = int64_t{1} << 30;

  Builder() { m->fallback_id.fill(-1); }

  void put(const std::string& path, std::string raw, const std::string& spelling, int64_t id);
  /// A byte-level vocabulary entry spelled in GPT-2's byte-to-unicode alphabet.
  void add_token(const std::string& path, const std::string& spelling, int64_t id);
  /// A character-level entry (SentencePiece-style): `space` (normally "▁") stands for a space, "<0xNN>" is
  /// the byte-fallback token of byte NN.
  void add_piece(const std::string& path, const std::string& spelling, int64_t id, const std::string& space);
  /// An added token (HF added_tokens, GPT-2's <|endoftext|>, GGUF control/user-defined): plain text,
  /// matched before pre-tokenizing.
  void add_added(const std::string& path, const std::string& content, int64_t id, bool is_special, bool lstrip = false,
                 bool rstrip = false);
  void add_merge(const std::string& path, size_t line, std::string_view left, std::string_view right);
  /// After the vocabulary, before the merges: a byte-level vocabulary has a token for every single byte.
  void check_vocabulary(const std::string& vocab_path);
  /// Freezes: merge table, specials sorted, pre-tokenizer steps compiled from `patterns` (in order).
  std::shared_ptr<BpeModel> finish(const std::string& source, const std::string& vocab_path,
                                   const std::vector<std::string>& patterns);
};

}  // namespace vocablens::detail
