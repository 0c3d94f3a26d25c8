// vocablens/wordpiece_trainer.hpp — trains a BERT-style WordPiece vocabulary (vocab.txt) on a text, beside the
// byte-level BPE trainer (bpe_trainer.hpp); `vocablens train --tokenizer-algo wordpiece` uses it.
//
// Algorithm (WordPiece as Schuster & Nakajima 2012 / BERT train it, in the form Hugging Face documents):
// the text is normalised and split into words exactly as the WordPiece tokenizer does (wordpiece_tokenizer.hpp:
// BERT's clean-up, CJK spacing, lower-casing and accent stripping per the config, whitespace/punctuation
// split); words are counted. Each word starts as its characters, the first plain and the others with the
// "##" prefix ("paris" -> p ##a ##r ##i ##s); the vocabulary starts as [PAD] [UNK] [CLS] [SEP] [MASK] and every
// such unit (sorted). Then, repeatedly, the adjacent pair (a, b) with the highest score
//     count(ab) / (count(a) · count(b))          (counts weighted by word frequency)
// among pairs seen at least min_frequency times is merged (ties: higher count(ab), then the smaller
// spelling), its token a + b-without-## added, until vocab_size tokens or no pair is left. The score prefers
// pairs whose parts rarely occur apart — the likelihood gain of the merge under a unigram model.
// Words longer than max_input_chars_per_word code points are not learned (the tokenizer makes them [UNK]);
// they are counted in skipped_long_words and the trainer's caller reports them in one line.
//
// The result is written as vocab.txt (id = line) + tokenizer_config.json, which WordPieceTokenizer (and
// Hugging Face's BertTokenizer) read. Every word of the training text encodes without [UNK].
//
//   vocablens::WordPieceTrainerOptions o;  o.vocab_size = 800;
//   vocablens::WordPieceVocabulary v = vocablens::train_wordpiece(text, o);
//   v.write("out/model");                     // out/model/vocab.txt + tokenizer_config.json
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vocablens/wordpiece_tokenizer.hpp"

namespace vocablens {

struct WordPieceTrainerOptions {
  int64_t vocab_size = 1024;  ///< total, special tokens and the initial alphabet included
  int64_t min_frequency = 2;  ///< a pair is merged only if it occurs this often (>= 1)
  WordPieceConfig config;     ///< normalisation and the ## prefix (what the written config says)
};

struct WordPieceVocabulary {
  std::vector<std::string> tokens;  ///< id order: specials, alphabet (sorted), merges in order
  WordPieceConfig config;
  int64_t alphabet = 0;  ///< initial units (characters, with and without ##)
  int64_t merges = 0;
  int64_t words = 0;  ///< words counted (with repetition)
  int64_t distinct_words = 0;
  int64_t skipped_long_words = 0;  ///< words longer than max_input_chars_per_word (not learned)
  std::string first_skipped;       ///< the first of them (for the report line)

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  /// Writes dir/vocab.txt and dir/tokenizer_config.json atomically (dir is created if needed).
  void write(const std::string& dir) const;
};

/// Trains on text. Throws UsageError on bad options (vocab_size below the specials + alphabet is allowed:
/// the vocabulary is then specials + alphabet, no merges).
WordPieceVocabulary train_wordpiece(std::string_view text, const WordPieceTrainerOptions& opts = {});

}  // namespace vocablens
