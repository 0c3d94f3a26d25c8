// GGUF -> Model through the architecture table (vocablens/arch.hpp): each family's llama.cpp tensor names
// ("token_embd", "blk.{L}.attn_q", ...) and hyper-parameter keys ("<arch>.block_count", "<arch>.rope.*", ...)
// mapped onto ModelConfig / ModelWeights. A ggml matrix with ne = {in, out} is stored as `out` rows of `in`
// values: the [out, in] layout of nn.Linear, so the "x @ W" weight is its transpose (a view).
// What llama.cpp's convert_hf_to_gguf.py changed is undone or recorded here: Llama q/k rows permuted to
// interleaved rotary pairs (rope_interleaved), Gemma norms stored as (1 + w) (used as stored), GPT-NeoX's
// per-head q k v rows regrouped into q | k | v, Llama-3 rope scaling as a rope_freqs factor tensor.
#include "model/gguf_model.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <set>
#include <vector>

#include <ATen/Parallel.h>

#include "checkpoint/mapped_file.hpp"
#include "core/config_checks.hpp"
#include "model/nonfinite.hpp"
#include "vocablens/arch.hpp"
#include "vocablens/error.hpp"
#include "vocablens/weight.hpp"
#include "util/parallel.hpp"

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
  // [out, in] matrix (ggml ne {in, out}) in its stored type. Every weight is checked for NaN/Inf as the
  // safetensors reader's are (vocablens/nonfinite.hpp), quantized ones through their dequantized values,
  // so a NaN block scale is caught too.
  at::Tensor matrix(const std::string& name, int64_t out, int64_t in) {
    const auto& t = info(name);
    check(t, {in, out});
    at::Tensor view;
    switch (t.type) {
      case GgmlType::F32: view = view_as_tensor(g.file, t.offset, {out, in}, {}, at::kFloat); break;
      case GgmlType::F16: view = view_as_tensor(g.file, t.offset, {out, in}, {}, at::kHalf); break;
      case GgmlType::BF16: view = view_as_tensor(g.file, t.offset, {out, in}, {}, at::kBFloat16); break;
      default: break;
    }
    if (view.defined()) {
      detail::check_weight_finite(view, name, g.path);
      return view;
    }
    if (!ggml_can_dequantize(t.type))
      throw FormatError(g.path, "tensor '" + name + "' has type " + ggml_type_name(static_cast<uint32_t>(t.type)) +
                                    ", which vocablens cannot dequantize");
    check_quantized_finite(t, name, out, in);
    return make_packed_weight(std::static_pointer_cast<const void>(g.file), g.tensor_data(t), t.type, out, in);
  }
  // Quantized rows dequantized one at a time (in parallel) and scanned; on a hit the whole matrix is
  // dequantized once more so that the message is the one every format gives (count, first index).
  void check_quantized_finite(const GgufTensorInfo& t, const std::string& name, int64_t out, int64_t in) {
    int64_t block_values = 0;
    size_t block_bytes = 0;
    if (!ggml_block_layout(t.type, block_values, block_bytes) || block_values <= 0 || in % block_values != 0) return;
    const size_t row_bytes = static_cast<size_t>(in / block_values) * block_bytes;
    const auto* base = static_cast<const uint8_t*>(g.tensor_data(t));
    std::atomic<bool> bad{false};
    detail::parallel_for(0, out, 64, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(in));
      for (int64_t r = r0; r < r1 && !bad.load(std::memory_order_relaxed); ++r) {
        dequantize_row(t.type, base + static_cast<size_t>(r) * row_bytes, row.data(), in);
        for (float v : row)
          if (!std::isfinite(v)) {
            bad = true;
            break;
          }
      }
    });
    if (!bad) return;
    at::Tensor full = at::empty({out, in}, at::kFloat);
    for (int64_t r = 0; r < out; ++r)
      dequantize_row(t.type, base + static_cast<size_t>(r) * row_bytes, full.data_ptr<float>() + r * in, in);
    detail::check_weight_finite(full, name, g.path);
  }
  // A 3-D expert tensor (ggml ne {in, out, E}: E matrices of [out, in], expert-major) as E views of the file,
  // each in its stored type (ffn_gate_exps, ...); nothing is copied or expanded.
  std::vector<at::Tensor> experts(const std::string& name, int64_t E, int64_t out, int64_t in) {
    const auto& t = info(name);
    check(t, {in, out, E});
    std::vector<at::Tensor> r;
    at::ScalarType dense = t.type == GgmlType::F32    ? at::kFloat
                           : t.type == GgmlType::F16  ? at::kHalf
                           : t.type == GgmlType::BF16 ? at::kBFloat16
                                                      : at::kByte;
    if (dense != at::kByte) {
      at::Tensor all = view_as_tensor(g.file, t.offset, {E, out, in}, {}, dense);
      detail::check_weight_finite(all, name, g.path);
      for (int64_t e = 0; e < E; ++e) r.push_back(all.select(0, e).t());
      return r;
    }
    if (!ggml_can_dequantize(t.type))
      throw FormatError(g.path, "tensor '" + name + "' has type " + ggml_type_name(static_cast<uint32_t>(t.type)) +
                                    ", which vocablens cannot dequantize");
    int64_t block_values = 0;
    size_t block_bytes = 0;
    if (!ggml_block_layout(t.type, block_values, block_bytes) || block_values <= 0 || in % block_values != 0)
      throw FormatError(g.path, "tensor '" + name + "': rows of " + std::to_string(in) + " values do not fill whole blocks");
    const size_t expert_bytes = static_cast<size_t>(in / block_values) * block_bytes * static_cast<size_t>(out);
    const auto* base = static_cast<const uint8_t*>(g.tensor_data(t));
    for (int64_t e = 0; e < E; ++e) {
      GgufTensorInfo one = t;
      one.offset = t.offset + expert_bytes * static_cast<size_t>(e);
      check_quantized_finite(one, name, out, in);
      r.push_back(make_packed_weight(std::static_pointer_cast<const void>(g.file), base + expert_bytes * static_cast<size_t>(e),
                                     t.type, out, in)
                      .t());
    }
    return r;
  }
  // A per-expert bias tensor (ggml ne {n, E}) as E float32 rows.
  std::vector<at::Tensor> expert_biases(const std::string& name, int64_t E, int64_t n) {
    const auto& t = info(name);
    check(t, {n, E});
    if (t.type != GgmlType::F32) throw FormatError(g.path, "tensor '" + name + "' must be F32 (a bias)");
    at::Tensor all = view_as_tensor(g.file, t.offset, {E, n}, {}, at::kFloat);
    detail::check_weight_finite(all, name, g.path);
    std::vector<at::Tensor> r;
    for (int64_t e = 0; e < E; ++e) r.push_back(all[e]);
    return r;
  }
  // A vector (norm weight, bias) as float32.
  at::Tensor vec(const std::string& name, int64_t n) {
    const auto& t = info(name);
    check(t, {n});
    at::Tensor v = at::empty({n}, at::kFloat);
    dequantize_row(t.type, g.tensor_data(t), v.data_ptr<float>(), n);
    detail::check_weight_finite(v, name, g.path);
    return v;
  }
  at::Tensor opt_vec(const std::string& name, int64_t n) { return has(name) ? vec(name, n) : at::Tensor(); }
};

