// vocablens/neighbours.hpp — cosine neighbourhoods in embedding space: the nearest tokens to a token, a
// word, or an arithmetic expression of them, and the exact k-NN graph of the whole vocabulary.
//
//   auto tok = vocablens::load_tokenizer_for(path);
//   vocablens::Model m = vocablens::load_model(path);
//   at::Tensor X = vocablens::space_vectors(m, vocablens::VectorSpace::Embedding);     // [V, d]
//   vocablens::NeighbourOptions o;  o.k = 10;
//   auto nb = vocablens::neighbours(X, tok.get(), " king - man + woman", o);
//   auto g = vocablens::knn_graph(X, {});          // g.indices [V, 10], g.scores [V, 10]
//
// Score. Every neighbour list reports, and is ordered by, the cosine computed in float64 from the float32
// rows: cos(a, b) = (Σ aₖbₖ) / (‖a‖‖b‖), products and sums in double (0 when either row is zero; the
// sums use a fixed order of four interleaved accumulators, so scores are reproducible bit for bit).
// Order: cosine descending, ties by token id ascending. The row itself is never its own neighbour.
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
// Expressions (neighbours()): terms joined by + and − (an operator must start the expression or follow
// whitespace or a closing quote, so "king-man" is one word), each optionally weighted "0.5*king" or
// "0.5 * king". A term is
//   #123          the token with id 123;
//   "New York"    quoted text (single or double quotes), for spaces or a leading/trailing '+'/'-';
//   word          any other text.
// Text is first looked up as one token (its bytes, or the display form "␣king"); if it is not a single
// token it is encoded and its pieces are composed: sum (Σ pieces), mean (Σ/p), or weighted (each piece
// weighted by its byte length / the word's byte length). With normalise_terms (default) every piece
// vector is unit-normalised first (3CosAdd); the query is Σ weightₜ · termₜ.
//
// E⁺-space: the rows of (E⁺)ᵀ (the pseudo-inverse's columns, one d-vector per token), E⁺ from
// vocablens/unembed.hpp (float64 eigendecomposition of EᵀE, singular values ≤ 1e-6 σ_max dropped; the
// model's E = W_Uᵀ is cached on disk).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

class Model;
class Tokenizer;

enum class VectorSpace { Embedding, PseudoInverse };
const char* to_string(VectorSpace s);                 ///< "E", "E+"
/// "E", "embedding", "E+", "pinv", "pseudo-inverse"; throws UsageError otherwise.
VectorSpace vector_space_from_string(const std::string& s);

enum class Compose { Sum, Mean, Weighted };
const char* to_string(Compose c);                     ///< "sum", "mean", "weighted"
Compose compose_from_string(const std::string& s);    ///< throws UsageError on anything else

/// Rows of (E⁺)ᵀ for E [V, d], V >= d: [V, d] float32 (vocablens::pseudo_inverse, no cache).
at::Tensor pseudo_inverse_rows(const at::Tensor& E);

/// The vocabulary's vectors: model_matrix(m, matrix) (W_E or W_U, rows = tokens) or its pseudo-inverse
/// rows (embedding_pinv(m), cached, for W_U and for a tied W_E). [V, d] float32, contiguous.
at::Tensor space_vectors(const Model& m, VectorSpace space, const std::string& matrix = "W_E");

/// Cosine in float64 between two float32 vectors of length d (0 if either is zero).
double cosine64(const float* a, const float* b, int64_t d);

// ---- single queries ----------------------------------------------------------------------------------

struct ExprTerm {
  double weight = 1.0;
  std::string text;       ///< the word as written (quotes removed); empty for an id term
  int64_t id = -1;        ///< >= 0 for "#123"
};

/// Parses "king - man + woman", "0.5*#464 + 'New York'". Throws UsageError naming the problem.
std::vector<ExprTerm> parse_expression(const std::string& expr);

struct NeighbourOptions {
  int64_t k = 20;
  Compose compose = Compose::Mean;
  bool normalise_terms = true;   ///< unit-normalise each piece before composing (3CosAdd)
  bool exclude_inputs = true;    ///< drop every token of the query from the list
  bool prefix_space = false;     ///< look words up as " word" (GPT-2's word-initial tokens)
};

struct ResolvedTerm {
  ExprTerm term;
  std::vector<int64_t> pieces;         ///< token ids
  std::vector<double> piece_weights;   ///< composition weights (before the term weight)
  bool single_token = false;
};

struct Neighbour {
  int64_t id = -1;
  double cosine = 0;
};

struct NeighbourResult {
  std::string query;
  std::string matrix = "W_E";
  std::string space = "E";
  NeighbourOptions options;
  std::vector<ResolvedTerm> terms;
  std::vector<int64_t> excluded;       ///< ids left out of the list
  std::vector<double> query_vector;    ///< [d]
  std::vector<Neighbour> neighbours;   ///< k best, cosine descending, ties id ascending

  /// kind "neighbours": summary (query, terms with their pieces, neighbours with token strings), table
  /// "neighbours" (rank, token_id, token, cosine), array query_vector.
  Result to_result(const Tokenizer* tok) const;
};

/// The k rows of X [V, d] closest in cosine to q [d] (float64), ids in `exclude` left out.
std::vector<Neighbour> nearest_to_vector(const at::Tensor& X, const std::vector<double>& q, int64_t k,
                                         const std::vector<int64_t>& exclude = {});

/// Resolves an expression's terms to token pieces (tok may be null when every term is "#id").
std::vector<ResolvedTerm> resolve_terms(const std::vector<ExprTerm>& terms, const Tokenizer* tok, int64_t vocab,
                                        const NeighbourOptions& opts);

/// Neighbours of a token / word / expression in X (rows = the tokenizer's ids). A query that is a single
/// token with positive weight scores exactly like the k-NN graph (cosine64 of the two rows).
NeighbourResult neighbours(const at::Tensor& X, const Tokenizer* tok, const std::string& expr,
                           const NeighbourOptions& opts = {});

// ---- k-NN graph --------------------------------------------------------------------------------------

struct KnnOptions {
  int64_t k = 10;
  int64_t block = 2048;     ///< rows per GEMM block
  int64_t slack = 0;        ///< extra float32 candidates kept per row; 0 = k + 16
};

struct KnnGraph {
  std::string matrix = "W_E";
  std::string space = "E";
  int64_t n = 0, k = 0, dim = 0;
  std::vector<int64_t> rows;       ///< query rows (all of 0..n-1 for knn_graph)
  std::vector<int64_t> indices;    ///< [rows.size(), k]
  std::vector<double> scores;      ///< [rows.size(), k] float64 cosines
  double margin = 0;               ///< 2δ used for the candidate window
  int64_t rescored = 0;            ///< candidates re-scored in float64
  int64_t fallback_rows = 0;       ///< rows recomputed over all V
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

/// Exact k-NN graph of all rows of X [n, d] (self excluded). k is clamped to n − 1.
KnnGraph knn_graph(const at::Tensor& X, const KnnOptions& opts = {});

/// Exact k nearest rows of X for the given query rows (each excluding itself), by the same kernel
/// (without the symmetry): for checking against brute force, or a few rows of a big vocabulary.
KnnGraph knn_query(const at::Tensor& X, const std::vector<int64_t>& rows, const KnnOptions& opts = {});

}  // namespace vocablens
