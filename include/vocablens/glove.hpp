// vocablens/glove.hpp — GloVe (Pennington, Socher & Manning 2014): global co-occurrence counts and the
// weighted least-squares fit of their logarithm, as `vocablens train --model glove` runs it.
//
// Counts. Within each line (a line is a document, as in the reference: the window never crosses a newline;
// the newline token itself is never counted), every pair of tokens at distance 1 <= d <= window adds 1/d to
// X[a][b] AND to X[b][a] (symmetric context; a token paired with itself adds 2/d to X[a][a]). Sums run in
// corpus order in double precision, the order of Stanford's `cooccur`, so the counts are identical to its
// cooccurrence.bin on the same token sequence (tests/glove_test.cpp against tests/glove_reference/).
//
// Fit. J = Σ_{X_ij > 0} f(X_ij) (w_i·w̃_j + b_i + b̃_j − log X_ij)², f(x) = min(1, (x / x_max)^α), by
// AdaGrad over the nonzero entries in one fixed random order (shuffled once), one entry at a time, as the
// reference `glove` does with one thread: vector steps η·g / sqrt(1 + Σ(η·g)²) with each gradient
// component clipped to ±100, bias steps g / sqrt(1 + Σg²) (the reference applies η to the vectors only).
// Initial values U(−0.5/d, 0.5/d) for vectors and biases (std::mt19937_64 seeded with the seed). The cost
// of an epoch is the reference's: mean over the nonzero entries of ½ f(X)(…)², each taken just before
// that entry's update.
//
// Output (train()): config.json "VocablensGloVe" / model_type "vocablens-glove"; embeddings.safetensors
// with "embeddings" = W + W̃ [V, d] (the vectors GloVe publishes), "word_vectors" W, "context_embeddings"
// W̃, "bias" b, "context_bias" b̃; embeddings.npy = W + W̃; cooccurrence.npz-free: the counts are not
// written (recomputed in seconds). Every geometry analysis reads the directory (load_embedding_matrix:
// W_E = W + W̃, W_U = W̃).
//
//   vocablens::GloveCounts X = vocablens::glove_cooccurrence(stream, vocab, 10);
//   X.entries.size();                         // nonzero (i, j) pairs, sorted by (i, j)
//   vocablens::GloveParams P = vocablens::glove_init(vocab, 50, /*seed=*/1);
//   vocablens::GloveFit fit(X, opts);  for (int e = 0; e < 25; ++e) cost = fit.epoch(P);
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "vocablens/train.hpp"

namespace vocablens {

/// One nonzero co-occurrence X[row][col] (ids of the tokenizer).
struct GloveEntry {
  int32_t row = 0, col = 0;
  double x = 0;
};

struct GloveCounts {
  int64_t vocab = 0;
  int64_t window = 0;
  int64_t tokens = 0;               ///< content tokens counted (newline tokens excluded)
  int64_t distinct = 0;             ///< distinct token ids that occur
  std::vector<GloveEntry> entries;  ///< sorted by (row, col)
};

/// Co-occurrence counts of the content tokens of `s` (see above). Throws UsageError when window < 1.
GloveCounts glove_cooccurrence(const TokenStream& s, int64_t vocab, int64_t window, bool distance_weighting = true);

/// The fitted parameters, row-major [V, d] vectors and [V] biases, double precision.
struct GloveParams {
  int64_t vocab = 0, dim = 0;
  std::vector<double> w, wc;             ///< word and context vectors
  std::vector<double> b, bc;             ///< word and context biases
  std::vector<double> gw, gwc, gb, gbc;  ///< AdaGrad sums of squared (step) gradients, initialised to 1
};

/// Initial parameters (see above).
GloveParams glove_init(int64_t vocab, int64_t dim, uint64_t seed);

struct GloveFitOptions {
  double x_max = 100.0;
  double alpha = 0.75;
  double eta = 0.05;
  double grad_clip = 100.0;  ///< per-component clip of the vector gradients
  uint64_t seed = 1;         ///< the one shuffle of the entries
};

/// AdaGrad epochs over the nonzero counts (kept by reference: they must outlive the fit).
class GloveFit {
 public:
  GloveFit(const GloveCounts& counts, const GloveFitOptions& o);
  /// One pass over every nonzero entry; returns the epoch's cost (mean of ½ f(X)(…)² before each update).
  double epoch(GloveParams& p) const;
  /// The objective J / nnz at `p` (the same mean of ½ f(X)(…)², nothing updated).
  double cost(const GloveParams& p) const;

 private:
  const GloveCounts& c_;
  GloveFitOptions o_;
  std::vector<uint32_t> order_;
  std::vector<double> weight_, logx_;
};

}  // namespace vocablens
