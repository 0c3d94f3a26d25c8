// GGUF -> Model: llama.cpp's tensor names and hyper-parameter keys mapped onto ModelConfig / ModelWeights.
// Internal header: callers use vocablens::load_model(), which detects the GGUF magic.
#pragma once
#include <string>

#include "vocablens/gguf.hpp"
#include "vocablens/model.hpp"

namespace vocablens {

/// Loads a GGUF model of any family in the architecture table that llama.cpp converts (gpt2, llama, qwen2,
/// qwen3, gemma, gemma2, phi3, gptneox; vocablens/arch.hpp). Matrices stay in their stored type:
/// F32/F16/BF16 as views of the mapping, quantized types packed (vocablens/weight.hpp); vectors (norms,
/// biases) become float32. Throws FormatError naming the file on a missing or mis-shaped tensor, a
/// block count that disagrees with the tensors, or an unsupported architecture / rope variant (YaRN,
/// LongRoPE, rope_freqs not of the Llama-3.1 form).
Model load_gguf_model(const std::string& path);
Model load_gguf_model(const GgufFile& g);

/// ModelConfig from a GGUF's metadata and tensor shapes (no weights touched).
ModelConfig gguf_model_config(const GgufFile& g);

}  // namespace vocablens
