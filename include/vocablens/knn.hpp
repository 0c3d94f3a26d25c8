// vocablens/knn.hpp — the exact k-nearest-neighbour graph of a vocabulary's vectors by cosine, with its
// hubness statistics (the `knn` command).
//
//   at::Tensor X = vocablens::space_vectors(m, vocablens::VectorSpace::Embedding);     // [V, d] (neighbours.hpp)
//   auto g = vocablens::knn_graph(X, {});          // g.indices [V, 10], g.scores [V, 10]
//   g.compute_statistics();                        // in-degree, mutual fraction, skewness, anti-hubs
//   vocablens::Result r = g.to_result(tok.get());  // kind "knn"
//
// Score and order as in vocablens/neighbours.hpp: float64 cosine of the float32 rows (linalg/cosine.hpp),
// descending, ties by row index ascending; a row is never its own neighbour.
//
// k-NN graph (exact). Rows are normalised once (float32); the candidates come from blocked float32 GEMMs
// over block pairs (I ≤ J: S = U_I U_Jᵀ serves the rows of I and, transposed, the rows of J, so only half
// of the V² products are computed) with a per-row partial selection of the best k + slack candidates.
// A float32 cosine differs from the exact one by at most δ = γ_d(1+u)² + 2u + u² (u = 2⁻²⁴,
// γ_d = d·u/(1 − d·u); Higham Thm 3.1 + rounding of the normalised rows), so every true top-k member has a
// float32 score ≥ T − 2δ, T being the k-th best float32 score of the row. All candidates above T − 2δ are
// re-scored in float64 and the top k taken in the order above; a row whose kept candidates do not reach
// below T − 2δ (more than k + slack near-ties) is recomputed exactly over all V. The result therefore
// equals a float64 brute force, not merely a float32 one.
//
#pragma once
#include "vocablens/tensor_fwd.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

class Tokenizer;

struct KnnOptions {
  int64_t k = 10;
  int64_t block = 2048;  ///< rows per GEMM block
  int64_t slack = 0;     ///< extra float32 candidates kept per row; 0 = k + 16
  /// Called after each block of rows with (rows done, rows in total); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct KnnGraph {
  std::string matrix = "W_E";
  std::string space = "E";
  int64_t n = 0, k = 0, dim = 0;
  std::vector<int64_t> rows;     ///< query rows (all of 0..n-1 for knn_graph)
  std::vector<int64_t> indices;  ///< [rows.size(), k]
  std::vector<double> scores;    ///< [rows.size(), k] float64 cosines
  double margin = 0;             ///< 2δ used for the candidate window
  int64_t rescored = 0;          ///< candidates re-scored in float64
  int64_t fallback_rows = 0;     ///< rows recomputed over all V
  double seconds = 0;

  // Statistics (knn_graph only: every row is a query).
  std::vector<int64_t> in_degree;  ///< [n] how often each row is someone's neighbour (k-occurrence)
  double mutual_fraction = 0;      ///< share of edges i→j with j→i also an edge
  double in_degree_skewness = 0;   ///< hubness
  int64_t anti_hubs = 0;           ///< rows that are nobody's neighbour
  void compute_statistics();

  /// kind "knn": summary (sizes, statistics, the first rows' lists, top hubs), arrays indices [n, k] (int64),
  /// scores [n, k] (float32), in_degree; table "hubs" (top 100 by in-degree) and, with `edges`, table
  /// "edges" (source, source_token, rank, target, target_token, cosine) — V·k rows.
  Result to_result(const Tokenizer* tok, bool edges = false) const;
};

/// Exact k-NN graph of all rows of X [n, d] (self excluded). UsageError when k > n − 1 or when the candidate
/// lists would need more than 8 GB (`knn --k 100000` ran until out of memory).
KnnGraph knn_graph(const at::Tensor& X, const KnnOptions& opts = {});

/// Exact k nearest rows of X for the given query rows (each excluding itself), by the same kernel
/// (without the symmetry): for checking against brute force, or a few rows of a big vocabulary.
KnnGraph knn_query(const at::Tensor& X, const std::vector<int64_t>& rows, const KnnOptions& opts = {});

}  // namespace vocablens
