// model/forward_work.hpp (internal) — the multiply-adds of a forward pass, for choosing its thread count.
//
//   const detail::SerialBelow serial(forward_work(cfg, B * T, compute_logits));   // util/parallel.hpp
//
// Counts the products with the blocks' weights (q, k, v, o and the MLP's two or three matrices) per token and,
// when logits are made, the unembedding; the attention's own T x T work is left out (it matters only for long
// inputs, which are far above any threshold anyway).
#pragma once
#include <cstdint>

#include "vocablens/model_config.hpp"

namespace vocablens {

// Rows per weight product where a long input goes through a block by rows (src/model/forward.cpp): the
// q/k/v and W_O products and the MLP run over this many rows at once (a dense MLP's [rows, d_mlp]
// intermediates bound it). Fewer, larger GEMMs: on two threads each of OpenBLAS's threaded GEMMs ends in
// its threads waiting for each other (sched_yield), and every call reads the whole weight again.
// docs/benchmarks.md, "Long context".
constexpr int64_t kRowBlock = 1024;

// The MLP's width a token goes through: a dense MLP's, or its k experts' (and a shared expert's) plus the router.
inline double mlp_width(const ModelConfig& cfg) {
  if (cfg.n_experts == 0) return static_cast<double>(cfg.d_mlp);
  return static_cast<double>(cfg.n_experts_used * cfg.d_expert + (cfg.shared_expert ? cfg.d_mlp : 0)) +
         static_cast<double>(cfg.n_experts) / 3.0;
}

inline double forward_work(const ModelConfig& cfg, int64_t tokens, bool logits) {
  const double d = static_cast<double>(cfg.d_model);
  const double per_layer = d * static_cast<double>((cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.d_head) +
                           static_cast<double>(cfg.n_heads * cfg.d_head) * d + (cfg.gated_mlp ? 3.0 : 2.0) * d * mlp_width(cfg);
  const double per_token =
      static_cast<double>(cfg.n_layers) * per_layer + (logits ? d * static_cast<double>(cfg.vocab_size) : 0.0);
  return per_token * static_cast<double>(tokens);
}

}  // namespace vocablens
