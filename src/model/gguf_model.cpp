// GGUF -> Model. Names and keys follow llama.cpp (src/llama-arch.cpp): token_embd, position_embd,
// output_norm, output, blk.N.{attn_norm, attn_qkv, attn_q, attn_k, attn_v, attn_output, ffn_norm,
// ffn_gate, ffn_up, ffn_down}; "<arch>.block_count", "<arch>.embedding_length", ...
// A ggml matrix with ne = {in, out} is stored as `out` rows of `in` values: the [out, in] layout of
// nn.Linear, so the "x @ W" weight is its transpose (a view).
#include "model/gguf_model.hpp"

#include <set>

#include "checkpoint/mapped_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/weight.hpp"

namespace vocablens {
namespace {

struct Reader {
  const GgufFile& g;
  std::set<std::string> used;

  const GgufTensorInfo& info(const std::string& name) {
    const GgufTensorInfo* t = g.find(name);
    if (!t) throw FormatError(g.path, "missing tensor '" + name + "'");
    used.insert(name);
    return *t;
  }
  bool has(const std::string& name) const { return g.find(name) != nullptr; }
  static std::string dims(const std::vector<int64_t>& ne) {
    std::string s = "{";
    for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "}";
  }
  void check(const GgufTensorInfo& t, std::vector<int64_t> ne) {
    std::vector<int64_t> have = t.ne;
    while (have.size() > ne.size() && have.back() == 1) have.pop_back();
    if (have != ne)
      throw FormatError(g.path, "tensor '" + t.name + "' has ne " + dims(t.ne) + " but the metadata implies " + dims(ne));
  }
  // [out, in] matrix (ggml ne {in, out}) in its stored type.
  at::Tensor matrix(const std::string& name, int64_t out, int64_t in) {
    const auto& t = info(name);
    check(t, {in, out});
    switch (t.type) {
      case GgmlType::F32: return view_as_tensor(g.file, t.offset, {out, in}, {}, at::kFloat);
      case GgmlType::F16: return view_as_tensor(g.file, t.offset, {out, in}, {}, at::kHalf);
      case GgmlType::BF16: return view_as_tensor(g.file, t.offset, {out, in}, {}, at::kBFloat16);
      default: break;
    }
    if (!ggml_can_dequantize(t.type))
      throw FormatError(g.path, "tensor '" + name + "' has type " + ggml_type_name(static_cast<uint32_t>(t.type)) +
                                    ", which vocablens cannot dequantize");
    return make_packed_weight(std::static_pointer_cast<const void>(g.file), g.tensor_data(t), t.type, out, in);
  }
  // A vector (norm weight, bias) as float32.
  at::Tensor vec(const std::string& name, int64_t n) {
    const auto& t = info(name);
    check(t, {n});
    at::Tensor v = at::empty({n}, at::kFloat);
    dequantize_row(t.type, g.tensor_data(t), v.data_ptr<float>(), n);
    return v;
  }
  at::Tensor opt_vec(const std::string& name, int64_t n) { return has(name) ? vec(name, n) : at::Tensor(); }
};

int64_t need_int(const GgufFile& g, const std::string& key) {
  if (!g.metadata.contains(key)) throw FormatError(g.path, "missing metadata '" + key + "'");
  if (!g.metadata[key].is_number_integer()) throw FormatError(g.path, "metadata '" + key + "' is " + g.metadata_types.at(key) + ", expected an integer");
  int64_t v = g.get_int(key, 0);
  if (v <= 0 || v > (int64_t(1) << 40)) throw FormatError(g.path, "metadata '" + key + "' = " + std::to_string(v) + " is out of range");
  return v;
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& g) {
  const std::string arch = g.get_string("general.architecture", "");
  if (arch.empty()) throw FormatError(g.path, "missing metadata 'general.architecture'");
  if (arch != "gpt2" && arch != "llama")
    throw FormatError(g.path, "GGUF architecture '" + arch + "' is not supported (supported: gpt2, llama)");
  ModelConfig c;
  c.architecture = arch + " (GGUF)";
  const std::string a = arch + ".";
  c.n_layers = need_int(g, a + "block_count");
  c.d_model = need_int(g, a + "embedding_length");
  c.d_mlp = need_int(g, a + "feed_forward_length");
  c.n_heads = need_int(g, a + "attention.head_count");
  c.n_kv_heads = g.metadata.contains(a + "attention.head_count_kv") ? need_int(g, a + "attention.head_count_kv") : c.n_heads;
  c.n_ctx = need_int(g, a + "context_length");
  if (c.d_model % c.n_heads != 0) throw FormatError(g.path, "embedding_length is not a multiple of attention.head_count");
  c.d_head = g.metadata.contains(a + "attention.key_length") ? need_int(g, a + "attention.key_length") : c.d_model / c.n_heads;
  if (c.n_heads % c.n_kv_heads != 0) throw FormatError(g.path, "attention.head_count is not a multiple of head_count_kv");
  const GgufTensorInfo* emb = g.find("token_embd.weight");
  if (!emb) throw FormatError(g.path, "missing tensor 'token_embd.weight'");
  if (emb->ne.size() != 2) throw FormatError(g.path, "tensor 'token_embd.weight' is not a matrix");
  c.vocab_size = emb->ne[1];
  if (c.vocab_size < 1 || emb->ne[0] != c.d_model)
    throw FormatError(g.path, "tensor 'token_embd.weight' has ne {" + std::to_string(emb->ne[0]) + ", " + std::to_string(emb->ne[1]) +
                                  "}, expected {" + std::to_string(c.d_model) + ", vocabulary size >= 1}");
  c.tied_embeddings = g.find("output.weight") == nullptr;
  // The tensors must agree with block_count: no blk.N beyond it.
  for (auto& t : g.tensors) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    int64_t n = std::atoll(t.name.c_str() + 4);
    if (n >= c.n_layers)
      throw FormatError(g.path, "tensor '" + t.name + "' lies beyond " + a + "block_count = " + std::to_string(c.n_layers));
  }
  if (arch == "gpt2") {
    c.family = Family::GPT2;
    c.norm = NormKind::LayerNorm;
    c.norm_eps = g.get_float(a + "attention.layer_norm_epsilon", 1e-5);
    c.positions = PositionKind::Learned;
    c.activation = Activation::GeluNew;
    c.gated_mlp = false;
    c.attn_bias = c.mlp_bias = true;
  } else {
    c.family = Family::Llama;
    c.norm = NormKind::RMSNorm;
    c.norm_eps = g.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5);
    c.positions = PositionKind::Rotary;
    c.rope_theta = g.get_float(a + "rope.freq_base", 10000.0);
    const int64_t rdim = g.metadata.contains(a + "rope.dimension_count") ? need_int(g, a + "rope.dimension_count") : c.d_head;
    if (c.d_head % 2 != 0) throw FormatError(g.path, "rotary embeddings need an even head size, not " + std::to_string(c.d_head));
    if (rdim != c.d_head)
      throw FormatError(g.path, "partial rotary embeddings (rope.dimension_count " + std::to_string(rdim) + " < head size " +
                                    std::to_string(c.d_head) + ") are not supported");
    const std::string scaling = g.get_string(a + "rope.scaling.type", "none");
    if (scaling != "none" && g.get_float(a + "rope.scaling.factor", 1.0) != 1.0)
      throw FormatError(g.path, "rope scaling '" + scaling + "' is not supported");
    // llama.cpp's converter permutes llama q/k rows from Hugging Face's rotate_half order to the
    // interleaved pairs of Meta's code (ggml's "normal" rope): the runner follows that convention.
    c.rope_interleaved = true;
    c.activation = Activation::SiLU;
    c.gated_mlp = true;
    c.attn_bias = g.find("blk.0.attn_q.bias") != nullptr;
    c.mlp_bias = g.find("blk.0.ffn_up.bias") != nullptr;
  }
  c.bos_token_id = g.get_int("tokenizer.ggml.bos_token_id", -1);
  c.eos_token_id = g.get_int("tokenizer.ggml.eos_token_id", -1);
  std::set<std::string> types;
  for (auto& t : g.tensors) types.insert(ggml_type_name(static_cast<uint32_t>(t.type)));
  c.weight_dtype.clear();
  for (auto& s : types) c.weight_dtype += (c.weight_dtype.empty() ? "" : "+") + s;
  return c;
}

