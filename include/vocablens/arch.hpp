// vocablens/arch.hpp — the architecture table: every family's tensor names and fixed block recipe, in one place.
//
// Modelled on llama.cpp's llama-arch: one entry per family (Hugging Face `architectures[0]`), listing each
// weight by role with its Hugging Face name AND its llama.cpp GGUF name, and how the stored tensor is laid
// out (fused q|k|v, fused gate|up, Conv1D or nn.Linear orientation). The loaders (HF directories here, GGUF
// files elsewhere) map a checkpoint through this table; the runner reads only ModelConfig; analyses read only
// Model's roles. Each entry also carries its family's recipe (FamilyRecipe: config keys, norm, activation,
// biases, positions, soft-caps, windows, GGUF hyper-parameter keys), so a new family is one entry in
// src/core/arch.cpp (plus its fixture and test rows); no reader switches on the family.
//
//   const vocablens::ArchSpec* a = vocablens::find_architecture("Qwen3ForCausalLM");
//   for (const auto& t : a->tensors)                          // roles of block 3, both namings
//     if (t.per_layer) fmt::print("{} {} {}\n", to_string(t.role), vocablens::tensor_name(t.hf, 3),
//                                 t.gguf ? vocablens::tensor_name(t.gguf, 3) : "-");
//   // -> attn_q model.layers.3.self_attn.q_proj blk.3.attn_q   (".weight" / ".bias" are appended by the caller)
//
// Names are patterns: "{L}" stands for the layer index; no ".weight"/".bias" suffix. Hugging Face names are the
// ones the *ForCausalLM class saves (e.g. "gpt_neox.layers.{L}...", "lm_head"); checkpoints saved from the bare
// base model lack `hf_base_prefix` and are accepted too. Plain data, no LibTorch.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "vocablens/model_config.hpp"

