// vocablens/model_config.hpp — what a checkpoint says about its architecture (plain data, no LibTorch).
//
// One struct describes both families; the runner reads only these fields, never the family name,
// so a GPT-2 with RoPE or a Llama with LayerNorm (e.g. a model trained by `vocablens train`) runs too.
//
//   auto cfg = vocablens::read_hf_config("gpt2/config.json");
//   fmt::print("{} layers, d_model {}\n", cfg.n_layers, cfg.d_model);
#pragma once
#include <cstdint>
#include <string>

namespace vocablens {

enum class Family { GPT2, Llama };
enum class NormKind { LayerNorm, RMSNorm };
/// How positions enter the model. Learned/Sinusoidal are added to the embedding; Rotary rotates q and k
/// (Hugging Face rotate_half convention inside the runner); ALiBi biases attention scores; None: nothing.
enum class PositionKind { Learned, Sinusoidal, Rotary, ALiBi, None };
enum class Activation { GeluNew, Gelu, Relu, SiLU };

struct ModelConfig {
  std::string architecture;   ///< "GPT2LMHeadModel", "LlamaForCausalLM", "llama2.c", ...
  Family family = Family::GPT2;
  int64_t n_layers = 0;
  int64_t d_model = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;     ///< == n_heads unless grouped-query attention
  int64_t d_head = 0;
  int64_t d_mlp = 0;
  int64_t vocab_size = 0;
  int64_t n_ctx = 0;          ///< longest sequence the model accepts
  NormKind norm = NormKind::LayerNorm;
  double norm_eps = 1e-5;
  PositionKind positions = PositionKind::Learned;
  double rope_theta = 10000.0;
  /// Rotary convention: false = Hugging Face rotate_half (pairs (i, i + d_head/2)); true = llama2.c /
  /// Meta interleaved pairs (2i, 2i+1). Checkpoints keep their own q/k row order; the runner follows it.
  bool rope_interleaved = false;
  Activation activation = Activation::GeluNew;
  bool gated_mlp = false;     ///< SwiGLU-style: act(x W_gate) * (x W_in)
  bool attn_bias = true;      ///< q/k/v/o projections carry biases
  bool mlp_bias = true;
  bool tied_embeddings = true;
  int64_t bos_token_id = -1;  ///< -1 when unknown
  int64_t eos_token_id = -1;
  std::string weight_dtype = "F32";  ///< dtype as stored on disk ("F32", "F16", "BF16")
  /// Segment (token-type) embeddings W_seg summed with token and position embeddings; 0 = none. Set by
  /// the loader from config.json "vocablens_segments" (models of `vocablens train --segments`).
  int64_t n_segments = 0;
};

/// Reads a Hugging Face config.json (GPT2LMHeadModel / GPT2Model / LlamaForCausalLM / LlamaModel, and the
/// vocablens extension fields "vocablens_positions" etc. written by `vocablens train`).
/// Throws FormatError(path, ...) on unreadable or malformed JSON, unknown architecture, or missing or
/// inconsistent sizes (e.g. n_embd not divisible by n_head).
ModelConfig read_hf_config(const std::string& path);

/// Parses config.json text; `path` is only used in error messages.
ModelConfig parse_hf_config(const std::string& json_text, const std::string& path);

const char* to_string(Family f);
const char* to_string(NormKind n);
const char* to_string(PositionKind p);
const char* to_string(Activation a);
/// Inverse of to_string(PositionKind); throws UsageError on an unknown name.
PositionKind position_kind_from_string(const std::string& s);

}  // namespace vocablens