int64_t need_int(const GgufFile& g, const std::string& key) {
  if (!g.metadata.contains(key)) throw FormatError(g.path, "missing metadata '" + key + "'");
  if (!g.metadata[key].is_number_integer())
    throw FormatError(g.path, "metadata '" + key + "' is " + g.metadata_types.at(key) + ", expected an integer");
  int64_t v = g.get_int(key, 0);
  // The bound config.json's counts have (model_config.cpp): a count no tensor could hold is a corrupt file.
  if (v <= 0 || v > (int64_t(1) << 31))
    throw FormatError(g.path, "metadata '" + key + "' = " + std::to_string(v) + " is out of range (1 .. 2^31)");
  return v;
}
int64_t opt_int(const GgufFile& g, const std::string& key, int64_t fallback) {
  return g.metadata.contains(key) ? need_int(g, key) : fallback;
}
double opt_float(const GgufFile& g, const std::string& key, double fallback, double lo, double hi) {
  const double v = g.get_float(key, fallback);
  if (!std::isfinite(v) || v < lo || v > hi)
    throw FormatError(g.path, "metadata '" + key + "' = " + std::to_string(v) + " is out of range");
  return v;
}
bool opt_bool(const GgufFile& g, const std::string& key, bool fallback) {
  auto it = g.metadata.find(key);
  if (it == g.metadata.end()) return fallback;
  if (!it->is_boolean()) throw FormatError(g.path, "metadata '" + key + "' is " + g.metadata_types.at(key) + ", expected a bool");
  return it->get<bool>();
}

