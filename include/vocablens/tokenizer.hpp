// vocablens/tokenizer.hpp — the one tokenizer interface every analysis and the CLI use.
//
// Two families sit behind it (see bpe_tokenizer.hpp and llama2c_tokenizer.hpp):
//  - GPT-2 byte-level BPE (vocab.json + merges.txt, Hugging Face tokenizer.json, or OpenAI's
//    encoder.json + vocab.bpe), byte-exact with OpenAI's encoder.py / tiktoken "gpt2";
//  - the llama2.c / SentencePiece-style vocabulary (tokenizer.bin, tok512.bin), id-exact with
//    llama2.c run.c's encode().
// Tokens are bytes, not text: token_bytes() may be a fragment of a UTF-8 character. display() is the
// form for tables and reports (always valid UTF-8, spaces and newlines visible).
//
//   auto tok = vocablens::load_tokenizer_for("fixtures/gpt2-tiny");      // picks the files itself
//   std::vector<int64_t> ids = tok->encode("The Eiffel Tower");          // [464, 412, 733, 417, 8765]
//   std::string text = tok->decode(ids);                                 // "The Eiffel Tower"
//   tok->display(ids[1]);                                                // "␣E"
//   int64_t paris = tok->require_token_id(" Paris");                     // 6342, or UsageError
//   vocablens::EncodeOptions opt;
//   opt.special_tokens = true;
//   tok->encode("a<|endoftext|>", opt);                                  // [64, 50256]
//
// Thread safety: all const member functions may be called concurrently on one Tokenizer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vocablens {

/// How encode() treats the text's edges and special-token strings.
struct EncodeOptions {
  /// Prepend bos_id(). Unset: the tokenizer's own convention (llama2.c: yes, as run.c does; GPT-2: no;
  /// tokenizer.json: tokenizer_config.json's add_bos_token, else its post-processor; SentencePiece: yes).
  std::optional<bool> add_bos;
  /// Append eos_id() (ignored when the tokenizer has none). Unset: the tokenizer's convention (mostly no).
  std::optional<bool> add_eos;
  /// Recognise special-token strings such as "<|endoftext|>" in the text and emit their ids (like
  /// tiktoken's allowed_special="all"). Off by default: the text is then ordinary characters (like
  /// tiktoken's encode_ordinary and OpenAI's encoder.py). No effect for llama2.c vocabularies.
  bool special_tokens = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// "gpt2-bpe" or "llama2c".
  virtual std::string kind() const = 0;
  /// The file(s) this tokenizer was read from, for provenance ("dir/vocab.json + dir/merges.txt").
  virtual std::string source() const = 0;
  /// Ids are in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  /// Beginning/end-of-sequence ids, or -1 when the vocabulary has none. GPT-2: both are <|endoftext|>.
  virtual int64_t bos_id() const = 0;
  virtual int64_t eos_id() const = 0;

  /// Text (any bytes; invalid UTF-8 and NUL included) -> ids. Empty text -> [] (plus BOS/EOS if asked).
  /// Never throws for any input bytes, except UsageError if the vocabulary cannot represent a byte
  /// (llama2.c vocabulary without that <0xXX> piece).
  std::vector<int64_t> encode(std::string_view text, const EncodeOptions& opts = {}) const { return do_encode(text, opts); }

  /// Ids -> the bytes of the text. GPT-2: concatenation of token_bytes (so encode/decode round-trips any
  /// bytes exactly). llama2.c: like run.c's decode(): BOS/EOS emit nothing, the piece right after BOS loses
  /// one leading space, <0xXX> pieces emit their byte. Throws UsageError for an id outside [0, vocab_size()).
  std::string decode(const std::vector<int64_t>& ids) const { return do_decode(ids.data(), ids.size()); }
  std::string decode(const int64_t* ids, size_t n) const { return do_decode(ids, n); }

  /// The bytes token `id` stands for, out of context (llama2.c: <0x0A> -> "\n", BOS/EOS -> "").
  /// An id inside the range that the vocabulary leaves unused gives "". Throws UsageError for an id
  /// outside [0, vocab_size()).
  virtual std::string token_bytes(int64_t id) const = 0;

