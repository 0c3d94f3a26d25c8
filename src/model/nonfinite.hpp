// src/model/nonfinite.hpp — the scans behind vocablens/nonfinite.hpp (internal).
#pragma once
#include <ATen/ATen.h>

#include <string>

#include "vocablens/nonfinite.hpp"

namespace vocablens::detail {

/// Index (flat, row-major) of the first NaN/±Inf of a floating tensor, or -1. Float32 contiguous tensors
/// are scanned by a bit test on the exponent in parallel chunks; anything else through at::isfinite.
int64_t first_nonfinite(const at::Tensor& t);

/// "[i, j, k]" for a flat index into `t`'s shape.
std::string index_str(const at::Tensor& t, int64_t flat);

/// Checks one weight tensor. On a hit: NonFiniteError (policy Refuse) or a warning line on stderr
/// (policy Warn) "<source>: weight '<name>' holds N non-finite values (first: nan at [i, j])".
/// `layer_axis`: when >= 0, the element's index along that axis is reported as "layer N" too
/// (llama2.c stacks layers in one array).
void check_weight_finite(const at::Tensor& t, const std::string& name, const std::string& source, int layer_axis = -1);

/// Checks an activation x [B, T, ...] recorded at `hook` (e.g. "resid_post.3"); only when grad mode is
/// off. Returns true when finite. On a hit: throws (Refuse) or warns once per process (Warn) and returns
/// false; `context` is appended to the message (e.g. "; the block's input was finite").
bool check_activation_finite(const at::Tensor& x, const std::string& hook, const std::string& context = "");

}  // namespace vocablens::detail
