// src/model/forward_replay.hpp — how a forward pass is recorded into, and replayed from, a ForwardRecord
// (vocablens/forward_memo.hpp): building blocks of src/model/forward.cpp, not a public interface.
//
// A separate file from forward.cpp because it is a concept of its own: the pass itself never depends on it
// (it only adds hooks to record, or returns a finished ForwardOutput instead of running), while the memo's
// LRU and thread scope (forward_memo.cpp) know nothing of hook points. Recording is a set of hooks added
// after the pass's own; replaying runs those same hook points on the recorded tensors in forward order.
//
//   HookList with_recorders = caller_hooks;             // forward.cpp, a pass that will be kept
//   forward_memo_detail::add_recorders(cfg, rec.get(), with_recorders);
//   if (auto out = forward_memo_detail::replay_forward(cfg, w, *found, spec, logits, hooks)) return *out;
//
// Shapes: a record holds, for every layer l, z.l [1, T, H, d_head] and resid_mid.l, mlp_out.l, resid_post.l
// [1, T, d_model], plus resid_pre.0 and final_norm [1, T, d_model] (resid_pre.l of a later block is
// resid_post.(l-1), the same tensor in the pass).
#pragma once
#include <ATen/ATen.h>

#include <optional>

#include "vocablens/forward_memo.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"

namespace vocablens {
namespace forward_memo_detail {

/// Adds to `hooks`, after those already there, one hook per recorded point that keeps in `rec` the tensor
/// the rest of the pass goes on with. `rec` must outlive the pass.
void add_recorders(const ModelConfig& cfg, ForwardRecord* rec, HookList& hooks);

/// The pass, from a record: its hooks run on the recorded tensors in forward order (each hook point copies
/// before its callbacks, so the record is never written), its cache is filled with copies, its logits
/// computed from the recorded final_norm. Empty when the pass asks for something a record does not hold
/// (attn_out, pattern, the norms' points or mlp_in, a hook on another point, a record missing a point): the
/// caller then runs the pass.
std::optional<ForwardOutput> replay_forward(const ModelConfig& cfg, const ModelWeights& w, const ForwardRecord& rec,
                                            const CacheSpec& spec, bool compute_logits, const HookList* hooks);

}  // namespace forward_memo_detail
}  // namespace vocablens
