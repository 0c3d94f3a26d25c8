// vocablens/lens_corpus.hpp — the logit lens over a whole text file: per-layer cross-entropy, bits per byte,
// KL to the final layer, entropy and top-1 accuracy, streamed window by window (`lens --corpus`).
//
// The corpus is read in chunks and tokenised; windows of the model's context overlap by one token, so
// every token after the first is predicted exactly once. Memory is bounded by chunk and window, not by
// the file. The per-position statistics are those of vocablens/lens.hpp, averaged over positions.
//
//   vocablens::CorpusLensOptions o;  o.max_tokens = 100000;
//   auto c = vocablens::logit_lens_corpus(model, *tok, "wiki.txt", o);
//   double bpb = c.bits_per_byte.back();          // [n lens layers], last = the model's own output
//   vocablens::Result r = c.to_result();          // kind "logit_lens_corpus"
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vocablens/lens.hpp"
#include "vocablens/result.hpp"

namespace vocablens {

class Model;
class Tokenizer;

struct CorpusLensOptions {
  LensOptions lens;  ///< top_k and target are ignored (statistics only)
  /// Tokens per window; 0 = the model's context. Windows overlap by one token, so every token after the
  /// first of the corpus is predicted exactly once.
  int64_t window = 0;
  /// Bytes of text read and tokenised at a time (split at a line end or space where possible).
  size_t chunk_bytes = 1 << 20;
  /// Stop after this many predicted tokens (0 = the whole corpus).
  int64_t max_tokens = 0;
  /// Called after each window with (tokens predicted so far, their total): max_tokens when > 0, else the
  /// corpus's estimated from the tokens per byte read so far (exact once the file is read); may be empty.
  std::function<void(uint64_t, uint64_t)> progress;
  /// Under mpirun (vocablens/dist.hpp): window w is run by rank w mod size; every rank tokenises the whole
  /// file and all ranks return the same result, equal bit for bit to the one-process run (per-window sums
  /// reduced in window order). false: this process does all the work whatever the ranks.
  bool distributed = true;
  /// Also the mean KL to the final layer by position within the window (kl_by_position, [n, positions]);
  /// under mpirun its sums are reduced by MPI (equal to one process within rounding).
  bool by_position = false;
};

struct CorpusLensResult {
  std::string corpus;             ///< path
  std::vector<LensLayer> layers;  ///< [n]
  int64_t tokens = 0;             ///< tokens read (the first one is context only)
  int64_t predicted = 0;          ///< positions scored (= tokens - 1 when the corpus was read whole)
  int64_t windows = 0;
  uint64_t bytes = 0;  ///< bytes the predicted tokens stand for (for bits per byte)
  uint64_t corpus_bytes = 0;
  int64_t window = 0;
  LensOptions options;
  std::vector<double> mean_cross_entropy;  ///< [n] nats per token
  std::vector<double> bits_per_byte;       ///< [n] total cross-entropy / (ln 2 * bytes)
  std::vector<double> mean_kl_final;       ///< [n] over every scored position
  std::vector<double> mean_entropy;        ///< [n]
  std::vector<double> top1_accuracy;       ///< [n] fraction of positions whose top-1 is the next token
  int64_t positions = 0;                   ///< with by_position: positions per window seen (<= window - 1)
  std::vector<double> kl_by_position;      ///< [n, positions] mean KL(final || layer) at each window position

  /// kind "logit_lens_corpus"; a per-layer table and arrays.
  Result to_result() const;
};

/// Streams a text file through the lens in windows of the model's context. Memory is bounded by the
/// chunk and window sizes, not by the corpus. Throws FormatError when the file cannot be read.
CorpusLensResult logit_lens_corpus(const Model& m, const Tokenizer& tok, const std::string& path,
                                   const CorpusLensOptions& opts = {});

}  // namespace vocablens
