// vocablens/neighbours.hpp — cosine neighbourhoods in embedding space: the nearest tokens to a token, a
// word, or an arithmetic expression of them (the exact k-NN graph of the whole vocabulary: knn.hpp).
//
//   auto tok = vocablens::load_tokenizer_for(path);
//   vocablens::Model m = vocablens::load_model(path);
//   at::Tensor X = vocablens::space_vectors(m, vocablens::VectorSpace::Embedding);     // [V, d]
//   vocablens::NeighbourOptions o;  o.k = 10;
//   auto nb = vocablens::neighbours(X, tok.get(), " king - man + woman", o);
//
// Score. Every neighbour list reports, and is ordered by, the cosine computed in float64 from the float32
// rows: cos(a, b) = (Σ aₖbₖ) / (‖a‖‖b‖), products and sums in double (0 when either row is zero; the
// sums use a fixed order of four interleaved accumulators, so scores are reproducible bit for bit).
// Order: cosine descending, ties by token id ascending. The row itself is never its own neighbour.
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
#include "vocablens/tensor_fwd.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/linalg/cosine.hpp"
#include "vocablens/result.hpp"

namespace vocablens {

class Model;
class Tokenizer;

enum class VectorSpace { Embedding, PseudoInverse };
const char* to_string(VectorSpace s);  ///< "E", "E+"
/// "E", "embedding", "E+", "pinv", "pseudo-inverse"; throws UsageError otherwise.
VectorSpace vector_space_from_string(const std::string& s);

enum class Compose { Sum, Mean, Weighted };
const char* to_string(Compose c);                   ///< "sum", "mean", "weighted"
Compose compose_from_string(const std::string& s);  ///< throws UsageError on anything else

/// Rows of (E⁺)ᵀ for E [V, d], V >= d: [V, d] float32 (vocablens::pseudo_inverse, no cache).
at::Tensor pseudo_inverse_rows(const at::Tensor& E);

/// The vocabulary's vectors: model_matrix(m, matrix) (W_E or W_U, rows = tokens) or its pseudo-inverse
/// rows (embedding_pinv(m), cached, for W_U and for a tied W_E). [V, d] float32, contiguous.
at::Tensor space_vectors(const Model& m, VectorSpace space, const std::string& matrix = "W_E");

// ---- single queries ----------------------------------------------------------------------------------

struct ExprTerm {
  double weight = 1.0;
  std::string text;  ///< the word as written (quotes removed); empty for an id term
  int64_t id = -1;   ///< >= 0 for "#123"
};

/// Parses "king - man + woman", "0.5*#464 + 'New York'". Throws UsageError naming the problem.
std::vector<ExprTerm> parse_expression(const std::string& expr);

struct NeighbourOptions {
  int64_t k = 20;
  Compose compose = Compose::Mean;
  bool normalise_terms = true;  ///< unit-normalise each piece before composing (3CosAdd)
  bool exclude_inputs = true;   ///< drop every token of the query from the list
  bool prefix_space = false;    ///< look words up as " word" (GPT-2's word-initial tokens)
};

struct ResolvedTerm {
  ExprTerm term;
  std::vector<int64_t> pieces;        ///< token ids
  std::vector<double> piece_weights;  ///< composition weights (before the term weight)
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
  std::vector<int64_t> excluded;      ///< ids left out of the list
  std::vector<double> query_vector;   ///< [d]
  std::vector<Neighbour> neighbours;  ///< k best, cosine descending, ties id ascending

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
NeighbourResult neighbours(const at::Tensor& X, const Tokenizer* tok, const std::string& expr, const NeighbourOptions& opts = {});

}  // namespace vocablens
