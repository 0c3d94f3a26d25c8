// src/core/config_checks.hpp — config values that parse but would make the forward pass NaN.
#pragma once
#include <string>

#include "vocablens/model_config.hpp"

namespace vocablens::detail {

/// Throws FormatError(path, ...) when a norm epsilon is negative or not finite, or (rotary positions) when
/// rope_theta is not a finite number > 0. Called by parse_hf_config and the llama2.c ckpt.pt reader.
void check_config_values(const ModelConfig& c, const std::string& path);

/// The activation of a Hugging Face name ("gelu_new", "gelu_pytorch_tanh", "gelu", "relu", "silu", ...); throws
/// FormatError(path, ...) for another. Used for config.json values and the table's fixed GGUF activations.
Activation parse_activation(const std::string& name, const std::string& path);

}  // namespace vocablens::detail
