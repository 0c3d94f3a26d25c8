// `vocablens inspect`'s description of a block: every way it departs from a plain GPT-2 block, read from
// ModelConfig alone (vocablens/arch.hpp).
#include <string>
#include <vector>

#include <fmt/format.h>

#include "vocablens/arch.hpp"

namespace vocablens {

std::vector<std::string> departures_from_gpt2(const ModelConfig& c) {
  std::vector<std::string> d;
  if (c.norm == NormKind::RMSNorm) d.push_back("RMSNorm instead of LayerNorm");
  if (c.norm_weight_offset != 0) d.push_back(fmt::format("norm scale ({:g} + w)", c.norm_weight_offset));
  if (!c.norm_before) d.push_back("post-LN: norms after the residual adds");
  if (!c.final_norm) d.push_back("no final norm");
  if (c.parallel_residual) d.push_back("parallel residual: x + attn(ln1(x)) + mlp(ln2(x))");
  if (c.positions == PositionKind::Rotary) {
    std::string r =
        fmt::format("rotary positions (theta {:g}, {}", c.rope_theta, c.rope_interleaved ? "interleaved pairs" : "rotate_half");
    if (c.rotary_dim > 0 && c.rotary_dim != c.d_head) r += fmt::format(", partial: {} of {} features", c.rotary_dim, c.d_head);
    if (c.rope_scaling == ModelConfig::RopeScaling::Linear) r += fmt::format(", linear scaling x{:g}", c.rope_factor);
    if (c.rope_scaling == ModelConfig::RopeScaling::Llama3)
      r += fmt::format(", llama3 scaling x{:g} (low {:g}, high {:g}, original context {})", c.rope_factor, c.rope_low_freq_factor,
                       c.rope_high_freq_factor, c.rope_original_context);
    if (c.rope_scaling == ModelConfig::RopeScaling::Yarn)
      r += fmt::format(", yarn scaling x{:g} (beta_fast {:g}, beta_slow {:g}, original context {}, attention factor {:g})",
                       c.rope_factor, c.rope_yarn_beta_fast, c.rope_yarn_beta_slow, c.rope_original_context,
                       c.rope_attention_factor);
    if (c.rope_theta_local > 0) r += fmt::format("; sliding-window layers: theta {:g}, unscaled", c.rope_theta_local);
    std::string none;
    for (size_t l = 0; l < c.rotary_layers.size(); ++l)
      if (!c.rotary_layers[l]) none += (none.empty() ? "" : ", ") + std::to_string(l);
    if (!none.empty()) r += "; no rotary on layers " + none;
    d.push_back(r + ") instead of learned positions");
  } else if (c.positions != PositionKind::Learned) {
    d.push_back(std::string(to_string(c.positions)) + " positions instead of learned ones");
  }
  if (c.position_offset != 0) d.push_back(fmt::format("learned position table offset by {}", c.position_offset));
  if (c.d_embed > 0 && c.d_embed != c.d_model)
    d.push_back(fmt::format("embeddings of width {} projected in/out (folded into W_E and W_U)", c.d_embed));
  if (c.embed_scale != 1.0) d.push_back(fmt::format("embeddings multiplied by {:g}", c.embed_scale));
  if (c.embed_norm) d.push_back("embeddings normalised before the first block");
  if (c.n_kv_heads != c.n_heads)
    d.push_back(fmt::format("grouped-query attention ({} query heads share {} key/value heads)", c.n_heads, c.n_kv_heads));
  if (c.n_heads * c.d_head != c.d_model)
    d.push_back(fmt::format("head_dim {} independent of d_model / n_heads = {}", c.d_head, c.d_model / c.n_heads));
  if (!c.attn_bias && !c.attn_out_bias) d.push_back("no attention biases");
  else if (!c.attn_out_bias) d.push_back("q/k/v biases but no output-projection bias");
  else if (!c.attn_bias) d.push_back("output-projection bias but no q/k/v biases");
  if (c.qk_norm) d.push_back(c.qk_norm_full ? "RMSNorm on q and k over all heads at once" : "per-head RMSNorm on q and k");
  if (!c.input_norms) d.push_back("no norm before attention and MLP");
  if (c.attn_scale != 0) d.push_back(fmt::format("attention scale {:g} instead of 1/sqrt(d_head)", c.attn_scale));
  if (c.attn_softcap != 0) d.push_back(fmt::format("attention logits soft-capped at {:g}", c.attn_softcap));
  if (c.attn_sinks) d.push_back("a learned sink logit per head joins the attention softmax (rows sum to less than 1)");
  if (c.sliding_window > 0 && !c.sliding_layers.empty()) {
    std::string full;
    for (size_t l = 0; l < c.sliding_layers.size(); ++l)
      if (!c.sliding_layers[l]) full += (full.empty() ? "" : ", ") + std::to_string(l);
    d.push_back(
        fmt::format("sliding window {} except on layers {} (full attention)", c.sliding_window, full.empty() ? "none" : full));
  } else if (c.sliding_window > 0)
    d.push_back(
        c.sliding_pattern == 2  ? fmt::format("sliding window {} on even layers, full attention on odd layers", c.sliding_window)
        : c.sliding_pattern > 2 ? fmt::format("sliding window {} except on every {}th layer", c.sliding_window, c.sliding_pattern)
                                : fmt::format("sliding-window attention ({} positions)", c.sliding_window));
  if (c.post_attn_norm) d.push_back("norm after attention, before the residual add");
  if (c.post_mlp_norm) d.push_back("norm after the MLP, before the residual add");
  if (c.n_experts > 0)
    d.push_back(fmt::format("mixture of experts: {}, top {} of {} gated experts of width {}{} on each token{}",
                            c.expert_weights_topk_softmax ? "router softmax over its top-k logits only" : "softmax router",
                            c.n_experts_used, c.n_experts, c.d_expert, c.expert_weights_norm ? " (weights renormalised)" : "",
                            c.shared_expert ? fmt::format(", plus a sigmoid-gated shared expert of width {}", c.d_mlp) : ""));
  if (c.gated_mlp && c.glu_limit > 0)
    d.push_back(
        fmt::format("gated MLP: clamped SwiGLU g * sigmoid({:g} g) * (u + {:g}), g = min(x W_gate, {:g}), u = x W_in clamped to "
                    "+-{:g}",
                    c.glu_alpha, c.glu_up_offset, c.glu_limit, c.glu_limit));
  else if (c.gated_mlp) d.push_back(fmt::format("gated MLP: {}(x W_gate) * (x W_in)", to_string(c.activation)));
  else if (c.activation != Activation::GeluNew) d.push_back(fmt::format("{} MLP instead of gelu_new", to_string(c.activation)));
  if (!c.mlp_bias) d.push_back("no MLP biases");
  if (!c.tied_embeddings) d.push_back("separate (untied) unembedding");
  if (c.final_softcap != 0) d.push_back(fmt::format("final logits soft-capped at {:g}", c.final_softcap));
  return d;
}

}  // namespace vocablens