std::string gguf_names() {
  std::vector<std::string> seen;
  for (const auto& a : architectures())
    if (a.gguf_architecture && std::find(seen.begin(), seen.end(), a.gguf_architecture) == seen.end())
      seen.push_back(a.gguf_architecture);
  std::string s;
  for (auto& n : seen) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// The GGUF name of role r in block `layer` with `suffix`; "" when the family has no such role.
std::string gname(const ArchSpec& a, TensorRole r, int64_t layer, const char* suffix) {
  const TensorSpec* t = find_tensor(a, r);
  if (!t || !t->gguf) return "";
  return tensor_name(t->gguf, layer) + suffix;
}

// Llama-3.1 rope scaling: llama.cpp's converter stores only one divisor per rotary frequency (rope_freqs, F32)
// and no scaling metadata; the runner takes the four llama3 parameters. They are recovered from the divisors
// (low_freq_factor normalised to 1: only original_context / low and / high matter) from the blended band, and
// every divisor is then recomputed and checked, so a tensor of any other form is refused rather than misread.
void fit_llama3_rope(const GgufFile& g, const GgufTensorInfo& rf, int64_t rdim, ModelConfig& c) {
  auto fail = [&](const std::string& why) { throw FormatError(g.path, "tensor 'rope_freqs.weight': " + why); };
  const int64_t n = rdim / 2;
  if (rf.ne.size() != 1 || rf.ne[0] != n || rf.type != GgmlType::F32) fail("expected F32 with ne {" + std::to_string(n) + "}");
  const float* f = reinterpret_cast<const float*>(g.tensor_data(rf));
  double F = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(f[i]) || f[i] < 1) fail("holds a divisor below 1 or not finite");
    F = std::max(F, static_cast<double>(f[i]));
  }
  auto omega = [&](int64_t i) { return std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(rdim)); };
  if (F == 1.0) return;                        // no scaling at all
  std::vector<std::pair<double, double>> mid;  // (frequency, blend s) of the divisors strictly between 1 and F
  for (int64_t i = 0; i < n; ++i)
    if (f[i] > 1.0 + 1e-6 && f[i] < F * (1 - 1e-6)) mid.push_back({omega(i), (1.0 / f[i] - 1.0 / F) / (1.0 - 1.0 / F)});
  if (mid.size() < 2) fail("fewer than two blended frequencies: the Llama-3.1 scaling parameters cannot be recovered");
  // s = (original_context * w / (2 pi) - low) / (high - low), linear in the frequency w; low = 1.
  const double a = (mid.back().second - mid.front().second) / (mid.back().first - mid.front().first);
  const double b = a * mid.front().first - mid.front().second;
  if (!(a > 0) || !(b > 0)) fail("does not follow the Llama-3.1 formula");
  const double hi = 1.0 + 1.0 / b, orig = 2 * M_PI * a / b;
  if (!std::isfinite(hi) || !std::isfinite(orig) || orig < 1 || orig > 1e12) fail("does not follow the Llama-3.1 formula");
  c.rope_scaling = ModelConfig::RopeScaling::Llama3;
  c.rope_factor = F;
  c.rope_low_freq_factor = 1.0;
  c.rope_high_freq_factor = hi;
  c.rope_original_context = std::llround(orig);
  const double old_ctx = static_cast<double>(c.rope_original_context);
  for (int64_t i = 0; i < n; ++i) {  // the same rule as the runner's (and the converter's)
    const double wavelen = 2 * M_PI / omega(i);
    double want = 1.0;
    if (wavelen > old_ctx) want = F;
    else if (wavelen >= old_ctx / hi) {
      const double s = (old_ctx / wavelen - 1.0) / (hi - 1.0);
      want = 1.0 / ((1 - s) / F + s);
    }
    if (std::abs(want - f[i]) > 1e-4 * want) fail("does not follow the Llama-3.1 formula (divisor " + std::to_string(i) + ")");
  }
}

