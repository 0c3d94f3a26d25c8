// llama2.c checkpoints: the .bin export (legacy version 0 and version 1 float32) and the PyTorch
// training checkpoint ckpt.pt. Internal header: callers use vocablens::load_model().
#pragma once
#include <string>

#include "vocablens/model.hpp"

namespace vocablens {

/// Reads a llama2.c .bin. Version 0 (legacy, what run.c reads): 7 int32 header dim, hidden_dim, n_layers,
/// n_heads, n_kv_heads, vocab_size (negative = untied classifier follows), seq_len, then float32 arrays.
/// Version 1: magic "ak42", version 1, the 7 ints, shared-classifier flag, header padded to 256 bytes.
/// The file size must equal what the header implies. Zero-copy views of a memory mapping.
Model load_llama2c_bin(const std::string& path);

/// Reads llama2.c's ckpt.pt (torch.save of {"model": state_dict, "model_args": {...}, ...}).
Model load_llama2c_ckpt(const std::string& path);

/// ModelConfig for a llama2.c model with the given header values (RMSNorm eps 1e-5, interleaved RoPE,
/// theta 10000, SwiGLU, no biases, BOS 1, EOS 2).
ModelConfig llama2c_config(int64_t dim, int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads, int64_t vocab,
                           int64_t seq_len, bool shared_classifier);

}  // namespace vocablens
