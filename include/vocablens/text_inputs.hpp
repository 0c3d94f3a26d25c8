// vocablens/text_inputs.hpp — the two text inputs of the corpus and batch analyses, read without LibTorch (so
// that the readers are fuzzed on their own: tests/fuzz/fuzz_prompts_corpus.cpp).
//
// Prompts file (`lens --prompts FILE`, vocablens/lens_batch.hpp): either plain text (one prompt per line;
// blank lines skipped; a trailing '\r' dropped) or JSON Lines (every non-blank line an object
// {"prompt": "...", "target": " Paris"}; "target" optional, one token as text). A first non-blank line
// starting with '{' makes the whole file JSON Lines. Escapes such as \n are only possible in JSON Lines. The
// file must be a regular file of at most 1 GB (src/util/regular_file.hpp).
//
// Corpus (`lens --corpus`, `tuned-lens eval --corpus`, vocablens/lens_corpus.hpp): streamed in reads of a
// fixed size, each cut where tokenising the pieces apart changes least; the pieces concatenate to the file.
//
//   auto prompts = vocablens::read_lens_prompts("prompts.jsonl");   // prompts[i].line: 1-based, for errors
//   vocablens::for_each_corpus_chunk("heldout.txt", 1 << 20, [&](const std::string& text, uint64_t read, bool last) {
//     auto ids = tok.encode(text);      // ...
//     return true;                      // false: stop reading
//   });
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vocablens {

struct LensPrompt {
  std::string prompt;  ///< never empty
  std::string target;  ///< one token as text; "" = the next token at every position
  int64_t line = 0;    ///< 1-based line in the file (for errors)
};

/// Reads a prompts file (see above). Throws FormatError(path, "line N: ...") on a bad line, an empty file,
/// or an unreadable file (one line each).
std::vector<LensPrompt> read_lens_prompts(const std::string& path);

/// Where to cut `text` so that tokenising the two halves apart changes as little as possible: before a
/// single space between two words (GPT-2's pre-tokenizer then splits there anyway), else after a line end
/// followed by text, else on a UTF-8 character boundary. Searches the second half only; returns text.size()
/// when the whole text should be kept back (no cut found and the text is short).
size_t corpus_split_point(const std::string& text);

/// Reads `path` (a regular file of at most 1 TB, so /dev/zero and FIFOs are refused) in reads of `chunk_bytes`
/// (>= 16, else UsageError). Each call of fn gets the text up to the last cut (the rest is carried into the next
/// call), the bytes read so far, and whether this is the end of the file; fn returns false to stop reading.
/// The texts concatenate to the file exactly; a text may be empty. Throws FormatError(path, ...) when the file
/// cannot be read.
void for_each_corpus_chunk(const std::string& path, size_t chunk_bytes,
                           const std::function<bool(const std::string& text, uint64_t bytes_read, bool last)>& fn);

}  // namespace vocablens
