// vocablens/heads.hpp — attention heads read in vocabulary space (Dar et al., ACL 2023, §3; Elhage et al. 2021).
//
// Per head h of layer l (weights in "x @ W" orientation, R = read_projection(model, inverse) [d, V]):
//   OV circuit  W_VO = W_V[h] W_O[h]   [d, d], rank d_head
//               vocabulary form  M_OV = Rᵀ W_VO W_U   [V, V]
//               M_OV[s, t]: attending to a position holding token s raises the logit of token t by this much
//               (pinv: Dar's E' W_VO E; transpose: Dar's approximation Eᵀ W_VO E in their notation)
//   QK circuit  W_QK = W_Q[h] W_K[h]ᵀ  [d, d], rank d_head
//               vocabulary form  M_QK = Rᵀ W_QK R     [V, V]
//               M_QK[q, k]: attention score (before scaling and softmax) of query token q on key token k
// Biases, layer norms and positions are left out (as in the paper). M is never formed: it is kept as the
// factors A = Rᵀ W_V[h] [V, d_head] (or Rᵀ W_Q[h]) and B = W_O[h] W_U [d_head, V] (or W_K[h]ᵀ R), its
// exact top-k entries come from topk_stream(), its spectrum from factored.hpp.
//
//   vocablens::HeadsOptions o;
//   o.layers = {0}; o.heads = {3}; o.kinds = {vocablens::CircuitKind::OV}; o.top_k = 50;
//   auto tok = vocablens::load_tokenizer_for(model.source());
//   vocablens::HeadsAnalysis a = vocablens::analyze_heads(model, o, tok.get());
//   vocablens::Result r = a.to_result(tok.get());            // tables "pairs", "per_token", "circuits"
#pragma once
#include "vocablens/tensor_fwd.hpp"

#include <complex>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vocablens/linalg/factored.hpp"
#include "vocablens/result.hpp"
#include "vocablens/token_filter.hpp"
#include "vocablens/linalg/topk_stream.hpp"
#include "vocablens/unembed.hpp"

namespace vocablens {

class Model;
class Tokenizer;

enum class CircuitKind { OV, QK };
/// "ov" | "qk" (case-insensitive); UsageError otherwise.
CircuitKind parse_circuit_kind(const std::string& s);
const char* to_string(CircuitKind k);

/// The head's model-space circuit W_VO = W_V W_O or W_QK = W_Q W_Kᵀ ([d, d]) as factors.
FactoredMatrix head_weight_circuit(const Model& m, int64_t layer, int64_t head, CircuitKind kind);

/// The head's vocabulary-space circuit (V×V) as factors [V, d_head] · [d_head, V], for the read
/// projection R [d, V] (see unembed.hpp).
FactoredMatrix head_vocab_circuit(const Model& m, const at::Tensor& R, int64_t layer, int64_t head, CircuitKind kind);

struct HeadsOptions {
  std::vector<int64_t> layers;  ///< empty = every layer
  std::vector<int64_t> heads;   ///< empty = every head
  std::vector<CircuitKind> kinds = {CircuitKind::OV, CircuitKind::QK};
  int64_t top_k = 50;  ///< (token, token) pairs per circuit
  InverseKind inverse = InverseKind::Pinv;
  PinvOptions pinv;
  TokenFilter filter;                  ///< applies to both sides of every pair
  bool drop_same_token = false;        ///< drop (t, t)
  bool drop_same_normalized = false;   ///< drop pairs equal up to leading spaces and case (needs a tokenizer)
  std::vector<int64_t> source_tokens;  ///< per-token lists: best targets (OV) / keys (QK) of these
  int64_t per_token_k = 0;             ///< length of those lists (0 = top_k)
  bool spectra = true;                 ///< singular values, eigenvalues, copying scores
  bool prune = true;                   ///< norm-bound pruning in the stream (exact either way)
  /// Called after each circuit with (circuits done, circuits in total); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct HeadCircuit {
  int64_t layer = 0, head = 0;
  CircuitKind kind = CircuitKind::OV;
  std::vector<TopkEntry> top;                     ///< i = source (OV) / query (QK) token, j = target / key token
  std::vector<std::vector<TopkEntry>> per_token;  ///< one list per HeadsOptions::source_tokens entry
  std::vector<double> singular_values;            ///< of the vocabulary-space circuit (d_head values)
  std::vector<std::complex<double>> eigenvalues;  ///< of the vocabulary-space circuit
  double copying_score = 0;                       ///< Σλ/Σ|λ| of the vocabulary-space circuit
  std::vector<double> weight_singular_values;     ///< of W_VO / W_QK (d_head values)
  std::vector<std::complex<double>> weight_eigenvalues;
  double weight_copying_score = 0;  ///< Σλ/Σ|λ| of W_VO / W_QK
  TopkStreamStats stats;
};

struct HeadsAnalysis {
  HeadsOptions options;
  int64_t vocab_size = 0, d_model = 0, d_head = 0;
  int64_t allowed_tokens = 0;         ///< tokens left by the filter (vocab_size when none)
  int64_t pinv_rank = -1;             ///< rank of E (pinv only)
  uint64_t embedding_hash = 0;        ///< hash of E (pinv only)
  std::vector<HeadCircuit> circuits;  ///< in (layer, head, kind) order
  /// kind "heads": tables "pairs", "per_token" (when asked), "circuits"; arrays of ids, values, spectra.
  Result to_result(const Tokenizer* tok) const;
};

/// The largest top_k analyze_heads accepts (besides top_k <= V^2): 2^26 pairs, ~1.6 GB per circuit.
constexpr int64_t kMaxHeadsTopK = int64_t{1} << 26;

/// Runs the analysis. `tok` is needed for alpha_only / drop_same_normalized (UsageError without it) and
/// is otherwise optional. Throws UsageError on out-of-range layers, heads or tokens, and on a top_k above
/// V^2 or kMaxHeadsTopK (per_token_k above V), before anything is allocated.
HeadsAnalysis analyze_heads(const Model& m, const HeadsOptions& o, const Tokenizer* tok = nullptr);

}  // namespace vocablens
