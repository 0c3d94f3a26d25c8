// Reading Hugging Face config.json into ModelConfig.
#include "vocablens/model_config.hpp"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/config_checks.hpp"
#include "util/json_depth.hpp"
#include "util/regular_file.hpp"
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
      // Fuzzing fix (issue #9): an unsigned value above INT64_MAX used to wrap to a negative number
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
  bool gpt2 = arch == "GPT2LMHeadModel" || arch == "GPT2Model" || (arch.empty() && model_type == "gpt2");
  bool llama = arch == "LlamaForCausalLM" || arch == "LlamaModel" || (arch.empty() && model_type == "llama");
  if (!gpt2 && !llama)
    throw FormatError(path, "unknown architecture '" + (c.architecture.empty() ? std::string("<none>") : c.architecture) +
                                "' (supported: GPT2LMHeadModel, LlamaForCausalLM)");
  using detail::get_int;
  if (gpt2) {
    c.family = Family::GPT2;
    c.n_layers = get_int(j, {"n_layer", "num_hidden_layers"}, path, 0, true);
    c.d_model = get_int(j, {"n_embd", "hidden_size"}, path, 0, true);
    c.n_heads = get_int(j, {"n_head", "num_attention_heads"}, path, 0, true);
    c.n_kv_heads = c.n_heads;
    c.vocab_size = get_int(j, {"vocab_size"}, path, 0, true);
    c.n_ctx = get_int(j, {"n_positions", "n_ctx", "max_position_embeddings"}, path, 0, true);
    // Fuzzing fix (issue #9): 4 * n_embd overflowed int64 (UB) for a huge n_embd before the range checks
    // below ran; an out-of-range n_embd now gets fallback 0 here and is refused below as "hidden size".
    const bool d_model_ok = c.d_model > 0 && c.d_model <= (int64_t(1) << 31);
    c.d_mlp = get_int(j, {"n_inner"}, path, d_model_ok ? 4 * c.d_model : 0, false);
    c.norm = NormKind::LayerNorm;
    c.norm_eps = detail::get_num(j, "layer_norm_epsilon", 1e-5, path);
    c.positions = PositionKind::Learned;
    c.activation = detail::parse_activation(j.value("activation_function", std::string("gelu_new")), path);
    c.gated_mlp = false;
    c.attn_bias = c.mlp_bias = true;
    c.tied_embeddings = j.value("tie_word_embeddings", true);
    // Variants of GPT-2 attention the runner does not implement: refuse rather than compute wrong numbers.
    if (j.value("scale_attn_by_inverse_layer_idx", false))
      throw FormatError(path, "scale_attn_by_inverse_layer_idx = true is not supported");
    if (!j.value("scale_attn_weights", true)) throw FormatError(path, "scale_attn_weights = false is not supported");
    c.bos_token_id = get_int(j, {"bos_token_id"}, path, -1, false);
    c.eos_token_id = get_int(j, {"eos_token_id"}, path, -1, false);
  } else {
    c.family = Family::Llama;
    c.n_layers = get_int(j, {"num_hidden_layers"}, path, 0, true);
    c.d_model = get_int(j, {"hidden_size"}, path, 0, true);
    c.n_heads = get_int(j, {"num_attention_heads"}, path, 0, true);
    c.n_kv_heads = get_int(j, {"num_key_value_heads"}, path, c.n_heads, false);
    c.vocab_size = get_int(j, {"vocab_size"}, path, 0, true);
    c.n_ctx = get_int(j, {"max_position_embeddings"}, path, 0, true);
    c.d_mlp = get_int(j, {"intermediate_size"}, path, 0, true);
    c.norm = NormKind::RMSNorm;
    c.norm_eps = detail::get_num(j, "rms_norm_eps", 1e-6, path);
    c.positions = PositionKind::Rotary;
    c.rope_theta = detail::get_num(j, "rope_theta", 10000.0, path);
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
      throw FormatError(path, "rope_scaling is not supported yet");
    c.activation = detail::parse_activation(j.value("hidden_act", std::string("silu")), path);
    c.gated_mlp = true;
    c.attn_bias = j.value("attention_bias", false);
    c.mlp_bias = j.value("mlp_bias", false);
    c.tied_embeddings = j.value("tie_word_embeddings", false);
    c.bos_token_id = get_int(j, {"bos_token_id"}, path, -1, false);
    c.eos_token_id = get_int(j, {"eos_token_id"}, path, -1, false);
  }
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
  if (c.d_model % c.n_heads != 0)
    throw FormatError(path, "hidden size " + std::to_string(c.d_model) + " is not divisible by " +
                                std::to_string(c.n_heads) + " heads");
  c.d_head = detail::get_int(j, {"head_dim"}, path, c.d_model / c.n_heads, false);
  // Fuzzing fix (issue #9): head_dim was taken unchecked (0 or negative passed through to the runner).
  if (c.d_head <= 0 || c.d_head > (int64_t(1) << 31))
    throw FormatError(path, "head_dim must be positive, got " + std::to_string(c.d_head));
  if (c.n_heads % c.n_kv_heads != 0) throw FormatError(path, "num_attention_heads is not a multiple of num_key_value_heads");
  if (c.positions == PositionKind::Rotary && c.d_head % 2 != 0) throw FormatError(path, "rotary positions need an even head size");
  std::string td = j.value("torch_dtype", std::string("float32"));
  c.weight_dtype = td == "float16" ? "F16" : td == "bfloat16" ? "BF16" : "F32";
  detail::check_config_values(c, path);  // issue #16: values that would make the forward NaN
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
  // Issue #9 (hostile input): config.json is read whole; refuse absurd sizes before reading (real ones
  // are a few KB).
  // Issue #16: only a regular file (a FIFO hung, a symlink to /dev/zero read gigabytes).
  constexpr uint64_t kMaxConfigBytes = uint64_t{64} << 20;
  return parse_hf_config(detail::read_regular_file(path, kMaxConfigBytes, "config files"), path);
}

const char* to_string(Family f) { return f == Family::GPT2 ? "gpt2" : "llama"; }
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
