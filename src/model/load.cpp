// load_model: find the checkpoint, read its config, map tensor names to roles, check every shape.
#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>

#include "model/gguf_model.hpp"
#include "model/llama2c.hpp"
#include "model/validate.hpp"
#include "util/regular_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"

namespace vocablens {
namespace detail {
namespace fs = std::filesystem;

std::string shape_str(at::IntArrayRef s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// The tensor `name` with exactly `shape`; FormatError naming the file and both shapes otherwise.
at::Tensor expect(const TensorStore& st, const std::string& name, std::vector<int64_t> shape, const std::string& cfg_path) {
  const at::Tensor& t = st.get(name);
  if (t.sizes() != at::IntArrayRef(shape))
    throw FormatError(st.source, "tensor '" + name + "' has shape " + shape_str(t.sizes()) + " but " + cfg_path +
                                     " implies " + shape_str(shape));
  const auto ty = t.scalar_type();
  if (ty != at::kFloat && ty != at::kHalf && ty != at::kBFloat16)
    throw FormatError(st.source, "tensor '" + name + "' is not a floating-point tensor");
  // Matrices stay as stored (float16/bfloat16 views of the file; the runner upcasts per tile); vectors
  // (norms, biases) are tiny and become float32 so every elementwise op runs in float32.
  if (t.dim() < 2 && ty != at::kFloat) return t.to(at::kFloat);
  return t;
}

at::Tensor optional(const TensorStore& st, const std::string& name, std::vector<int64_t> shape, const std::string& cfg_path) {
  return st.has(name) ? expect(st, name, std::move(shape), cfg_path) : at::Tensor();
}

void strip_known_prefixes(TensorStore& st, const char* prefix) {
  bool any = false;
  for (auto& kv : st.tensors)
    if (kv.first.rfind(prefix, 0) == 0) any = true;
  if (any) st.strip_prefix(prefix);
}

ModelWeights map_gpt2(TensorStore& st, const ModelConfig& c, const std::string& cp) {
  strip_known_prefixes(st, "transformer.");
  const int64_t d = c.d_model, V = c.vocab_size, m = c.d_mlp;
  ModelWeights w;
  w.W_E = expect(st, "wte.weight", {V, d}, cp);
  // Only learned positions have a table; models trained by vocablens with sinusoidal / rotary / ALiBi /
  // no positions ("vocablens_positions" in config.json) carry none.
  if (c.positions == PositionKind::Learned) w.W_pos = expect(st, "wpe.weight", {c.n_ctx, d}, cp);
  w.lnf_w = expect(st, "ln_f.weight", {d}, cp);
  w.lnf_b = expect(st, "ln_f.bias", {d}, cp);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    std::string p = "h." + std::to_string(i) + ".";
    LayerWeights L;
    L.ln1_w = expect(st, p + "ln_1.weight", {d}, cp);
    L.ln1_b = expect(st, p + "ln_1.bias", {d}, cp);
    // Conv1D stores [in, out]: already the "x @ W" orientation; q, k, v are column blocks of c_attn.
    at::Tensor qkv = expect(st, p + "attn.c_attn.weight", {d, 3 * d}, cp);
    at::Tensor qkv_b = expect(st, p + "attn.c_attn.bias", {3 * d}, cp);
    L.w_q = qkv.narrow(1, 0, d);
    L.w_k = qkv.narrow(1, d, d);
    L.w_v = qkv.narrow(1, 2 * d, d);
    L.b_q = qkv_b.narrow(0, 0, d);
    L.b_k = qkv_b.narrow(0, d, d);
    L.b_v = qkv_b.narrow(0, 2 * d, d);
    L.w_o = expect(st, p + "attn.c_proj.weight", {d, d}, cp);
    L.b_o = expect(st, p + "attn.c_proj.bias", {d}, cp);
    L.ln2_w = expect(st, p + "ln_2.weight", {d}, cp);
    L.ln2_b = expect(st, p + "ln_2.bias", {d}, cp);
    L.w_in = expect(st, p + "mlp.c_fc.weight", {d, m}, cp);
    L.b_in = expect(st, p + "mlp.c_fc.bias", {m}, cp);
    L.w_out = expect(st, p + "mlp.c_proj.weight", {m, d}, cp);
    L.b_out = expect(st, p + "mlp.c_proj.bias", {d}, cp);
    w.layers.push_back(std::move(L));
  }
  if (st.has("lm_head.weight")) w.W_U = expect(st, "lm_head.weight", {V, d}, cp).t();
  else if (c.tied_embeddings) w.W_U = w.W_E.t();
  else throw FormatError(st.source, "missing tensor 'lm_head.weight' (config.json says the embeddings are not tied)");
  return w;
}

ModelWeights map_llama_hf(TensorStore& st, const ModelConfig& c, const std::string& cp) {
  strip_known_prefixes(st, "model.");
  const int64_t d = c.d_model, V = c.vocab_size, m = c.d_mlp, qd = c.n_heads * c.d_head, kd = c.n_kv_heads * c.d_head;
  ModelWeights w;
  w.W_E = expect(st, "embed_tokens.weight", {V, d}, cp);
  w.lnf_w = expect(st, "norm.weight", {d}, cp);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    std::string p = "layers." + std::to_string(i) + ".";
    LayerWeights L;
    // nn.Linear stores [out, in]: transpose views give the "x @ W" orientation without copying.
    L.ln1_w = expect(st, p + "input_layernorm.weight", {d}, cp);
    L.w_q = expect(st, p + "self_attn.q_proj.weight", {qd, d}, cp).t();
    L.w_k = expect(st, p + "self_attn.k_proj.weight", {kd, d}, cp).t();
    L.w_v = expect(st, p + "self_attn.v_proj.weight", {kd, d}, cp).t();
    L.w_o = expect(st, p + "self_attn.o_proj.weight", {d, qd}, cp).t();
    L.b_q = optional(st, p + "self_attn.q_proj.bias", {qd}, cp);
    L.b_k = optional(st, p + "self_attn.k_proj.bias", {kd}, cp);
    L.b_v = optional(st, p + "self_attn.v_proj.bias", {kd}, cp);
    L.b_o = optional(st, p + "self_attn.o_proj.bias", {d}, cp);
    L.ln2_w = expect(st, p + "post_attention_layernorm.weight", {d}, cp);
    L.w_gate = expect(st, p + "mlp.gate_proj.weight", {m, d}, cp).t();
    L.w_in = expect(st, p + "mlp.up_proj.weight", {m, d}, cp).t();
    L.w_out = expect(st, p + "mlp.down_proj.weight", {d, m}, cp).t();
    L.b_gate = optional(st, p + "mlp.gate_proj.bias", {m}, cp);
    L.b_in = optional(st, p + "mlp.up_proj.bias", {m}, cp);
    L.b_out = optional(st, p + "mlp.down_proj.bias", {d}, cp);
    w.layers.push_back(std::move(L));
  }
  if (st.has("lm_head.weight")) w.W_U = expect(st, "lm_head.weight", {V, d}, cp).t();
  else if (c.tied_embeddings) w.W_U = w.W_E.t();
  else throw FormatError(st.source, "missing tensor 'lm_head.weight' (config.json says the embeddings are not tied)");
  return w;
}

bool starts_with_zip_magic(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char m[4] = {};
  f.read(m, 4);
  return f.gcount() == 4 && m[0] == 'P' && m[1] == 'K' && m[2] == 3 && m[3] == 4;
}

void attach_segments(const std::string& config_path, const TensorStore& st, ModelConfig& cfg, ModelWeights& w);

Model load_hf_dir(const fs::path& dir) {
  const std::string cp = (dir / "config.json").string();
  if (!fs::exists(cp))
    throw FormatError(dir.string(), "no config.json in this directory (not a Hugging Face model directory)" +
                                        checkpoints_hint(dir.string()));
  ModelConfig cfg = read_hf_config(cp);
  TensorStore st;
  if (fs::exists(dir / "model.safetensors")) st = read_safetensors((dir / "model.safetensors").string(), false);
  else if (fs::exists(dir / "model.safetensors.index.json")) st = read_safetensors_index((dir / "model.safetensors.index.json").string(), false);
  else if (fs::exists(dir / "pytorch_model.bin")) st = read_torch_zip((dir / "pytorch_model.bin").string());
  else
    throw FormatError(dir.string(), "no weights found (expected model.safetensors, model.safetensors.index.json or pytorch_model.bin)");
  if (!st.stored_dtype.empty()) cfg.weight_dtype = st.stored_dtype;
  ModelWeights w = cfg.family == Family::GPT2 ? map_gpt2(st, cfg, cp) : map_llama_hf(st, cfg, cp);
  attach_segments(cp, st, cfg, w);  // "vocablens_segments": W_seg (segments.cpp)
  check_all_tensors_used(st, cfg, cp);  // issue #16: every tensor used or reported
  check_store_finite(st);                // issue #16: NaN/Inf weights named at load
  return Model(std::move(cfg), std::move(w), dir.string());
}

}  // namespace detail

