// The position encodings of the forward pass (src/model/forward.cpp): rotary tables and rotation, the
// sinusoidal table, ALiBi slopes. Internal to the model layer; rotary_inv_freq is public (vocablens/model.hpp).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "vocablens/model_config.hpp"

namespace vocablens::detail {

/// cos/sin tables [T, rotary_dim / 2] of positions 0 .. T - 1; angles in double, stored as float.
std::pair<at::Tensor, at::Tensor> rotary_tables(const ModelConfig& cfg, int64_t T, const at::Device& dev);
/// x [B, H, T, d_head] rotated by the tables' rows (one per position of x); the features past
/// 2 * cos.size(-1) pass unchanged (partial rotary). `interleaved`: pairs (2i, 2i+1), else (i, i + d_head/2).
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved);
/// Sinusoidal position table [T, d] (Vaswani et al.): sin on even features, cos on odd ones.
at::Tensor sinusoidal_table(int64_t T, int64_t d);
/// ALiBi head slopes (Press et al.) for n heads.
std::vector<double> alibi_slopes(int64_t n);

}  // namespace vocablens::detail
