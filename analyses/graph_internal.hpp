// analyses/graph_internal.hpp — what the attribution graph's files share inside the library (not installed):
// the float32 view of a weight, the point a set of transcoders reads, what the replacement model freezes
// (graph_forward.cpp) and the transcoder reader (graph_transcoders.cpp), for the engine (graph.cpp).
//
//   at::Tensor x = graph_engine::transcoder_input(model, l, resid_mid, tcs.input());   // [T, d] -> [T, d]
//   auto tcs = graph_engine::load_graph_transcoders(dir, model, /*keep_for_next=*/true);  // an estimate's read
//   graph_engine::Frozen fz = graph_engine::record_forward(model, ids, *tcs, /*zero_first=*/true);
//
// Shapes: resid_mid [T, d_model] of block l; the result is what the set's encoders read at that block.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vocablens/graph.hpp"

namespace vocablens {
namespace graph_engine {

/// A weight as float32 (a view when stored so); undefined stays undefined.
at::Tensor f32(const at::Tensor& t);
/// What a transcoder of layer l reads, from resid_mid [T, d]: ln2 with or without its weight and bias, or
/// resid_mid itself.
at::Tensor transcoder_input(const Model& m, int64_t l, const at::Tensor& mid, GraphInput in);
/// load_graph_transcoders; with keep_for_next, the set read is also kept for the next call on the same
/// folder (the estimate's, for its run), handed over once while no file of it changed.
std::unique_ptr<GraphTranscoders> load_graph_transcoders(const std::string& dir, const Model& model, bool keep_for_next);
/// Which read of a folder `tcs` is (the same number for the estimate's set and the run it was handed to);
/// 0 for transcoders not read by load_graph_transcoders (they never match).
uint64_t transcoders_serial(const GraphTranscoders& tcs);

/// What the local replacement model freezes, from one forward pass of the real model.
struct Frozen {
  int64_t T = 0, L = 0, d = 0;
  std::vector<at::Tensor> s1, s2;   ///< [T, 1] norm denominators of ln1 and ln2 per layer
  std::vector<at::Tensor> s_attn;   ///< [T, 1] the post-attention norm's per layer (empty: no such norm)
  at::Tensor sf;                    ///< [T, 1] the final norm's (undefined: no final norm)
  std::vector<at::Tensor> pattern;  ///< [H, T, T] per layer
  std::vector<at::Tensor> errors;   ///< [T, d] per layer (position 0 zeroed when asked)
  at::Tensor tokens;                ///< [T, d] embedding rows × scale
  at::Tensor last_logits;           ///< [V]
  // the active features, sorted by (layer, position, feature)
  at::Tensor active;                 ///< [A, 3] int64
  at::Tensor acts;                   ///< [A]
  std::vector<int64_t> layer_start;  ///< [L + 1] offsets of each layer's features in `active`
};

/// Throws UsageError naming the model when its blocks are not ones the replacement model covers.
void check_block_supported(const Model& m);
/// The forward pass of ids [T] recorded and frozen; the transcoders encoded layer by layer (each layer's
/// pages given back after), their active features listed (position 0 left out when zero_first).
Frozen record_forward(const Model& m, const at::Tensor& ids, const GraphTranscoders& tcs, bool zero_first);
/// The frozen forward the estimate (graph_active_counts) kept for exactly this model, prompt and read of the
/// transcoders, handed over once; null otherwise.
std::shared_ptr<const Frozen> take_forward(const Model& m, const at::Tensor& ids, const GraphTranscoders& tcs, bool zero_first);

}  // namespace graph_engine
}  // namespace vocablens
