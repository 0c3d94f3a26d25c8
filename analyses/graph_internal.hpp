// analyses/graph_internal.hpp — what the attribution graph's files share inside the library (not installed):
// the float32 view of a weight and the point a set of transcoders reads, as the engine (graph.cpp) and the
// transcoder reader (graph_transcoders.cpp) both compute it.
//
//   at::Tensor x = graph_engine::transcoder_input(model, l, resid_mid, tcs.input());   // [T, d] -> [T, d]
//   auto tcs = graph_engine::load_graph_transcoders(dir, model, /*keep_for_next=*/true);  // an estimate's read
//
// Shapes: resid_mid [T, d_model] of block l; the result is what the set's encoders read at that block.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>

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

}  // namespace graph_engine
}  // namespace vocablens
