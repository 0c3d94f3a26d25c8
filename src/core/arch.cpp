// The architecture table (see vocablens/arch.hpp): every family's tensor names, HF and GGUF, by role.
#include "vocablens/arch.hpp"

#include "core/arch_table.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace vocablens {
namespace arch_detail {

TensorSpec model_t(R r, const char* hf, const char* gguf, Lay l, BiasKind b, bool required) {
  return {r, hf, gguf, l, b, required, false};
}
TensorSpec layer_t(R r, const char* hf, const char* gguf, Lay l, BiasKind b) { return {r, hf, gguf, l, b, true, true}; }

// The Llama block's names, shared by Llama, Mistral, Qwen2, Qwen3, Gemma (their departures are in the recipe).
std::vector<TensorSpec> llama_like(BiasKind qkv_bias, BiasKind o_bias, bool lm_head) {
  std::vector<TensorSpec> t = {
      model_t(R::TokenEmbd, "model.embed_tokens", "token_embd", Lay::Embedding, kNo, true),
      model_t(R::OutputNorm, "model.norm", "output_norm", Lay::Vector, kNo, true),
      layer_t(R::AttnNorm, "model.layers.{L}.input_layernorm", "blk.{L}.attn_norm", Lay::Vector, kNo),
      layer_t(R::AttnQ, "model.layers.{L}.self_attn.q_proj", "blk.{L}.attn_q", Lay::Linear, qkv_bias),
      layer_t(R::AttnK, "model.layers.{L}.self_attn.k_proj", "blk.{L}.attn_k", Lay::Linear, qkv_bias),
      layer_t(R::AttnV, "model.layers.{L}.self_attn.v_proj", "blk.{L}.attn_v", Lay::Linear, qkv_bias),
      layer_t(R::AttnOut, "model.layers.{L}.self_attn.o_proj", "blk.{L}.attn_output", Lay::Linear, o_bias),
      layer_t(R::FfnNorm, "model.layers.{L}.post_attention_layernorm", "blk.{L}.ffn_norm", Lay::Vector, kNo),
      layer_t(R::FfnGate, "model.layers.{L}.mlp.gate_proj", "blk.{L}.ffn_gate", Lay::Linear, kOpt),
      layer_t(R::FfnUp, "model.layers.{L}.mlp.up_proj", "blk.{L}.ffn_up", Lay::Linear, kOpt),
      layer_t(R::FfnDown, "model.layers.{L}.mlp.down_proj", "blk.{L}.ffn_down", Lay::Linear, kOpt),
  };
  if (lm_head) t.push_back(model_t(R::Output, "lm_head", "output", Lay::Linear, kNo, false));
  return t;
}

ArchSpec entry(const char* name, const char* hf, std::vector<std::string> aliases, const char* gguf, const char* prefix,
               std::vector<TensorSpec> tensors, FamilyRecipe recipe, bool gguf_qk_interleaved, bool gguf_norm_plus_one,
               const char* summary) {
  return {name,
          hf,
          std::move(aliases),
          gguf,
          prefix,
          std::move(tensors),
          std::move(recipe),
          gguf_qk_interleaved,
          gguf_norm_plus_one,
          summary};
}

// The recipes. FamilyRecipe's defaults are the Llama block as LlamaConfig spells it (RMSNorm rms_norm_eps 1e-6,
// rotary rope_theta, gated hidden_act silu, attention_bias / mlp_bias, untied); each family states how it departs.
FamilyRecipe llama_recipe() { return {}; }

FamilyRecipe gpt2_recipe() {
  FamilyRecipe r;
  r.n_layers_keys = {"n_layer", "num_hidden_layers"};
  r.d_model_keys = {"n_embd", "hidden_size"};
  r.n_heads_keys = {"n_head", "num_attention_heads"};
  r.n_ctx_keys = {"n_positions", "n_ctx", "max_position_embeddings"};
  r.d_mlp_keys = {"n_inner"};
  r.n_kv_heads_keys = {};
  r.d_mlp_per_d_model = 4;
  r.head_dim_key = nullptr;
  r.norm = NormKind::LayerNorm;
  r.norm_eps_key = "layer_norm_epsilon";
  r.norm_eps_default = 1e-5;
  r.positions = PositionKind::Learned;
  r.activation_key = "activation_function";
  r.activation_default = "gelu_new";
  r.gated_mlp = false;
  r.attn_bias = r.attn_out_bias = r.mlp_bias = {nullptr, true};
  r.tied = {"tie_word_embeddings", true};
  r.refusals = {{"scale_attn_by_inverse_layer_idx", true, "not supported"}, {"scale_attn_weights", false, "not supported"}};
  return r;
}

FamilyRecipe mistral_recipe() {
  FamilyRecipe r;
  r.sliding_window_key = "sliding_window";
  r.sliding_window_default = 4096;  // MistralConfig's default when the key is absent
  return r;
}

FamilyRecipe qwen_recipe(bool qk_norm) {
  FamilyRecipe r;
  if (!qk_norm) {  // Qwen2: q/k/v always biased, the output projection never
    r.attn_bias = {nullptr, true};
    r.attn_out_bias = {nullptr, false};
  }
  r.qk_norm = qk_norm;
  r.refusals = {
      {"use_sliding_window", true, "Qwen sliding-window layers are not supported (released Qwen2.5/Qwen3 models set false)"}};
  return r;
}

FamilyRecipe gemma_recipe(bool gemma2) {
  FamilyRecipe r;
  r.head_dim_default = 256;  // GemmaConfig's default whatever the hidden size
  r.norm_weight_offset = 1.0;
  r.embed_scale_sqrt_d_model = true;
  r.activation_key = "hidden_activation";  // Gemma's MLP reads this one, whatever hidden_act says
  r.activation_default = "gelu_pytorch_tanh";
  r.tied = {"tie_word_embeddings", true};
  if (gemma2) {
    r.post_norms = true;
    r.attn_scale_key = "query_pre_attn_scalar";
    r.attn_scale_default = 256;
    r.attn_softcap_key = "attn_logit_softcapping";
    r.attn_softcap_default = 50;
    r.final_softcap_key = "final_logit_softcapping";
    r.final_softcap_default = 30;
    r.sliding_window_key = "sliding_window";
    r.sliding_window_default = 4096;
    r.sliding_pattern = 2;
    r.gguf_attn_softcap_key = "attn_logit_softcapping";
    r.gguf_final_softcap_key = "final_logit_softcapping";
    r.gguf_sliding_window_key = "attention.sliding_window";
  }
  return r;
}

// Gemma3TextConfig: Gemma-2's recipe with q/k norms, no soft-caps by default, layers typed by layer_types (else
// sliding_window_pattern, 6: every 6th layer global); the local layers rotate with rope_local_base_freq, unscaled.
FamilyRecipe gemma3_recipe() {
  FamilyRecipe r = gemma_recipe(true);
  r.qk_norm = true;
  r.rope_theta_default = 1e6;
  r.n_heads_default = 8;
  r.n_kv_heads_default = 4;
  r.vocab_size_default = 262208;
  r.n_ctx_default = 131072;
  r.attn_softcap_default = 0;  // null in Gemma3TextConfig: the keys still switch a cap on when a file gives one
  r.final_softcap_default = 0;
  r.sliding_window_default = 4096;
  r.sliding_pattern = 6;
  r.sliding_pattern_key = "sliding_window_pattern";
  r.rope_local_theta_key = "rope_local_base_freq";
  r.rope_local_theta_default = 10000.0;
  r.gguf_attn_softcap_key = nullptr;  // llama.cpp's Gemma 3 graph has no attention soft-cap
  r.gguf_rope_local_theta_key = "rope.freq_base_swa";
  return r;
}

FamilyRecipe phi3_recipe() {
  FamilyRecipe r;
  r.sliding_window_key = "sliding_window";
  r.gguf_sliding_window_key = "attention.sliding_window";
  return r;
}

FamilyRecipe gpt_neox_recipe() {
  FamilyRecipe r;
  r.n_kv_heads_keys = {};
  r.norm = NormKind::LayerNorm;
  r.norm_eps_key = "layer_norm_eps";
  r.norm_eps_default = 1e-5;
  r.rope_theta_keys = {"rope_theta", "rotary_emb_base"};
  r.rotary_fraction_keys = {"partial_rotary_factor", "rotary_pct"};
  r.rotary_fraction_default = 0.25;
  r.activation_default = "gelu";  // Pythia's erf GELU (llama.cpp runs the tanh form: docs/runner.md)
  r.gated_mlp = false;
  r.attn_bias = r.attn_out_bias = {"attention_bias", true};
  r.mlp_bias = {nullptr, true};
  r.parallel_residual = {"use_parallel_residual", true};
  r.gguf_parallel_residual_key = "use_parallel_residual";
  return r;
}

FamilyRecipe opt_recipe() {
  FamilyRecipe r;
  r.d_mlp_keys = {"ffn_dim"};
  r.n_kv_heads_keys = {};
  r.norm = NormKind::LayerNorm;
  r.norm_eps_key = nullptr;  // OPT's config has no epsilon: nn.LayerNorm's default
  r.norm_eps_default = 1e-5;
  r.norm_before = {"do_layer_norm_before", true};
  r.remove_final_norm_key = "_remove_final_layer_norm";
  r.positions = PositionKind::Learned;
  r.position_offset = 2;
  r.activation_key = "activation_function";
  r.activation_default = "relu";
  r.gated_mlp = false;
  r.attn_bias = r.attn_out_bias = r.mlp_bias = {"enable_bias", true};
  r.tied = {"tie_word_embeddings", true};
  r.d_embed_key = "word_embed_proj_dim";
  r.refusals = {{"layer_norm_elementwise_affine", false, "norms without scale and bias are not supported"}};
  return r;
}

}  // namespace arch_detail

