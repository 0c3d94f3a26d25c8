// GGUF -> Model: llama.cpp's tensor names and hyper-parameter keys mapped onto ModelConfig / ModelWeights.
// Internal header: callers use vocablens::load_model(), which detects the GGUF magic.
#pragma once
#include <string>

#include "vocablens/gguf.hpp"
#include "vocablens/model.hpp"

namespace vocablens {

/// Loads a GGUF model (architectures "gpt2" and "llama" so far). Matrices stay in their stored type:
/// F32/F16/BF16 as views of the mapping, quantized types packed (vocablens/weight.hpp); vectors (norms,
/// biases) become float32. Throws FormatError naming the file on a missing or mis-shaped tensor, a
/// block count that disagrees with the tensors, or an unsupported architecture / rope variant.
Model load_gguf_model(const std::string& path);
Model load_gguf_model(const GgufFile& g);

/// ModelConfig from a GGUF's metadata and tensor shapes (no weights touched).
ModelConfig gguf_model_config(const GgufFile& g);

}  // namespace vocablens
