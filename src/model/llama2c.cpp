#include "model/llama2c.hpp"

#include <ATen/ATen.h>

#include <cstring>

#include "checkpoint/mapped_file.hpp"
#include "model/nonfinite.hpp"
#include "model/validate.hpp"
#include "vocablens/error.hpp"

namespace vocablens {

ModelConfig llama2c_config(int64_t dim, int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads, int64_t vocab,
                           int64_t seq_len, bool shared) {
  ModelConfig c;
  c.architecture = "llama2.c";
  c.family = "llama";
  c.d_model = dim;
  c.d_mlp = hidden;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.vocab_size = vocab;
  c.n_ctx = seq_len;
  c.d_head = heads > 0 ? dim / heads : 0;
  c.norm = NormKind::RMSNorm;
  c.norm_eps = 1e-5;
  c.positions = PositionKind::Rotary;
  c.rope_interleaved = true;
  c.rope_theta = 10000.0;
  c.activation = Activation::SiLU;
  c.gated_mlp = true;
  c.attn_bias = c.attn_out_bias = c.mlp_bias = false;
  c.tied_embeddings = shared;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

namespace detail {

void check_llama2c_header(const std::string& path, int64_t dim, int64_t hidden, int64_t layers, int64_t heads, int64_t kv,
                          int64_t vocab, int64_t seq) {
  auto bad = [&](const std::string& what) { throw FormatError(path, "not a llama2.c checkpoint: " + what); };
  const int64_t lim = int64_t(1) << 24;
  if (dim <= 0 || dim > lim) bad("dim " + std::to_string(dim) + " out of range");
  if (hidden <= 0 || hidden > lim) bad("hidden_dim " + std::to_string(hidden) + " out of range");
  if (layers <= 0 || layers > 4096) bad("n_layers " + std::to_string(layers) + " out of range");
  if (heads <= 0 || heads > dim || dim % heads != 0)
    bad("n_heads " + std::to_string(heads) + " does not divide dim " + std::to_string(dim));
  if (kv <= 0 || kv > heads || heads % kv != 0) bad("n_kv_heads " + std::to_string(kv) + " does not divide n_heads");
  if (vocab <= 0 || vocab > lim) bad("vocab_size " + std::to_string(vocab) + " out of range");
  if (seq <= 0 || seq > lim) bad("seq_len " + std::to_string(seq) + " out of range");
  if ((dim / heads) % 2 != 0) bad("head size must be even for rotary positions");
}

// Builds weights from llama2.c-layout arrays. `get(name, shape)` returns the [out, in] tensor.
template <class Get>
ModelWeights llama2c_weights(const ModelConfig& c, Get get) {
  const int64_t d = c.d_model, h = c.d_mlp, kd = c.n_kv_heads * c.d_head, L = c.n_layers;
  ModelWeights w;
  w.W_E = get("tok_embeddings", std::vector<int64_t>{c.vocab_size, d});
  at::Tensor rms_att = get("rms_att", std::vector<int64_t>{L, d});
  at::Tensor wq = get("wq", std::vector<int64_t>{L, d, d});
  at::Tensor wk = get("wk", std::vector<int64_t>{L, kd, d});
  at::Tensor wv = get("wv", std::vector<int64_t>{L, kd, d});
  at::Tensor wo = get("wo", std::vector<int64_t>{L, d, d});
  at::Tensor rms_ffn = get("rms_ffn", std::vector<int64_t>{L, d});
  at::Tensor w1 = get("w1", std::vector<int64_t>{L, h, d});
  at::Tensor w2 = get("w2", std::vector<int64_t>{L, d, h});
  at::Tensor w3 = get("w3", std::vector<int64_t>{L, h, d});
  w.lnf_w = get("rms_final", std::vector<int64_t>{d});
  for (int64_t i = 0; i < L; ++i) {
    LayerWeights lw;
    lw.ln1_w = rms_att[i];
    lw.w_q = wq[i].t();
    lw.w_k = wk[i].t();
    lw.w_v = wv[i].t();
    lw.w_o = wo[i].t();
    lw.ln2_w = rms_ffn[i];
    lw.w_gate = w1[i].t();  // llama2.c: w2(silu(w1 x) * w3 x)
    lw.w_in = w3[i].t();
    lw.w_out = w2[i].t();
    w.layers.push_back(std::move(lw));
  }
  w.W_U = c.tied_embeddings ? w.W_E.t() : get("wcls", std::vector<int64_t>{c.vocab_size, d}).t();
  return w;
}

}  // namespace detail

Model load_llama2c_bin(const std::string& path) {
  auto file = MappedFile::open(path);
  const uint8_t* p = file->data();
  const size_t n = file->size();
  auto rd32 = [&](size_t off) {
    int32_t v;
    std::memcpy(&v, p + off, 4);
    return static_cast<int64_t>(v);
  };
  if (n < 28) throw FormatError(path, "truncated llama2.c checkpoint (" + std::to_string(n) + " bytes, header needs 28)");
  size_t off = 0;
  int64_t hdr[7];
  bool shared;
  int version = 0;
  uint32_t magic;
  std::memcpy(&magic, p, 4);
  if (magic == 0x616b3432u) {  // "ak42": llama2.c export version >= 1
    if (n < 256) throw FormatError(path, "truncated llama2.c v1 header");
    version = static_cast<int>(rd32(4));
    if (version != 1)
      throw FormatError(
          path, "llama2.c export version " + std::to_string(version) + " is not supported (only float32 versions 0 and 1)");
    for (int i = 0; i < 7; ++i) hdr[i] = rd32(8 + 4 * static_cast<size_t>(i));
    shared = p[36] != 0;
    off = 256;
  } else {
    for (int i = 0; i < 7; ++i) hdr[i] = rd32(4 * static_cast<size_t>(i));
    shared = hdr[5] > 0;
    if (hdr[5] < 0) hdr[5] = -hdr[5];
    off = 28;
  }
  const int64_t dim = hdr[0], hidden = hdr[1], layers = hdr[2], heads = hdr[3], kv = hdr[4], vocab = hdr[5], seq = hdr[6];
  detail::check_llama2c_header(path, dim, hidden, layers, heads, kv, vocab, seq);
  ModelConfig c = llama2c_config(dim, hidden, layers, heads, kv, vocab, seq, shared);
  const int64_t hs = dim / heads, kd = kv * hs;
  // Expected size, in floats, computed in 64 bits from bounded header values (no overflow).
  int64_t floats = vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * kd * dim + 3 * dim * hidden) + dim;
  if (version == 0) floats += seq * hs;  // legacy freq_cis_real + freq_cis_imag (each seq * hs/2)
  if (!shared) floats += vocab * dim;
  // Floats * 4 exceeds 2^64 for some in-range headers (dim 2^24, 4096 layers) and used to
  // wrap; compare in 128 bits (and print the saturated value).
  const unsigned __int128 expected_wide = off + static_cast<unsigned __int128>(floats) * 4;
  const uint64_t expected = expected_wide > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(expected_wide);
  if (static_cast<unsigned __int128>(n) != expected_wide)
    throw FormatError(path, "file is " + std::to_string(n) + " bytes but its header (dim " + std::to_string(dim) + ", " +
                                std::to_string(layers) + " layers, vocab " + std::to_string(vocab) + ") implies " +
                                std::to_string(expected) + (n < expected ? " (truncated?)" : ""));
  // Array order differs between versions; record each array's offset.
  std::map<std::string, size_t> at_off;
  auto take = [&](const char* name, int64_t count) {
    at_off[name] = off;
    off += static_cast<size_t>(count) * 4;
  };
  if (version == 0) {
    take("tok_embeddings", vocab * dim);
    take("rms_att", layers * dim);
    take("wq", layers * dim * dim);
    take("wk", layers * kd * dim);
    take("wv", layers * kd * dim);
    take("wo", layers * dim * dim);
    take("rms_ffn", layers * dim);
    take("w1", layers * hidden * dim);
    take("w2", layers * dim * hidden);
    take("w3", layers * hidden * dim);
    take("rms_final", dim);
    take("freq_cis", seq * hs);  // skipped: run.c computes RoPE on the fly
  } else {
    take("rms_att", layers * dim);
    take("rms_ffn", layers * dim);
    take("rms_final", dim);
    take("tok_embeddings", vocab * dim);
    take("wq", layers * dim * dim);
    take("wk", layers * kd * dim);
    take("wv", layers * kd * dim);
    take("wo", layers * dim * dim);
    take("w1", layers * hidden * dim);
    take("w2", layers * dim * hidden);
    take("w3", layers * hidden * dim);
  }
  if (!shared) take("wcls", vocab * dim);
  auto get = [&](const char* name, std::vector<int64_t> shape) {
    at::Tensor t = view_as_tensor(file, at_off.at(name), shape, {}, at::kFloat);
    // NaN/Inf weights named at load (stacked per-layer arrays report the layer too).
    detail::check_weight_finite(
        t, name, path, shape.size() >= 2 && std::string(name) != "tok_embeddings" && std::string(name) != "wcls" ? 0 : -1);
    return t;
  };
  ModelWeights w = detail::llama2c_weights(c, get);
  c.weight_dtype = "F32";
  return Model(std::move(c), std::move(w), path);
}

Model load_llama2c_ckpt(const std::string& path) {
  TensorStore st = read_torch_zip(path);
  auto arg = [&](const char* k) -> int64_t {
    std::string key = std::string("model_args.") + k;
    auto it = st.metadata.find(key);
    if (it == st.metadata.end() || !it->is_number_integer())
      throw FormatError(path, "not a llama2.c training checkpoint: no integer '" + key + "'");
    return it->get<int64_t>();
  };
  const int64_t dim = arg("dim"), layers = arg("n_layers"), heads = arg("n_heads"), vocab = arg("vocab_size"),
                seq = arg("max_seq_len");
  int64_t kv = heads;
  if (st.metadata.contains("model_args.n_kv_heads") && st.metadata["model_args.n_kv_heads"].is_number_integer())
    kv = st.metadata["model_args.n_kv_heads"].get<int64_t>();
  const at::Tensor& w1 = st.get("model.layers.0.feed_forward.w1.weight");
  const int64_t hidden = w1.dim() == 2 ? w1.size(0) : -1;
  detail::check_llama2c_header(path, dim, hidden, layers, heads, kv, vocab, seq);
  ModelConfig c = llama2c_config(dim, hidden, layers, heads, kv, vocab, seq, true);
  if (st.metadata.contains("model_args.norm_eps") && st.metadata["model_args.norm_eps"].is_number())
    c.norm_eps = st.metadata["model_args.norm_eps"].get<double>();
  auto expect = [&](const std::string& name, std::vector<int64_t> shape) {
    const at::Tensor& t = st.get(name);
    if (t.sizes() != at::IntArrayRef(shape) || t.scalar_type() != at::kFloat)
      throw FormatError(path, "tensor '" + name + "' has an unexpected shape or dtype for model_args");
    return t;
  };
  // The state_dict is per layer; stack into the .bin layout so one mapping serves both formats.
  auto stack = [&](const std::string& suffix, std::vector<int64_t> shape) {
    std::vector<at::Tensor> parts;
    for (int64_t i = 0; i < layers; ++i) parts.push_back(expect("model.layers." + std::to_string(i) + "." + suffix, shape));
    return at::stack(parts);
  };
  const int64_t kd = kv * (dim / heads);
  auto get = [&](const char* name, std::vector<int64_t> shape) -> at::Tensor {
    std::string n = name;
    if (n == "tok_embeddings") return expect("model.tok_embeddings.weight", shape);
    if (n == "rms_final") return expect("model.norm.weight", shape);
    if (n == "wcls") return expect("model.output.weight", shape);
    if (n == "rms_att") return stack("attention_norm.weight", {dim});
    if (n == "rms_ffn") return stack("ffn_norm.weight", {dim});
    if (n == "wq") return stack("attention.wq.weight", {dim, dim});
    if (n == "wk") return stack("attention.wk.weight", {kd, dim});
    if (n == "wv") return stack("attention.wv.weight", {kd, dim});
    if (n == "wo") return stack("attention.wo.weight", {dim, dim});
    if (n == "w1") return stack("feed_forward.w1.weight", {hidden, dim});
    if (n == "w2") return stack("feed_forward.w2.weight", {dim, hidden});
    if (n == "w3") return stack("feed_forward.w3.weight", {hidden, dim});
    throw FormatError(path, "internal: unknown llama2.c array " + n);
  };
  // Tied unless the classifier holds different values from the embedding.
  if (st.has("model.output.weight")) {
    const at::Tensor& out = st.get("model.output.weight");
    const at::Tensor& emb = st.get("model.tok_embeddings.weight");
    c.tied_embeddings = out.sizes() == emb.sizes() && at::equal(out, emb);
  }
  detail::check_config_values(c, path);
  ModelWeights w = detail::llama2c_weights(c, get);
  detail::check_all_tensors_used(st, c, path, "model.");
  detail::check_store_finite(st);
  c.weight_dtype = st.stored_dtype.empty() ? "F32" : st.stored_dtype;
  return Model(std::move(c), std::move(w), path);
}

}  // namespace vocablens
