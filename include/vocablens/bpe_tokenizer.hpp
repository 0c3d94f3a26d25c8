// vocablens/bpe_tokenizer.hpp — GPT-2 byte-level BPE (OpenAI GPT-2, Hugging Face GPT2Tokenizer, tiktoken "gpt2").
//
// Reads any of the three file layouts that carry the same vocabulary:
//   BpeTokenizer::from_vocab_merges("gpt2/vocab.json", "gpt2/merges.txt");      // Hugging Face
//   BpeTokenizer::from_vocab_merges("gpt2/encoder.json", "gpt2/vocab.bpe");     // OpenAI's names, same format
//   BpeTokenizer::from_tokenizer_json("gpt2/tokenizer.json");                   // Hugging Face tokenizers
//
//   auto tok = vocablens::BpeTokenizer::from_vocab_merges(dir + "/vocab.json", dir + "/merges.txt");
//   tok->encode("Hello world!");   // [15496, 995, 0]
//
// Algorithm (= OpenAI's encoder.py): the text is split into pre-tokens by GPT-2's regular expression
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// run by PCRE2 (UTF + UCP + JIT, Unicode tables of the PCRE2 library; \s is the Unicode White_Space
// property, as in tiktoken's Rust regex and Python's `regex`), then each pre-token's bytes are merged pair
// by pair, lowest merges.txt rank first (leftmost on ties). Results are cached per pre-token.
// Bytes that are not valid UTF-8 cannot be matched by the expression; each maximal run of them becomes a
// pre-token of its own, so any byte string round-trips through encode/decode.
// A tokenizer.json may name its own pre-tokenizer expression (Split + ByteLevel, as Llama 3 does); it is
// used instead, with \s / \S read as White_Space like the Rust regex crate does.
#pragma once
#include <memory>
#include <string>

#include "vocablens/tokenizer.hpp"

namespace vocablens {

namespace detail {
struct BpeModel;
}

class BpeTokenizer final : public Tokenizer {
 public:
  /// vocab.json (or encoder.json): {"token in GPT-2's byte-to-unicode spelling": id, ...};
  /// merges.txt (or vocab.bpe): optional "#version" line, then one "left right" pair per line, rank = order.
  /// "<|endoftext|>" (if in the vocabulary) is the special token, BOS and EOS.
  /// Throws FormatError naming the offending file (missing, not JSON, unknown token in a merge, ...).
  static std::unique_ptr<BpeTokenizer> from_vocab_merges(const std::string& vocab_json, const std::string& merges_txt);

  /// Hugging Face tokenizer.json with model.type "BPE" and a ByteLevel pre-tokenizer (optionally after a
  /// Split with its own expression). added_tokens become special tokens. Throws FormatError for a missing
  /// or malformed file and for features this reader does not implement (normalizers, other models).
  static std::unique_ptr<BpeTokenizer> from_tokenizer_json(const std::string& path);

  explicit BpeTokenizer(std::shared_ptr<const detail::BpeModel> model);
  ~BpeTokenizer() override;

  std::string kind() const override { return "gpt2-bpe"; }
  std::string source() const override;
  int64_t vocab_size() const override;
  int64_t bos_id() const override;
  int64_t eos_id() const override;
  std::string token_bytes(int64_t id) const override;
  std::string piece(int64_t id) const override;
  std::string display(int64_t id) const override;
  std::optional<int64_t> token_to_id(std::string_view token) const override;
  bool is_special(int64_t id) const override;

  /// The pre-tokenizer's split of `text` (byte ranges as strings), for tests and explanations.
  std::vector<std::string> pretokenize(std::string_view text) const;

 protected:
  std::vector<int64_t> do_encode(std::string_view text, const EncodeOptions& opts) const override;
  std::string do_decode(const int64_t* ids, size_t n) const override;

 private:
  std::shared_ptr<const detail::BpeModel> m_;
};

}  // namespace vocablens
