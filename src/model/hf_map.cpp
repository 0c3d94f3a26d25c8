// Hugging Face tensors -> ModelWeights by role, driven by the architecture table (vocablens/arch.hpp).
#include "model/hf_map.hpp"

#include <ATen/ATen.h>

#include "vocablens/arch.hpp"
#include "vocablens/error.hpp"
#include "vocablens/weight.hpp"

namespace vocablens::detail {
namespace {

std::string shape_of(at::IntArrayRef s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

class Mapper {
 public:
  Mapper(const TensorStore& st, const ModelConfig& c, const std::string& cp)
      : st_(st), c_(c), a_(architecture(c.family)), cp_(cp) {}

  /// The stored name of role r (layer, suffix), with or without the base prefix; "" when absent.
  std::string find(TensorRole r, int64_t layer, const char* suffix) const {
    const TensorSpec* t = find_tensor(a_, r);
    if (!t) return "";
    const std::string full = tensor_name(t->hf, layer) + suffix;
    if (st_.has(full)) return full;
    const std::string pre = a_.hf_base_prefix ? a_.hf_base_prefix : "";
    if (!pre.empty() && full.rfind(pre, 0) == 0 && st_.has(full.substr(pre.size()))) return full.substr(pre.size());
    // The language model inside a multimodal checkpoint (Gemma3ForConditionalGeneration): saved under
    // "language_model." by the released files, under "model.language_model." (in place of the base prefix)
    // by newer transformers.
    if (st_.has("language_model." + full)) return "language_model." + full;
    if (!pre.empty() && full.rfind(pre, 0) == 0) {
      const std::string nested = "model.language_model." + full.substr(pre.size());
      if (st_.has(nested)) return nested;
    }
    return "";
  }
  bool has(TensorRole r, int64_t layer = -1, const char* suffix = ".weight") const { return !find(r, layer, suffix).empty(); }

  /// `full` as this file would name it: without the base prefix when the file's names lack it.
  std::string file_style(const std::string& full) const {
    const std::string pre = a_.hf_base_prefix ? a_.hf_base_prefix : "";
    if (pre.empty() || full.rfind(pre, 0) != 0) return full;
    for (const auto& kv : st_.tensors)
      if (kv.first.rfind(pre, 0) == 0) return full;
    return full.substr(pre.size());
  }

  /// The stored tensor with exactly `shape`; FormatError naming the tensor and both shapes otherwise.
  at::Tensor get(TensorRole r, int64_t layer, const char* suffix, std::vector<int64_t> shape, bool required = true) const {
    std::string n = find(r, layer, suffix);
    if (n.empty()) {
      if (!required) return at::Tensor();
      const TensorSpec* t = find_tensor(a_, r);
      throw FormatError(st_.source, "missing tensor '" +
                                        (t ? file_style(tensor_name(t->hf, layer) + suffix) : std::string(to_string(r))) + "' (" +
                                        a_.hf_architecture + ")");
    }
    const at::Tensor& t = checked(n, shape);
    const auto ty = t.scalar_type();
    // Matrices stay as stored (float16/bfloat16 views of the file; the runner upcasts per tile,
    // vocablens/weight.hpp); vectors (norms, biases) are tiny and become float32 so every elementwise op
    // runs in float32.
    if (t.dim() < 2 && ty != at::kFloat) return t.to(at::kFloat);
    return t;
  }

  /// A bias the config governs: read when `wanted` (then required), ignored otherwise (as Hugging Face does).
  at::Tensor bias(TensorRole r, int64_t layer, std::vector<int64_t> shape, bool wanted) const {
    const TensorSpec* t = find_tensor(a_, r);
    if (!t || t->bias == BiasKind::None) return at::Tensor();
    if (t->bias == BiasKind::Required || wanted) return get(r, layer, ".bias", std::move(shape), true);
    return at::Tensor();
  }

  at::Tensor norm(TensorRole r, int64_t layer, int64_t n, bool required = true) const {
    at::Tensor w = get(r, layer, ".weight", {n}, required);
    // Gemma scales by (1 + w), its q/k norms too (Gemma 3): folded once here, so every consumer sees the
    // effective scale.
    if (w.defined() && c_.norm_weight_offset != 0) w = w + c_.norm_weight_offset;
    return w;
  }

  // Config fields that contradict the q/k/v tensors: one line naming the field and both values.
  void check_heads(int64_t layer) const {
    const int64_t d = c_.d_model, H = c_.n_heads, Hkv = c_.n_kv_heads, dh = c_.d_head;
    auto rows = [&](TensorRole r) -> int64_t {
      std::string n = find(r, layer, ".weight");
      return n.empty() ? -1 : st_.get(n).size(0);
    };
    const auto& q_spec = find_tensor(a_, TensorRole::AttnQ);
    if (q_spec && q_spec->layout == TensorLayout::Linear) {
      int64_t qr = rows(TensorRole::AttnQ), kr = rows(TensorRole::AttnK);
      if (qr > 0 && qr != H * dh && qr % H == 0)
        throw FormatError(cp_, "head_dim = " + std::to_string(dh) + " but " + find(TensorRole::AttnQ, layer, ".weight") +
                                   " has " + std::to_string(qr) + " rows = " + std::to_string(H) + " heads of " +
                                   std::to_string(qr / H));
      if (kr > 0 && kr != Hkv * dh && kr % dh == 0)
        throw FormatError(cp_, "num_key_value_heads = " + std::to_string(Hkv) + " but " +
                                   find(TensorRole::AttnK, layer, ".weight") + " has " + std::to_string(kr) +
                                   " rows = " + std::to_string(kr / dh) + " heads of head_dim " + std::to_string(dh));
    }
    const auto& qkv_spec = find_tensor(a_, TensorRole::AttnQKV);
    if (qkv_spec && qkv_spec->layout == TensorLayout::FusedQKV) {
      int64_t r = rows(TensorRole::AttnQKV);
      if (r > 0 && r != (H + 2 * Hkv) * dh && r % dh == 0 && (r / dh - H) % 2 == 0 && r / dh > H)
        throw FormatError(cp_, "num_key_value_heads = " + std::to_string(Hkv) + " but " +
                                   find(TensorRole::AttnQKV, layer, ".weight") + " has " + std::to_string(r) +
                                   " rows = " + std::to_string(H) + " query heads + 2 x " + std::to_string((r / dh - H) / 2) +
                                   " key/value heads of head_dim " + std::to_string(dh));
    }
    (void)d;
  }

  ModelWeights map() const {
    const int64_t d = c_.d_model, V = c_.vocab_size, m = c_.d_mlp, H = c_.n_heads, Hkv = c_.n_kv_heads, dh = c_.d_head;
    const int64_t qd = H * dh, kd = Hkv * dh;
    ModelWeights w;
    const int64_t de = c_.d_embed > 0 ? c_.d_embed : d;
    at::Tensor emb = get(TensorRole::TokenEmbd, -1, ".weight", {V, de});
    w.W_E = emb;
    if (de != d) {  // OPT project_in [d, de]: W_E = embed_tokens @ project_in^T, the vectors the residual stream starts from
      at::Tensor pin = get(TensorRole::ProjectIn, -1, ".weight", {d, de});
      w.W_E = at::mm(materialize_weight(emb), materialize_weight(pin).t());  // folded in float32
    }
    if (c_.positions == PositionKind::Learned) {
      at::Tensor pos = get(TensorRole::PosEmbd, -1, ".weight", {c_.n_ctx + c_.position_offset, d});
      w.W_pos = c_.position_offset ? pos.narrow(0, c_.position_offset, c_.n_ctx) : pos;
    }
    if (c_.embed_norm) {  // BLOOM: word_embeddings_layernorm
      w.emb_norm_w = norm(TensorRole::TokenEmbdNorm, -1, d);
      if (c_.norm == NormKind::LayerNorm) w.emb_norm_b = get(TensorRole::TokenEmbdNorm, -1, ".bias", {d});
    }
    if (c_.final_norm) {
      w.lnf_w = norm(TensorRole::OutputNorm, -1, d);
      w.lnf_b = c_.norm == NormKind::LayerNorm ? get(TensorRole::OutputNorm, -1, ".bias", {d}) : at::Tensor();
    }
    for (int64_t i = 0; i < c_.n_layers; ++i) {
      check_heads(i);
      LayerWeights L;
      const bool ln = c_.norm == NormKind::LayerNorm;
      if (c_.input_norms) {
        L.ln1_w = norm(TensorRole::AttnNorm, i, d);
        if (ln) L.ln1_b = get(TensorRole::AttnNorm, i, ".bias", {d});
        L.ln2_w = norm(TensorRole::FfnNorm, i, d);
        if (ln) L.ln2_b = get(TensorRole::FfnNorm, i, ".bias", {d});
      }
      map_attention(L, i, d, qd, kd);
      if (c_.n_experts == 0 || c_.shared_expert) map_mlp(L, i, d, m);
      if (c_.n_experts > 0) map_experts(L, i, d);
      if (c_.qk_norm) {
        L.q_norm_w = norm(TensorRole::AttnQNorm, i, c_.qk_norm_full ? qd : dh);
        L.k_norm_w = norm(TensorRole::AttnKNorm, i, c_.qk_norm_full ? kd : dh);
      }
      if (c_.post_attn_norm) L.post_attn_norm_w = norm(TensorRole::AttnPostNorm, i, d);
      if (c_.post_mlp_norm) L.post_mlp_norm_w = norm(TensorRole::FfnPostNorm, i, d);
      w.layers.push_back(std::move(L));
    }
    at::Tensor head = has(TensorRole::Output) ? get(TensorRole::Output, -1, ".weight", {V, de}) : at::Tensor();
    if (!head.defined()) {
      if (!c_.tied_embeddings)
        throw FormatError(st_.source, "missing tensor '" + file_style(tensor_name(find_tensor(a_, TensorRole::Output)->hf)) +
                                          ".weight' (config.json says the embeddings are not tied)");
      head = emb;
    }
    if (de != d) {  // OPT project_out [de, d]: W_U = project_out^T @ lm_head^T
      at::Tensor pout = get(TensorRole::ProjectOut, -1, ".weight", {de, d});
      w.W_U = at::mm(materialize_weight(head), materialize_weight(pout)).t();
    } else {
      w.W_U = head.t();
    }
    // A biased lm_head (Phi-2): the table says the family's has one.
    if (has(TensorRole::Output)) w.b_U = bias(TensorRole::Output, -1, {V}, false);
    return w;
  }

 private:
  void map_attention(LayerWeights& L, int64_t i, int64_t d, int64_t qd, int64_t kd) const {
    const int64_t H = c_.n_heads, dh = c_.d_head;
    const TensorSpec* qkv = find_tensor(a_, TensorRole::AttnQKV);
    const bool qb = c_.attn_bias;
    if (!qkv) {
      L.w_q = get(TensorRole::AttnQ, i, ".weight", {qd, d}).t();
      L.w_k = get(TensorRole::AttnK, i, ".weight", {kd, d}).t();
      L.w_v = get(TensorRole::AttnV, i, ".weight", {kd, d}).t();
      L.b_q = bias(TensorRole::AttnQ, i, {qd}, qb);
      L.b_k = bias(TensorRole::AttnK, i, {kd}, qb);
      L.b_v = bias(TensorRole::AttnV, i, {kd}, qb);
    } else if (qkv->layout == TensorLayout::FusedQKVConv1D) {  // GPT-2 c_attn [d, 3d]: column blocks
      at::Tensor W = get(TensorRole::AttnQKV, i, ".weight", {d, qd + 2 * kd});
      L.w_q = W.narrow(1, 0, qd);
      L.w_k = W.narrow(1, qd, kd);
      L.w_v = W.narrow(1, qd + kd, kd);
      at::Tensor b = bias(TensorRole::AttnQKV, i, {qd + 2 * kd}, qb);
      if (b.defined()) L.b_q = b.narrow(0, 0, qd), L.b_k = b.narrow(0, qd, kd), L.b_v = b.narrow(0, qd + kd, kd);
    } else if (qkv->layout == TensorLayout::FusedQKV) {  // Phi-3 qkv_proj [qd + 2 kd, d]: row blocks
      at::Tensor W = get(TensorRole::AttnQKV, i, ".weight", {qd + 2 * kd, d});
      L.w_q = W.narrow(0, 0, qd).t();
      L.w_k = W.narrow(0, qd, kd).t();
      L.w_v = W.narrow(0, qd + kd, kd).t();
      at::Tensor b = bias(TensorRole::AttnQKV, i, {qd + 2 * kd}, qb);
      if (b.defined()) L.b_q = b.narrow(0, 0, qd), L.b_k = b.narrow(0, qd, kd), L.b_v = b.narrow(0, qd + kd, kd);
    } else {  // GPT-NeoX query_key_value [H * 3 * dh, d]: rows grouped per head (q, k, v of head 0, then head 1, ...)
      at::Tensor W = get(TensorRole::AttnQKV, i, ".weight", {3 * qd, d}).view({H, 3, dh, d});
      L.w_q = W.select(1, 0).reshape({qd, d}).t();
      L.w_k = W.select(1, 1).reshape({qd, d}).t();
      L.w_v = W.select(1, 2).reshape({qd, d}).t();
      at::Tensor b = bias(TensorRole::AttnQKV, i, {3 * qd}, qb);
      if (b.defined()) {
        b = b.view({H, 3, dh});
        L.b_q = b.select(1, 0).reshape({qd}), L.b_k = b.select(1, 1).reshape({qd}), L.b_v = b.select(1, 2).reshape({qd});
      }
    }
    const TensorSpec* o = find_tensor(a_, TensorRole::AttnOut);
    L.w_o = o->layout == TensorLayout::Conv1D ? get(TensorRole::AttnOut, i, ".weight", {qd, d})
                                              : get(TensorRole::AttnOut, i, ".weight", {d, qd}).t();
    L.b_o = bias(TensorRole::AttnOut, i, {d}, c_.attn_out_bias);
    if (c_.attn_sinks) L.sinks = get(TensorRole::AttnSinks, i, "", {H});  // GPT-OSS self_attn.sinks, no ".weight"
  }

  // The router and each expert's matrices as stored (views, "x @ W"); the router's rows must be the config's
  // expert count, and no expert may lie beyond it.
  void map_experts(LayerWeights& L, int64_t i, int64_t d) const {
    const int64_t E = c_.n_experts, me = c_.d_expert;
    const std::string router = find(TensorRole::FfnGateInp, i, ".weight");
    if (!router.empty() && st_.get(router).dim() == 2 && st_.get(router).size(0) != E && st_.get(router).size(1) == d)
      throw FormatError(cp_, "the config gives " + std::to_string(E) + " experts but '" + router + "' routes to " +
                                 std::to_string(st_.get(router).size(0)));
    L.w_router = get(TensorRole::FfnGateInp, i, ".weight", {E, d}).t();
    L.b_router = bias(TensorRole::FfnGateInp, i, {E}, true);
    if (find_tensor(a_, TensorRole::FfnGateExps)->layout == TensorLayout::ExpertsStacked) return map_stacked_experts(L, i, d);
    const std::string beyond = stored(expert_name(TensorRole::FfnGateExps, i, E));
    if (!beyond.empty())
      throw FormatError(cp_, "the config gives " + std::to_string(E) + " experts but the checkpoint has '" + beyond + "'");
    for (int64_t e = 0; e < E; ++e) {
      L.exp_gate.push_back(expert(TensorRole::FfnGateExps, i, e, {me, d}).t());
      L.exp_up.push_back(expert(TensorRole::FfnUpExps, i, e, {me, d}).t());
      L.exp_down.push_back(expert(TensorRole::FfnDownExps, i, e, {d, me}).t());
    }
    if (find_tensor(a_, TensorRole::FfnGateInpShexp))
      L.w_shared_gate = get(TensorRole::FfnGateInpShexp, i, ".weight", {1, d}).t();
  }
  // GPT-OSS: every expert in one "x @ W" tensor [E, in, out] (no ".weight"), gate and up in alternate columns of
  // gate_up_proj [E, d, 2 me]; biases "<name>_bias" [E, out]. Each expert's matrices are views of the file.
  void map_stacked_experts(LayerWeights& L, int64_t i, int64_t d) const {
    const int64_t E = c_.n_experts, me = c_.d_expert;
    const std::string gu_name = find(TensorRole::FfnGateExps, i, "");
    if (!gu_name.empty() && st_.get(gu_name).dim() == 3 && st_.get(gu_name).size(0) != E)
      throw FormatError(cp_, "the config gives " + std::to_string(E) + " experts but '" + gu_name + "' holds " +
                                 std::to_string(st_.get(gu_name).size(0)));
    const at::Tensor gu = get(TensorRole::FfnGateExps, i, "", {E, d, 2 * me});
    const at::Tensor gu_b = get(TensorRole::FfnGateExps, i, "_bias", {E, 2 * me});
    const at::Tensor down = get(TensorRole::FfnDownExps, i, "", {E, me, d});
    const at::Tensor down_b = get(TensorRole::FfnDownExps, i, "_bias", {E, d});
    for (int64_t e = 0; e < E; ++e) {
      L.exp_gate.push_back(gu[e].slice(1, 0, 2 * me, 2));
      L.exp_up.push_back(gu[e].slice(1, 1, 2 * me, 2));
      L.exp_down.push_back(down[e]);
      L.exp_gate_b.push_back(gu_b[e].slice(0, 0, 2 * me, 2).to(at::kFloat));
      L.exp_up_b.push_back(gu_b[e].slice(0, 1, 2 * me, 2).to(at::kFloat));
      L.exp_down_b.push_back(down_b[e].to(at::kFloat));
    }
  }
  std::string expert_name(TensorRole r, int64_t layer, int64_t e) const {
    return tensor_name(find_tensor(a_, r)->hf, layer, e) + ".weight";
  }
  // `full` or `full` without the base prefix, whichever the file has; "" when neither (one lookup each: a
  // model of 128 experts has tens of thousands of names).
  std::string stored(const std::string& full) const {
    if (st_.has(full)) return full;
    const std::string pre = a_.hf_base_prefix ? a_.hf_base_prefix : "";
    if (!pre.empty() && full.rfind(pre, 0) == 0 && st_.has(full.substr(pre.size()))) return full.substr(pre.size());
    return "";
  }
  at::Tensor expert(TensorRole r, int64_t layer, int64_t e, std::vector<int64_t> shape) const {
    const std::string full = expert_name(r, layer, e);
    const std::string n = stored(full);
    if (n.empty()) throw FormatError(st_.source, "missing tensor '" + full + "' (" + a_.hf_architecture + ")");
    return checked(n, shape);
  }

  /// The stored tensor `n`, which must have exactly `shape` and a floating-point type (one line naming it otherwise).
  const at::Tensor& checked(const std::string& n, const std::vector<int64_t>& shape) const {
    const at::Tensor& t = st_.get(n);
    if (t.sizes() != at::IntArrayRef(shape))
      throw FormatError(st_.source,
                        "tensor '" + n + "' has shape " + shape_of(t.sizes()) + " but " + cp_ + " implies " + shape_of(shape));
    const auto ty = t.scalar_type();
    if (ty != at::kFloat && ty != at::kHalf && ty != at::kBFloat16)
      throw FormatError(st_.source, "tensor '" + n + "' is not a floating-point tensor");
    return t;
  }

  void map_mlp(LayerWeights& L, int64_t i, int64_t d, int64_t m) const {
    const bool mb = c_.mlp_bias;
    if (find_tensor(a_, TensorRole::FfnGateUp)) {  // Phi-3 gate_up_proj [2m, d]: gate rows first, then up
      at::Tensor W = get(TensorRole::FfnGateUp, i, ".weight", {2 * m, d});
      L.w_gate = W.narrow(0, 0, m).t();
      L.w_in = W.narrow(0, m, m).t();
    } else {
      const bool conv = find_tensor(a_, TensorRole::FfnUp)->layout == TensorLayout::Conv1D;
      L.w_in = conv ? get(TensorRole::FfnUp, i, ".weight", {d, m}) : get(TensorRole::FfnUp, i, ".weight", {m, d}).t();
      L.b_in = bias(TensorRole::FfnUp, i, {m}, mb);
      if (c_.gated_mlp) {
        L.w_gate = get(TensorRole::FfnGate, i, ".weight", {m, d}).t();
        L.b_gate = bias(TensorRole::FfnGate, i, {m}, mb);
      }
    }
    const bool conv = find_tensor(a_, TensorRole::FfnDown)->layout == TensorLayout::Conv1D;
    L.w_out = conv ? get(TensorRole::FfnDown, i, ".weight", {m, d}) : get(TensorRole::FfnDown, i, ".weight", {d, m}).t();
    L.b_out = bias(TensorRole::FfnDown, i, {d}, mb);
  }

  const TensorStore& st_;
  const ModelConfig& c_;
  const ArchSpec& a_;
  std::string cp_;
};

}  // namespace

ModelWeights map_hf_weights(const TensorStore& st, const ModelConfig& c, const std::string& cfg_path) {
  return Mapper(st, c, cfg_path).map();
}

}  // namespace vocablens::detail
