// src/model/attention_blocks.hpp — blocked causal attention that hands each query block's output to the
// caller instead of filling a [B, T, H, d_head] z: a building block of src/model/forward.cpp (the streamed
// block, which sends each block of z through the output projection at once), not a public interface.
//
// Same loop, same arithmetic and the same shapes as vocablens::blocked_causal_attention
// (vocablens/attention.hpp); q may be any strided [B, H, T, d_head] view (each query block is copied into
// the GEMM's layout as it is read), k and v [B, H_kv, T, d_head].
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>

#include "vocablens/attention.hpp"

namespace vocablens {
namespace detail {

/// Called once per query block, in order of position: `q0` its first position, `z` its output
/// [B, rows, H, d_head] (a view of a scratch buffer, valid during the call only). Once the call for a
/// block has returned, the loop never reads that block's rows of q again (the caller may overwrite them).
using AttentionBlockSink = std::function<void(int64_t q0, const at::Tensor& z)>;

/// Blocked causal attention of q over k, v (vocablens/attention.hpp), each query block's output given to
/// `sink` instead of being gathered. Throws UsageError on shapes that do not fit together.
void blocked_causal_attention_each(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionSpec& s,
                                   const AttentionBlockSink& sink);

}  // namespace detail
}  // namespace vocablens
