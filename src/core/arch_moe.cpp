// The architecture table's mixtures of experts (vocablens/arch.hpp): Mixtral, Qwen3-MoE, Qwen2-MoE, OLMoE, GPT-OSS.
#include "core/arch_table.hpp"

namespace vocablens::arch_detail {
namespace {

// The mixture-of-experts block: Llama's attention names (q/k/v biases per `qkv_bias`), no dense MLP, a router
// `router` and per-expert matrices `experts`.{E}.<gate|up|down> in llama.cpp's 3-D ffn_*_exps tensors.
std::vector<TensorSpec> moe_like(BiasKind qkv_bias, BiasKind o_bias, const char* router, const char* gate, const char* up,
                                 const char* down) {
  std::vector<TensorSpec> t;
  for (const auto& s : llama_like(qkv_bias, o_bias, true))
    if (s.role != R::FfnGate && s.role != R::FfnUp && s.role != R::FfnDown) t.push_back(s);
  t.push_back(layer_t(R::FfnGateInp, router, "blk.{L}.ffn_gate_inp", Lay::Linear, kNo));
  t.push_back(layer_t(R::FfnGateExps, gate, "blk.{L}.ffn_gate_exps", Lay::Linear, kNo));
  t.push_back(layer_t(R::FfnUpExps, up, "blk.{L}.ffn_up_exps", Lay::Linear, kNo));
  t.push_back(layer_t(R::FfnDownExps, down, "blk.{L}.ffn_down_exps", Lay::Linear, kNo));
  return t;
}

// Mixtures of experts (ModelConfig::n_experts): the router's softmax over every expert, its top k, each expert a
// SwiGLU MLP of `d_expert_keys`' width. Whether the top-k weights are renormalised is the family's config key
// (norm_topk_prob; Mixtral always) and llama.cpp's fixed choice per architecture for GGUF files.
FamilyRecipe moe_recipe(const char* n_experts_key, bool gguf_norm) {
  FamilyRecipe r;
  r.n_experts_keys = {n_experts_key};
  r.gguf_expert_weights_norm = gguf_norm;
  r.sparse_step_key = "decoder_sparse_step";
  r.dense_layers_key = "mlp_only_layers";
  return r;
}

}  // namespace

void add_moe_families(std::vector<ArchSpec>& a) {
  // MixtralConfig: a Mistral block (sliding_window, null in Mixtral-8x7B) whose MLP is num_local_experts experts
  // (w1 gate, w3 up, w2 down) of intermediate_size, top num_experts_per_tok, always renormalised; llama.cpp writes
  // it as "llama" with an expert count (q/k rows interleaved like Llama's).
  a.push_back(entry(
      "mixtral", "MixtralForCausalLM", {"MixtralModel", "mixtral"}, "llama", "model.",
      moe_like(kNo, kNo, "model.layers.{L}.block_sparse_moe.gate", "model.layers.{L}.block_sparse_moe.experts.{E}.w1",
               "model.layers.{L}.block_sparse_moe.experts.{E}.w3", "model.layers.{L}.block_sparse_moe.experts.{E}.w2"),
      [] {
        FamilyRecipe r = moe_recipe("num_local_experts", true);
        r.d_expert_keys = {"intermediate_size"};
        r.expert_weights_norm = {nullptr, true};
        r.sparse_step_key = r.dense_layers_key = nullptr;
        r.sliding_window_key = "sliding_window";
        r.sliding_window_default = 4096;
        r.gguf_sliding_window_key = "attention.sliding_window";
        return r;
      }(),
      true, false, "Mixtral: a Mistral block whose MLP is a top-k mixture of SwiGLU experts"));
  // Qwen3MoeConfig: Qwen3's attention (per-head q/k norms), num_experts of moe_intermediate_size, norm_topk_prob.
  {
    auto t = moe_like(kOpt, kOpt, "model.layers.{L}.mlp.gate", "model.layers.{L}.mlp.experts.{E}.gate_proj",
                      "model.layers.{L}.mlp.experts.{E}.up_proj", "model.layers.{L}.mlp.experts.{E}.down_proj");
    t.push_back(layer_t(R::AttnQNorm, "model.layers.{L}.self_attn.q_norm", "blk.{L}.attn_q_norm", Lay::Vector, kNo));
    t.push_back(layer_t(R::AttnKNorm, "model.layers.{L}.self_attn.k_norm", "blk.{L}.attn_k_norm", Lay::Vector, kNo));
    FamilyRecipe r = moe_recipe("num_experts", true);
    r.d_mlp_keys = {"moe_intermediate_size"};
    r.qk_norm = true;
    r.refusals = qwen_recipe(true).refusals;
    a.push_back(entry("qwen3moe", "Qwen3MoeForCausalLM", {"Qwen3MoeModel", "qwen3_moe"}, "qwen3moe", "model.", std::move(t),
                      std::move(r), false, false, "Qwen3-MoE: Qwen3's attention, a top-k mixture of SwiGLU experts"));
  }
  // Qwen2MoeConfig: Qwen2's attention (q/k/v biases), experts of moe_intermediate_size never renormalised in
  // llama.cpp, and a shared expert of shared_expert_intermediate_size scaled by sigmoid(shared_expert_gate).
  {
    auto t = moe_like(kReq, kNo, "model.layers.{L}.mlp.gate", "model.layers.{L}.mlp.experts.{E}.gate_proj",
                      "model.layers.{L}.mlp.experts.{E}.up_proj", "model.layers.{L}.mlp.experts.{E}.down_proj");
    t.push_back(layer_t(R::FfnGate, "model.layers.{L}.mlp.shared_expert.gate_proj", "blk.{L}.ffn_gate_shexp", Lay::Linear, kNo));
    t.push_back(layer_t(R::FfnUp, "model.layers.{L}.mlp.shared_expert.up_proj", "blk.{L}.ffn_up_shexp", Lay::Linear, kNo));
    t.push_back(layer_t(R::FfnDown, "model.layers.{L}.mlp.shared_expert.down_proj", "blk.{L}.ffn_down_shexp", Lay::Linear, kNo));
    t.push_back(
        layer_t(R::FfnGateInpShexp, "model.layers.{L}.mlp.shared_expert_gate", "blk.{L}.ffn_gate_inp_shexp", Lay::Linear, kNo));
    FamilyRecipe r = qwen_recipe(false);
    const FamilyRecipe m = moe_recipe("num_experts", false);
    r.n_experts_keys = m.n_experts_keys;
    r.sparse_step_key = m.sparse_step_key;
    r.dense_layers_key = m.dense_layers_key;
    r.d_mlp_keys = {"shared_expert_intermediate_size"};
    r.d_expert_keys = {"moe_intermediate_size"};
    r.shared_expert = true;
    a.push_back(entry("qwen2moe", "Qwen2MoeForCausalLM", {"Qwen2MoeModel", "qwen2_moe"}, "qwen2moe", "model.", std::move(t),
                      std::move(r), false, false,
                      "Qwen2-MoE: Qwen2's attention, a top-k mixture of SwiGLU experts plus a sigmoid-gated shared expert"));
  }
  // OlmoeConfig: OLMo's q/k RMSNorm over the whole projections but norms before attention and MLP, num_experts of
  // intermediate_size, norm_topk_prob (llama.cpp never renormalises), rms_norm_eps 1e-5; clip_qkv refused.
  {
    auto t = moe_like(kOpt, kOpt, "model.layers.{L}.mlp.gate", "model.layers.{L}.mlp.experts.{E}.gate_proj",
                      "model.layers.{L}.mlp.experts.{E}.up_proj", "model.layers.{L}.mlp.experts.{E}.down_proj");
    t.push_back(layer_t(R::AttnQNorm, "model.layers.{L}.self_attn.q_norm", "blk.{L}.attn_q_norm", Lay::Vector, kNo));
    t.push_back(layer_t(R::AttnKNorm, "model.layers.{L}.self_attn.k_norm", "blk.{L}.attn_k_norm", Lay::Vector, kNo));
    FamilyRecipe r = moe_recipe("num_experts", false);
    r.sparse_step_key = r.dense_layers_key = nullptr;
    r.head_dim_key = nullptr;
    r.norm_eps_default = 1e-5;
    r.qk_norm = r.qk_norm_full = true;
    r.refused_unless_null = {{"clip_qkv", "clipping q, k and v is not supported (OLMoE-1B-7B sets null)"}};
    a.push_back(entry("olmoe", "OlmoeForCausalLM", {"OlmoeModel", "olmoe"}, "olmoe", "model.", std::move(t), std::move(r), false,
                      false, "OLMoE: RMSNorm on the whole q and k projections, a top-k mixture of SwiGLU experts"));
  }
  // GptOssConfig: Llama's attention with q/k/v/o biases and a learned sink logit per head, layers alternately
  // sliding (sliding_window) and full (layer_types, else the pattern sliding, full, ...), YaRN rotary; a biased
  // router whose softmax runs over its top num_experts_per_tok logits only; num_local_experts experts of
  // intermediate_size with biases, stored fused (gate_up_proj [E, d, 2 ff], gate and up in alternate columns;
  // down_proj [E, ff, d]), their SwiGLU clamped at swiglu_limit with gate * sigmoid(1.702 gate) * (up + 1).
  // llama.cpp ("gpt-oss") splits the experts into ffn_gate/up/down_exps and fixes the limit at 7.
  {
    auto t = moe_like(kReq, kReq, "model.layers.{L}.mlp.router", "model.layers.{L}.mlp.experts.gate_up_proj",
                      "model.layers.{L}.mlp.experts.gate_up_proj", "model.layers.{L}.mlp.experts.down_proj");
    for (auto& s : t) {
      if (s.role == R::FfnNorm) s.gguf = "blk.{L}.post_attention_norm";
      if (s.role == R::FfnGateInp) s.bias = kReq;
      if (s.role == R::FfnGateExps || s.role == R::FfnUpExps || s.role == R::FfnDownExps) {
        s.layout = Lay::ExpertsStacked;
        s.bias = kReq;
      }
    }
    t.push_back(layer_t(R::AttnSinks, "model.layers.{L}.self_attn.sinks", "blk.{L}.attn_sinks", Lay::Unsuffixed, kNo));
    FamilyRecipe r = moe_recipe("num_local_experts", false);
    r.sparse_step_key = r.dense_layers_key = nullptr;
    r.d_expert_keys = {"intermediate_size"};
    r.expert_weights_norm = {nullptr, false};
    r.expert_weights_topk_softmax = true;
    r.attn_sinks = true;
    r.attn_bias = r.attn_out_bias = {"attention_bias", true};
    r.mlp_bias = {nullptr, true};  // the experts' (the family has no dense MLP)
    r.norm_eps_default = 1e-5;
    r.rope_theta_default = 150000.0;
    r.sliding_window_key = "sliding_window";
    r.sliding_window_default = 128;
    r.sliding_pattern = 2;
    r.gguf_sliding_window_key = "attention.sliding_window";
    r.swiglu_limit_key = "swiglu_limit";
    r.swiglu_limit_default = 7.0;
    r.swiglu_alpha = 1.702;
    r.swiglu_up_offset = 1.0;
    r.refused_unless_null = {{"quantization_config",
                              "quantized experts (the released checkpoints' MXFP4 *_blocks / *_scales) are not read from a "
                              "Hugging Face directory; llama.cpp's GGUF of it keeps them MXFP4 and is read"}};
    a.push_back(entry("gpt_oss", "GptOssForCausalLM", {"GptOssModel", "gpt_oss"}, "gpt-oss", "model.", std::move(t), std::move(r),
                      false, false,
                      "GPT-OSS: attention sinks, alternating sliding and full layers, YaRN, a biased router softmaxed over "
                      "its top k, biased experts with a clamped SwiGLU"));
  }
}

}  // namespace vocablens::arch_detail