namespace {

using namespace arch_detail;

std::vector<ArchSpec> build_table() {
  std::vector<ArchSpec> a;
  a.push_back(entry("gpt2", "GPT2LMHeadModel", {"GPT2Model", "gpt2"}, "gpt2", "transformer.",
                    {
                        model_t(R::TokenEmbd, "transformer.wte", "token_embd", Lay::Embedding, kNo, true),
                        model_t(R::PosEmbd, "transformer.wpe", "position_embd", Lay::Embedding, kNo, false),
                        model_t(R::OutputNorm, "transformer.ln_f", "output_norm", Lay::Vector, kReq, true),
                        model_t(R::Output, "lm_head", "output", Lay::Linear, kNo, false),
                        layer_t(R::AttnNorm, "transformer.h.{L}.ln_1", "blk.{L}.attn_norm", Lay::Vector, kReq),
                        layer_t(R::AttnQKV, "transformer.h.{L}.attn.c_attn", "blk.{L}.attn_qkv", Lay::FusedQKVConv1D, kReq),
                        layer_t(R::AttnOut, "transformer.h.{L}.attn.c_proj", "blk.{L}.attn_output", Lay::Conv1D, kReq),
                        layer_t(R::FfnNorm, "transformer.h.{L}.ln_2", "blk.{L}.ffn_norm", Lay::Vector, kReq),
                        layer_t(R::FfnUp, "transformer.h.{L}.mlp.c_fc", "blk.{L}.ffn_up", Lay::Conv1D, kReq),
                        layer_t(R::FfnDown, "transformer.h.{L}.mlp.c_proj", "blk.{L}.ffn_down", Lay::Conv1D, kReq),
                    },
                    gpt2_recipe(), false, false, "GPT-2: pre-LayerNorm, learned positions, gelu_new MLP, fused Conv1D c_attn"));
  a.push_back(entry(
      "llama", "LlamaForCausalLM", {"LlamaModel", "llama"}, "llama", "model.", llama_like(kOpt, kOpt, true), llama_recipe(), true,
      false, "Llama: RMSNorm, rotary positions (rope_theta, rope_scaling linear/llama3), SwiGLU, grouped-query attention"));
  a.push_back(entry("mistral", "MistralForCausalLM", {"MistralModel", "mistral"}, "llama", "model.", llama_like(kNo, kNo, true),
                    mistral_recipe(), true, false, "Mistral: a Llama block with sliding-window attention"));
  a.push_back(entry("qwen2", "Qwen2ForCausalLM", {"Qwen2Model", "qwen2"}, "qwen2", "model.", llama_like(kReq, kNo, true),
                    qwen_recipe(false), false, false, "Qwen2: a Llama block with q/k/v biases"));
  {
    auto t = llama_like(kOpt, kOpt, true);
    t.push_back(layer_t(R::AttnQNorm, "model.layers.{L}.self_attn.q_norm", "blk.{L}.attn_q_norm", Lay::Vector, kNo));
    t.push_back(layer_t(R::AttnKNorm, "model.layers.{L}.self_attn.k_norm", "blk.{L}.attn_k_norm", Lay::Vector, kNo));
    a.push_back(entry("qwen3", "Qwen3ForCausalLM", {"Qwen3Model", "qwen3"}, "qwen3", "model.", std::move(t), qwen_recipe(true),
                      false, false, "Qwen3: a Llama block with per-head RMSNorm on q and k"));
  }
  a.push_back(entry("gemma", "GemmaForCausalLM", {"GemmaModel", "gemma"}, "gemma", "model.", llama_like(kOpt, kOpt, true),
                    gemma_recipe(false), false, true,
                    "Gemma: RMSNorm (1 + w), embeddings x sqrt(d_model), GeGLU (tanh GELU), independent head_dim"));
  {
    std::vector<TensorSpec> t = {
        model_t(R::TokenEmbd, "model.embed_tokens", "token_embd", Lay::Embedding, kNo, true),
        model_t(R::OutputNorm, "model.norm", "output_norm", Lay::Vector, kNo, true),
        model_t(R::Output, "lm_head", "output", Lay::Linear, kNo, false),
        layer_t(R::AttnNorm, "model.layers.{L}.input_layernorm", "blk.{L}.attn_norm", Lay::Vector, kNo),
        layer_t(R::AttnQ, "model.layers.{L}.self_attn.q_proj", "blk.{L}.attn_q", Lay::Linear, kOpt),
        layer_t(R::AttnK, "model.layers.{L}.self_attn.k_proj", "blk.{L}.attn_k", Lay::Linear, kOpt),
        layer_t(R::AttnV, "model.layers.{L}.self_attn.v_proj", "blk.{L}.attn_v", Lay::Linear, kOpt),
        layer_t(R::AttnOut, "model.layers.{L}.self_attn.o_proj", "blk.{L}.attn_output", Lay::Linear, kOpt),
        layer_t(R::AttnPostNorm, "model.layers.{L}.post_attention_layernorm", "blk.{L}.post_attention_norm", Lay::Vector, kNo),
        layer_t(R::FfnNorm, "model.layers.{L}.pre_feedforward_layernorm", "blk.{L}.ffn_norm", Lay::Vector, kNo),
        layer_t(R::FfnGate, "model.layers.{L}.mlp.gate_proj", "blk.{L}.ffn_gate", Lay::Linear, kNo),
        layer_t(R::FfnUp, "model.layers.{L}.mlp.up_proj", "blk.{L}.ffn_up", Lay::Linear, kNo),
        layer_t(R::FfnDown, "model.layers.{L}.mlp.down_proj", "blk.{L}.ffn_down", Lay::Linear, kNo),
        layer_t(R::FfnPostNorm, "model.layers.{L}.post_feedforward_layernorm", "blk.{L}.post_ffw_norm", Lay::Vector, kNo),
    };
    a.push_back(entry("gemma2", "Gemma2ForCausalLM", {"Gemma2Model", "gemma2"}, "gemma2", "model.", t, gemma_recipe(true), false,
                      true,
                      "Gemma-2: Gemma plus norms after attention and MLP, logit soft-capping, alternating sliding windows"));
    // Gemma 3: Gemma-2's names plus per-head q/k norms (Gemma3RMSNorm: also 1 + w).
    t.push_back(layer_t(R::AttnQNorm, "model.layers.{L}.self_attn.q_norm", "blk.{L}.attn_q_norm", Lay::Vector, kNo));
    t.push_back(layer_t(R::AttnKNorm, "model.layers.{L}.self_attn.k_norm", "blk.{L}.attn_k_norm", Lay::Vector, kNo));
    a.push_back(entry("gemma3", "Gemma3ForCausalLM", {"Gemma3ForConditionalGeneration", "gemma3_text", "gemma3"}, "gemma3",
                      "model.", std::move(t), gemma3_recipe(), false, true,
                      "Gemma 3: Gemma-2's block without soft-caps, per-head q/k RMSNorm, 5 local : 1 global layers with "
                      "their own rotary bases"));
  }
  a.push_back(entry("phi3", "Phi3ForCausalLM", {"Phi3Model", "phi3"}, "phi3", "model.",
                    {
                        model_t(R::TokenEmbd, "model.embed_tokens", "token_embd", Lay::Embedding, kNo, true),
                        model_t(R::OutputNorm, "model.norm", "output_norm", Lay::Vector, kNo, true),
                        model_t(R::Output, "lm_head", "output", Lay::Linear, kNo, false),
                        layer_t(R::AttnNorm, "model.layers.{L}.input_layernorm", "blk.{L}.attn_norm", Lay::Vector, kNo),
                        layer_t(R::AttnQKV, "model.layers.{L}.self_attn.qkv_proj", "blk.{L}.attn_qkv", Lay::FusedQKV, kNo),
                        layer_t(R::AttnOut, "model.layers.{L}.self_attn.o_proj", "blk.{L}.attn_output", Lay::Linear, kNo),
                        layer_t(R::FfnNorm, "model.layers.{L}.post_attention_layernorm", "blk.{L}.ffn_norm", Lay::Vector, kNo),
                        layer_t(R::FfnGateUp, "model.layers.{L}.mlp.gate_up_proj", "blk.{L}.ffn_up", Lay::FusedGateUp, kNo),
                        layer_t(R::FfnDown, "model.layers.{L}.mlp.down_proj", "blk.{L}.ffn_down", Lay::Linear, kNo),
                    },
                    phi3_recipe(), false, false, "Phi-3: a Llama block with fused qkv_proj and gate_up_proj"));
  a.push_back(entry(
      "gpt_neox", "GPTNeoXForCausalLM", {"GPTNeoXModel", "gpt_neox"}, "gptneox", "gpt_neox.",
      {
          model_t(R::TokenEmbd, "gpt_neox.embed_in", "token_embd", Lay::Embedding, kNo, true),
          model_t(R::OutputNorm, "gpt_neox.final_layer_norm", "output_norm", Lay::Vector, kReq, true),
          model_t(R::Output, "embed_out", "output", Lay::Linear, kNo, false),
          layer_t(R::AttnNorm, "gpt_neox.layers.{L}.input_layernorm", "blk.{L}.attn_norm", Lay::Vector, kReq),
          layer_t(R::AttnQKV, "gpt_neox.layers.{L}.attention.query_key_value", "blk.{L}.attn_qkv", Lay::FusedQKVPerHead, kOpt),
          layer_t(R::AttnOut, "gpt_neox.layers.{L}.attention.dense", "blk.{L}.attn_output", Lay::Linear, kOpt),
          layer_t(R::FfnNorm, "gpt_neox.layers.{L}.post_attention_layernorm", "blk.{L}.ffn_norm", Lay::Vector, kReq),
          layer_t(R::FfnUp, "gpt_neox.layers.{L}.mlp.dense_h_to_4h", "blk.{L}.ffn_up", Lay::Linear, kReq),
          layer_t(R::FfnDown, "gpt_neox.layers.{L}.mlp.dense_4h_to_h", "blk.{L}.ffn_down", Lay::Linear, kReq),
      },
      gpt_neox_recipe(), false, false,
      "GPT-NeoX (Pythia): parallel residual, partial rotary (rotary_pct), LayerNorm, fused per-head query_key_value"));
  a.push_back(entry("opt", "OPTForCausalLM", {"OPTModel", "opt"}, nullptr, "model.",
                    {
                        model_t(R::TokenEmbd, "model.decoder.embed_tokens", nullptr, Lay::Embedding, kNo, true),
                        model_t(R::PosEmbd, "model.decoder.embed_positions", nullptr, Lay::Embedding, kNo, true),
                        model_t(R::OutputNorm, "model.decoder.final_layer_norm", nullptr, Lay::Vector, kReq, false),
                        model_t(R::Output, "lm_head", nullptr, Lay::Linear, kNo, false),
                        model_t(R::ProjectIn, "model.decoder.project_in", nullptr, Lay::Linear, kNo, false),
                        model_t(R::ProjectOut, "model.decoder.project_out", nullptr, Lay::Linear, kNo, false),
                        layer_t(R::AttnNorm, "model.decoder.layers.{L}.self_attn_layer_norm", nullptr, Lay::Vector, kReq),
                        layer_t(R::AttnQ, "model.decoder.layers.{L}.self_attn.q_proj", nullptr, Lay::Linear, kOpt),
                        layer_t(R::AttnK, "model.decoder.layers.{L}.self_attn.k_proj", nullptr, Lay::Linear, kOpt),
                        layer_t(R::AttnV, "model.decoder.layers.{L}.self_attn.v_proj", nullptr, Lay::Linear, kOpt),
                        layer_t(R::AttnOut, "model.decoder.layers.{L}.self_attn.out_proj", nullptr, Lay::Linear, kOpt),
                        layer_t(R::FfnNorm, "model.decoder.layers.{L}.final_layer_norm", nullptr, Lay::Vector, kReq),
                        layer_t(R::FfnUp, "model.decoder.layers.{L}.fc1", nullptr, Lay::Linear, kOpt),
                        layer_t(R::FfnDown, "model.decoder.layers.{L}.fc2", nullptr, Lay::Linear, kOpt),
                    },
                    opt_recipe(), false, false,
                    "OPT: learned positions offset by 2, ReLU MLP, do_layer_norm_before, project_in/out"));
  a.push_back(entry(
      "stablelm", "StableLmForCausalLM", {"StableLmModel", "stablelm"}, "stablelm", "model.",
      {
          model_t(R::TokenEmbd, "model.embed_tokens", "token_embd", Lay::Embedding, kNo, true),
          model_t(R::OutputNorm, "model.norm", "output_norm", Lay::Vector, kReq, true),
          model_t(R::Output, "lm_head", "output", Lay::Linear, kNo, false),
          layer_t(R::AttnNorm, "model.layers.{L}.input_layernorm", "blk.{L}.attn_norm", Lay::Vector, kReq),
          layer_t(R::AttnQ, "model.layers.{L}.self_attn.q_proj", "blk.{L}.attn_q", Lay::Linear, kOpt),
          layer_t(R::AttnK, "model.layers.{L}.self_attn.k_proj", "blk.{L}.attn_k", Lay::Linear, kOpt),
          layer_t(R::AttnV, "model.layers.{L}.self_attn.v_proj", "blk.{L}.attn_v", Lay::Linear, kOpt),
          layer_t(R::AttnOut, "model.layers.{L}.self_attn.o_proj", "blk.{L}.attn_output", Lay::Linear, kNo),
          layer_t(R::FfnNorm, "model.layers.{L}.post_attention_layernorm", "blk.{L}.ffn_norm", Lay::Vector, kReq),
          layer_t(R::FfnGate, "model.layers.{L}.mlp.gate_proj", "blk.{L}.ffn_gate", Lay::Linear, kNo),
          layer_t(R::FfnUp, "model.layers.{L}.mlp.up_proj", "blk.{L}.ffn_up", Lay::Linear, kNo),
          layer_t(R::FfnDown, "model.layers.{L}.mlp.down_proj", "blk.{L}.ffn_down", Lay::Linear, kNo),
      },
      [] {  // StableLmConfig: LayerNorm layer_norm_eps, a quarter of each head rotated, SwiGLU, use_qkv_bias
        FamilyRecipe r;
        r.head_dim_key = nullptr;  // head_dim = hidden_size / num_attention_heads
        r.norm = NormKind::LayerNorm;
        r.norm_eps_key = "layer_norm_eps";
        r.norm_eps_default = 1e-5;
        r.rotary_fraction_default = 0.25;
        r.attn_bias = {"use_qkv_bias", false};
        r.attn_out_bias = r.mlp_bias = {nullptr, false};
        r.refusals = {{"qk_layernorm", true, "per-head LayerNorms on q and k (StableLM 2 12B) are not supported"},
                      {"use_parallel_residual", true,
                       "the parallel block sharing one norm between attention and MLP (StableLM 2 12B) is not supported"}};
        return r;
      }(),
      false, false, "StableLM-2: LayerNorm, partial rotary (partial_rotary_factor), SwiGLU, q/k/v biases"));
  a.push_back(entry(
      "olmo2", "Olmo2ForCausalLM", {"Olmo2Model", "olmo2"}, "olmo2", "model.",
      {
          model_t(R::TokenEmbd, "model.embed_tokens", "token_embd", Lay::Embedding, kNo, true),
          model_t(R::OutputNorm, "model.norm", "output_norm", Lay::Vector, kNo, true),
          model_t(R::Output, "lm_head", "output", Lay::Linear, kNo, false),
          layer_t(R::AttnQ, "model.layers.{L}.self_attn.q_proj", "blk.{L}.attn_q", Lay::Linear, kOpt),
          layer_t(R::AttnK, "model.layers.{L}.self_attn.k_proj", "blk.{L}.attn_k", Lay::Linear, kOpt),
          layer_t(R::AttnV, "model.layers.{L}.self_attn.v_proj", "blk.{L}.attn_v", Lay::Linear, kOpt),
          layer_t(R::AttnOut, "model.layers.{L}.self_attn.o_proj", "blk.{L}.attn_output", Lay::Linear, kOpt),
          layer_t(R::AttnQNorm, "model.layers.{L}.self_attn.q_norm", "blk.{L}.attn_q_norm", Lay::Vector, kNo),
          layer_t(R::AttnKNorm, "model.layers.{L}.self_attn.k_norm", "blk.{L}.attn_k_norm", Lay::Vector, kNo),
          layer_t(R::AttnPostNorm, "model.layers.{L}.post_attention_layernorm", "blk.{L}.post_attention_norm", Lay::Vector, kNo),
          layer_t(R::FfnGate, "model.layers.{L}.mlp.gate_proj", "blk.{L}.ffn_gate", Lay::Linear, kNo),
          layer_t(R::FfnUp, "model.layers.{L}.mlp.up_proj", "blk.{L}.ffn_up", Lay::Linear, kNo),
          layer_t(R::FfnDown, "model.layers.{L}.mlp.down_proj", "blk.{L}.ffn_down", Lay::Linear, kNo),
          layer_t(R::FfnPostNorm, "model.layers.{L}.post_feedforward_layernorm", "blk.{L}.post_ffw_norm", Lay::Vector, kNo),
      },
      [] {  // Olmo2Config: RMSNorm 1e-5, no norms before attention and MLP, post-norms, q/k norms over the
            // whole projection, head_dim = hidden_size / heads, SwiGLU without biases, untied
        FamilyRecipe r;
        r.head_dim_key = nullptr;
        r.norm_eps_default = 1e-5;
        r.input_norms = false;
        r.post_norms = true;
        r.qk_norm = r.qk_norm_full = true;
        r.mlp_bias = {nullptr, false};
        return r;
      }(),
      false, false, "OLMo 2: norms after attention and MLP only, RMSNorm on the whole q and k projections, SwiGLU"));
  a.push_back(entry(
      "smollm3", "SmolLM3ForCausalLM", {"SmolLM3Model", "smollm3"}, "smollm3", "model.", llama_like(kOpt, kOpt, true),
      [] {  // SmolLM3Config: a Llama block whose every 4th layer (no_rope_layers, else no_rope_layer_interval)
            // has no rotary; tied by default
        FamilyRecipe r;
        r.tied = {"tie_word_embeddings", true};
        r.rotary_layers_key = "no_rope_layers";
        r.no_rotary_interval_key = "no_rope_layer_interval";
        r.no_rotary_interval = 4;
        r.refusals = {{"use_sliding_window", true,
                       "SmolLM3's sliding-window layers are not supported (released SmolLM3 models set false)"}};
        return r;
      }(),
      true, false, "SmolLM3: a Llama block with no rotary on every 4th layer (no_rope_layers)"));
  a.push_back(entry(
      "phi", "PhiForCausalLM", {"PhiModel", "phi"}, "phi2", "model.",
      {
          model_t(R::TokenEmbd, "model.embed_tokens", "token_embd", Lay::Embedding, kNo, true),
          model_t(R::OutputNorm, "model.final_layernorm", "output_norm", Lay::Vector, kReq, true),
          model_t(R::Output, "lm_head", "output", Lay::Linear, kReq, false),
          layer_t(R::AttnNorm, "model.layers.{L}.input_layernorm", "blk.{L}.attn_norm", Lay::Vector, kReq),
          layer_t(R::AttnQ, "model.layers.{L}.self_attn.q_proj", "blk.{L}.attn_q", Lay::Linear, kReq),
          layer_t(R::AttnK, "model.layers.{L}.self_attn.k_proj", "blk.{L}.attn_k", Lay::Linear, kReq),
          layer_t(R::AttnV, "model.layers.{L}.self_attn.v_proj", "blk.{L}.attn_v", Lay::Linear, kReq),
          layer_t(R::AttnOut, "model.layers.{L}.self_attn.dense", "blk.{L}.attn_output", Lay::Linear, kReq),
          // One LayerNorm feeds attention and MLP: the MLP's norm is the same tensor.
          layer_t(R::FfnNorm, "model.layers.{L}.input_layernorm", "blk.{L}.attn_norm", Lay::Vector, kReq),
          layer_t(R::FfnUp, "model.layers.{L}.mlp.fc1", "blk.{L}.ffn_up", Lay::Linear, kReq),
          layer_t(R::FfnDown, "model.layers.{L}.mlp.fc2", "blk.{L}.ffn_down", Lay::Linear, kReq),
      },
      [] {  // PhiConfig (Phi-2): parallel attention and MLP on one LayerNorm, partial rotary, gelu_new,
            // biases everywhere (lm_head too), untied
        FamilyRecipe r;
        r.head_dim_key = nullptr;
        r.norm = NormKind::LayerNorm;
        r.norm_eps_key = "layer_norm_eps";
        r.norm_eps_default = 1e-5;
        r.rotary_fraction_default = 0.5;
        r.activation_default = "gelu_new";
        r.gated_mlp = false;
        r.attn_bias = r.attn_out_bias = r.mlp_bias = {nullptr, true};
        r.parallel_residual = {nullptr, true};
        r.refusals = {{"qk_layernorm", true, "LayerNorms on q and k are not supported (Phi-2 sets false)"}};
        return r;
      }(),
      false, false, "Phi-2: attention and MLP in parallel on one LayerNorm, partial rotary, gelu_new, biased lm_head"));
  a.push_back(entry(
      "bloom", "BloomForCausalLM", {"BloomModel", "bloom"}, "bloom", "transformer.",
      {
          model_t(R::TokenEmbd, "transformer.word_embeddings", "token_embd", Lay::Embedding, kNo, true),
          model_t(R::TokenEmbdNorm, "transformer.word_embeddings_layernorm", "token_embd_norm", Lay::Vector, kReq, true),
          model_t(R::OutputNorm, "transformer.ln_f", "output_norm", Lay::Vector, kReq, true),
          model_t(R::Output, "lm_head", "output", Lay::Linear, kNo, false),
          layer_t(R::AttnNorm, "transformer.h.{L}.input_layernorm", "blk.{L}.attn_norm", Lay::Vector, kReq),
          layer_t(R::AttnQKV, "transformer.h.{L}.self_attention.query_key_value", "blk.{L}.attn_qkv", Lay::FusedQKVPerHead, kReq),
          layer_t(R::AttnOut, "transformer.h.{L}.self_attention.dense", "blk.{L}.attn_output", Lay::Linear, kReq),
          layer_t(R::FfnNorm, "transformer.h.{L}.post_attention_layernorm", "blk.{L}.ffn_norm", Lay::Vector, kReq),
          layer_t(R::FfnUp, "transformer.h.{L}.mlp.dense_h_to_4h", "blk.{L}.ffn_up", Lay::Linear, kReq),
          layer_t(R::FfnDown, "transformer.h.{L}.mlp.dense_4h_to_h", "blk.{L}.ffn_down", Lay::Linear, kReq),
      },
      [] {  // BloomConfig: n_layer / n_head, LayerNorm layer_norm_epsilon (also on the embeddings), ALiBi, a
            // tanh-GELU MLP of 4 d (n_inner), biases everywhere, tied; no context length in its configs
        FamilyRecipe r;
        r.n_layers_keys = {"n_layer", "num_hidden_layers"};
        r.d_model_keys = {"hidden_size", "n_embed"};
        r.n_heads_keys = {"n_head", "num_attention_heads"};
        r.n_ctx_keys = {"seq_length"};
        r.n_ctx_default = 2048;  // its training length; ALiBi itself has no limit
        r.d_mlp_keys = {"n_inner"};
        r.n_kv_heads_keys = {};
        r.d_mlp_per_d_model = 4;
        r.head_dim_key = nullptr;
        r.norm = NormKind::LayerNorm;
        r.norm_eps_key = "layer_norm_epsilon";
        r.norm_eps_default = 1e-5;
        r.embed_norm = true;
        r.positions = PositionKind::ALiBi;
        r.activation_default = "gelu_new";  // bloom_gelu_forward: the tanh form
        r.gated_mlp = false;
        r.attn_bias = r.attn_out_bias = r.mlp_bias = {nullptr, true};
        r.tied = {"tie_word_embeddings", true};
        r.refusals = {{"apply_residual_connection_post_layernorm", true,
                       "a residual taken after the norm is not supported (BLOOM checkpoints set false)"}};
        return r;
      }(),
      false, false, "BLOOM: ALiBi, LayerNorm of the embeddings, fused per-head query_key_value, tanh-GELU MLP"));
  a.push_back(entry(
      "falcon", "FalconForCausalLM", {"FalconModel", "falcon"}, "falcon", "transformer.",
      {
          model_t(R::TokenEmbd, "transformer.word_embeddings", "token_embd", Lay::Embedding, kNo, true),
          model_t(R::OutputNorm, "transformer.ln_f", "output_norm", Lay::Vector, kReq, true),
          model_t(R::Output, "lm_head", "output", Lay::Linear, kNo, false),
          layer_t(R::AttnNorm, "transformer.h.{L}.input_layernorm", "blk.{L}.attn_norm", Lay::Vector, kReq),
          // Multi-query: rows [q: H * dh | k: dh | v: dh] (one key/value group, as llama.cpp's converter keeps it)
          layer_t(R::AttnQKV, "transformer.h.{L}.self_attention.query_key_value", "blk.{L}.attn_qkv", Lay::FusedQKV, kOpt),
          layer_t(R::AttnOut, "transformer.h.{L}.self_attention.dense", "blk.{L}.attn_output", Lay::Linear, kOpt),
          // Attention and MLP in parallel on the one input_layernorm: the MLP's norm is the same tensor.
          layer_t(R::FfnNorm, "transformer.h.{L}.input_layernorm", "blk.{L}.attn_norm", Lay::Vector, kReq),
          layer_t(R::FfnUp, "transformer.h.{L}.mlp.dense_h_to_4h", "blk.{L}.ffn_up", Lay::Linear, kOpt),
          layer_t(R::FfnDown, "transformer.h.{L}.mlp.dense_4h_to_h", "blk.{L}.ffn_down", Lay::Linear, kOpt),
      },
      [] {  // FalconConfig, Falcon-7B's block: multi-query, attention and MLP in parallel on one LayerNorm,
            // rotary, erf GELU (activation), no biases (bias), tied; the other Falcon blocks are refused
        FamilyRecipe r;
        r.n_layers_keys = {"num_hidden_layers", "n_layer"};
        r.n_heads_keys = {"num_attention_heads", "n_head"};
        r.n_ctx_default = 2048;  // older configs give no context length
        r.d_mlp_keys = {"ffn_hidden_size"};
        r.d_mlp_per_d_model = 4;
        r.n_kv_heads_keys = {};
        r.n_kv_heads_fixed = 1;
        r.head_dim_key = nullptr;
        r.norm = NormKind::LayerNorm;
        r.norm_eps_key = "layer_norm_epsilon";
        r.norm_eps_default = 1e-5;
        r.activation_key = "activation";
        r.activation_default = "gelu";
        r.gated_mlp = false;
        r.attn_bias = r.attn_out_bias = r.mlp_bias = {"bias", false};
        r.tied = {"tie_word_embeddings", true};
        r.parallel_residual = {nullptr, true};
        r.refusals = {
            {"new_decoder_architecture", true, "Falcon-40B/180B's block (two norms, grouped key/value heads) is not supported"},
            {"multi_query", false, "Falcon without multi-query attention (its per-head fused layout) is not supported"},
            {"parallel_attn", false, "Falcon's sequential block is not supported"},
            {"alibi", true, "Falcon with ALiBi (RW models) is not supported"}};
        return r;
      }(),
      false, false, "Falcon-7B: multi-query, attention and MLP in parallel on one LayerNorm, rotary, GELU"));
  add_moe_families(a);
  return a;
}

}  // namespace

const std::vector<ArchSpec>& architectures() {
  static const std::vector<ArchSpec> table = build_table();
  return table;
}

}  // namespace vocablens
