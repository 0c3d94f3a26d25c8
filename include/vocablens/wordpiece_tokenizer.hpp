// vocablens/wordpiece_tokenizer.hpp — BERT's WordPiece tokenizer: a `vocab.txt` (one token per line, id =
// line number) read with the settings of `tokenizer_config.json`, or a Hugging Face `tokenizer.json` whose
// model is WordPiece. Checked id for id against transformers.js (tests/wordpiece_crosscheck/).
//
// Encoding, as BERT's BasicTokenizer + WordpieceTokenizer (and transformers.js's BertNormalizer,
// BertPreTokenizer and WordPiece model):
//  1. clean text: NUL, U+FFFD and control characters (categories Cc, Cf, Co, Cs; not tab, newline, CR) are
//     removed, every whitespace character becomes a space;
//  2. CJK ideographs (the CJK Unified Ideographs blocks and their extensions, compatibility ideographs) get
//     a space on each side, so each is a word of its own;
//  3. lower-casing (full Unicode mapping, final sigma included) when `lowercase`; accent stripping (NFD,
//     then every non-spacing mark Mn removed) when `strip_accents`, which by default follows `lowercase`;
//  4. words = maximal runs of characters that are neither whitespace nor punctuation (Unicode P* and all
//     ASCII symbols !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~); each punctuation character is a word of its own;
//  5. each word: longer than max_input_chars_per_word code points → [UNK]; else greedy longest match
//     first, pieces after the first spelled with the "##" prefix; if some position has no match, the whole
//     word is [UNK].
// Unicode data (categories, lower-case mapping, NFD) come from ICU.
//
// Special tokens: [CLS] is bos_id(), [SEP] eos_id(); encode() adds neither unless asked (EncodeOptions).
// token_bytes() is the token's text without the "##" prefix; decode() joins words with spaces and glues
// "##" pieces to the word before (BERT's convert_tokens_to_string); it does not undo lower-casing.
//
//   auto tok = vocablens::WordPieceTokenizer::from_vocab_txt("bert/vocab.txt");   // + tokenizer_config.json
//   tok->encode("Unaffable!");      // ["un", "##aff", "##able", "!"] -> their ids
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "vocablens/tokenizer.hpp"

namespace vocablens {

struct WordPieceConfig {
  bool lowercase = true;
  std::optional<bool> strip_accents;  ///< unset: follows lowercase (BERT's default)
  bool clean_text = true;
  bool handle_chinese_chars = true;
  std::string unk_token = "[UNK]";
  std::string prefix = "##";  ///< continuing_subword_prefix
  int64_t max_input_chars_per_word = 100;
};

class WordPieceTokenizer final : public Tokenizer {
 public:
  /// vocab.txt; settings from `config_path` (tokenizer_config.json: do_lower_case, strip_accents,
  /// tokenize_chinese_chars, unk_token, max_input_chars_per_word) or, when empty, from a
  /// tokenizer_config.json beside vocab.txt if there is one, else the defaults.
  /// Throws FormatError(path, ...) when a file is unreadable or malformed, or [UNK] is missing.
  static std::unique_ptr<WordPieceTokenizer> from_vocab_txt(const std::string& vocab_path, const std::string& config_path = "");
  /// tokenizer.json with "model": {"type": "WordPiece", ...} and a BertNormalizer (or none).
  static std::unique_ptr<WordPieceTokenizer> from_tokenizer_json(const std::string& path);
  /// Tokens in id order (e.g. from the WordPiece trainer).
  static std::unique_ptr<WordPieceTokenizer> from_tokens(std::vector<std::string> tokens, const WordPieceConfig& c,
                                                         const std::string& source);

  std::string kind() const override { return "wordpiece"; }
  std::string source() const override { return source_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  int64_t bos_id() const override { return cls_; }
  int64_t eos_id() const override { return sep_; }
  std::string token_bytes(int64_t id) const override;
  std::string piece(int64_t id) const override;
  std::string display(int64_t id) const override;
  std::optional<int64_t> token_to_id(std::string_view token) const override;
  bool is_special(int64_t id) const override;

  const WordPieceConfig& config() const { return cfg_; }
  int64_t unk_id() const { return unk_; }
  /// Steps 1–4: the words WordPiece sees (UTF-8).
  std::vector<std::string> pre_tokenize(std::string_view text) const;
  /// Step 5 for one word: appends its ids; returns false when the word became [UNK].
  bool encode_word(std::string_view word, std::vector<int64_t>& out) const;

 private:
  WordPieceTokenizer() = default;
  void index(const std::string& path_for_errors);
  std::vector<int64_t> do_encode(std::string_view text, const EncodeOptions& opts) const override;
  std::string do_decode(const int64_t* ids, size_t n) const override;

  WordPieceConfig cfg_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
  size_t max_piece_chars_ = 0;  ///< longest token (without prefix), in code points
  int64_t unk_ = -1, cls_ = -1, sep_ = -1;
  std::string source_;
};

}  // namespace vocablens