// A mixture of experts' sizes as llama.cpp's converter writes them; the renormalisation is llama.cpp's fixed
// choice for the architecture (its graph ignores norm_topk_prob).
void gguf_experts(const GgufFile& g, const std::string& a, const FamilyRecipe& R, ModelConfig& c) {
  if (!g.metadata.contains(a + "expert_count"))
    throw FormatError(g.path, "missing metadata '" + a + "expert_count' (this architecture's MLP is a mixture of experts)");
  c.n_experts = need_int(g, a + "expert_count");
  c.n_experts_used = need_int(g, a + "expert_used_count");
  if (c.n_experts > (int64_t(1) << 16))
    throw FormatError(g.path,
                      "metadata '" + a + "expert_count' = " + std::to_string(c.n_experts) + " is out of range (at most 65536)");
  if (c.n_experts_used > c.n_experts)
    throw FormatError(g.path, "metadata '" + a + "expert_used_count' = " + std::to_string(c.n_experts_used) + " exceeds " + a +
                                  "expert_count = " + std::to_string(c.n_experts));
  c.d_expert = opt_int(g, a + "expert_feed_forward_length", c.d_mlp);
  if (R.shared_expert) c.d_mlp = opt_int(g, a + "expert_shared_feed_forward_length", c.d_mlp);
  else c.d_mlp = c.d_expert;
  c.expert_weights_norm = R.gguf_expert_weights_norm;
  c.expert_weights_topk_softmax = R.expert_weights_topk_softmax;
  c.shared_expert = R.shared_expert;
}

