// Readers of SAE / transcoder files (vocablens/sae.hpp): SAELens folders, Gemma Scope params.npz and
// params.safetensors, Llama Scope folders, circuit-tracer per-layer transcoders. Each builds the one Sae
// layout ("x @ W" orientation), keeping the stored dtype; every tensor's shape and finiteness is checked.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <regex>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/npz.hpp"
#include "model/sae_checks.hpp"
#include "util/json_depth.hpp"
#include "util/regular_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/tensor_store.hpp"

namespace vocablens {
namespace {

using json = nlohmann::json;

const char* kLayouts =
    "SAELens folder (cfg.json + sae_weights.safetensors), Gemma Scope params.npz / params.safetensors, "
    "Llama Scope folder (hyperparams.json + checkpoints/final.safetensors), circuit-tracer transcoder "
    "(layer_N.safetensors with W_enc, W_dec, b_enc, b_dec)";

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}
std::string join(const std::string& d, const std::string& f) { return d.empty() || d.back() == '/' ? d + f : d + "/" + f; }
std::string basename(const std::string& p) {
  auto s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}
std::string dirname(const std::string& p) {
  auto s = p.find_last_of('/');
  return s == std::string::npos ? "." : p.substr(0, s);
}

json read_json(const std::string& path) {
  std::string text = detail::read_regular_file(path, 16 << 20, "SAE configuration files");
  detail::check_json_depth(text, path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) { throw FormatError(path, std::string("not valid JSON (") + e.what() + ")"); }
  if (!j.is_object()) throw FormatError(path, "expected a JSON object");
  return j;
}

// A required field of a JSON config, with the file named when it is missing or of the wrong type.
const json& field(const json& j, const std::string& key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) throw FormatError(path, "missing field '" + key + "'");
  return *it;
}
int64_t int_field(const json& j, const std::string& key, const std::string& path) {
  const json& v = field(j, key, path);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (int64_t{1} << 32))
    throw FormatError(path, "field '" + key + "' must be a positive integer (got " + v.dump() + ")");
  return v.get<int64_t>();
}
double num_field(const json& j, const std::string& key, const std::string& path) {
  const json& v = field(j, key, path);
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    throw FormatError(path, "field '" + key + "' must be a finite number (got " + v.dump() + ")");
  return v.get<double>();
}
// A string field, or `dflt` when absent or null. Any other type is refused: `"hook_name": 5` read as "no hook"
// would load an SAE that silently splices nowhere.
std::string str_or(const json& j, const std::string& key, const std::string& dflt, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_string()) throw FormatError(path, "field '" + key + "' must be a string (got " + it->dump() + ")");
  return it->get<std::string>();
}

}  // namespace

// Checked in slices of <= 16 M values along the first dimension: a Gemma-Scope-sized W_enc (2.4 GB float32,
// mapped from the file) never needs a 600 MB mask, and the pages of a large mapped tensor are given back once
// read (MADV_PAGEOUT: clean file pages are dropped and read again if touched; harmless on other memory), so
// that loading reads each matrix once without keeping it resident — the logit weights, for one, never touch
// W_enc again.
bool detail::all_finite_in_slices(const at::Tensor& t) {
  if (t.dim() == 0 || t.numel() <= (int64_t{16} << 20)) return all_finite(t);
  const int64_t per_row = t.numel() / std::max<int64_t>(1, t.size(0));
  const int64_t step = std::max<int64_t>(1, (int64_t{16} << 20) / std::max<int64_t>(1, per_row));
  const bool give_back = t.is_contiguous() && t.nbytes() > (size_t{256} << 20);
  for (int64_t r0 = 0; r0 < t.size(0); r0 += step) {
    at::Tensor sl = t.narrow(0, r0, std::min(step, t.size(0) - r0));
    if (!all_finite(sl)) return false;  // in place: no float copy or masks
    if (give_back) {
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
      const uintptr_t pg = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
      const uintptr_t p = reinterpret_cast<uintptr_t>(sl.data_ptr());
      const uintptr_t a = (p + pg - 1) / pg * pg, b = (p + sl.nbytes()) / pg * pg;
      if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_PAGEOUT);
    }
  }
  return true;
}

