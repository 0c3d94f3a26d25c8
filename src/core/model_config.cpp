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

// The first of `keys` present and not null, or nullptr.
const char* first_key(const json& j, const std::vector<const char*>& keys) {
  for (const char* k : keys)
    if (j.contains(k) && !j[k].is_null()) return k;
  return nullptr;
}

int64_t get_int(const json& j, const std::vector<const char*>& keys, const std::string& path, int64_t fallback, bool required) {
  const char* k = first_key(j, keys);
  if (!k) {
    if (required) throw FormatError(path, std::string("config.json has no '") + (keys.empty() ? "?" : keys.front()) + "'");
    return fallback;
  }
  return get_int(j, {k}, path, fallback, required);
}

bool read_switch(const json& j, const ConfigSwitch& s, const std::string& path) {
  return s.key ? get_bool(j, s.key, s.fallback, path) : s.fallback;
}

// A number whose key may be given as null to switch the feature off (soft-caps).
double get_num_or_off(const json& j, const char* key, double fallback, const std::string& path) {
  if (j.contains(key) && j[key].is_null()) return 0.0;
  return get_num(j, key, fallback, path);
}

// A mixture of experts' sizes (vocablens/model_config.hpp, n_experts): every layer a mixture, 1 <= top-k <= experts.
void read_experts(const json& j, ModelConfig& c, const FamilyRecipe& r, const std::string& path) {
  const char* ek = first_key(j, r.n_experts_keys) ? first_key(j, r.n_experts_keys) : r.n_experts_keys.front();
  c.n_experts = get_int(j, r.n_experts_keys, path, 0, true);
  c.n_experts_used = get_int(j, {r.n_experts_used_key}, path, 0, true);
  const bool d_model_ok = c.d_model > 0 && c.d_model <= (int64_t(1) << 31);
  c.d_expert = get_int(j, r.d_expert_keys, path, d_model_ok ? c.d_mlp : 0, true);
  if (c.n_experts < 1 || c.n_experts > (int64_t(1) << 16))
    bad_field(path, ek, std::to_string(c.n_experts), "must be between 1 and 65536");
  if (c.n_experts_used < 1 || c.n_experts_used > c.n_experts)
    bad_field(path, r.n_experts_used_key, std::to_string(c.n_experts_used),
              "must be between 1 and the number of experts (" + std::string(ek) + " = " + std::to_string(c.n_experts) + ")");
  if (c.d_expert < 1 || c.d_expert > (int64_t(1) << 31))
    bad_field(path, first_key(j, r.d_expert_keys) ? first_key(j, r.d_expert_keys) : r.d_expert_keys.front(),
              std::to_string(c.d_expert), "an expert's width must be positive");
  c.expert_weights_norm = read_switch(j, r.expert_weights_norm, path);
  c.expert_weights_topk_softmax = r.expert_weights_topk_softmax;
  c.shared_expert = r.shared_expert;
  // Qwen-MoE's dense layers among the mixtures: llama.cpp has none either.
  if (r.sparse_step_key && get_int(j, {r.sparse_step_key}, path, 1, false) != 1)
    bad_field(path, r.sparse_step_key, j[r.sparse_step_key].dump(),
              "dense MLP layers between the mixtures are not supported (must be 1)");
  if (r.dense_layers_key && j.contains(r.dense_layers_key) && !j[r.dense_layers_key].is_null() &&
      !(j[r.dense_layers_key].is_array() && j[r.dense_layers_key].empty()))
    bad_field(path, r.dense_layers_key, j[r.dense_layers_key].dump(),
              "dense MLP layers among the mixtures are not supported (must be [])");
}

