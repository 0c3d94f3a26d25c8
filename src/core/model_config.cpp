// Reading Hugging Face config.json into ModelConfig.
#include "vocablens/model_config.hpp"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/config_checks.hpp"
#include "util/json_depth.hpp"
#include "util/regular_file.hpp"
#include "vocablens/arch.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {

using json = nlohmann::json;

int64_t get_int(const json& j, std::initializer_list<const char*> keys, const std::string& path, int64_t fallback,
                bool required) {
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it != j.end() && !it->is_null()) {
      if (!it->is_number_integer()) throw FormatError(path, std::string("config field '") + k + "' is not an integer");
      // Found by fuzzing: an unsigned value above INT64_MAX used to wrap to a negative number
      // (e.g. "bos_token_id": 18446744073709551615 silently read as -1 = "none").
      if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        throw FormatError(path, std::string("config field '") + k + "' is out of range");
      return it->get<int64_t>();
    }
  }
  if (required) throw FormatError(path, std::string("config.json has no '") + *keys.begin() + "'");
  return fallback;
}

double get_num(const json& j, const char* key, double fallback, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw FormatError(path, std::string("config field '") + key + "' is not a number");
  return it->get<double>();
}

Activation parse_activation(const std::string& s, const std::string& path) {
  if (s == "gelu_new" || s == "gelu_pytorch_tanh" || s == "gelu_fast") return Activation::GeluNew;
  if (s == "gelu") return Activation::Gelu;
  if (s == "relu") return Activation::Relu;
  if (s == "silu" || s == "swish") return Activation::SiLU;
  throw FormatError(path, "unsupported activation function '" + s + "'");
}


// A field given in the file but not usable: one line naming the field and the value.
[[noreturn]] void bad_field(const std::string& path, const std::string& field, const std::string& value, const std::string& why) {
  throw FormatError(path, "config field '" + field + "' = " + value + ": " + why);
}

bool get_bool(const json& j, const char* key, bool fallback, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw FormatError(path, std::string("config field '") + key + "' is not true or false");
  return it->get<bool>();
}

std::string fmt_num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void read_gpt2(const json& j, ModelConfig& c, const std::string& path) {
  c.n_layers = get_int(j, {"n_layer", "num_hidden_layers"}, path, 0, true);
  c.d_model = get_int(j, {"n_embd", "hidden_size"}, path, 0, true);
  c.n_heads = get_int(j, {"n_head", "num_attention_heads"}, path, 0, true);
  c.n_kv_heads = c.n_heads;
  c.vocab_size = get_int(j, {"vocab_size"}, path, 0, true);
  c.n_ctx = get_int(j, {"n_positions", "n_ctx", "max_position_embeddings"}, path, 0, true);
  // Found by fuzzing: 4 * n_embd overflowed int64 (UB) for a huge n_embd before the range checks
  // below ran; an out-of-range n_embd now gets fallback 0 here and is refused below as "hidden size".
  const bool d_model_ok = c.d_model > 0 && c.d_model <= (int64_t(1) << 31);
  c.d_mlp = get_int(j, {"n_inner"}, path, d_model_ok ? 4 * c.d_model : 0, false);
  c.norm = NormKind::LayerNorm;
  c.norm_eps = get_num(j, "layer_norm_epsilon", 1e-5, path);
  c.positions = PositionKind::Learned;
  c.activation = parse_activation(j.value("activation_function", std::string("gelu_new")), path);
  c.gated_mlp = false;
  c.attn_bias = c.attn_out_bias = c.mlp_bias = true;
  c.tied_embeddings = j.value("tie_word_embeddings", true);
  // Variants of GPT-2 attention the runner does not implement: refuse rather than compute wrong numbers.
  if (j.value("scale_attn_by_inverse_layer_idx", false))
    throw FormatError(path, "scale_attn_by_inverse_layer_idx = true is not supported");
  if (!j.value("scale_attn_weights", true)) throw FormatError(path, "scale_attn_weights = false is not supported");
}

// Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma-2, Phi-3: the Llama block's keys, then each family's departures.
void read_llama_like(const json& j, ModelConfig& c, const std::string& path) {
  const Family f = c.family;
  const bool gemma = f == Family::Gemma || f == Family::Gemma2;
  c.n_layers = get_int(j, {"num_hidden_layers"}, path, 0, true);
  c.d_model = get_int(j, {"hidden_size"}, path, 0, true);
  c.n_heads = get_int(j, {"num_attention_heads"}, path, 0, true);
  c.n_kv_heads = get_int(j, {"num_key_value_heads"}, path, c.n_heads, false);
  c.vocab_size = get_int(j, {"vocab_size"}, path, 0, true);
  c.n_ctx = get_int(j, {"max_position_embeddings"}, path, 0, true);
  c.d_mlp = get_int(j, {"intermediate_size"}, path, 0, true);
  c.norm = NormKind::RMSNorm;
  c.norm_eps = get_num(j, "rms_norm_eps", 1e-6, path);
  c.positions = PositionKind::Rotary;
  c.rope_theta = get_num(j, "rope_theta", 10000.0, path);
  // Gemma's MLP reads hidden_activation (gelu_pytorch_tanh when absent, whatever hidden_act says).
  std::string act = gemma ? j.value("hidden_activation", std::string("gelu_pytorch_tanh")) : j.value("hidden_act", std::string("silu"));
  if (gemma && j.contains("hidden_activation") && j["hidden_activation"].is_null()) act = "gelu_pytorch_tanh";
  c.activation = parse_activation(act, path);
  c.gated_mlp = true;
  const bool attention_bias = get_bool(j, "attention_bias", false, path);
  c.attn_bias = f == Family::Qwen2 ? true : attention_bias;
  c.attn_out_bias = f == Family::Qwen2 ? false : attention_bias;
  c.mlp_bias = get_bool(j, "mlp_bias", false, path);
  c.tied_embeddings = get_bool(j, "tie_word_embeddings", gemma, path);
  if (f == Family::Qwen3) c.qk_norm = true;
  if (gemma) {
    c.norm_weight_offset = 1.0;
    c.embed_scale = std::sqrt(static_cast<double>(c.d_model));
  }
  if (f == Family::Mistral || f == Family::Phi3 || f == Family::Gemma2) {
    // MistralConfig and Gemma2Config default to 4096 when the key is absent; null means "no window".
    const int64_t fallback = f == Family::Phi3 ? 0 : 4096;
    if (j.contains("sliding_window") && j["sliding_window"].is_null()) c.sliding_window = 0;
    else c.sliding_window = get_int(j, {"sliding_window"}, path, fallback, false);
    if (j.contains("sliding_window") && !j["sliding_window"].is_null() && c.sliding_window <= 0)
      bad_field(path, "sliding_window", std::to_string(c.sliding_window), "a window must be at least 1 position (or null for none)");
  }
  if ((f == Family::Qwen2 || f == Family::Qwen3) && get_bool(j, "use_sliding_window", false, path))
    bad_field(path, "use_sliding_window", "true", "Qwen sliding-window layers are not supported (released Qwen2.5/Qwen3 models set false)");
  if (f == Family::Gemma2) {
    c.post_attn_norm = c.post_mlp_norm = true;
    c.sliding_pattern = 2;
    const double qpas = get_num(j, "query_pre_attn_scalar", 256.0, path);
    if (!(qpas > 0)) bad_field(path, "query_pre_attn_scalar", fmt_num(qpas), "must be positive");
    c.attn_scale = 1.0 / std::sqrt(qpas);
    c.attn_softcap = j.contains("attn_logit_softcapping") && j["attn_logit_softcapping"].is_null() ? 0.0 : get_num(j, "attn_logit_softcapping", 50.0, path);
    c.final_softcap = j.contains("final_logit_softcapping") && j["final_logit_softcapping"].is_null() ? 0.0 : get_num(j, "final_logit_softcapping", 30.0, path);
    if (c.attn_softcap < 0) bad_field(path, "attn_logit_softcapping", fmt_num(c.attn_softcap), "must be positive");
    if (c.final_softcap < 0) bad_field(path, "final_logit_softcapping", fmt_num(c.final_softcap), "must be positive");
    if (j.contains("layer_types") && j["layer_types"].is_array()) {
      const auto& lt = j["layer_types"];
      for (size_t i = 0; i < lt.size(); ++i) {
        const std::string want = i % 2 == 0 ? "sliding_attention" : "full_attention";
        if (!lt[i].is_string() || lt[i].get<std::string>() != want)
          bad_field(path, "layer_types[" + std::to_string(i) + "]", lt[i].dump(), "expected \"" + want + "\" (Gemma-2 alternates)");
      }
    }
  }
}

