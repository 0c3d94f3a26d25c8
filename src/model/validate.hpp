// src/model/validate.hpp — checks every loader runs after mapping a checkpoint, kept apart from
// the loaders so that they stay one call each:
//   check_all_tensors_used   every tensor of the checkpoint is used by the model or reported
//   check_store_finite       every used weight is finite (names the tensor and element)
//   check_config_values      config numbers that would make the forward NaN (src/core/config_checks.hpp)
#pragma once
#include <string>

#include "core/config_checks.hpp"
#include "vocablens/model_config.hpp"
#include "vocablens/tensor_store.hpp"

namespace vocablens::detail {

/// Throws FormatError(st.source, ...) when `st` holds tensors the loader never read (TensorStore::used),
/// other than known buffers (GPT-2 attn.bias / attn.masked_bias causal masks, rotary inv_freq). Layer
/// tensors beyond the config's layer count get their own message ("holds layers 0..2, <cfg> says 2").
/// Only names starting with `only_prefix` are considered (llama2.c ckpt.pt: "model.").
void check_all_tensors_used(const TensorStore& st, const ModelConfig& c, const std::string& cfg_path,
                            const std::string& only_prefix = "");

/// "; it holds the llama2.c checkpoint 'x.bin': pass that file" when `dir` holds .bin / ckpt.pt files that
/// load_model reads as single files (a llama2.c folder), else "".
std::string checkpoints_hint(const std::string& dir);

/// check_weight_finite (model/nonfinite.hpp) on every tensor of `st` that the loader used.
void check_store_finite(const TensorStore& st);

}  // namespace vocablens::detail