// Every family through its recipe (vocablens/arch.hpp): sizes, norms, MLP, biases, attention variants.
void read_family(const json& j, ModelConfig& c, const FamilyRecipe& r, const std::string& path) {
  c.n_layers = get_int(j, r.n_layers_keys, path, 0, true);
  c.d_model = get_int(j, r.d_model_keys, path, 0, true);
  c.n_heads = get_int(j, r.n_heads_keys, path, r.n_heads_default, r.n_heads_default == 0);
  c.n_kv_heads = r.n_kv_heads_fixed > 0 ? r.n_kv_heads_fixed
                 : r.n_kv_heads_keys.empty()
                     ? c.n_heads
                     : get_int(j, r.n_kv_heads_keys, path, r.n_kv_heads_default > 0 ? r.n_kv_heads_default : c.n_heads, false);
  c.vocab_size = get_int(j, {"vocab_size"}, path, r.vocab_size_default, r.vocab_size_default == 0);
  c.n_ctx = get_int(j, r.n_ctx_keys, path, r.n_ctx_default, r.n_ctx_default == 0);
  // Fuzzing fix: d_mlp_per_d_model * d_model overflowed int64 (UB) for a huge d_model before the range checks
  // ran; an out-of-range d_model gets fallback 0 here and is refused later as "hidden size".
  const bool d_model_ok = c.d_model > 0 && c.d_model <= (int64_t(1) << 31);
  c.d_mlp = get_int(j, r.d_mlp_keys, path, d_model_ok ? r.d_mlp_per_d_model * c.d_model : 0, r.d_mlp_per_d_model == 0);
  c.norm = r.norm;
  c.norm_eps = r.norm_eps_key ? get_num(j, r.norm_eps_key, r.norm_eps_default, path) : r.norm_eps_default;
  c.norm_weight_offset = r.norm_weight_offset;
  c.norm_before = read_switch(j, r.norm_before, path);
  c.final_norm = c.norm_before && !(r.remove_final_norm_key && get_bool(j, r.remove_final_norm_key, false, path));
  c.qk_norm = r.qk_norm;
  c.qk_norm_full = r.qk_norm_full;
  c.input_norms = r.input_norms;
  c.post_attn_norm = c.post_mlp_norm = r.post_norms;
  c.positions = r.positions;
  c.position_offset = r.position_offset;
  std::string act = r.activation_default;
  if (j.contains(r.activation_key) && !j[r.activation_key].is_null()) act = j[r.activation_key].get<std::string>();
  c.activation = parse_activation(act, path);
  c.gated_mlp = r.gated_mlp;
  c.attn_bias = read_switch(j, r.attn_bias, path);
  c.attn_out_bias = read_switch(j, r.attn_out_bias, path);
  c.mlp_bias = read_switch(j, r.mlp_bias, path);
  c.tied_embeddings = read_switch(j, r.tied, path);
  c.parallel_residual = read_switch(j, r.parallel_residual, path);
  if (r.embed_scale_sqrt_d_model) c.embed_scale = std::sqrt(static_cast<double>(c.d_model));
  c.embed_norm = r.embed_norm;
  if (r.d_embed_key) {
    c.d_embed = get_int(j, {r.d_embed_key}, path, c.d_model, false);
    if (c.d_embed <= 0 || c.d_embed > (int64_t(1) << 31))
      bad_field(path, r.d_embed_key, std::to_string(c.d_embed), "must be positive");
  }
  for (const auto& no : r.refusals)
    if (get_bool(j, no.key, !no.value, path) == no.value) bad_field(path, no.key, no.value ? "true" : "false", no.why);
  for (const auto& [key, why] : r.refused_unless_null)
    if (j.contains(key) && !j[key].is_null()) bad_field(path, key, j[key].dump(), why);
  if (!r.n_experts_keys.empty()) read_experts(j, c, r, path);
  c.attn_sinks = r.attn_sinks;
  if (r.swiglu_limit_key) {  // GPT-OSS's clamped SwiGLU: the limit from the file, alpha and the up offset fixed
    c.glu_limit = get_num(j, r.swiglu_limit_key, r.swiglu_limit_default, path);
    if (!(c.glu_limit > 0) || !std::isfinite(c.glu_limit))
      bad_field(path, r.swiglu_limit_key, fmt_num(c.glu_limit), "must be a positive number");
    c.glu_alpha = r.swiglu_alpha;
    c.glu_up_offset = r.swiglu_up_offset;
  }
  if (r.sliding_window_key) {
    const char* k = r.sliding_window_key;
    if (j.contains(k) && j[k].is_null()) c.sliding_window = 0;  // null means "no window"
    else c.sliding_window = get_int(j, {k}, path, r.sliding_window_default, false);
    if (j.contains(k) && !j[k].is_null() && c.sliding_window <= 0)
      bad_field(path, k, std::to_string(c.sliding_window), "a window must be at least 1 position (or null for none)");
    c.sliding_pattern = r.sliding_pattern;
  }
  if (r.sliding_pattern_key) {  // Gemma 3: layer i slides unless (i + 1) % p == 0; p = 1: none slides
    const int64_t p = get_int(j, {r.sliding_pattern_key}, path, r.sliding_pattern, false);
    if (p < 1 || p > (int64_t(1) << 31)) bad_field(path, r.sliding_pattern_key, std::to_string(p), "must be at least 1");
    for (int64_t i = 0; i < c.n_layers && i < (int64_t(1) << 20); ++i) c.sliding_layers.push_back((i + 1) % p != 0);
  }
  // layer_types names each layer's attention; where the family has a pattern of sliding and full layers the
  // list decides (a checkpoint may depart from the pattern), and must name every layer with a known type.
  if (r.sliding_pattern > 1 && j.contains("layer_types") && !j["layer_types"].is_null()) {
    const auto& lt = j["layer_types"];
    if (!lt.is_array() || lt.size() != static_cast<size_t>(c.n_layers))
      bad_field(path, "layer_types", lt.is_array() ? std::to_string(lt.size()) + " entries" : lt.dump(),
                "must list one type per layer (" + std::to_string(c.n_layers) + " layers)");
    c.sliding_layers.clear();
    for (size_t i = 0; i < lt.size(); ++i) {
      const std::string t = lt[i].is_string() ? lt[i].get<std::string>() : "";
      if (t != "sliding_attention" && t != "full_attention")
        bad_field(path, "layer_types[" + std::to_string(i) + "]", lt[i].dump(),
                  "unknown layer type (known: \"sliding_attention\", \"full_attention\")");
      c.sliding_layers.push_back(t == "sliding_attention");
    }
  }
  if (r.attn_scale_key) {
    const double s = get_num(j, r.attn_scale_key, r.attn_scale_default, path);
    if (!(s > 0)) bad_field(path, r.attn_scale_key, fmt_num(s), "must be positive");
    c.attn_scale = 1.0 / std::sqrt(s);
  }
  if (r.attn_softcap_key) {
    c.attn_softcap = get_num_or_off(j, r.attn_softcap_key, r.attn_softcap_default, path);
    if (c.attn_softcap < 0) bad_field(path, r.attn_softcap_key, fmt_num(c.attn_softcap), "must be positive");
  }
  if (r.final_softcap_key) {
    c.final_softcap = get_num_or_off(j, r.final_softcap_key, r.final_softcap_default, path);
    if (c.final_softcap < 0) bad_field(path, r.final_softcap_key, fmt_num(c.final_softcap), "must be positive");
  }
}