void read_gpt_neox(const json& j, ModelConfig& c, const std::string& path) {
  c.n_layers = get_int(j, {"num_hidden_layers"}, path, 0, true);
  c.d_model = get_int(j, {"hidden_size"}, path, 0, true);
  c.n_heads = get_int(j, {"num_attention_heads"}, path, 0, true);
  c.n_kv_heads = c.n_heads;
  c.vocab_size = get_int(j, {"vocab_size"}, path, 0, true);
  c.n_ctx = get_int(j, {"max_position_embeddings"}, path, 0, true);
  c.d_mlp = get_int(j, {"intermediate_size"}, path, 0, true);
  c.norm = NormKind::LayerNorm;
  c.norm_eps = get_num(j, "layer_norm_eps", 1e-5, path);
  c.positions = PositionKind::Rotary;
  c.rope_theta = j.contains("rope_theta") ? get_num(j, "rope_theta", 10000.0, path) : get_num(j, "rotary_emb_base", 10000.0, path);
  c.activation = parse_activation(j.value("hidden_act", std::string("gelu")), path);
  c.gated_mlp = false;
  c.attn_bias = c.attn_out_bias = get_bool(j, "attention_bias", true, path);
  c.mlp_bias = true;
  c.parallel_residual = get_bool(j, "use_parallel_residual", true, path);
  c.tied_embeddings = get_bool(j, "tie_word_embeddings", false, path);
}

void read_opt(const json& j, ModelConfig& c, const std::string& path) {
  c.n_layers = get_int(j, {"num_hidden_layers"}, path, 0, true);
  c.d_model = get_int(j, {"hidden_size"}, path, 0, true);
  c.n_heads = get_int(j, {"num_attention_heads"}, path, 0, true);
  c.n_kv_heads = c.n_heads;
  c.vocab_size = get_int(j, {"vocab_size"}, path, 0, true);
  c.n_ctx = get_int(j, {"max_position_embeddings"}, path, 0, true);
  c.d_mlp = get_int(j, {"ffn_dim"}, path, 0, true);
  c.norm = NormKind::LayerNorm;
  c.norm_eps = 1e-5;  // nn.LayerNorm's default; OPT's config has no epsilon
  c.positions = PositionKind::Learned;
  c.position_offset = 2;
  c.activation = parse_activation(j.value("activation_function", std::string("relu")), path);
  c.gated_mlp = false;
  c.attn_bias = c.attn_out_bias = c.mlp_bias = get_bool(j, "enable_bias", true, path);
  c.norm_before = get_bool(j, "do_layer_norm_before", true, path);
  c.final_norm = c.norm_before && !get_bool(j, "_remove_final_layer_norm", false, path);
  if (!get_bool(j, "layer_norm_elementwise_affine", true, path))
    bad_field(path, "layer_norm_elementwise_affine", "false", "norms without scale and bias are not supported");
  c.d_embed = get_int(j, {"word_embed_proj_dim"}, path, c.d_model, false);
  if (c.d_embed <= 0 || c.d_embed > (int64_t(1) << 31))
    bad_field(path, "word_embed_proj_dim", std::to_string(c.d_embed), "must be positive");
  c.tied_embeddings = get_bool(j, "tie_word_embeddings", true, path);
}

