// src/model/hook_table.hpp — the hooks of one forward pass resolved to (point, layer) slots, and per-head
// outputs: building blocks of src/model/forward.cpp and hooks.cpp, not a public interface.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "vocablens/hooks.hpp"

namespace vocablens {
namespace hook_detail {

/// The hooks of one forward pass, resolved to (point, layer) slots.
class HookTable {
 public:
  HookTable(const HookList& hooks, const ModelConfig& cfg);
  bool has(HookPoint p, int64_t layer) const { return !slot(p, layer).empty(); }
  /// Runs the hooks of (p, layer) on t (copied first); checks that they kept t's shape.
  void apply(HookPoint p, int64_t layer, at::Tensor& t) const;

 private:
  const std::vector<const HookFn*>& slot(HookPoint p, int64_t layer) const {
    return slots_[static_cast<size_t>(static_cast<int>(p) * (n_layers_ + 1) + layer + 1)];
  }
  int64_t n_layers_ = 0;
  std::vector<std::vector<const HookFn*>> slots_;
};

/// Per-head outputs [B, T, H, d_model] of z [B, T, H, d_head] through w_o [H*d_head, d_model].
at::Tensor head_results(const at::Tensor& z, const at::Tensor& w_o);

}  // namespace hook_detail
}  // namespace vocablens
