// vocablens/sentencepiece_tokenizer.hpp — SentencePiece models (tokenizer.model of Llama-2, Mistral, Gemma,
// Phi-3), encoded by Debian's libsentencepiece itself (not a re-implementation).
//
//   auto tok = vocablens::SentencePieceTokenizer::load("Llama-2-7b/tokenizer.model");
//   tok->encode("Hello world");        // [1, 15043, 3186]   (BOS first, as transformers' LlamaTokenizer does)
//   tok->decode({1, 15043, 3186});     // "Hello world"
//   tok->display(15043);               // "␣Hello"   piece(15043) == "▁Hello"
//
// BOS/EOS: the model's own bos/eos ids; encode() adds BOS by default when the model has one, unless
// tokenizer_config.json beside the file says otherwise (add_bos_token / add_eos_token).
// EncodeOptions::special_tokens: control pieces ("<s>", "</s>", "<start_of_turn>", ...) written in the text
// become their ids (the text between them is encoded piece by piece, each with the model's dummy prefix,
// as llama.cpp does); user-defined pieces are always matched (SentencePiece itself does that).
// token_bytes(): "▁" is a space, "<0xNN>" byte pieces their byte, control and unknown pieces "".
// decode() = SentencePiece's DecodeIds (control pieces vanish, the dummy-prefix space is removed).
// Thread safety: encode/decode may run concurrently (SentencePieceProcessor's Encode/Decode are const).
#pragma once
#include <memory>
#include <string>

#include "vocablens/tokenizer.hpp"

namespace vocablens {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  /// Reads a SentencePiece model file (a serialized ModelProto). Throws FormatError(path, ...) when it is
  /// missing, unreadable or not a model libsentencepiece accepts (its message is included).
  static std::unique_ptr<SentencePieceTokenizer> load(const std::string& path);

  /// From the bytes of a serialized ModelProto (for vocabularies held in memory, e.g. built from GGUF
  /// metadata). `source` names it in messages. add_bos/add_eos: the defaults of encode().
  static std::unique_ptr<SentencePieceTokenizer> from_serialized(const std::string& proto, const std::string& source,
                                                                 bool add_bos, bool add_eos, int64_t bos_id = -2,
                                                                 int64_t eos_id = -2);

  ~SentencePieceTokenizer() override;

  std::string kind() const override { return "sentencepiece"; }
  std::string source() const override;
  int64_t vocab_size() const override;
  int64_t bos_id() const override;
  int64_t eos_id() const override;
  std::string token_bytes(int64_t id) const override;
  std::string piece(int64_t id) const override;
  std::string display(int64_t id) const override;
  std::optional<int64_t> token_to_id(std::string_view token) const override;
  bool is_special(int64_t id) const override;
  /// The piece's score (BPE: merge priority, higher first).
  float score(int64_t id) const;

  struct Impl;

 protected:
  std::vector<int64_t> do_encode(std::string_view text, const EncodeOptions& opts) const override;
  std::string do_decode(const int64_t* ids, size_t n) const override;

 private:
  explicit SentencePieceTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> p_;
};

}  // namespace vocablens