// Rotary details shared by every rotary family: the rotated fraction and rope_scaling (or rope_parameters).
void finish_rotary(const json& j, ModelConfig& c, const std::string& path) {
  if (c.positions != PositionKind::Rotary) return;
  const char* frac_key = c.family == Family::GPTNeoX && !j.contains("partial_rotary_factor") ? "rotary_pct" : "partial_rotary_factor";
  const double frac = get_num(j, frac_key, c.family == Family::GPTNeoX ? 0.25 : 1.0, path);
  const double dims = frac * static_cast<double>(c.d_head);
  c.rotary_dim = static_cast<int64_t>(dims);  // Hugging Face and llama.cpp both truncate: int(head_dim * pct)
  if (!(frac > 0 && frac <= 1) || c.rotary_dim < 2 || c.rotary_dim % 2 != 0)
    bad_field(path, frac_key, fmt_num(frac),
              "gives " + fmt_num(dims) + " rotary features of head_dim " + std::to_string(c.d_head) + " (need an even number >= 2)");
  const char* scaling_key = j.contains("rope_scaling") ? "rope_scaling" : "rope_parameters";
  if (!j.contains(scaling_key) || j[scaling_key].is_null()) return;
  const json& rs = j[scaling_key];
  if (!rs.is_object()) throw FormatError(path, std::string("config field '") + scaling_key + "' is not an object");
  std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
  if (rs.contains("rope_theta")) c.rope_theta = get_num(rs, "rope_theta", c.rope_theta, path);
  if (type == "default") return;
  if (type == "linear" || type == "llama3") {
    c.rope_factor = get_num(rs, "factor", 0.0, path);
    if (!(c.rope_factor > 0)) bad_field(path, std::string(scaling_key) + ".factor", fmt_num(c.rope_factor), "must be positive");
    if (type == "linear") {
      c.rope_scaling = ModelConfig::RopeScaling::Linear;
      return;
    }
    c.rope_scaling = ModelConfig::RopeScaling::Llama3;
    c.rope_low_freq_factor = get_num(rs, "low_freq_factor", 1.0, path);
    c.rope_high_freq_factor = get_num(rs, "high_freq_factor", 4.0, path);
    c.rope_original_context = get_int(rs, {"original_max_position_embeddings"}, path, 8192, false);
    if (!(c.rope_high_freq_factor > c.rope_low_freq_factor) || !(c.rope_low_freq_factor > 0) || c.rope_original_context <= 0)
      bad_field(path, std::string(scaling_key) + ".high_freq_factor", fmt_num(c.rope_high_freq_factor),
                "llama3 scaling needs high_freq_factor > low_freq_factor (" + fmt_num(c.rope_low_freq_factor) +
                    ") > 0 and a positive original_max_position_embeddings");
    return;
  }
  bad_field(path, std::string(scaling_key) + ".rope_type", "\"" + type + "\"", "not supported (supported: default, linear, llama3)");
}

}  // namespace detail

namespace detail {
ModelConfig parse_hf_config_impl(const std::string& text, const std::string& path) {
  using detail::json;
  detail::check_json_depth(text, path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    throw FormatError(path, "malformed JSON: " + msg.substr(msg.find(']') == std::string::npos ? 0 : msg.find(']') + 2));
  }
  if (!j.is_object()) throw FormatError(path, "config.json is not a JSON object");
  std::string arch, model_type = j.value("model_type", std::string());
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    arch = j["architectures"][0].get<std::string>();
  ModelConfig c;
  c.architecture = arch.empty() ? model_type : arch;
  const ArchSpec* spec = find_architecture(arch.empty() ? model_type : arch);
  if (!spec)
    throw FormatError(path, "unknown architecture '" + (c.architecture.empty() ? std::string("<none>") : c.architecture) +
                                "' (supported: " + supported_architectures() + ")");
  c.family = spec->family;
  switch (c.family) {
    case Family::GPT2: read_gpt2(j, c, path); break;
    case Family::GPTNeoX: read_gpt_neox(j, c, path); break;
    case Family::OPT: read_opt(j, c, path); break;
    default: read_llama_like(j, c, path); break;
  }
  c.bos_token_id = get_int(j, {"bos_token_id"}, path, -1, false);
  c.eos_token_id = get_int(j, {"eos_token_id"}, path, -1, false);
  // vocablens extensions written by `vocablens train` (positions other than the family default).
  if (j.contains("vocablens_positions")) {
    if (!j["vocablens_positions"].is_string()) throw FormatError(path, "vocablens_positions is not a string");
    try {
      c.positions = position_kind_from_string(j["vocablens_positions"].get<std::string>());
    } catch (const UsageError& e) {
      throw FormatError(path, e.what());
    }
  }
  for (auto [v, name] : {std::pair{c.n_layers, "number of layers"}, {c.d_model, "hidden size"}, {c.n_heads, "number of heads"},
                         {c.n_kv_heads, "number of key/value heads"}, {c.vocab_size, "vocab_size"},
                         {c.n_ctx, "context length"}, {c.d_mlp, "MLP size"}})
    if (v <= 0 || v > (int64_t(1) << 31))
      throw FormatError(path, std::string(name) + " is " + std::to_string(v) +
                                  (v <= 0 ? "; it must be positive" : "; the largest supported is 2^31 = 2147483648"));
  const bool has_head_dim = j.contains("head_dim") && !j["head_dim"].is_null() && c.family != Family::GPT2;
  if (!has_head_dim && c.d_model % c.n_heads != 0)
    throw FormatError(path, "hidden size " + std::to_string(c.d_model) + " is not divisible by " +
                                std::to_string(c.n_heads) + " heads");
  c.d_head = has_head_dim ? detail::get_int(j, {"head_dim"}, path, 0, true)
                          : (c.family == Family::Gemma || c.family == Family::Gemma2) ? 256 : c.d_model / c.n_heads;
  // Gemma's config class defaults head_dim to 256 whatever the hidden size; an explicit value wins.
  // Found by fuzzing: head_dim was taken unchecked (0 or negative passed through to the runner).
  if (c.d_head <= 0 || c.d_head > (int64_t(1) << 31))
    throw FormatError(path, "head_dim must be positive, got " + std::to_string(c.d_head));
  if (c.n_heads % c.n_kv_heads != 0) throw FormatError(path, "num_attention_heads is not a multiple of num_key_value_heads");
  if (c.positions == PositionKind::Rotary && c.d_head % 2 != 0) throw FormatError(path, "rotary positions need an even head size");
  finish_rotary(j, c, path);
  std::string td = j.value("torch_dtype", std::string("float32"));
  c.weight_dtype = td == "float16" ? "F16" : td == "bfloat16" ? "BF16" : "F32";
  detail::check_config_values(c, path);  // Values that would make the forward NaN
  return c;
}
}  // namespace detail