// YaRN as llama.cpp reads it: the correction range always floored / ceiled, the attention factor 0.1 ln(factor) + 1.
// The keys that change its formula (ext_factor, attn_factor, log_multiplier) are refused unless neutral.
void gguf_yarn(const GgufFile& g, const std::string& a, double factor, ModelConfig& c) {
  if (!(factor >= 1)) throw FormatError(g.path, "metadata '" + a + "rope.scaling.factor' must be at least 1 for YaRN");
  c.rope_scaling = ModelConfig::RopeScaling::Yarn;
  c.rope_factor = factor;
  c.rope_original_context = opt_int(g, a + "rope.scaling.original_context_length", c.n_ctx);
  if (c.rope_original_context < 1)
    throw FormatError(g.path, "metadata '" + a + "rope.scaling.original_context_length' must be positive");
  c.rope_yarn_beta_fast = opt_float(g, a + "rope.scaling.yarn_beta_fast", 32.0, 1e-6, 1e6);
  c.rope_yarn_beta_slow = opt_float(g, a + "rope.scaling.yarn_beta_slow", 1.0, 1e-6, 1e6);
  for (const char* k : {"rope.scaling.yarn_ext_factor", "rope.scaling.attn_factor", "rope.scaling.yarn_attn_factor",
                        "rope.scaling.yarn_log_multiplier"}) {
    const double neutral = std::string(k) == "rope.scaling.yarn_log_multiplier" ? 0.0 : 1.0;
    if (opt_float(g, a + k, neutral, -1e6, 1e6) != neutral)
      throw FormatError(g.path, "metadata '" + a + k + "' is not supported (YaRN with its default formula only)");
  }
  c.rope_attention_factor = 0.1 * std::log(factor) + 1.0;
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& g) {
  const std::string arch = g.get_string("general.architecture", "");
  if (arch.empty()) throw FormatError(g.path, "missing metadata 'general.architecture'");
  const bool experts = g.metadata.contains(arch + ".expert_count") && g.get_int(arch + ".expert_count", 0) > 0;
  const ArchSpec* spec = find_gguf_architecture(arch, experts);
  if (!spec) throw FormatError(g.path, "GGUF architecture '" + arch + "' is not supported (supported: " + gguf_names() + ")");
  const ArchSpec& A = *spec;
  const FamilyRecipe& R = A.recipe;
  ModelConfig c;
  c.family = A.name;
  c.architecture = std::string(A.hf_architecture) + " (GGUF " + arch + ")";
  const std::string a = arch + ".";
  c.n_layers = need_int(g, a + "block_count");
  c.d_model = need_int(g, a + "embedding_length");
  c.d_mlp = need_int(g, a + "feed_forward_length");
  c.n_heads = need_int(g, a + "attention.head_count");
  c.n_kv_heads = opt_int(g, a + "attention.head_count_kv", c.n_heads);
  c.n_ctx = need_int(g, a + "context_length");
  if (!g.metadata.contains(a + "attention.key_length") && c.d_model % c.n_heads != 0)
    throw FormatError(g.path, "embedding_length is not a multiple of attention.head_count");
  c.d_head = opt_int(g, a + "attention.key_length", c.d_model / c.n_heads);
  if (opt_int(g, a + "attention.value_length", c.d_head) != c.d_head)
    throw FormatError(g.path, "attention.value_length differs from attention.key_length (not supported)");
  if (c.n_heads % c.n_kv_heads != 0) throw FormatError(g.path, "attention.head_count is not a multiple of head_count_kv");
  // Each count is in range, but their product sizes the q rows: it must fit too (2^31 * 2^31 wrapped).
  if (c.n_heads * c.d_head > (int64_t(1) << 31))
    throw FormatError(g.path, "attention.head_count " + std::to_string(c.n_heads) + " x head size " + std::to_string(c.d_head) +
                                  " = " + std::to_string(c.n_heads * c.d_head) + " is out of range (at most 2^31)");
  const GgufTensorInfo* emb = g.find("token_embd.weight");
  if (!emb) throw FormatError(g.path, "missing tensor 'token_embd.weight'");
  if (emb->ne.size() != 2) throw FormatError(g.path, "tensor 'token_embd.weight' is not a matrix");
  c.vocab_size = emb->ne[1];
  if (c.vocab_size < 1 || emb->ne[0] != c.d_model)
    throw FormatError(g.path, "tensor 'token_embd.weight' has ne {" + std::to_string(emb->ne[0]) + ", " +
                                  std::to_string(emb->ne[1]) + "}, expected {" + std::to_string(c.d_model) +
                                  ", vocabulary size >= 1}");
  c.tied_embeddings = g.find("output.weight") == nullptr;
  // The tensors must agree with block_count: no blk.N beyond it.
  for (auto& t : g.tensors) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    int64_t n = std::atoll(t.name.c_str() + 4);
    if (n >= c.n_layers)
      throw FormatError(g.path, "tensor '" + t.name + "' lies beyond " + a + "block_count = " + std::to_string(c.n_layers));
  }
  // The block's fixed facts are the table entry's recipe, as for Hugging Face directories; what llama.cpp's
  // converter writes as hyper-parameters is read under the recipe's GGUF keys.
  c.norm = R.norm;
  c.norm_eps = c.norm == NormKind::LayerNorm ? opt_float(g, a + "attention.layer_norm_epsilon", 1e-5, 0, 1)
                                             : opt_float(g, a + "attention.layer_norm_rms_epsilon", 1e-5, 0, 1);
  // Biases: as the file has them (the table says which roles may carry one).
  auto has0 = [&](TensorRole r, const char* suffix) {
    const std::string n = gname(A, r, 0, suffix);
    return !n.empty() && g.find(n) != nullptr;
  };
  c.attn_bias = has0(TensorRole::AttnQ, ".bias") || has0(TensorRole::AttnQKV, ".bias");
  c.attn_out_bias = has0(TensorRole::AttnOut, ".bias");
  c.mlp_bias = has0(TensorRole::FfnUp, ".bias") || has0(TensorRole::FfnUpExps, ".bias");
  c.gated_mlp = find_tensor(A, TensorRole::FfnGate) != nullptr || find_tensor(A, TensorRole::FfnGateUp) != nullptr ||
                find_tensor(A, TensorRole::FfnGateExps) != nullptr;
  if (!R.n_experts_keys.empty()) gguf_experts(g, a, R, c);
  c.attn_sinks = R.attn_sinks;
  if (R.swiglu_limit_key) {  // llama.cpp fixes GPT-OSS's limit (7) and alpha; the file carries neither
    c.glu_limit = R.swiglu_limit_default;
    c.glu_alpha = R.swiglu_alpha;
    c.glu_up_offset = R.swiglu_up_offset;
  }
  // llama.cpp fixes the activation per architecture (GPT-NeoX: its graph runs tanh GELU where Pythia's config
  // says erf "gelu"; the recipe keeps the Hugging Face form, docs/runner.md measures the gap).
  c.activation = detail::parse_activation(R.activation_default, g.path);
  c.positions = R.positions;
  c.norm_weight_offset = R.norm_weight_offset;  // the converter stored (1 + w): used as stored, recorded here
  c.embed_scale = R.embed_scale_sqrt_d_model ? std::sqrt(static_cast<double>(c.d_model)) : 1.0;
  c.embed_norm = R.embed_norm;
  c.qk_norm = R.qk_norm;
  c.qk_norm_full = R.qk_norm_full;
  c.input_norms = R.input_norms;
  c.post_attn_norm = c.post_mlp_norm = R.post_norms;
  c.parallel_residual = R.gguf_parallel_residual_key ? opt_bool(g, a + R.gguf_parallel_residual_key, R.parallel_residual.fallback)
                                                     : R.parallel_residual.fallback;
  if (R.gguf_attn_softcap_key) c.attn_softcap = opt_float(g, a + R.gguf_attn_softcap_key, 0.0, 0, 1e6);
  if (R.gguf_final_softcap_key) c.final_softcap = opt_float(g, a + R.gguf_final_softcap_key, 0.0, 0, 1e6);
  if (R.gguf_sliding_window_key) {
    c.sliding_window = opt_int(g, a + R.gguf_sliding_window_key, 0);
    c.sliding_pattern = c.sliding_window > 0 ? R.sliding_pattern : 0;
    // llama.cpp reads a per-layer pattern (an array of booleans, true = sliding) or a period under this key.
    const std::string pk = a + "attention.sliding_window_pattern";
    if (c.sliding_window > 0 && g.metadata.contains(pk)) {
      const auto& p = g.metadata[pk];
      if (p.is_array() && p.size() == static_cast<size_t>(c.n_layers)) {
        for (const auto& b : p) {
          if (!b.is_boolean()) throw FormatError(g.path, "metadata '" + pk + "' is not an array of booleans");
          c.sliding_layers.push_back(b.get<bool>());
        }
      } else if (p.is_number_integer() && p.get<int64_t>() >= 0) {
        const int64_t n = p.get<int64_t>();  // llama.cpp: layer l slides when n == 0 or l % n < n - 1
        for (int64_t l = 0; l < c.n_layers && l < (int64_t(1) << 20); ++l) c.sliding_layers.push_back(n == 0 || l % n < n - 1);
      } else {
        throw FormatError(g.path, "metadata '" + pk + "' is neither one boolean per layer nor a period");
      }
    }
  }
  // Layers without rotary: llama.cpp fixes their period per architecture (SmolLM3: every 4th layer).
  if (R.no_rotary_interval > 0)
    for (int64_t l = 0; l < c.n_layers && l < (int64_t(1) << 20); ++l)
      c.rotary_layers.push_back((l + 1) % R.no_rotary_interval != 0);
  // The sliding layers' own rotary base (Gemma 3); llama.cpp uses it only when the file has sliding layers.
  if (R.gguf_rope_local_theta_key && c.sliding_window > 0)
    c.rope_theta_local = opt_float(g, a + R.gguf_rope_local_theta_key, R.rope_local_theta_default, 1e-6, 1e30);
  if (c.positions == PositionKind::Rotary) {
    c.rope_theta = opt_float(g, a + "rope.freq_base", 10000.0, 1e-6, 1e30);
    const int64_t rdim = opt_int(g, a + "rope.dimension_count", c.d_head);
    if (rdim % 2 != 0 || rdim > c.d_head)
      throw FormatError(g.path, "rope.dimension_count " + std::to_string(rdim) + " must be even and at most the head size " +
                                    std::to_string(c.d_head));
    c.rotary_dim = rdim == c.d_head ? 0 : rdim;
    // llama.cpp's converter permutes Llama q/k rows from Hugging Face's rotate_half order to the interleaved
    // pairs of Meta's code (ggml's "normal" rope); the other families keep rotate_half (ggml's "neox" rope).
    c.rope_interleaved = A.gguf_qk_interleaved;
    const std::string scaling = g.get_string(a + "rope.scaling.type", "none");
    const double factor = opt_float(g, a + "rope.scaling.factor", 1.0, 0, 1e6);
    if (scaling == "linear" && factor != 1.0) {
      if (factor <= 0) throw FormatError(g.path, "metadata '" + a + "rope.scaling.factor' must be positive");
      c.rope_scaling = ModelConfig::RopeScaling::Linear;
      c.rope_factor = factor;
    } else if (scaling == "yarn") {
      gguf_yarn(g, a, factor, c);
    } else if (scaling != "none" && scaling != "linear") {
      throw FormatError(g.path, "rope scaling '" + scaling + "' is not supported");
    }
    if (const GgufTensorInfo* rf = g.find("rope_freqs.weight")) {
      // llama.cpp applies both (positions scaled, then each frequency divided); the runner has one scaling:
      // refused rather than the linear factor silently dropped.
      const bool linear = c.rope_scaling == ModelConfig::RopeScaling::Linear;
      const double linear_factor = c.rope_factor;
      fit_llama3_rope(g, *rf, rdim, c);
      if (linear && c.rope_scaling != ModelConfig::RopeScaling::Linear)
        throw FormatError(g.path, "linear rope scaling (" + a + "rope.scaling.factor " + std::to_string(linear_factor) +
                                      ") together with a rope_freqs tensor of Llama-3.1 divisors is not supported");
    }
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
  const ArchSpec& A = architecture(c.family);
  Reader r{g, {}};
  if (c.rope_scaling == ModelConfig::RopeScaling::Llama3) r.used.insert("rope_freqs.weight");
  const int64_t d = c.d_model, V = c.vocab_size, m = c.d_mlp, qd = c.n_heads * c.d_head, kd = c.n_kv_heads * c.d_head;
  auto name = [&](TensorRole role, int64_t layer, const char* suffix) { return gname(A, role, layer, suffix); };
  ModelWeights w;
  w.W_E = r.matrix("token_embd.weight", V, d);
  if (c.positions == PositionKind::Learned) w.W_pos = r.matrix("position_embd.weight", c.n_ctx, d);
  if (c.embed_norm) {
    w.emb_norm_w = r.vec(name(TensorRole::TokenEmbdNorm, -1, ".weight"), d);
    if (c.norm == NormKind::LayerNorm) w.emb_norm_b = r.vec(name(TensorRole::TokenEmbdNorm, -1, ".bias"), d);
  }
  w.lnf_w = r.vec("output_norm.weight", d);
  if (c.norm == NormKind::LayerNorm) w.lnf_b = r.vec("output_norm.bias", d);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    LayerWeights L;
    if (c.input_norms) {
      L.ln1_w = r.vec(name(TensorRole::AttnNorm, i, ".weight"), d);
      L.ln2_w = r.vec(name(TensorRole::FfnNorm, i, ".weight"), d);
    }
    if (c.input_norms && c.norm == NormKind::LayerNorm) {
      L.ln1_b = r.vec(name(TensorRole::AttnNorm, i, ".bias"), d);
      L.ln2_b = r.vec(name(TensorRole::FfnNorm, i, ".bias"), d);
    }
    // Fused q|k|v rows (GPT-2 c_attn and Phi-3 qkv_proj as converted; GPT-NeoX regrouped by the converter),
    // or separate q, k, v.
    const std::string qkv = name(TensorRole::AttnQKV, i, ".weight");
    if (!qkv.empty() && r.has(qkv)) {
      at::Tensor W = r.matrix(qkv, qd + 2 * kd, d).t();  // [d, q|k|v]
      L.w_q = W.narrow(1, 0, qd);
      L.w_k = W.narrow(1, qd, kd);
      L.w_v = W.narrow(1, qd + kd, kd);
      const std::string bn = name(TensorRole::AttnQKV, i, ".bias");
      if (r.has(bn)) {
        at::Tensor b = r.vec(bn, qd + 2 * kd);
        L.b_q = b.narrow(0, 0, qd);
        L.b_k = b.narrow(0, qd, kd);
        L.b_v = b.narrow(0, qd + kd, kd);
      }
    } else {
      L.w_q = r.matrix("blk." + std::to_string(i) + ".attn_q.weight", qd, d).t();
      L.w_k = r.matrix("blk." + std::to_string(i) + ".attn_k.weight", kd, d).t();
      L.w_v = r.matrix("blk." + std::to_string(i) + ".attn_v.weight", kd, d).t();
      if (c.attn_bias) {
        L.b_q = r.vec("blk." + std::to_string(i) + ".attn_q.bias", qd);
        L.b_k = r.vec("blk." + std::to_string(i) + ".attn_k.bias", kd);
        L.b_v = r.vec("blk." + std::to_string(i) + ".attn_v.bias", kd);
      }
    }
    L.w_o = r.matrix(name(TensorRole::AttnOut, i, ".weight"), d, qd).t();
    if (c.attn_out_bias) L.b_o = r.vec(name(TensorRole::AttnOut, i, ".bias"), d);
    if (c.attn_sinks) L.sinks = r.vec(name(TensorRole::AttnSinks, i, ".weight"), c.n_heads);
    if (c.n_experts > 0) {
      const int64_t E = c.n_experts, me = c.d_expert;
      L.w_router = r.matrix(name(TensorRole::FfnGateInp, i, ".weight"), E, d).t();
      if (find_tensor(A, TensorRole::FfnGateInp)->bias != BiasKind::None)  // GPT-OSS's router; others have none
        L.b_router = r.vec(name(TensorRole::FfnGateInp, i, ".bias"), E);
      L.exp_gate = r.experts(name(TensorRole::FfnGateExps, i, ".weight"), E, me, d);
      L.exp_up = r.experts(name(TensorRole::FfnUpExps, i, ".weight"), E, me, d);
      L.exp_down = r.experts(name(TensorRole::FfnDownExps, i, ".weight"), E, d, me);
      if (find_tensor(A, TensorRole::FfnGateExps)->bias != BiasKind::None) {  // GPT-OSS: ne {out, E}, one row per expert
        L.exp_gate_b = r.expert_biases(name(TensorRole::FfnGateExps, i, ".bias"), E, me);
        L.exp_up_b = r.expert_biases(name(TensorRole::FfnUpExps, i, ".bias"), E, me);
        L.exp_down_b = r.expert_biases(name(TensorRole::FfnDownExps, i, ".bias"), E, d);
      }
      if (c.shared_expert) {
        L.w_shared_gate = r.vec(name(TensorRole::FfnGateInpShexp, i, ".weight"), d).view({d, 1});
        L.w_in = r.matrix(name(TensorRole::FfnUp, i, ".weight"), m, d).t();
        L.w_gate = r.matrix(name(TensorRole::FfnGate, i, ".weight"), m, d).t();
        L.w_out = r.matrix(name(TensorRole::FfnDown, i, ".weight"), d, m).t();
      }
    } else if (find_tensor(A, TensorRole::FfnGateUp)) {  // Phi-3: ffn_up holds [gate: m | up: m] rows
      at::Tensor W = r.matrix(name(TensorRole::FfnGateUp, i, ".weight"), 2 * m, d).t();
      L.w_gate = W.narrow(1, 0, m);
      L.w_in = W.narrow(1, m, m);
    } else {
      L.w_in = r.matrix(name(TensorRole::FfnUp, i, ".weight"), m, d).t();
      if (c.mlp_bias) L.b_in = r.vec(name(TensorRole::FfnUp, i, ".bias"), m);
      if (c.gated_mlp) {
        L.w_gate = r.matrix(name(TensorRole::FfnGate, i, ".weight"), m, d).t();
        L.b_gate = r.opt_vec(name(TensorRole::FfnGate, i, ".bias"), m);
      }
    }
    if (c.n_experts == 0) L.w_out = r.matrix(name(TensorRole::FfnDown, i, ".weight"), d, m).t();
    if (c.mlp_bias) L.b_out = r.opt_vec(name(TensorRole::FfnDown, i, ".bias"), d);
    if (c.qk_norm) {
      L.q_norm_w = r.vec(name(TensorRole::AttnQNorm, i, ".weight"), c.qk_norm_full ? qd : c.d_head);
      L.k_norm_w = r.vec(name(TensorRole::AttnKNorm, i, ".weight"), c.qk_norm_full ? kd : c.d_head);
    }
    if (c.post_attn_norm) L.post_attn_norm_w = r.vec(name(TensorRole::AttnPostNorm, i, ".weight"), d);
    if (c.post_mlp_norm) L.post_mlp_norm_w = r.vec(name(TensorRole::FfnPostNorm, i, ".weight"), d);
    w.layers.push_back(std::move(L));
  }
  if (!c.tied_embeddings) w.W_U = r.matrix("output.weight", V, d).t();
  else w.W_U = w.W_E.t();
  if (!c.tied_embeddings) w.b_U = r.opt_vec("output.bias", V);  // Phi-2's biased lm_head
  // Tensors nobody reads would be silently ignored weights: refuse them (they name the unsupported variant).
  for (auto& t : g.tensors)
    if (!r.used.count(t.name))
      throw FormatError(g.path, "tensor '" + t.name + "' is not used by the " + c.architecture + " model (unsupported variant)");
  return Model(std::move(c), std::move(w), g.path);
}

Model load_gguf_model(const std::string& path) { return load_gguf_model(read_gguf(path)); }

}  // namespace vocablens