Model load_gguf_model(const GgufFile& g) {
  ModelConfig c = gguf_model_config(g);
  Reader r{g, {}};
  const int64_t d = c.d_model, V = c.vocab_size, m = c.d_mlp, qd = c.n_heads * c.d_head, kd = c.n_kv_heads * c.d_head;
  ModelWeights w;
  w.W_E = r.matrix("token_embd.weight", V, d);
  if (c.positions == PositionKind::Learned) w.W_pos = r.matrix("position_embd.weight", c.n_ctx, d);
  w.lnf_w = r.vec("output_norm.weight", d);
  if (c.norm == NormKind::LayerNorm) w.lnf_b = r.vec("output_norm.bias", d);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights L;
    L.ln1_w = r.vec(p + "attn_norm.weight", d);
    L.ln2_w = r.vec(p + "ffn_norm.weight", d);
    if (c.norm == NormKind::LayerNorm) {
      L.ln1_b = r.vec(p + "attn_norm.bias", d);
      L.ln2_b = r.vec(p + "ffn_norm.bias", d);
    }
    if (r.has(p + "attn_qkv.weight")) {
      at::Tensor qkv = r.matrix(p + "attn_qkv.weight", qd + 2 * kd, d).t();  // [d, q|k|v]
      L.w_q = qkv.narrow(1, 0, qd);
      L.w_k = qkv.narrow(1, qd, kd);
      L.w_v = qkv.narrow(1, qd + kd, kd);
      if (r.has(p + "attn_qkv.bias")) {
        at::Tensor b = r.vec(p + "attn_qkv.bias", qd + 2 * kd);
        L.b_q = b.narrow(0, 0, qd);
        L.b_k = b.narrow(0, qd, kd);
        L.b_v = b.narrow(0, qd + kd, kd);
      }
    } else {
      L.w_q = r.matrix(p + "attn_q.weight", qd, d).t();
      L.w_k = r.matrix(p + "attn_k.weight", kd, d).t();
      L.w_v = r.matrix(p + "attn_v.weight", kd, d).t();
      L.b_q = r.opt_vec(p + "attn_q.bias", qd);
      L.b_k = r.opt_vec(p + "attn_k.bias", kd);
      L.b_v = r.opt_vec(p + "attn_v.bias", kd);
    }
    L.w_o = r.matrix(p + "attn_output.weight", d, qd).t();
    L.b_o = r.opt_vec(p + "attn_output.bias", d);
    L.w_in = r.matrix(p + "ffn_up.weight", m, d).t();
    L.b_in = r.opt_vec(p + "ffn_up.bias", m);
    if (c.gated_mlp) {
      L.w_gate = r.matrix(p + "ffn_gate.weight", m, d).t();
      L.b_gate = r.opt_vec(p + "ffn_gate.bias", m);
    }
    L.w_out = r.matrix(p + "ffn_down.weight", d, m).t();
    L.b_out = r.opt_vec(p + "ffn_down.bias", d);
    w.layers.push_back(std::move(L));
  }
  if (!c.tied_embeddings) w.W_U = r.matrix("output.weight", V, d).t();
  else w.W_U = w.W_E.t();
  // Tensors nobody reads would be silently ignored weights: refuse them (rope_freqs etc. are named).
  for (auto& t : g.tensors)
    if (!r.used.count(t.name))
      throw FormatError(g.path, "tensor '" + t.name + "' is not used by the " + c.architecture + " model (unsupported variant)");
  return Model(std::move(c), std::move(w), g.path);
}

Model load_gguf_model(const std::string& path) { return load_gguf_model(read_gguf(path)); }

}  // namespace vocablens