  /// The vocabulary's own spelling of token `id`: GPT-2 the vocab.json key ("ĠParis"), llama2.c the
  /// stored piece (" Paris", "<0x0A>", "\n<s>\n"); "" for an unused id. Throws UsageError for an id
  /// outside [0, vocab_size()).
  virtual std::string piece(int64_t id) const = 0;

  /// A one-line, valid UTF-8 form of token `id` for tables and reports: see display_text(). Special
  /// tokens show their name ("<|endoftext|>", "<s>"). Never throws: an id out of range gives "<id N?>"
  /// (models may have more output rows than the tokenizer has tokens, e.g. a padded vocabulary).
  virtual std::string display(int64_t id) const;

  /// The id of a single token given as its bytes (" Paris"), or nullopt when no token is exactly that.
  /// The display form ("␣Paris", "⏎", "<0x0A>") is accepted too when the bytes are not a token.
  virtual std::optional<int64_t> token_to_id(std::string_view token) const = 0;

  /// Like token_to_id but throws UsageError naming the token and how it would be encoded instead.
  int64_t require_token_id(std::string_view token) const;

  /// True for control tokens (BOS/EOS/<unk>, GPT-2's <|endoftext|>, added special tokens).
  virtual bool is_special(int64_t id) const = 0;

 protected:
  virtual std::vector<int64_t> do_encode(std::string_view text, const EncodeOptions& opts) const = 0;
  virtual std::string do_decode(const int64_t* ids, size_t n) const = 0;
};

/// Bytes -> a one-line, valid UTF-8 display form: every space is "␣", newline "⏎", tab "⇥"; other
/// control bytes (C0, DEL) and bytes that are not part of a valid UTF-8 character are "<0xXX>"; C1
/// controls (U+0080..U+009F) are "<U+0085>", and so are code points that print blank or nothing (no-break
/// and other spaces U+00A0, U+2000..U+200A, U+3000; zero-width and direction marks U+200B..U+200F,
/// U+2028..U+202F, U+2060..U+206F; soft hyphen; BOM; variation selectors): "<U+200A>". Everything else is
/// copied. Example: " Paris\n" -> "␣Paris⏎".
std::string display_text(std::string_view bytes);

/// Inverse of display_text() for the escapes it produces (␣ ⏎ ⇥ <0xXX> <U+XXXX>); other text is copied.
std::string undisplay_text(std::string_view shown);

/// Reads a tokenizer from a file or directory given explicitly:
///  - a directory: the same search as load_tokenizer_for();
///  - tokenizer.json (Hugging Face, byte-level BPE);
///  - vocab.json or merges.txt (the other file of the pair must be beside it), likewise encoder.json /
///    vocab.bpe (OpenAI's names);
///  - a GGUF file: its tokenizer.ggml.* vocabulary (vocablens/vocab_spec.hpp; needs the vocablens library);
///  - any other file: a llama2.c tokenizer (tokenizer.bin, tok512.bin, ...).
/// Throws FormatError naming the file when it is missing, unreadable or malformed.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

/// Finds and reads the tokenizer for a model. model_path is what load_model() takes (HF directory,
/// llama2.c .bin, ckpt.pt) or a tokenizer file itself (tokenizer.json, vocab.json, tok512.bin, ...).
/// If explicit_tokenizer is non-empty it is used instead of searching (see load_tokenizer()).
/// A GGUF model uses its own tokenizer.ggml.* vocabulary when it has one.
/// Search, in the model's directory (the path itself, or the directory holding the file):
///   tokenizer.json; vocab.json + merges.txt; encoder.json + vocab.bpe; tokenizer.bin; tok*.bin.
/// When several llama2.c vocabularies are there, the one whose size matches the model's vocab_size
/// (llama2.c header or config.json) wins. Throws FormatError(model_path, ...) when nothing is found.
std::unique_ptr<Tokenizer> load_tokenizer_for(const std::string& model_path, const std::string& explicit_tokenizer = "");

}  // namespace vocablens
