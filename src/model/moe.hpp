// model/moe.hpp (internal) — the MLP step of a mixture-of-experts block (ModelConfig::n_experts > 0), called by
// the block recipe in forward.cpp.
//
//   at::Tensor y = detail::moe_mlp(cfg, L, h, l, hk, record);   // h [B, n, d_model] normalised -> [B, n, d_model]
//
// Router logits h @ W_router, a softmax over every expert, the top n_experts_used (renormalised when the family
// does); each expert runs on the rows routed to it only (gathered, one GEMM per matrix, written to their (token,
// slot) rows, then summed with the weights), never on every token. Hook points router_logits, expert_indices,
// expert_weights and expert_out (each chosen expert's unweighted output [B, n, k, d_model]) run on [B, n, ...]; an
// edit of the logits changes the choice, an edit of the indices, weights or outputs what is added. `record` (may
// be empty) receives the four after their hooks.
#pragma once
#include <ATen/ATen.h>

#include <functional>

#include "model/hook_table.hpp"
#include "vocablens/model.hpp"

namespace vocablens::detail {

using MoeRecord = std::function<void(const char* point, const at::Tensor& t)>;

at::Tensor moe_mlp(const ModelConfig& cfg, const LayerWeights& L, const at::Tensor& h, int64_t l,
                   const hook_detail::HookTable* hk, const MoeRecord& record);

}  // namespace vocablens::detail