namespace vocablens {

/// What a stored tensor is for. Model-level roles first, then per-block ones (llama.cpp's LLM_TENSOR_*).
enum class TensorRole {
  TokenEmbd,      ///< token embedding W_E (GGUF token_embd)
  TokenEmbdNorm,  ///< norm of the token embeddings before the first block (BLOOM word_embeddings_layernorm)
  PosEmbd,        ///< learned position table W_pos (position_embd)
  OutputNorm,     ///< final norm (output_norm)
  Output,         ///< unembedding / lm_head (output); absent when tied
  ProjectIn,      ///< OPT project_in: word_embed_proj_dim -> d_model (folded into W_E by the loader)
  ProjectOut,     ///< OPT project_out: d_model -> word_embed_proj_dim (folded into W_U by the loader)
  AttnNorm,       ///< norm before attention (attn_norm); after it for post-LN (OPT do_layer_norm_before=false)
  AttnQ,
  AttnK,
  AttnV,
  AttnQKV,  ///< fused q|k|v (attn_qkv)
  AttnOut,  ///< attention output projection (attn_output)
  AttnQNorm,
  AttnKNorm,     ///< norms on q and k: per head (Qwen3) or over the whole projection (OLMo 2)
  AttnPostNorm,  ///< norm on the attention output before the residual add (Gemma-2 post_attention_norm)
  FfnNorm,       ///< norm before the MLP (ffn_norm)
  FfnGate,
  FfnUp,
  FfnDown,
  FfnGateUp,    ///< fused gate|up (Phi-3; llama.cpp keeps it fused as ffn_up of 2 * d_mlp rows)
  FfnPostNorm,  ///< norm on the MLP output before the residual add (Gemma-2 post_ffw_norm)
  // Mixture of experts. HF names carry "{E}" for the expert; GGUF stores each as one 3-D tensor, expert-major.
  FfnGateInp,  ///< the router [n_experts, d_model] (ffn_gate_inp)
  FfnGateExps,
  FfnUpExps,
  FfnDownExps,      ///< each expert's gate, up, down (ffn_gate_exps, ...)
  FfnGateInpShexp,  ///< the shared expert's sigmoid gate [1, d_model] (Qwen2-MoE ffn_gate_inp_shexp)
  AttnSinks,        ///< a learned logit per head in the attention softmax's denominator [n_heads] (GPT-OSS attn_sinks)
};

/// How the stored tensor is laid out (Hugging Face side; GGUF stores every matrix as [out, in] = nn.Linear).
enum class TensorLayout {
  Vector,           ///< [n] norm scale or bias
  Embedding,        ///< [rows, d]: one row per token / position
  Linear,           ///< nn.Linear weight [out, in]; its transpose is the "x @ W" matrix
  Conv1D,           ///< GPT-2 Conv1D [in, out]: already "x @ W"
  FusedQKV,         ///< nn.Linear rows [q: H*dh | k: Hkv*dh | v: Hkv*dh] (Phi-3 qkv_proj)
  FusedQKVConv1D,   ///< Conv1D columns [q | k | v] (GPT-2 c_attn)
  FusedQKVPerHead,  ///< nn.Linear rows grouped per head [h0: q k v | h1: q k v | ...] (GPT-NeoX query_key_value)
  FusedGateUp,      ///< nn.Linear rows [gate: d_mlp | up: d_mlp] (Phi-3 gate_up_proj)
  /// Every expert in one 3-D "x @ W" tensor [E, in, out], named without ".weight"; biases "<name>_bias" [E, out]
  /// (GPT-OSS down_proj). A role of this layout whose name is the gate's too (gate_up_proj [E, d, 2 d_expert]) holds
  /// gate and up in alternate columns: gate column j at 2j, up column j at 2j + 1.
  ExpertsStacked,
  Unsuffixed,  ///< a vector named without ".weight" (GPT-OSS self_attn.sinks)
};

enum class BiasKind { None, Optional, Required };

struct TensorSpec {
  TensorRole role;
  const char* hf;       ///< Hugging Face name pattern, e.g. "model.layers.{L}.self_attn.q_proj"
  const char* gguf;     ///< llama.cpp GGUF name pattern, e.g. "blk.{L}.attn_q"; nullptr: none
  TensorLayout layout;  ///< Hugging Face layout
  BiasKind bias;        ///< whether "<name>.bias" exists (Optional: the config decides, e.g. attention_bias)
  bool required;        ///< false: the tensor may be absent (lm_head of tied models, OPT project_in/out)
  bool per_layer;       ///< true: the pattern contains "{L}"
};

/// A boolean of config.json with its value when absent; key nullptr: the family fixes the value.
struct ConfigSwitch {
  const char* key;
  bool fallback;
};

/// A config.json value the runner does not implement: refused with a FormatError naming the key.
struct ConfigRefusal {
  const char* key;
  bool value;       ///< the refused value (every refusal so far is a boolean switch)
  const char* why;  ///< the end of the message: "... = true: <why>"
};

/// How a family's config.json spells its sizes and switches, and the fixed facts of its block. The one reader
/// (read_hf_config) and the GGUF reader apply these; neither branches on the family. Keys are tried in order,
/// the first present wins.
struct FamilyRecipe {
  // ---- sizes ----
  std::vector<const char*> n_layers_keys{"num_hidden_layers"}, d_model_keys{"hidden_size"}, n_heads_keys{"num_attention_heads"},
      n_ctx_keys{"max_position_embeddings"}, d_mlp_keys{"intermediate_size"};
  std::vector<const char*> n_kv_heads_keys{"num_key_value_heads"};  ///< empty: always n_heads (or n_kv_heads_fixed)
  int64_t n_kv_heads_fixed = 0;  ///< Falcon-7B's multi-query attention: always this many key/value heads; 0: keys
  /// Sizes when the config omits them (Gemma3TextConfig's defaults: the released multimodal checkpoints' text_config
  /// lists only what differs); 0: the key is required.
  int64_t n_heads_default = 0, n_kv_heads_default = 0, vocab_size_default = 0;
  int64_t n_ctx_default = 0;      ///< context when no n_ctx key is present (BLOOM: ALiBi, its configs give none); 0: required
  int64_t d_mlp_per_d_model = 0;  ///< d_mlp when no d_mlp key is present, as a multiple of d_model (GPT-2: 4); 0: required
  const char* head_dim_key = "head_dim";  ///< nullptr: head_dim = d_model / n_heads whatever the file says
  int64_t head_dim_default = 0;           ///< when the key is absent; 0: d_model / n_heads (Gemma: 256)
  // ---- norms ----
  NormKind norm = NormKind::RMSNorm;
  const char* norm_eps_key = "rms_norm_eps";  ///< nullptr: always norm_eps_default (OPT's nn.LayerNorm default)
  double norm_eps_default = 1e-6;
  double norm_weight_offset = 0;                ///< Gemma: the scale is (1 + w)
  ConfigSwitch norm_before{nullptr, true};      ///< OPT do_layer_norm_before
  const char* remove_final_norm_key = nullptr;  ///< OPT _remove_final_layer_norm
  bool qk_norm = false;                         ///< per-head RMSNorm on q and k (Qwen3)
  bool qk_norm_full = false;                    ///< the q/k norms span all heads of the projection (OLMo 2)
  bool input_norms = true;                      ///< false: no norm before attention and MLP (OLMo 2)
  bool post_norms = false;                      ///< norms after attention and MLP, before the residual adds (Gemma-2)
  // ---- positions ----
  PositionKind positions = PositionKind::Rotary;
  int64_t position_offset = 0;  ///< OPT: learned table rows before position 0
  std::vector<const char*> rope_theta_keys{"rope_theta"};
  double rope_theta_default = 10000.0;                                     ///< when no key is present (Gemma 3: 1e6)
  std::vector<const char*> rotary_fraction_keys{"partial_rotary_factor"};  ///< rotated fraction of each head
  double rotary_fraction_default = 1.0;
  const char* rotary_layers_key = nullptr;       ///< SmolLM3 no_rope_layers: per layer 1 = rotary, 0 = none
  const char* no_rotary_interval_key = nullptr;  ///< SmolLM3 no_rope_layer_interval: when no list is given,
  int64_t no_rotary_interval = 0;                ///< every n-th layer (l % n == n - 1) has no rotary; 0: none
  // ---- MLP, biases, embeddings ----
  const char* activation_key = "hidden_act";
  const char* activation_default = "silu";  ///< also the GGUF activation (llama.cpp fixes it per architecture)
  bool gated_mlp = true;
  ConfigSwitch attn_bias{"attention_bias", false}, attn_out_bias{"attention_bias", false}, mlp_bias{"mlp_bias", false};
  ConfigSwitch tied{"tie_word_embeddings", false};
  ConfigSwitch parallel_residual{nullptr, false};  ///< GPT-NeoX use_parallel_residual
  const char* d_embed_key = nullptr;               ///< OPT word_embed_proj_dim (project_in/out)
  bool embed_scale_sqrt_d_model = false;           ///< Gemma: embeddings x sqrt(d_model)
  bool embed_norm = false;                         ///< BLOOM: the embeddings normalised before the first block
  // ---- attention ----
  const char* attn_scale_key = nullptr;  ///< Gemma-2 query_pre_attn_scalar s: scores scaled by s^-1/2
  double attn_scale_default = 0;
  const char* attn_softcap_key = nullptr;  ///< null in the file: no soft-cap
  double attn_softcap_default = 0;
  const char* final_softcap_key = nullptr;
  double final_softcap_default = 0;
  const char* sliding_window_key = nullptr;  ///< null in the file: no window
  int64_t sliding_window_default = 0;
  int64_t sliding_pattern = 0;  ///< p > 1: layer l slides unless l % p == p - 1; config.json layer_types, if given, decides
  const char* sliding_pattern_key = nullptr;   ///< Gemma 3 sliding_window_pattern (configs without layer_types)
  const char* rope_local_theta_key = nullptr;  ///< Gemma 3 rope_local_base_freq: the sliding layers' rotary base
  double rope_local_theta_default = 0;
  std::vector<ConfigRefusal> refusals;
  /// Keys the runner implements only when absent or null (OLMoE clip_qkv): {key, why}.
  std::vector<std::pair<const char*, const char*>> refused_unless_null;
  // ---- mixture of experts (vocablens/model_config.hpp, ModelConfig::n_experts) ----
  std::vector<const char*> n_experts_keys;  ///< empty: a dense family; else the expert count's key (required)
  const char* n_experts_used_key = "num_experts_per_tok";
  std::vector<const char*> d_expert_keys{"moe_intermediate_size", "intermediate_size"};
  ConfigSwitch expert_weights_norm{"norm_topk_prob", false};  ///< key nullptr: fixed (Mixtral: always)
  bool gguf_expert_weights_norm = false;                      ///< llama.cpp fixes the renormalisation per architecture
  bool shared_expert = false;                                 ///< Qwen2-MoE: d_mlp's dense MLP beside the experts, sigmoid-gated
  bool expert_weights_topk_softmax = false;                   ///< GPT-OSS: softmax over the top k router logits (ModelConfig)
  bool attn_sinks = false;  ///< GPT-OSS: per-head sink logits (ModelConfig::attn_sinks, role AttnSinks)
  /// Clamped SwiGLU (ModelConfig::glu_limit): the limit's key and value when absent (also GGUF's, which llama.cpp
  /// fixes), alpha and up offset fixed by the family. swiglu_limit_key nullptr: no clamp.
  const char* swiglu_limit_key = nullptr;
  double swiglu_limit_default = 0, swiglu_alpha = 1, swiglu_up_offset = 0;
  /// Qwen-MoE's dense layers (decoder_sparse_step, mlp_only_layers): refused unless every layer is a mixture.
  const char* sparse_step_key = nullptr;
  const char* dense_layers_key = nullptr;
  // ---- GGUF (llama.cpp's hyper-parameter keys, after "<general.architecture>.") ----
  const char* gguf_parallel_residual_key = nullptr;  ///< "use_parallel_residual" (GPT-NeoX); nullptr: the fixed value
  const char* gguf_attn_softcap_key = nullptr;       ///< "attn_logit_softcapping" (Gemma-2)
  const char* gguf_final_softcap_key = nullptr;      ///< "final_logit_softcapping"
  const char* gguf_sliding_window_key = nullptr;     ///< "attention.sliding_window"
  const char* gguf_rope_local_theta_key = nullptr;   ///< "rope.freq_base_swa" (Gemma 3)
};

/// One family: its identity (`name`, the value of ModelConfig::family), tensor names per role and block recipe.
/// Sizes and switches read from config.json live in ModelConfig (see read_hf_config).
struct ArchSpec {
  const char* name;                  ///< "gpt_neox": ModelConfig::family, `inspect`'s family, the Python config's
  const char* hf_architecture;       ///< "GPTNeoXForCausalLM": the value of config.json architectures[0]
  std::vector<std::string> aliases;  ///< other accepted architectures[0] values and model_type values
  const char* gguf_architecture;     ///< llama.cpp's general.architecture ("gptneox"); nullptr: not in llama.cpp
  const char* hf_base_prefix;        ///< prefix of the base model's names ("gpt_neox."), optional in files
  std::vector<TensorSpec> tensors;
  FamilyRecipe recipe;
  // ---- how llama.cpp's convert_hf_to_gguf.py changes tensors (for GGUF readers) ----
  bool gguf_qk_interleaved;  ///< q/k rows permuted to interleaved rotary pairs (LLAMA rope type "norm")
  bool gguf_norm_plus_one;   ///< norm weights stored as (1 + w) (Gemma)
  const char* summary;       ///< one line for `vocablens inspect` and error messages
};

/// Every supported family, in the order they are listed to users.
const std::vector<ArchSpec>& architectures();
/// The entry whose hf_architecture or alias equals `name` (architectures[0] or model_type); nullptr if none.
const ArchSpec* find_architecture(const std::string& name);
/// The entry for llama.cpp's general.architecture value (e.g. "qwen2"); nullptr if none. GGUF "llama" files
/// of Mistral models map to the Llama entry (the first entry of that name).
const ArchSpec* find_gguf_architecture(const std::string& gguf_arch);
/// The same, preferring the entry that is (`experts` true) or is not a mixture of experts: llama.cpp writes
/// Mixtral as "llama" with an expert count.
const ArchSpec* find_gguf_architecture(const std::string& gguf_arch, bool experts);
/// The entry named `family` (ModelConfig::family); throws std::logic_error for a name no entry has.
const ArchSpec& architecture(const std::string& family);
/// The entry named `family`; nullptr if none (a ModelConfig made in code may name no entry).
const ArchSpec* find_family(const std::string& family);
/// "GPT2LMHeadModel, LlamaForCausalLM, ...": the list printed when an architecture is refused.
std::string supported_architectures();
/// How well a checkpoint of an architecture vocablens does not run fits one supported family: of the checkpoint's
/// tensor names (layer index as {L}, other indices as {N}, no .weight/.bias), how many the family's table maps,
/// those it does not, and the family's required roles the checkpoint lacks.
struct ArchMatch {
  const ArchSpec* arch = nullptr;
  int64_t matched = 0, total = 0;      ///< distinct name patterns of the checkpoint, and those the family maps
  std::vector<std::string> unmatched;  ///< the checkpoint's patterns the family has no role for
  std::vector<std::string> missing;    ///< the family's required patterns the checkpoint lacks
};
/// Every family ranked for these tensor names (Hugging Face names, or GGUF names when `gguf`): most names
/// mapped first, then fewest required tensors missing.
std::vector<ArchMatch> rank_architectures(const std::vector<std::string>& tensor_names, bool gguf);
/// "nearest supported family: Llama (LlamaForCausalLM): 9 of 12 tensor name patterns map; not in its table:
/// ...; it also needs: ..." for an error message; "" when no family maps any name.
std::string nearest_architecture_hint(const std::vector<std::string>& tensor_names, bool gguf);

/// The entry's tensor of role `r`; nullptr if the family has none.
const TensorSpec* find_tensor(const ArchSpec& a, TensorRole r);
/// `pattern` with "{L}" replaced by `layer` (and "{E}" by `expert`, the expert tensors' HF names).
std::string tensor_name(const char* pattern, int64_t layer = -1, int64_t expert = -1);
/// The Hugging Face name of role `r` of family `a` in block `layer` with `suffix` (".weight", ".bias"), without
/// the base prefix when `base_prefix` is false ("h.0.ln_1.weight" rather than "transformer.h.0.ln_1.weight").
/// Throws std::logic_error if the family has no such role.
std::string hf_tensor_name(const ArchSpec& a, TensorRole r, int64_t layer, const char* suffix, bool base_prefix = true);
const char* to_string(TensorRole r);

/// Every way `c`'s block departs from a plain GPT-2 block (pre-LayerNorm, learned positions, gelu_new MLP,
/// biased MHA, sequential residual, tied unembedding), one short phrase each, for `vocablens inspect`.
std::vector<std::string> departures_from_gpt2(const ModelConfig& c);

}  // namespace vocablens
