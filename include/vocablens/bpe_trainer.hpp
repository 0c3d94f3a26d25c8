// vocablens/bpe_trainer.hpp — trains a small GPT-2-style byte-level BPE vocabulary and writes it as
// vocab.json + merges.txt, which vocablens's own tokenizer (bpe_tokenizer.hpp) and Hugging Face's
// GPT2Tokenizer read unchanged.
//
// Algorithm (Sennrich et al. 2016 on bytes, as GPT-2 / HF ByteLevel BPE): the text is split into
// pre-tokens by GPT-2's regular expression (the same PCRE2 pre-tokenizer the reader uses), pre-tokens are
// counted, and starting from the 256 single bytes the most frequent adjacent pair (weighted by pre-token
// counts; ties: the pair of lower ids) is merged, repeatedly, until the vocabulary has vocab_size tokens
// (256 bytes + merges + "<|endoftext|>") or no pair occurs min_frequency times. Every merge is applied to
// all pre-tokens left to right, which is exactly what the encoder does with the merges in rank order, so
// encoding the training text reproduces the training segmentation.
//
// Ids: byte b is id b; merge r (0-based rank) creates id 256 + r (a merge whose result is already a token
// — two merges spelling the same bytes — adds no id); "<|endoftext|>" comes last. vocab.json spells
// tokens in GPT-2's byte-to-unicode alphabet ("Ġparis" for " paris"); merges.txt starts with
// "#version: 0.2".
//
//   vocablens::BpeTrainerOptions o;  o.vocab_size = 600;
//   vocablens::BpeVocabulary v = vocablens::train_bpe(text, o);
//   v.write("out/model");                                   // out/model/vocab.json + merges.txt
//   auto tok = vocablens::load_tokenizer("out/model");       // encodes text with the learned merges
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vocablens {

struct BpeTrainerOptions {
  /// Total vocabulary size including the 256 byte tokens and "<|endoftext|>" (>= 257).
  int64_t vocab_size = 1024;
  /// A pair is merged only if it occurs at least this many times (>= 1).
  int64_t min_frequency = 2;
  bool add_endoftext = true;
};

struct BpeVocabulary {
  std::vector<std::string> tokens;                          ///< id -> the token's bytes
  std::vector<std::pair<std::string, std::string>> merges;  ///< by rank: (left bytes, right bytes)
  int64_t endoftext_id = -1;                                ///< id of "<|endoftext|>", -1 if none
  int64_t pretokens = 0;                                    ///< pre-tokens counted (with repetition)
  int64_t distinct_pretokens = 0;

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  /// vocab.json text: {"<GPT-2 spelling>": id, ...} in id order.
  std::string vocab_json() const;
  /// merges.txt text: "#version: 0.2" then one "left right" line per merge (GPT-2 spelling).
  std::string merges_txt() const;
  /// Writes dir/vocab.json and dir/merges.txt atomically (dir is created if needed).
  void write(const std::string& dir) const;
  /// The token ids of one pre-token's bytes under the learned merges (for tests; the tokenizer read from
  /// the written files gives the same).
  std::vector<int64_t> segment(std::string_view pretoken) const;
};

/// GPT-2's pre-tokenization of `text` (the pieces, in order; they cover the text exactly).
std::vector<std::string> gpt2_pretokenize(std::string_view text);

/// Trains on text. Throws UsageError on bad options.
BpeVocabulary train_bpe(std::string_view text, const BpeTrainerOptions& opts = {});

/// Trains on pre-token counts (pre-token bytes -> count), e.g. gathered over a large file in chunks.
BpeVocabulary train_bpe_counts(const std::map<std::string, int64_t>& pretoken_counts, const BpeTrainerOptions& opts = {});

/// Bytes -> GPT-2's byte-to-unicode spelling (" paris" -> "Ġparis").
std::string gpt2_spelling(std::string_view bytes);

}  // namespace vocablens
