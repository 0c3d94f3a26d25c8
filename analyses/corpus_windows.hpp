// The windows a corpus is read in by the corpus analyses (lens --corpus, tuned-lens eval, sae corpus): private to
// the library. One cut for all of them, so that their numbers count the same positions.
//
// The file is read in chunks (for_each_corpus_chunk, vocablens/text_inputs.hpp), each encoded on its own (BOS
// only before the first), and the tokens are cut into windows of `window` tokens overlapping by one token (the
// last token of a window is the first of the next, so every token but the very first is predicted once); at the
// end of the file the last, shorter window; none shorter than 2 tokens. With max_tokens > 0 reading stops once
// that many positions are predicted (the last window cut to fit).
//
//   CorpusWindowCut cut{tok, path, chunk_bytes, W, opts.max_tokens, m.config().vocab_size};
//   CorpusWindowCount c = for_each_corpus_window(cut, total_bytes, opts.progress, [&](const std::vector<int64_t>& ids) {
//     ...   // ids: 2 .. W tokens; positions 0 .. ids.size()-2 are predicted
//   });
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vocablens {

class Tokenizer;

struct CorpusWindowCut {
  const Tokenizer& tok;
  const std::string& path;
  size_t chunk_bytes = 1 << 20;
  int64_t window = 0;      ///< tokens per window, >= 2
  int64_t max_tokens = 0;  ///< predicted positions at the most; 0 = the whole file
  int64_t vocab_size = 0;  ///< the model's: an id outside [0, vocab_size) is a UsageError
};

struct CorpusWindowCount {
  int64_t tokens = 0;     ///< tokens encoded (read), including those after the last window when max_tokens stopped it
  int64_t predicted = 0;  ///< positions predicted: the sum of (window length - 1)
  int64_t windows = 0;
};

/// Calls fn(ids) for each window in order, then progress (when set): (tokens predicted so far, their total) —
/// the total is max_tokens with a token budget, else estimated from the tokens per byte read so far (exact once
/// the whole file has been read), and never below the count done. Throws UsageError when the tokenizer produces an id the
/// model does not have, and what for_each_corpus_chunk or fn throw.
CorpusWindowCount for_each_corpus_window(const CorpusWindowCut& cut, uint64_t total_bytes,
                                         const std::function<void(uint64_t, uint64_t)>& progress,
                                         const std::function<void(const std::vector<int64_t>& ids)>& fn);

}  // namespace vocablens
