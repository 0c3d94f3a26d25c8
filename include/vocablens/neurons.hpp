// vocablens/neurons.hpp — MLP neurons read in vocabulary space (Geva et al. 2022; Dar et al., ACL 2023).
//
// Neuron n of layer l (weights in "x @ W" orientation):
//   key    k_n = W_in[:, n]    [d]  read from the residual stream  -> scores k_n R   (R = read projection)
//   gate   g_n = W_gate[:, n]  [d]  (gated MLPs: Llama's gate_proj / llama2.c w1) -> g_n R
//   value  v_n = W_out[n, :]   [d]  written to the residual stream -> scores v_n W_U
// (pinv: Dar's k E'ᵀ and v E; transpose: their approximation k E.) Each list is the exact top-k tokens by
// score (ties: smaller id first), computed by topk_rows() without forming d_mlp × V; with each vector's norm.
//
//   vocablens::NeuronsOptions o;
//   o.layer = 2; o.neurons = {0, 17, 300}; o.top_k = 30;
//   auto a = vocablens::analyze_neurons(model, o, tok.get());
//   a.neurons[0].value_top[0].j;    // best token id of neuron 0's value vector
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vocablens/options.hpp"  // parse_index_list
#include "vocablens/result.hpp"
#include "vocablens/token_filter.hpp"
#include "vocablens/linalg/topk_stream.hpp"
#include "vocablens/unembed.hpp"

namespace vocablens {

class Model;
class Tokenizer;

struct NeuronsOptions {
  int64_t layer = 0;
  std::vector<int64_t> neurons;  ///< empty = every neuron of the layer
  int64_t top_k = 30;
  InverseKind inverse = InverseKind::Pinv;
  PinvOptions pinv;
  TokenFilter filter;
  bool keys = true;
  bool values = true;
  bool gates = true;    ///< ignored (no lists) when the MLP is not gated
  bool bottom = false;  ///< also the k lowest-scoring tokens of each vector
  /// Called as the work advances with (vectors done, vectors in total); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct NeuronProjection {
  int64_t neuron = 0;
  double key_norm = 0, gate_norm = 0, value_norm = 0;            ///< gate_norm 0 when not gated
  std::vector<TopkEntry> key_top, gate_top, value_top;           ///< TopkEntry.j = token id, .value = score
  std::vector<TopkEntry> key_bottom, gate_bottom, value_bottom;  ///< (bottom) lowest scores, lowest first
};

struct NeuronsAnalysis {
  NeuronsOptions options;
  bool gated = false;
  int64_t d_mlp = 0, vocab_size = 0;
  std::vector<NeuronProjection> neurons;
  /// kind "neurons": table "top_k" (layer, neuron, vector, direction, rank, token_id, token, score),
  /// table "norms", arrays of ids / scores [N, k] per vector and norms.
  Result to_result(const Tokenizer* tok) const;
};

/// Throws UsageError on an out-of-range layer or neuron, or when alpha_only lacks a tokenizer.
NeuronsAnalysis analyze_neurons(const Model& m, const NeuronsOptions& o, const Tokenizer* tok = nullptr);

}  // namespace vocablens