Model load_model(const std::string& path, const LoadOptions& opts) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p(path);
  if (!fs::exists(p, ec)) throw FormatError(path, "no such file or directory");
  if (!fs::is_directory(p, ec) && !fs::is_regular_file(p, ec))  // issue #16: a FIFO blocked, /dev/zero
    throw FormatError(path, "is " + detail::file_kind(path) + ", not a model file or directory");
  if (fs::is_directory(p, ec)) return detail::load_hf_dir(p);
  // A single file: a PyTorch zip (llama2.c ckpt.pt, or pytorch_model.bin beside a config.json), a
  // safetensors file beside a config.json, or a llama2.c .bin.
  if (is_gguf_file(path)) return load_gguf_model(path);
  if (detail::starts_with_zip_magic(path)) {
    if (fs::exists(p.parent_path() / "config.json") && p.filename() == "pytorch_model.bin") return detail::load_hf_dir(p.parent_path());
    return load_llama2c_ckpt(path);
  }
  if (p.extension() == ".safetensors") {
    if (p.filename() == "model.safetensors") return detail::load_hf_dir(p.parent_path().empty() ? fs::path(".") : p.parent_path());
    throw FormatError(path, "a bare .safetensors file needs its Hugging Face directory (config.json): pass the directory");
  }
  if (p.extension() == ".json") throw FormatError(path, "pass the model directory, not its JSON file");
  return load_llama2c_bin(path);
}

}  // namespace vocablens