namespace {

// A tensor of the store with the expected shape, finite (rejecting NaN/Inf here means no analysis later
// sees one). Half/bfloat16 stay as stored.
at::Tensor take(const TensorStore& s, const std::string& name, std::vector<int64_t> shape, bool required = true) {
  if (!s.has(name)) {
    if (!required) return {};
    std::string have;
    for (const auto& [n, t] : s.tensors) have += (have.empty() ? "" : ", ") + n;
    throw FormatError(s.source, "missing tensor '" + name + "' (found: " + (have.empty() ? "none" : have) + ")");
  }
  at::Tensor t = s.get(name);
  if (t.sizes().vec() != shape)
    throw FormatError(s.source, fmt::format("tensor '{}' has shape [{}], expected [{}]", name, fmt::join(t.sizes(), ", "),
                                            fmt::join(shape, ", ")));
  if (!t.is_floating_point()) throw FormatError(s.source, "tensor '" + name + "' is not floating point");
  if (!detail::all_finite_in_slices(t)) throw FormatError(s.source, "tensor '" + name + "' has NaN or infinite values");
  return t;
}

std::vector<int64_t> shape_of(const TensorStore& s, const std::string& name) {
  if (!s.has(name)) {
    std::string have;
    for (const auto& [n, t] : s.tensors) have += (have.empty() ? "" : ", ") + n;
    throw FormatError(s.source, "missing tensor '" + name + "' (found: " + (have.empty() ? "none" : have) + ")");
  }
  auto v = s.tensors.at(name).sizes().vec();
  if (v.size() != 2) throw FormatError(s.source, "tensor '" + name + "' must be a matrix");
  return v;
}

// Drops a scaling factor that is all ones (SAELens does the same): it would only cost a multiply.
at::Tensor nontrivial_scale(const at::Tensor& s) {
  if (!s.defined()) return s;
  return at::all(s.to(at::kFloat) == 1).item<bool>() ? at::Tensor() : s;
}

SaeArchitecture parse_arch(const std::string& a, const std::string& path) {
  // SAELens 6's transcoder classes read like their SAE counterparts (the skip connection is a tensor, W_skip).
  if (a == "standard" || a == "relu" || a == "transcoder" || a == "skip_transcoder") return SaeArchitecture::Standard;
  if (a == "jumprelu" || a == "jumprelu_transcoder" || a == "jumprelu_skip_transcoder") return SaeArchitecture::JumpReLU;
  if (a == "topk") return SaeArchitecture::TopK;
  if (a == "batchtopk") return SaeArchitecture::BatchTopK;
  if (a == "gated") return SaeArchitecture::Gated;
  throw FormatError(path, "architecture '" + a + "' is not one vocablens reads (standard, jumprelu, topk, batchtopk, gated)");
}

SaeNormalize parse_norm(const json& v, const std::string& path) {
  if (v.is_null()) return SaeNormalize::None;
  if (!v.is_string()) throw FormatError(path, "normalize_activations must be a string");
  const std::string s = v.get<std::string>();
  if (s == "none") return SaeNormalize::None;
  if (s == "expected_average_only_in") return SaeNormalize::ExpectedAverageOnlyIn;
  if (s == "constant_norm_rescale") return SaeNormalize::ConstantNormRescale;
  if (s == "layer_norm") return SaeNormalize::LayerNorm;
  throw FormatError(path, "normalize_activations '" + s +
                              "' is not one vocablens reads (none, expected_average_only_in, constant_norm_rescale, layer_norm)");
}

// Gemma Scope / circuit-tracer files carry no hook name: layer_N and the site from the folder names.
// `transcoder_in` is where a transcoder reads (the layouts differ: see the callers).
std::string guess_hook(const std::string& path, bool transcoder, std::string* out_hook,
                       const char* transcoder_in = "hook_resid_mid") {
  static const std::regex layer_re("layer_(\\d+)");
  // only the last few folder names: a user's own path ("/home/matt/...") must not decide the site
  size_t cut = path.size();
  for (int i = 0; i < 5 && cut != std::string::npos && cut > 0; ++i) cut = path.find_last_of('/', cut - 1);
  const std::string tail = cut == std::string::npos ? path : path.substr(cut);
  std::string layer;
  // the last layer_N in the path (the file or its closest folder)
  for (auto it = std::sregex_iterator(tail.begin(), tail.end(), layer_re); it != std::sregex_iterator(); ++it) layer = (*it)[1];
  if (layer.empty()) return "";
  const std::string b = "blocks." + layer + ".";
  if (transcoder) {
    if (out_hook) *out_hook = b + "hook_mlp_out";
    return b + transcoder_in;
  }
  if (tail.find("mlp") != std::string::npos) return b + "hook_mlp_out";
  // Gemma Scope's attention SAEs (both releases) read the heads' concatenated values, o_proj's input (SAELens:
  // blocks.L.attn.hook_z), not the attention's output.
  if (tail.find("att") != std::string::npos) return b + "attn.hook_z";
  return b + "hook_resid_post";
}

void finish(Sae& s) {
  s.d_in = s.W_enc.size(0);
  s.d_sae = s.W_enc.size(1);
  s.d_out = s.W_dec.size(1);
}

Sae load_saelens(const std::string& dir) {
  const std::string cfg_path = join(dir, "cfg.json");
  const std::string w_path = join(dir, "sae_weights.safetensors");
  json cfg = read_json(cfg_path);
  if (!exists(w_path)) throw FormatError(dir, "has cfg.json but no sae_weights.safetensors");
  Sae s;
  s.source = dir;
  s.layout = "saelens";
  s.cfg = cfg;
  const int64_t d_in = int_field(cfg, "d_in", cfg_path);
  const int64_t d_sae = int_field(cfg, "d_sae", cfg_path);
  // pre-6.0 configs: hook_point / activation_fn_str (+ activation_fn_kwargs.k for topk), no architecture.
  std::string arch = str_or(cfg, "architecture", "", cfg_path);
  const std::string act = str_or(cfg, "activation_fn_str", str_or(cfg, "activation_fn", "relu", cfg_path), cfg_path);
  if (arch.empty()) {
    if (!cfg.contains("activation_fn_str") && !cfg.contains("hook_point"))
      throw FormatError(cfg_path, "missing field 'architecture'");
    arch = act == "topk" ? "topk" : "standard";
  }
  s.architecture = parse_arch(arch, cfg_path);
  if (s.architecture == SaeArchitecture::TopK) {
    if (cfg.contains("k")) s.k = int_field(cfg, "k", cfg_path);
    else if (cfg.contains("activation_fn_kwargs") && cfg["activation_fn_kwargs"].is_object())
      s.k = int_field(cfg["activation_fn_kwargs"], "k", cfg_path);
    else throw FormatError(cfg_path, "missing field 'k' (topk architecture)");
  }
  auto ab = cfg.find("apply_b_dec_to_input");
  if (ab != cfg.end() && !ab->is_null() && !ab->is_boolean())
    throw FormatError(cfg_path, "field 'apply_b_dec_to_input' must be true or false (got " + ab->dump() + ")");
  s.apply_b_dec_to_input = ab == cfg.end() || ab->is_null() ? true : ab->get<bool>();
  s.normalize = cfg.contains("normalize_activations") ? parse_norm(cfg["normalize_activations"], cfg_path) : SaeNormalize::None;
  for (const char* mk : {"metadata", "meta"})
    if (cfg.contains(mk) && cfg[mk].is_object()) s.hook_name = str_or(cfg[mk], "hook_name", s.hook_name, cfg_path);
  s.hook_name = str_or(cfg, "hook_name", str_or(cfg, "hook_point", s.hook_name, cfg_path), cfg_path);
  s.hook_name_out = str_or(cfg, "hook_name_out", "", cfg_path);
  if (s.hook_name_out.empty() && cfg.contains("metadata") && cfg["metadata"].is_object())
    s.hook_name_out = str_or(cfg["metadata"], "hook_name_out", "", cfg_path);
  const int64_t d_out = cfg.contains("d_out") ? int_field(cfg, "d_out", cfg_path) : d_in;

  TensorStore st = read_safetensors(w_path, /*upcast_half=*/false);
  s.stored_dtype = st.stored_dtype;
  s.W_enc = take(st, "W_enc", {d_in, d_sae});
  s.W_dec = take(st, "W_dec", {d_sae, d_out});
  s.b_dec = take(st, "b_dec", {d_out});
  if (s.architecture == SaeArchitecture::Gated) {
    s.b_gate = take(st, "b_gate", {d_sae});
    s.b_mag = take(st, "b_mag", {d_sae});
    s.r_mag = take(st, "r_mag", {d_sae});
  } else {
    s.b_enc = take(st, "b_enc", {d_sae});
  }
  if (s.architecture == SaeArchitecture::JumpReLU || s.architecture == SaeArchitecture::BatchTopK)
    s.threshold = take(st, "threshold", {d_sae});
  s.scaling_factor = nontrivial_scale(take(st, "scaling_factor", {d_sae}, false));
  // SAELens's SkipTranscoder stores W_skip [d_out, d_in] and adds x @ W_skipᵀ.
  at::Tensor skip = take(st, "W_skip", {d_out, d_in}, false);
  if (skip.defined()) s.W_skip = skip.t();
  finish(s);
  return s;
}

// Gemma Scope 2's config.json names Hugging Face module outputs (hf_hook_point_in / _out); under our names
// (SAELens's gemma_3 loader reads the same fields): model.layers.L.output is the block's output,
// pre_feedforward_layernorm.output what the MLP reads (its norm's weight applied: mlp.hook_in),
// post_feedforward_layernorm.output what the MLP adds to the stream, self_attn.o_proj.input the heads' values,
// post_attention_layernorm.output what attention adds. Gemma 3's multimodal checkpoints put the text layers
// under model.language_model.
std::string hook_from_hf(const std::string& hf, const std::string& path, const char* key) {
  static const std::regex re(R"(^(?:model\.)?(?:language_model\.)?(?:model\.)?layers\.(\d+)\.(.+)$)");
  std::smatch m;
  if (std::regex_match(hf, m, re)) {
    const std::string b = "blocks." + m[1].str() + ".", site = m[2].str();
    if (site == "output") return b + "hook_resid_post";
    if (site == "pre_feedforward_layernorm.output") return b + "mlp.hook_in";
    if (site == "post_feedforward_layernorm.output") return b + "hook_mlp_out";
    if (site == "self_attn.o_proj.input") return b + "attn.hook_z";
    if (site == "post_attention_layernorm.output") return b + "hook_attn_out";
  }
  throw FormatError(path, std::string(key) + " '" + hf +
                              "' is not a point vocablens maps (model.layers.L.output, .pre_feedforward_layernorm.output, "
                              ".post_feedforward_layernorm.output, .self_attn.o_proj.input, "
                              ".post_attention_layernorm.output); pass the hook point yourself (--hook / hook_name=)");
}

// Gemma Scope v1 (params.npz) and v2 (params.safetensors, with config.json beside it): w_enc/W_enc [d_in, d_sae],
// w_dec/W_dec [d_sae, d_out], b_enc, b_dec, threshold; JumpReLU, the input used as is (no b_dec subtraction); a
// v2 transcoder's affine_skip_connection is SAELens's W_skip, [d_out, d_in], added as x @ W_skipᵀ.
Sae load_gemmascope(const std::string& file, bool npz) {
  TensorStore st = npz ? read_npz(file) : read_safetensors(file, false);
  // Gemma Scope 2 spells the matrices w_enc / w_dec; either case is read.
  for (const char* k : {"w_enc", "w_dec"}) {
    if (st.has(k)) {
      std::string up = std::string("W_") + (k + 2);
      st.tensors[up] = st.tensors[k];
      st.tensors.erase(k);
    }
  }
  Sae s;
  s.source = file;
  s.layout = npz ? "gemmascope-npz" : "gemmascope-st";
  s.stored_dtype = st.stored_dtype;
  auto e = shape_of(st, "W_enc");
  auto dsh = shape_of(st, "W_dec");
  const int64_t d_in = e[0], d_sae = e[1], d_out = dsh[1];
  s.W_enc = take(st, "W_enc", {d_in, d_sae});
  s.W_dec = take(st, "W_dec", {d_sae, d_out});
  s.b_enc = take(st, "b_enc", {d_sae});
  s.b_dec = take(st, "b_dec", {d_out});
  s.threshold = take(st, "threshold", {d_sae});
  at::Tensor skip = take(st, "affine_skip_connection", {d_out, d_in}, false);
  if (skip.defined()) s.W_skip = skip.t();
  s.architecture = SaeArchitecture::JumpReLU;
  s.apply_b_dec_to_input = false;
  s.cfg = {{"layout", s.layout}, {"architecture", "jumprelu"}, {"d_in", d_in}, {"d_sae", d_sae}, {"d_out", d_out}};

  const std::string cfg_path = join(dirname(file), "config.json");
  if (!npz && exists(cfg_path)) {
    const json c = read_json(cfg_path);
    const std::string arch = str_or(c, "architecture", "jump_relu", cfg_path);
    if (arch != "jump_relu" && arch != "jumprelu")
      throw FormatError(cfg_path, "architecture '" + arch + "' is not one vocablens reads for Gemma Scope 2 (jump_relu)");
    if (c.contains("width") && int_field(c, "width", cfg_path) != d_sae)
      throw FormatError(cfg_path,
                        fmt::format("width {} does not match params.safetensors's {} features", c["width"].dump(), d_sae));
    const std::string type = str_or(c, "type", "", cfg_path);
    if (!type.empty() && type != "sae" && type != "transcoder")
      throw FormatError(cfg_path, "type '" + type +
                                      "' is not one vocablens reads (sae, transcoder; a cross-layer "
                                      "transcoder is read from circuit-tracer's folder: vocablens/transcoders.hpp)");
    auto af = c.find("affine_connection");
    if (af != c.end() && !af->is_null()) {
      if (!af->is_boolean()) throw FormatError(cfg_path, "field 'affine_connection' must be true or false");
      if (af->get<bool>() != skip.defined())
        throw FormatError(file, af->get<bool>() ? "config.json says affine_connection but there is no affine_skip_connection"
                                                : "has an affine_skip_connection but config.json says affine_connection false");
    }
    const std::string in = str_or(c, "hf_hook_point_in", "", cfg_path);
    const std::string out = str_or(c, "hf_hook_point_out", in, cfg_path);
    if (in.empty()) throw FormatError(cfg_path, "missing field 'hf_hook_point_in'");
    s.hook_name = hook_from_hf(in, cfg_path, "hf_hook_point_in");
    const std::string hout = hook_from_hf(out, cfg_path, "hf_hook_point_out");
    if (type == "transcoder" || hout != s.hook_name) s.hook_name_out = hout;
    s.cfg["config"] = c;
  } else {
    const bool tc = s.W_skip.defined() || d_out != d_in || file.find("transcoder") != std::string::npos;
    // Gemma Scope's transcoders: v1 reads the MLP's normalised input (SAELens and circuit-tracer:
    // ln2.hook_normalized); v2 Hugging Face's pre_feedforward_layernorm output (mlp.hook_in), as config.json says.
    s.hook_name = guess_hook(file, tc, &s.hook_name_out, npz ? "ln2.hook_normalized" : "mlp.hook_in");
    s.hook_guessed = !s.hook_name.empty();
  }
  finish(s);
  return s;
}

// Llama Scope: hyperparams.json + checkpoints/final.safetensors; encoder/decoder as nn.Linear (transposed).
Sae load_llamascope(const std::string& dir) {
  const std::string hp_path = join(dir, "hyperparams.json");
  const std::string w_path = join(dir, "checkpoints/final.safetensors");
  json hp = read_json(hp_path);
  if (!exists(w_path)) throw FormatError(dir, "has hyperparams.json but no checkpoints/final.safetensors");
  Sae s;
  s.source = dir;
  s.layout = "llamascope";
  s.cfg = hp;
  const int64_t d_in = int_field(hp, "d_model", hp_path);
  const int64_t d_sae = int_field(hp, "d_sae", hp_path);
  const std::string act = str_or(hp, "act_fn", "relu", hp_path);
  s.hook_name = str_or(hp, "hook_point_in", "", hp_path);
  const std::string hout = str_or(hp, "hook_point_out", s.hook_name, hp_path);
  if (hout != s.hook_name) s.hook_name_out = hout;
  TensorStore st = read_safetensors(w_path, false);
  s.stored_dtype = st.stored_dtype;
  auto dsh = shape_of(st, "decoder.weight");
  const int64_t d_out = dsh[0];
  s.W_enc = take(st, "encoder.weight", {d_sae, d_in}).t();
  s.b_enc = take(st, "encoder.bias", {d_sae});
  s.W_dec = take(st, "decoder.weight", {d_out, d_sae}).t();
  s.b_dec = take(st, "decoder.bias", {d_out});
  s.apply_b_dec_to_input = false;
  if (act == "jumprelu") {
    s.architecture = SaeArchitecture::JumpReLU;
    const double thr = num_field(hp, "jump_relu_threshold", hp_path);
    s.threshold = at::full({d_sae}, thr, at::kFloat);
  } else if (act == "topk") {
    s.architecture = SaeArchitecture::TopK;
    s.k = int_field(hp, "top_k", hp_path);
  } else if (act == "relu") {
    s.architecture = SaeArchitecture::Standard;
  } else {
    throw FormatError(hp_path, "act_fn '" + act + "' is not one vocablens reads (relu, jumprelu, topk)");
  }
  const std::string norm = str_or(hp, "norm_activation", "none", hp_path);
  if (norm == "dataset-wise") {
    const json& avg = field(hp, "dataset_average_activation_norm", hp_path);
    if (!avg.is_object()) throw FormatError(hp_path, "dataset_average_activation_norm must be an object {in, out}");
    s.norm_in = num_field(avg, "in", hp_path);
    s.norm_out = avg.contains("out") ? num_field(avg, "out", hp_path) : s.norm_in;
    if (s.norm_in <= 0 || s.norm_out <= 0) throw FormatError(hp_path, "dataset_average_activation_norm must be positive");
    s.normalize = SaeNormalize::DatasetWise;
  } else if (norm != "none" && norm != "token-wise") {
    throw FormatError(hp_path, "norm_activation '" + norm + "' is not one vocablens reads (none, dataset-wise)");
  } else if (norm == "token-wise") {
    throw FormatError(hp_path, "norm_activation 'token-wise' is not read yet (none, dataset-wise)");
  }
  auto sid = hp.find("sparsity_include_decoder_norm");
  s.sparsity_include_decoder_norm = sid != hp.end() && sid->is_boolean() && sid->get<bool>();
  finish(s);
  return s;
}

// circuit-tracer's per-layer transcoder: W_enc [d_sae, d_in] (F.linear), W_dec [d_sae, d_out], W_skip
// [d_out, d_in] (applied as x @ W_skipᵀ), activation_function.threshold for JumpReLU, k for TopK.
Sae load_circuit_tracer(const std::string& file, TensorStore st) {
  Sae s;
  s.source = file;
  s.layout = "circuit-tracer";
  s.stored_dtype = st.stored_dtype;
  auto e = shape_of(st, "W_enc");
  auto dsh = shape_of(st, "W_dec");
  const int64_t d_sae = e[0], d_in = e[1], d_out = dsh[1];
  s.W_enc = take(st, "W_enc", {d_sae, d_in}).t();
  s.W_dec = take(st, "W_dec", {d_sae, d_out});
  s.b_enc = take(st, "b_enc", {d_sae});
  s.b_dec = take(st, "b_dec", {d_out});
  at::Tensor skip = take(st, "W_skip", {d_out, d_in}, false);
  if (skip.defined()) s.W_skip = skip.t();
  s.threshold = take(st, "activation_function.threshold", {d_sae}, false);
  if (!s.threshold.defined()) s.threshold = take(st, "threshold", {d_sae}, false);
  s.architecture = s.threshold.defined() ? SaeArchitecture::JumpReLU : SaeArchitecture::Standard;
  if (st.has("k")) {
    s.architecture = SaeArchitecture::TopK;
    const at::Tensor& kt = st.get("k");
    if (kt.numel() != 1 || !at::isfinite(kt.to(at::kDouble)).all().item<bool>())
      throw FormatError(file, "tensor 'k' must hold one finite number");
    const double kd = kt.to(at::kDouble).item<double>();
    if (kd < 1 || kd > static_cast<double>(d_sae))
      throw FormatError(file, fmt::format("k {} is out of range (1..{})", kd, d_sae));
    s.k = static_cast<int64_t>(kd);
  }
  s.apply_b_dec_to_input = false;
  s.keep_negative = true;  // circuit-tracer's TopK and JumpReLU: pre · gate, no relu after
  s.cfg = {{"layout", s.layout}, {"architecture", to_string(s.architecture)}, {"d_in", d_in}, {"d_sae", d_sae}, {"d_out", d_out}};
  s.hook_name = guess_hook(file, true, &s.hook_name_out);
  s.hook_guessed = !s.hook_name.empty();
  finish(s);
  return s;
}

std::string listing(const std::string& dir) {
  std::string out;
  int n = 0;
  for (const char* f : {"cfg.json", "sae_weights.safetensors", "params.npz", "params.safetensors", "hyperparams.json",
                        "checkpoints", "config.json", "model.safetensors"})
    if (exists(join(dir, f))) out += (n++ ? ", " : "") + std::string(f);
  return n ? out : "none of their files";
}

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

Sae load_any(const std::string& path_in) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (!exists(path)) throw FormatError(path, "no such file or folder");
  if (is_dir(path)) {
    if (exists(join(path, "cfg.json"))) return load_saelens(path);
    if (exists(join(path, "hyperparams.json"))) return load_llamascope(path);
    if (exists(join(path, "params.npz"))) return load_gemmascope(join(path, "params.npz"), true);
    if (exists(join(path, "params.safetensors"))) return load_gemmascope(join(path, "params.safetensors"), false);
    if (exists(join(path, "config.yaml")))
      throw FormatError(path,
                        "a transcoder folder (config.yaml, circuit-tracer's layout) holds a model's transcoders: "
                        "read it with load_transcoders (vocablens/transcoders.hpp), or load one of its layer files");
    throw FormatError(path, std::string("no SAE layout found (found: ") + listing(path) + "; layouts read: " + kLayouts + ")");
  }
  const std::string base = basename(path);
  if (base == "cfg.json" || base == "sae_weights.safetensors") return load_saelens(dirname(path));
  if (base == "hyperparams.json") return load_llamascope(dirname(path));
  if (ends_with(base, ".npz")) return load_gemmascope(path, true);
  if (ends_with(base, ".safetensors")) {
    TensorStore st = read_safetensors(path, false);
    if (st.has("w_enc") || (st.has("W_enc") && st.has("threshold") && !st.has("activation_function.threshold") &&
                            st.tensors.at("W_enc").dim() == 2 && st.has("W_dec") &&
                            st.tensors.at("W_enc").size(0) != st.tensors.at("W_dec").size(0)))
      return load_gemmascope(path, false);
    if (st.has("W_enc") && st.has("W_dec") && st.tensors.at("W_enc").dim() == 2 && st.tensors.at("W_dec").dim() == 2 &&
        st.tensors.at("W_enc").size(0) == st.tensors.at("W_dec").size(0))
      return load_circuit_tracer(path, std::move(st));
    std::string have;
    int n = 0;
    for (const auto& [k, t] : st.tensors)
      if (n++ < 8) have += (have.empty() ? "" : ", ") + k;
    throw FormatError(path, "no SAE layout found (tensors: " + (have.empty() ? std::string("none") : have) +
                                "; layouts read: " + kLayouts + ")");
  }
  throw FormatError(path, std::string("no SAE layout found (layouts read: ") + kLayouts + ")");
}

}  // namespace

Sae load_sae(const std::string& path, const SaeLoadOptions& opts) {
  Sae s = load_any(path);
  if (!opts.hook_name.empty()) {
    s.hook_name = opts.hook_name;
    s.hook_guessed = false;
  } else if (s.hook_guessed) {
    // A guess that could be wrong is said (the file names no hook point).
    std::cerr << "vocablens: note: " << s.source << " names no hook point; reading it at " << s.hook_name
              << (s.hook_name_out.empty() ? std::string() : " and writing " + s.hook_name_out)
              << ", guessed from the folder names (--hook / hook_name= sets it)\n";
  }
  return s;
}

}  // namespace vocablens
