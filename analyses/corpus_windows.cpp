// The corpus analyses' windows (see corpus_windows.hpp).
#include "corpus_windows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "vocablens/error.hpp"
#include "vocablens/text_inputs.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {

CorpusWindowCount for_each_corpus_window(const CorpusWindowCut& cut, uint64_t total_bytes,
                                         const std::function<void(uint64_t, uint64_t)>& progress,
                                         const std::function<void(const std::vector<int64_t>& ids)>& fn) {
  const int64_t W = cut.window;
  CorpusWindowCount c;
  std::vector<int64_t> pending;  // tokens not yet used as the start of a window
  size_t head = 0;               // pending[head] is the first token of the next window
  uint64_t bytes_read = 0;
  bool first_chunk = true, done = false;
  auto budget_left = [&]() -> int64_t {
    return cut.max_tokens > 0 ? cut.max_tokens - c.predicted : std::numeric_limits<int64_t>::max();
  };
  auto run = [&](const std::vector<int64_t>& ids) {
    for (auto id : ids)
      if (id < 0 || id >= cut.vocab_size)
        throw UsageError("the tokenizer produced id " + std::to_string(id) + ", outside the model's vocabulary of " +
                         std::to_string(cut.vocab_size));
    fn(ids);
    c.predicted += static_cast<int64_t>(ids.size()) - 1;
    c.windows += 1;
    // Progress counts predicted tokens, so that a display can show tokens per second. The total: the token budget,
    // else the file's tokens estimated from the tokens per byte read so far (exact once the file is all read:
    // every token but the first is predicted).
    if (progress) {
      int64_t total = cut.max_tokens;
      if (total <= 0) {
        const double per_byte = bytes_read > 0 ? static_cast<double>(c.tokens) / static_cast<double>(bytes_read) : 0.0;
        total = bytes_read >= total_bytes ? c.tokens - 1
                                          : static_cast<int64_t>(std::llround(per_byte * static_cast<double>(total_bytes))) - 1;
      }
      progress(static_cast<uint64_t>(c.predicted), static_cast<uint64_t>(std::max(total, c.predicted)));
    }
  };
  // Runs every full window available; at the end of the input also the last partial one.
  auto drain = [&](bool at_end) {
    while (!done) {
      const int64_t avail = static_cast<int64_t>(pending.size() - head);
      int64_t len = std::min(avail, W);
      if (len < W && !at_end) break;
      if (cut.max_tokens > 0) len = std::min(len, budget_left() + 1);
      if (len < 2) break;
      std::vector<int64_t> ids(pending.begin() + static_cast<std::ptrdiff_t>(head),
                               pending.begin() + static_cast<std::ptrdiff_t>(head + static_cast<size_t>(len)));
      run(ids);
      head += static_cast<size_t>(len - 1);  // windows overlap by one token
      if (budget_left() <= 0) done = true;
    }
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(head));
    head = 0;
  };
  for_each_corpus_chunk(cut.path, cut.chunk_bytes, [&](const std::string& text, uint64_t read, bool eof) {
    bytes_read = read;
    if (!text.empty()) {
      EncodeOptions eo;
      if (!first_chunk) eo.add_bos = false;
      auto ids = cut.tok.encode(text, eo);
      pending.insert(pending.end(), ids.begin(), ids.end());
      c.tokens += static_cast<int64_t>(ids.size());
      first_chunk = false;
    }
    drain(eof);
    return !done;
  });
  return c;
}

}  // namespace vocablens