ModelConfig parse_hf_config(const std::string& text, const std::string& path) {
  try {
    return detail::parse_hf_config_impl(text, path);
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong JSON type (e.g. "tie_word_embeddings": "yes").
    std::string msg = e.what();
    auto cut = msg.find("] ");
    throw FormatError(path, "unexpected value in config.json: " + (cut == std::string::npos ? msg : msg.substr(cut + 2)));
  }
}

ModelConfig read_hf_config(const std::string& path) {
  // Hostile input: config.json is read whole; refuse absurd sizes before reading (real ones
  // are a few KB).
  // Only a regular file (a FIFO hung, a symlink to /dev/zero read gigabytes).
  constexpr uint64_t kMaxConfigBytes = uint64_t{64} << 20;
  return parse_hf_config(detail::read_regular_file(path, kMaxConfigBytes, "config files"), path);
}

const char* to_string(Family f) {
  switch (f) {
    case Family::GPT2: return "gpt2";
    case Family::Llama: return "llama";
    case Family::GPTNeoX: return "gpt_neox";
    case Family::Qwen2: return "qwen2";
    case Family::Qwen3: return "qwen3";
    case Family::Mistral: return "mistral";
    case Family::Gemma: return "gemma";
    case Family::Gemma2: return "gemma2";
    case Family::Phi3: return "phi3";
    case Family::OPT: return "opt";
  }
  return "?";
}
const char* to_string(NormKind n) { return n == NormKind::LayerNorm ? "layernorm" : "rmsnorm"; }
const char* to_string(PositionKind p) {
  switch (p) {
    case PositionKind::Learned: return "learned";
    case PositionKind::Sinusoidal: return "sinusoidal";
    case PositionKind::Rotary: return "rope";
    case PositionKind::ALiBi: return "alibi";
    case PositionKind::None: return "none";
  }
  return "?";
}
const char* to_string(Activation a) {
  switch (a) {
    case Activation::GeluNew: return "gelu_new";
    case Activation::Gelu: return "gelu";
    case Activation::Relu: return "relu";
    case Activation::SiLU: return "silu";
  }
  return "?";
}
PositionKind position_kind_from_string(const std::string& s) {
  for (auto p : {PositionKind::Learned, PositionKind::Sinusoidal, PositionKind::Rotary, PositionKind::ALiBi, PositionKind::None})
    if (s == to_string(p)) return p;
  if (s == "rotary") return PositionKind::Rotary;
  throw UsageError("unknown position kind '" + s + "' (learned, sinusoidal, rope, alibi, none)");
}

}  // namespace vocablens
