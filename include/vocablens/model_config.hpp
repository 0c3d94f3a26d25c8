// vocablens/model_config.hpp — what a checkpoint says about its architecture (plain data, no LibTorch).
//
// One struct describes every family; the runner reads only these fields, never the family name, so a GPT-2
// with RoPE or a Llama with LayerNorm (e.g. a model trained by `vocablens train`) runs too. The families'
// tensor names and fixed facts are in vocablens/arch.hpp; the block-recipe fields below default to a plain
// GPT-2 / Llama block and say how a family departs from it.
//
//   auto cfg = vocablens::read_hf_config("gpt2/config.json");
//   fmt::print("{} layers, d_model {}\n", cfg.n_layers, cfg.d_model);
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vocablens {

enum class NormKind { LayerNorm, RMSNorm };
/// How positions enter the model. Learned/Sinusoidal are added to the embedding; Rotary rotates q and k
/// (Hugging Face rotate_half convention inside the runner); ALiBi biases attention scores; None: nothing.
enum class PositionKind { Learned, Sinusoidal, Rotary, ALiBi, None };
enum class Activation { GeluNew, Gelu, Relu, SiLU };

struct ModelConfig {
  std::string architecture;  ///< "GPT2LMHeadModel", "LlamaForCausalLM", "llama2.c", ...
  /// The name of its entry in the architecture table (vocablens/arch.hpp: "gpt2", "llama", "qwen3", ...): the
  /// family is identified, never switched on; `architecture(family)` gives its entry.
  std::string family = "gpt2";
  int64_t n_layers = 0;
  int64_t d_model = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;  ///< == n_heads unless grouped-query attention
  int64_t d_head = 0;
  int64_t d_mlp = 0;
  int64_t vocab_size = 0;
  int64_t n_ctx = 0;  ///< longest sequence the model accepts
  NormKind norm = NormKind::LayerNorm;
  double norm_eps = 1e-5;
  PositionKind positions = PositionKind::Learned;
  double rope_theta = 10000.0;
  /// Rotary convention: false = Hugging Face rotate_half (pairs (i, i + d_head/2)); true = llama2.c /
  /// Meta interleaved pairs (2i, 2i+1). Checkpoints keep their own q/k row order; the runner follows it.
  bool rope_interleaved = false;
  Activation activation = Activation::GeluNew;
  bool gated_mlp = false;     ///< SwiGLU-style: act(x W_gate) * (x W_in)
  bool attn_bias = true;      ///< q/k/v projections carry biases
  bool attn_out_bias = true;  ///< the attention output projection carries a bias (Qwen2: q/k/v yes, o no)
  bool mlp_bias = true;
  bool tied_embeddings = true;
  int64_t bos_token_id = -1;  ///< -1 when unknown
  int64_t eos_token_id = -1;
  std::string weight_dtype = "F32";  ///< dtype as stored on disk ("F32", "F16", "BF16")
  /// Segment (token-type) embeddings W_seg summed with token and position embeddings; 0 = none. Set by
  /// the loader from config.json "vocablens_segments" (models of `vocablens train --segments`).
  int64_t n_segments = 0;

  // ---- block recipe: how a block departs from pre-norm, sequential, plain-softmax attention ----
  bool parallel_residual = false;  ///< x + attn(ln1(x)) + mlp(ln2(x)) (GPT-NeoX use_parallel_residual)
  bool norm_before = true;         ///< false: post-LN, x = ln1(x + attn(x)); x = ln2(x + mlp(x)) (OPT-350m)
  bool final_norm = true;          ///< false: no final norm (OPT with do_layer_norm_before = false)
  /// Gemma's RMSNorm scales by (1 + w). The loader adds this offset to the stored norm weights once, so the
  /// runner, final_norm() and analyses see the effective scale; the field records that it happened.
  double norm_weight_offset = 0.0;
  bool qk_norm = false;       ///< per-head RMSNorm on q and k before rotary (Qwen3), eps = norm_eps
  bool qk_norm_full = false;  ///< with qk_norm: one RMSNorm over all heads of q (and of k) at once (OLMo 2)
  /// false: attention and MLP read the stream itself, no norm before them (OLMo 2: its norms are the post-norms)
  bool input_norms = true;
  bool post_attn_norm = false;  ///< norm of the attention output before the residual add (Gemma-2)
  bool post_mlp_norm = false;   ///< norm of the MLP output before the residual add (Gemma-2)
  double embed_scale = 1.0;     ///< token embeddings are multiplied by this (Gemma: sqrt(d_model))
  bool embed_norm = false;      ///< the token embeddings are normalised before the first block (BLOOM)
  double attn_scale = 0.0;      ///< attention score multiplier; 0 = 1/sqrt(d_head) (Gemma-2: query_pre_attn_scalar^-1/2)
  double attn_softcap = 0.0;    ///< scores = c * tanh(scores / c) before the mask; 0 = none (Gemma-2)
  double final_softcap = 0.0;   ///< logits = c * tanh(logits / c), inside Model::unembed; 0 = none (Gemma-2)
  int64_t sliding_window = 0;   ///< a query sees keys at distance < window; 0 = full causal attention
  /// 0: every layer uses sliding_window; p > 1: layer l slides unless l % p == p - 1 (Gemma-2: 2, Gemma 3: 6).
  int64_t sliding_pattern = 0;
  /// Per layer, true where it slides (config.json layer_types); when not empty it decides, not sliding_pattern.
  std::vector<bool> sliding_layers;
  /// Rotary base of the sliding-window layers, which are never rope-scaled (Gemma 3 rope_local_base_freq);
  /// 0: every layer uses rope_theta and the scaling.
  double rope_theta_local = 0.0;
  /// Per layer, false where it has no rotary at all (SmolLM3 no_rope_layers); empty: every layer rotates.
  std::vector<bool> rotary_layers;
  // ---- mixture of experts: the MLP step routes each token to n_experts_used of n_experts gated MLPs ----
  /// 0: a dense MLP. Otherwise every layer's MLP is a mixture: router logits x W_router [n_experts], softmax over
  /// all experts, the top n_experts_used kept (renormalised to sum 1 when expert_weights_norm), each chosen
  /// expert a gated MLP of width d_expert run on its tokens only; a dense MLP of width d_mlp beside them, when
  /// the layer has one, is the shared expert (Qwen2-MoE), scaled by sigmoid(x W_shared_gate) when that is given.
  int64_t n_experts = 0;
  int64_t n_experts_used = 0;        ///< top-k: experts per token
  int64_t d_expert = 0;              ///< each routed expert's width
  bool expert_weights_norm = false;  ///< the top-k softmax weights renormalised to sum 1 (Mixtral, Qwen3-MoE)
  bool shared_expert = false;        ///< a dense MLP (width d_mlp) beside the experts on every token (Qwen2-MoE)
  int64_t position_offset = 0;       ///< learned table rows before position 0 (OPT: 2); the loader drops them
  int64_t d_embed = 0;               ///< OPT word_embed_proj_dim when != d_model (project_in/out folded into W_E/W_U)
  int64_t rotary_dim = 0;            ///< features rotated per head (partial rotary, GPT-NeoX rotary_pct); 0 = d_head
  enum class RopeScaling { None, Linear, Llama3, Yarn };
  RopeScaling rope_scaling = RopeScaling::None;
  double rope_factor = 1.0;                                        ///< linear and llama3: positions (frequencies) divided by this
  double rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;  ///< llama3
  int64_t rope_original_context = 8192;                            ///< llama3 / yarn original_max_position_embeddings
  /// YaRN (rope_type "yarn", as llama.cpp's ggml_rope_yarn_corr_dims / rope_yarn): frequency pair i keeps its
  /// own frequency below the correction range [lo, hi] of beta_fast / beta_slow rotations within the original
  /// context, is divided by rope_factor above it, blended linearly inside; lo and hi floored / ceiled unless
  /// rope_yarn_truncate is false (Hugging Face's truncate: false).
  double rope_yarn_beta_fast = 32.0, rope_yarn_beta_slow = 1.0;
  bool rope_yarn_truncate = true;
  /// cos and sin of every rotary layer multiplied by this (YaRN's attention factor, 0.1 ln(factor) + 1 unless
  /// rope_scaling gives attention_factor); 1 otherwise.
  double rope_attention_factor = 1.0;
  /// A learned logit per head (LayerWeights::sinks) joins each query's softmax denominator with no value: the
  /// pattern's rows sum to less than 1 (GPT-OSS).
  bool attn_sinks = false;
  /// The router's top k taken from its logits and the softmax over those k alone (GPT-OSS); else the softmax
  /// over every expert, then the top k (renormalised when expert_weights_norm).
  bool expert_weights_topk_softmax = false;
  /// Gated MLPs' clamped SwiGLU (GPT-OSS): gate clamped to at most glu_limit, up to [-glu_limit, glu_limit],
  /// act = gate * sigmoid(glu_alpha * gate) * (up + glu_up_offset). glu_limit 0: the plain act(gate) * up.
  double glu_limit = 0.0, glu_alpha = 1.0, glu_up_offset = 0.0;
};

/// The attention window of `layer` (0 = full causal attention), from sliding_window and sliding_layers or
/// sliding_pattern.
int64_t attention_window(const ModelConfig& c, int64_t layer);
/// Whether `layer` rotates q and k with the local table (rope_theta_local): a sliding layer of a model that has one.
bool local_rotary(const ModelConfig& c, int64_t layer);
/// Whether `layer` rotates q and k at all (rotary positions, and not a no-rotary layer of rotary_layers).
bool rotary_layer(const ModelConfig& c, int64_t layer);

/// Reads a Hugging Face config.json (every architecture of vocablens/arch.hpp, by architectures[0] or model_type, and the
/// vocablens extension fields "vocablens_positions" etc. written by `vocablens train`).
/// Throws FormatError(path, ...) on unreadable or malformed JSON, unknown architecture, or missing or
/// inconsistent sizes (e.g. n_embd not divisible by n_head).
ModelConfig read_hf_config(const std::string& path);

/// Parses config.json text; `path` is only used in error messages.
ModelConfig parse_hf_config(const std::string& json_text, const std::string& path);

const char* to_string(NormKind n);
const char* to_string(PositionKind p);
const char* to_string(Activation a);
/// Inverse of to_string(PositionKind); throws UsageError on an unknown name.
PositionKind position_kind_from_string(const std::string& s);

}  // namespace vocablens
