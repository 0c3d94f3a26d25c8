// vocablens/llama2c_tokenizer.hpp — the llama2.c / SentencePiece-style vocabulary (tokenizer.bin, tok512.bin).
//
//   auto tok = vocablens::Llama2cTokenizer::load("stories260K/tok512.bin");
//   tok->encode("Once upon a time");   // [1, 403, 407, 261, 378]   (BOS first, like run.c)
//   tok->decode({1, 403, 407});        // "Once upon"
//
// File format (llama2.c tokenizer.py export): int32 max_token_length, then for every token
// float32 score, int32 length, `length` bytes; little-endian; the vocabulary size is not stored (run.c takes
// it from the model), so every record up to the end of the file is read.
// Ids 0, 1, 2 are <unk>, BOS (<s>) and EOS (</s>); pieces "<0x00>".."<0xFF>" are the byte-fallback tokens.
//
// encode() reproduces llama2.c run.c's encode() (karpathy/llama2.c @ 350e04f): optional BOS; a dummy-prefix
// token " " when the text is not empty; each UTF-8 character (a lead byte plus up to 3 continuation bytes)
// looked up as a piece, else one <0xXX> token per byte; then, repeatedly, the adjacent pair whose
// concatenation is a piece with the highest score is merged (leftmost on ties; BOS takes part like in run.c).
// The merge loop uses a heap, O(n log n), where run.c rescans all pairs, O(n^2); the result is the same.
// Deliberate difference: a NUL byte is encoded (as <0x00>) instead of ending the text as in C.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "vocablens/tokenizer.hpp"

namespace vocablens {

class Llama2cTokenizer final : public Tokenizer {
 public:
  /// Reads a llama2.c tokenizer file. Throws FormatError(path, ...) when it is missing, empty, truncated
  /// or has impossible lengths.
  static std::unique_ptr<Llama2cTokenizer> load(const std::string& path);

  std::string kind() const override { return "llama2c"; }
  std::string source() const override { return path_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  int64_t bos_id() const override { return vocab_size() > 1 ? 1 : -1; }
  int64_t eos_id() const override { return vocab_size() > 2 ? 2 : -1; }
  std::string token_bytes(int64_t id) const override;
  std::string piece(int64_t id) const override;
  std::string display(int64_t id) const override;
  std::optional<int64_t> token_to_id(std::string_view token) const override;
  bool is_special(int64_t id) const override { return id >= 0 && id <= 2 && id < vocab_size(); }

  /// The merge score of token `id` (higher merges first). Throws UsageError when out of range.
  float score(int64_t id) const;
  /// The longest piece in bytes, as stored in the file header.
  int32_t max_token_length() const { return max_token_length_; }

 protected:
  std::vector<int64_t> do_encode(std::string_view text, const EncodeOptions& opts) const override;
  std::string do_decode(const int64_t* ids, size_t n) const override;

 private:
  Llama2cTokenizer() = default;
  void check_id(int64_t id) const;

  std::string path_;
  int32_t max_token_length_ = 0;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int32_t> id_of_;  // piece -> id (first id for a repeated piece)
  std::unordered_map<uint64_t, int32_t> pair_;      // (left, right) -> id of left+right
  std::vector<int32_t> byte_token_;                 // byte -> id of "<0xXX>", -1 if absent
  std::vector<int16_t> byte_of_;                    // id -> byte for "<0xXX>" pieces, else -1
};

}  // namespace vocablens