// rope_parameters keyed by layer type ({"full_attention": {...}, "sliding_attention": {...}}).
bool rs_by_layer_type(const json& rs) { return rs.contains("full_attention") || rs.contains("sliding_attention"); }

// Rotary details of every rotary family: theta, the rotated fraction and rope_scaling (or rope_parameters).
void finish_rotary(const json& j, ModelConfig& c, const FamilyRecipe& r, const std::string& path) {
  if (c.positions != PositionKind::Rotary) return;
  const char* theta_key = first_key(j, r.rope_theta_keys);
  c.rope_theta = theta_key ? get_num(j, theta_key, r.rope_theta_default, path) : r.rope_theta_default;
  const char* present = first_key(j, r.rotary_fraction_keys);
  const char* frac_key = present ? present : r.rotary_fraction_keys.back();
  const double frac = get_num(j, frac_key, r.rotary_fraction_default, path);
  const double dims = frac * static_cast<double>(c.d_head);
  c.rotary_dim = static_cast<int64_t>(dims);  // Hugging Face and llama.cpp both truncate: int(head_dim * pct)
  if (!(frac > 0 && frac <= 1) || c.rotary_dim < 2 || c.rotary_dim % 2 != 0)
    bad_field(
        path, frac_key, fmt_num(frac),
        "gives " + fmt_num(dims) + " rotary features of head_dim " + std::to_string(c.d_head) + " (need an even number >= 2)");
  if (r.rotary_layers_key && j.contains(r.rotary_layers_key) && !j[r.rotary_layers_key].is_null()) {
    // HF reads one entry per layer (a longer list is allowed, its tail unused); 1 = rotary, 0 = none.
    const json& nl = j[r.rotary_layers_key];
    if (!nl.is_array() || nl.size() < static_cast<size_t>(c.n_layers))
      bad_field(path, r.rotary_layers_key, nl.is_array() ? std::to_string(nl.size()) + " entries" : nl.dump(),
                "must give 1 (rotary) or 0 (none) for each of the " + std::to_string(c.n_layers) + " layers");
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const json& e = nl[static_cast<size_t>(l)];
      if (!e.is_number_integer() || (e.get<int64_t>() != 0 && e.get<int64_t>() != 1))
        bad_field(path, std::string(r.rotary_layers_key) + "[" + std::to_string(l) + "]", e.dump(),
                  "must be 1 (rotary) or 0 (none)");
      c.rotary_layers.push_back(e.get<int64_t>() == 1);
    }
  } else if (r.no_rotary_interval > 0) {
    const char* k = r.no_rotary_interval_key;
    const int64_t n = k ? get_int(j, {k}, path, r.no_rotary_interval, false) : r.no_rotary_interval;
    if (n < 1) bad_field(path, k ? k : "no_rope_layer_interval", std::to_string(n), "must be at least 1");
    for (int64_t l = 0; l < c.n_layers && l < (int64_t(1) << 20); ++l) c.rotary_layers.push_back((l + 1) % n != 0);
  }
  if (r.rope_local_theta_key) {
    c.rope_theta_local = get_num(j, r.rope_local_theta_key, r.rope_local_theta_default, path);
    if (!(c.rope_theta_local > 0) || !std::isfinite(c.rope_theta_local))
      bad_field(path, r.rope_local_theta_key, fmt_num(c.rope_theta_local), "must be a positive number");
  }
  std::string scaling_key = j.contains("rope_scaling") ? "rope_scaling" : "rope_parameters";
  if (!j.contains(scaling_key) || j[scaling_key].is_null()) return;
  const json* rsp = &j[scaling_key];
  if (!rsp->is_object()) throw FormatError(path, "config field '" + scaling_key + "' is not an object");
  // Per layer type (rope_parameters of newer configs): the full-attention layers' entry is the one the global
  // table follows; the sliding layers' entry gives their base, and must not scale.
  if (rs_by_layer_type(*rsp) && r.rope_local_theta_key) {
    if (rsp->contains("sliding_attention")) {
      const json& loc = (*rsp)["sliding_attention"];
      if (!loc.is_object()) throw FormatError(path, "config field '" + scaling_key + ".sliding_attention' is not an object");
      c.rope_theta_local = get_num(loc, "rope_theta", c.rope_theta_local, path);
      if (!(c.rope_theta_local > 0) || !std::isfinite(c.rope_theta_local))
        bad_field(path, scaling_key + ".sliding_attention.rope_theta", fmt_num(c.rope_theta_local), "must be a positive number");
      const std::string lt = loc.value("rope_type", loc.value("type", std::string("default")));
      if (lt != "default")
        bad_field(path, scaling_key + ".sliding_attention.rope_type", "\"" + lt + "\"",
                  "the sliding layers' rotary is never scaled here");
    }
    if (!rsp->contains("full_attention")) return;
    scaling_key += ".full_attention";
    rsp = &(*rsp)["full_attention"];
    if (!rsp->is_object()) throw FormatError(path, "config field '" + scaling_key + "' is not an object");
  }
  const json& rs = *rsp;
  std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
  if (rs.contains("rope_theta")) c.rope_theta = get_num(rs, "rope_theta", c.rope_theta, path);
  if (type == "default") return;
  if (type == "linear" || type == "llama3") {
    c.rope_factor = get_num(rs, "factor", 0.0, path);
    if (!(c.rope_factor > 0)) bad_field(path, scaling_key + ".factor", fmt_num(c.rope_factor), "must be positive");
    if (type == "linear") {
      c.rope_scaling = ModelConfig::RopeScaling::Linear;
      return;
    }
    c.rope_scaling = ModelConfig::RopeScaling::Llama3;
    c.rope_low_freq_factor = get_num(rs, "low_freq_factor", 1.0, path);
    c.rope_high_freq_factor = get_num(rs, "high_freq_factor", 4.0, path);
    c.rope_original_context = get_int(rs, {"original_max_position_embeddings"}, path, 8192, false);
    if (!(c.rope_high_freq_factor > c.rope_low_freq_factor) || !(c.rope_low_freq_factor > 0) || c.rope_original_context <= 0)
      bad_field(path, scaling_key + ".high_freq_factor", fmt_num(c.rope_high_freq_factor),
                "llama3 scaling needs high_freq_factor > low_freq_factor (" + fmt_num(c.rope_low_freq_factor) +
                    ") > 0 and a positive original_max_position_embeddings");
    return;
  }
  if (type == "yarn") {
    // Hugging Face's YaRN (and llama.cpp's): factor, beta_fast / beta_slow, original_max_position_embeddings (the
    // config's max_position_embeddings when absent), attention_factor (else 0.1 ln(factor) + 1), truncate.
    c.rope_scaling = ModelConfig::RopeScaling::Yarn;
    c.rope_factor = get_num(rs, "factor", 0.0, path);
    if (!(c.rope_factor >= 1) || !std::isfinite(c.rope_factor))
      bad_field(path, scaling_key + ".factor", fmt_num(c.rope_factor), "YaRN needs a finite factor >= 1");
    c.rope_yarn_beta_fast = get_num(rs, "beta_fast", 32.0, path);
    c.rope_yarn_beta_slow = get_num(rs, "beta_slow", 1.0, path);
    if (!(c.rope_yarn_beta_fast > 0) || !(c.rope_yarn_beta_slow > 0) || !std::isfinite(c.rope_yarn_beta_fast) ||
        !std::isfinite(c.rope_yarn_beta_slow))
      bad_field(path, scaling_key + ".beta_fast", fmt_num(c.rope_yarn_beta_fast),
                "beta_fast and beta_slow must be positive numbers");
    c.rope_original_context = get_int(rs, {"original_max_position_embeddings"}, path, c.n_ctx, false);
    if (c.rope_original_context < 1)
      bad_field(path, scaling_key + ".original_max_position_embeddings", std::to_string(c.rope_original_context),
                "must be positive");
    for (const char* k : {"mscale", "mscale_all_dim"})
      if (rs.contains(k) && !rs[k].is_null())
        bad_field(path, scaling_key + "." + k, rs[k].dump(), "YaRN's mscale variants (DeepSeek) are not supported");
    c.rope_attention_factor = get_num(rs, "attention_factor", 0.1 * std::log(c.rope_factor) + 1.0, path);
    if (!(c.rope_attention_factor > 0) || !std::isfinite(c.rope_attention_factor))
      bad_field(path, scaling_key + ".attention_factor", fmt_num(c.rope_attention_factor), "must be a positive number");
    c.rope_yarn_truncate = get_bool(rs, "truncate", true, path);
    return;
  }
  bad_field(path, scaling_key + ".rope_type", "\"" + type + "\"", "not supported (supported: default, linear, llama3, yarn)");
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
  // A multimodal checkpoint's language model (Gemma3ForConditionalGeneration): its sizes are in text_config,
  // read over the top level as llama.cpp's converter does; the architecture stays the top level's.
  if (j.contains("text_config") && !j["text_config"].is_null()) {
    if (!j["text_config"].is_object()) throw FormatError(path, "config field 'text_config' is not an object");
    json text = j["text_config"];
    for (auto it = text.begin(); it != text.end(); ++it)
      if (it.key() != "architectures" && it.key() != "model_type") j[it.key()] = it.value();
  }
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
  c.family = spec->name;
  const FamilyRecipe& recipe = spec->recipe;
  read_family(j, c, recipe, path);
  c.bos_token_id = get_int(j, {"bos_token_id"}, path, -1, false);
  c.eos_token_id = get_int(j, {"eos_token_id"}, path, -1, false);
  // vocablens extensions written by `vocablens train` (positions other than the family default).
  if (j.contains("vocablens_positions")) {
    if (!j["vocablens_positions"].is_string()) throw FormatError(path, "vocablens_positions is not a string");
    try {
      c.positions = position_kind_from_string(j["vocablens_positions"].get<std::string>());
    } catch (const UsageError& e) { throw FormatError(path, e.what()); }
  }
  for (auto [v, name] : {std::pair{c.n_layers, "number of layers"},
                         {c.d_model, "hidden size"},
                         {c.n_heads, "number of heads"},
                         {c.n_kv_heads, "number of key/value heads"},
                         {c.vocab_size, "vocab_size"},
                         {c.n_ctx, "context length"},
                         {c.d_mlp, "MLP size"}})
    if (v <= 0 || v > (int64_t(1) << 31))
      throw FormatError(path, std::string(name) + " is " + std::to_string(v) +
                                  (v <= 0 ? "; it must be positive" : "; the largest supported is 2^31 = 2147483648"));
  const bool has_head_dim = recipe.head_dim_key && j.contains(recipe.head_dim_key) && !j[recipe.head_dim_key].is_null();
  if (!has_head_dim && c.d_model % c.n_heads != 0)
    throw FormatError(
        path, "hidden size " + std::to_string(c.d_model) + " is not divisible by " + std::to_string(c.n_heads) + " heads");
  c.d_head = has_head_dim                  ? detail::get_int(j, {recipe.head_dim_key}, path, 0, true)
             : recipe.head_dim_default > 0 ? recipe.head_dim_default
                                           : c.d_model / c.n_heads;
  // Gemma's config class defaults head_dim to 256 whatever the hidden size; an explicit value wins.
  // Found by fuzzing: head_dim was taken unchecked (0 or negative passed through to the runner).
  if (c.d_head <= 0 || c.d_head > (int64_t(1) << 31))
    throw FormatError(path, "head_dim must be positive, got " + std::to_string(c.d_head));
  if (c.n_heads % c.n_kv_heads != 0) throw FormatError(path, "num_attention_heads is not a multiple of num_key_value_heads");
  if (c.positions == PositionKind::Rotary && c.d_head % 2 != 0)
    throw FormatError(path, "rotary positions need an even head size");
  finish_rotary(j, c, recipe, path);
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

// Per-layer facts (declared in vocablens/model_config.hpp).
namespace {
// Whether `layer` is a sliding-window layer by type (layer_types, else the pattern; without either, all are).
bool sliding_layer(const ModelConfig& c, int64_t layer) {
  if (!c.sliding_layers.empty())
    return layer >= 0 && layer < static_cast<int64_t>(c.sliding_layers.size()) && c.sliding_layers[static_cast<size_t>(layer)];
  if (c.sliding_pattern > 1) return layer % c.sliding_pattern < c.sliding_pattern - 1;
  return true;
}
}  // namespace

int64_t attention_window(const ModelConfig& c, int64_t layer) {
  return c.sliding_window > 0 && sliding_layer(c, layer) ? c.sliding_window : 0;
}

bool local_rotary(const ModelConfig& c, int64_t layer) { return c.rope_theta_local > 0 && sliding_layer(c, layer); }

bool rotary_layer(const ModelConfig& c, int64_t layer) {
  if (c.positions != PositionKind::Rotary) return false;
  if (c.rotary_layers.empty()) return true;
  return layer >= 0 && layer < static_cast<int64_t>(c.rotary_layers.size()) && c.rotary_layers[static_cast<size_t>(layer)];
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
