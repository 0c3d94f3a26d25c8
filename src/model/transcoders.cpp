// Transcoder sets (vocablens/transcoders.hpp): circuit-tracer's folders — config.yaml with per-layer transcoders
// (each read by load_sae) or a cross-layer transcoder (read here, as views of its mapped files) — and their
// encode / decoder rows / decode, and whether a set fits a model.
#include "vocablens/transcoders.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <map>
#include <regex>

#include <fmt/format.h>

#include "checkpoint/yaml_config.hpp"
#include "model/sae_checks.hpp"
#include "util/mapped_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hook_site.hpp"
#include "vocablens/model.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/tensor_store.hpp"

namespace vocablens {
namespace {

using json = nlohmann::json;

// A mapped tensor's resident pages given back (util/mapped_file.hpp); others untouched.
void give_back(const at::Tensor& t) {
  if (t.defined() && t.has_storage() && t.storage().nbytes() > 0)
    MappedFile::release_pages(t.storage().data(), t.storage().nbytes());
}
void give_back(const Sae& s) {
  for (const at::Tensor* t : {&s.W_enc, &s.W_dec, &s.W_skip}) give_back(*t);
}

bool tc_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}
bool tc_is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
uint64_t tc_size(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}
std::string tc_join(const std::string& d, const std::string& f) { return d.empty() || d.back() == '/' ? d + f : d + "/" + f; }

// The indices i of the files `<prefix>{i}.safetensors` in `dir`, which must be 0 .. n-1; n (0 when none).
int64_t numbered_files(const std::string& dir, const std::string& prefix) {
  const std::regex re(prefix + "([0-9]{1,6})\\.safetensors");
  std::vector<int64_t> found;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      std::smatch m;
      const std::string name = e->d_name;
      if (std::regex_match(name, m, re)) found.push_back(std::stoll(m[1]));
    }
    ::closedir(d);
  }
  std::sort(found.begin(), found.end());
  for (size_t i = 0; i < found.size(); ++i)
    if (found[i] != static_cast<int64_t>(i))
      throw FormatError(dir, fmt::format("{}{}.safetensors is missing ({} {}*.safetensors files, numbered up to {})", prefix, i,
                                         found.size(), prefix, found.back()));
  return static_cast<int64_t>(found.size());
}

// circuit-tracer's hook name (within a block, or a full name with "{layer}") -> the point within a block that
// vocablens hooks. mlp.hook_out (its ReplacementMLP's output) is the MLP's output before any post-MLP norm: the
// same tensor as hook_mlp_out in blocks without one (check_transcoders_fit refuses it on the others).
std::string set_point(const json& cfg, const std::string& key, const std::string& path, bool* before_post_norm) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) throw FormatError(path, "missing field '" + key + "'");
  if (!it->is_string()) throw FormatError(path, "field '" + key + "' must be a string (got " + it->dump() + ")");
  const std::string h = it->get<std::string>();
  static const std::regex full("blocks\\.\\{(layer|l|L|i)\\}\\.(.+)");
  std::smatch m;
  std::string p = std::regex_match(h, m, full) ? std::string(m[2]) : h;
  if (p == "mlp.hook_out") {
    p = "hook_mlp_out";
    *before_post_norm = true;
  }
  const auto site = hook_site_from_name("blocks.0." + p);
  if (!site || site->layer != 0 || HookSite{site->point, 0}.tl_name() != "blocks.0." + p)
    throw FormatError(path, key + " '" + h + "' names no hook point of a block (e.g. hook_resid_mid, " +
                                "ln2.hook_normalized, mlp.hook_in, hook_mlp_out, or blocks.{layer}.<point>)");
  return p;
}

// A tensor of a CLT file with the expected shape, floating point; `check` reads it for NaN/Inf now.
at::Tensor clt_tensor(const TensorStore& s, const std::string& name, const std::vector<int64_t>& shape, bool check,
                      const std::string& why = "") {
  if (!s.has(name)) {
    std::string have;
    int n = 0;
    for (const auto& kv : s.tensors)
      if (n++ < 8) have += (have.empty() ? "" : ", ") + kv.first;
    throw FormatError(s.source, "missing tensor '" + name + "'" + why + " (found: " + (have.empty() ? "none" : have) + ")");
  }
  at::Tensor t = s.get(name);
  if (t.sizes().vec() != shape)
    throw FormatError(s.source, fmt::format("tensor '{}' has shape [{}], expected [{}]", name, fmt::join(t.sizes(), ", "),
                                            fmt::join(shape, ", ")));
  if (!t.is_floating_point()) throw FormatError(s.source, "tensor '" + name + "' is not floating point");
  if (check && !detail::all_finite_in_slices(t)) throw FormatError(s.source, "tensor '" + name + "' has NaN or infinite values");
  return t;
}

// config.yaml's activation (and k) applied to a layer read from `file`.
void apply_activation(Sae& s, const json& cfg, const std::string& cfg_path, const std::string& file) {
  auto a = cfg.find("activation");
  if (a == cfg.end() || a->is_null()) return;
  if (!a->is_string()) throw FormatError(cfg_path, "field 'activation' must be a string (got " + a->dump() + ")");
  const std::string act = a->get<std::string>();
  if (act == "relu") {
    s.architecture = SaeArchitecture::Standard;
    s.threshold = at::Tensor();
  } else if (act == "jumprelu" || act == "jump_relu") {
    if (!s.threshold.defined())
      throw FormatError(file, "config.yaml's activation is " + act +
                                  " but this file has no thresholds "
                                  "(activation_function.threshold / threshold_{i})");
    s.architecture = SaeArchitecture::JumpReLU;
  } else if (act == "topk") {
    auto k = cfg.find("k");
    if (k != cfg.end() && !k->is_null()) {
      if (!k->is_number_integer() || k->get<int64_t>() < 1 || k->get<int64_t>() > s.d_sae)
        throw FormatError(cfg_path, fmt::format("field 'k' must be an integer in 1..{} (got {})", s.d_sae, k->dump()));
      s.k = k->get<int64_t>();
    } else if (s.k < 1) {
      throw FormatError(cfg_path, "activation topk needs k (in config.yaml or a tensor 'k' in " + file + ")");
    }
    s.architecture = SaeArchitecture::TopK;
  } else {
    throw FormatError(cfg_path, "activation '" + act + "' is not one vocablens reads (relu, jumprelu, topk)");
  }
}

// The per-layer files: the config's transcoders: list (relative to the folder), else layer_{i}.safetensors.
std::vector<std::string> per_layer_files(const std::string& dir, const json& cfg, const std::string& cfg_path) {
  std::vector<std::string> files;
  auto list = cfg.find("transcoders");
  if (list != cfg.end() && !list->is_null()) {
    if (!list->is_array() || list->empty()) throw FormatError(cfg_path, "field 'transcoders' must be a non-empty list of files");
    for (size_t i = 0; i < list->size(); ++i) {
      const json& e = (*list)[i];
      if (!e.is_string()) throw FormatError(cfg_path, fmt::format("transcoders[{}] must be a file name (got {})", i, e.dump()));
      const std::string p = e.get<std::string>();
      if (p.rfind("hf://", 0) == 0)
        throw FormatError(cfg_path, fmt::format("transcoders[{}] '{}' is a Hugging Face address: download the file and "
                                                "list its path",
                                                i, p));
      const std::string f = !p.empty() && p[0] == '/' ? p : tc_join(dir, p);
      if (!tc_exists(f)) throw FormatError(cfg_path, fmt::format("transcoders[{}]: no such file '{}'", i, f));
      files.push_back(f);
    }
    return files;
  }
  const int64_t n = numbered_files(dir, "layer_");
  if (n == 0)
    throw FormatError(dir,
                      "no layer_0.safetensors (a transcoder_set folder holds layer_{i}.safetensors, or config.yaml "
                      "lists its files under transcoders:)");
  for (int64_t i = 0; i < n; ++i) files.push_back(tc_join(dir, fmt::format("layer_{}.safetensors", i)));
  return files;
}

void load_per_layer(TranscoderSet& set, const std::string& dir, const json& cfg) {
  const std::vector<std::string> files = per_layer_files(dir, cfg, set.config_path);
  for (size_t i = 0; i < files.size(); ++i) {
    SaeLoadOptions o;
    o.hook_name = set.input_hook(static_cast<int64_t>(i));
    Sae s = load_sae(files[i], o);
    s.hook_name_out = set.output_hook(static_cast<int64_t>(i));
    apply_activation(s, cfg, set.config_path, files[i]);
    s.keep_negative = true;  // circuit-tracer's TopK and JumpReLU, whichever file layout
    if (i == 0) {
      set.d_in = s.d_in;
      set.d_transcoder = s.d_sae;
      set.d_out = s.d_out;
      set.stored_dtype = s.stored_dtype;
    } else if (s.d_in != set.d_in || s.d_sae != set.d_transcoder || s.d_out != set.d_out) {
      throw FormatError(files[i], fmt::format("d_in {} / d_transcoder {} / d_out {} differ from layer 0's {} / {} / {}", s.d_in,
                                              s.d_sae, s.d_out, set.d_in, set.d_transcoder, set.d_out));
    }
    set.file_bytes += tc_size(files[i]);
    // load_sae read the matrices for NaN/Inf: a set of 12 GPT-2-small layers would stay resident (1.8 GB)
    // though a reader then needs one layer at a time
    give_back(s);
    set.encoder_files.push_back(files[i]);
    set.decoder_files.push_back(files[i]);
    set.layers.push_back(std::move(s));
  }
}

// One layer of a CLT: W_enc_{i}.safetensors (encoder, biases, thresholds) and W_dec_{i}.safetensors.
void load_clt_layer(TranscoderSet& set, int64_t i, bool has_threshold, const json& cfg) {
  const int64_t n = set.n_layers;
  TensorStore e = read_safetensors(set.encoder_files[static_cast<size_t>(i)], false);
  TensorStore d = read_safetensors(set.decoder_files[static_cast<size_t>(i)], false);
  const std::string I = std::to_string(i);
  if (i == 0) {  // the sizes, from layer 0's encoder file
    for (const char* name : {"W_enc_0", "b_dec_0"})
      if (!e.has(name)) (void)clt_tensor(e, name, {}, false);  // throws, naming what the file holds
    const at::Tensor &W0 = e.get("W_enc_0"), &b0 = e.get("b_dec_0");
    if (W0.dim() != 2 || b0.dim() != 1 || W0.numel() == 0 || b0.numel() == 0)
      throw FormatError(e.source, fmt::format("tensors 'W_enc_0' [{}] and 'b_dec_0' [{}] must be [d_transcoder, d_in] "
                                              "and [d_out], not empty",
                                              fmt::join(W0.sizes(), ", "), fmt::join(b0.sizes(), ", ")));
    set.d_transcoder = e.get("W_enc_0").size(0);
    set.d_in = e.get("W_enc_0").size(1);
    set.d_out = e.get("b_dec_0").size(0);
    set.stored_dtype = e.stored_dtype;
  }
  Sae s;
  s.source = set.encoder_files[static_cast<size_t>(i)];
  s.layout = "circuit-tracer-clt";
  s.stored_dtype = e.stored_dtype;
  s.W_enc = clt_tensor(e, "W_enc_" + I, {set.d_transcoder, set.d_in}, false).t();
  s.b_enc = clt_tensor(e, "b_enc_" + I, {set.d_transcoder}, true);
  s.b_dec = clt_tensor(e, "b_dec_" + I, {set.d_out}, true);
  if (has_threshold)
    s.threshold = clt_tensor(e, "threshold_" + I, {set.d_transcoder}, true,
                             " (W_enc_0.safetensors has threshold_0: "
                             "every layer needs its thresholds)");
  else if (e.has("threshold_" + I))
    throw FormatError(e.source, "has threshold_" + I + " but W_enc_0.safetensors has no threshold_0");
  at::Tensor W = clt_tensor(d, "W_dec_" + I, {set.d_transcoder, n - i, set.d_out}, false,
                            fmt::format(" (a feature of layer {} writes to blocks {} .. {})", i, i, n - 1));
  s.W_dec = W.select(1, 0);  // its rows into its own block: a strided view, nothing read
  s.architecture = has_threshold ? SaeArchitecture::JumpReLU : SaeArchitecture::Standard;
  s.apply_b_dec_to_input = false;
  s.d_in = set.d_in;
  s.d_sae = set.d_transcoder;
  s.d_out = set.d_out;
  s.hook_name = set.input_hook(i);
  s.hook_name_out = set.output_hook(i);
  s.cfg = {{"layout", s.layout}, {"architecture", to_string(s.architecture)},
           {"d_in", s.d_in},     {"d_sae", s.d_sae},
           {"d_out", s.d_out},   {"layer", i}};
  apply_activation(s, cfg, set.config_path, s.source);
  s.keep_negative = true;
  set.layers.push_back(std::move(s));
  set.clt_decoders.push_back(std::move(W));
}

void load_clt(TranscoderSet& set, const std::string& dir, const json& cfg, const TranscoderLoadOptions& opts) {
  if (cfg.contains("transcoders") && !cfg["transcoders"].is_null())
    throw FormatError(set.config_path,
                      "a cross_layer_transcoder with a transcoders: list (Gemma Scope 2's layout) is "
                      "not read; vocablens reads circuit-tracer's W_enc_{i} / W_dec_{i} files");
  set.n_layers = numbered_files(dir, "W_enc_");
  if (set.n_layers == 0)
    throw FormatError(dir,
                      "no W_enc_0.safetensors (a cross_layer_transcoder folder holds W_enc_{i}.safetensors and "
                      "W_dec_{i}.safetensors)");
  for (int64_t i = 0; i < set.n_layers; ++i) {
    set.encoder_files.push_back(tc_join(dir, fmt::format("W_enc_{}.safetensors", i)));
    set.decoder_files.push_back(tc_join(dir, fmt::format("W_dec_{}.safetensors", i)));
    if (!tc_exists(set.decoder_files.back()))
      throw FormatError(dir, fmt::format("W_dec_{}.safetensors is missing (W_enc_{} has no decoder)", i, i));
    set.file_bytes += tc_size(set.encoder_files.back()) + tc_size(set.decoder_files.back());
  }
  const bool has_threshold = read_safetensors(set.encoder_files[0], false).has("threshold_0");
  for (int64_t i = 0; i < set.n_layers; ++i) load_clt_layer(set, i, has_threshold, cfg);
  // The matrices: read whole for NaN/Inf now when the set is small; else as their parts are used.
  if (set.file_bytes <= opts.check_at_load_bytes) {
    for (int64_t i = 0; i < set.n_layers; ++i) {
      const std::string I = std::to_string(i);
      if (!detail::all_finite_in_slices(set.layers[static_cast<size_t>(i)].W_enc))
        throw FormatError(set.encoder_files[static_cast<size_t>(i)], "tensor 'W_enc_" + I + "' has NaN or infinite values");
      if (!detail::all_finite_in_slices(set.clt_decoders[static_cast<size_t>(i)]))
        throw FormatError(set.decoder_files[static_cast<size_t>(i)], "tensor 'W_dec_" + I + "' has NaN or infinite values");
    }
  } else {
    set.encoder_checked = std::make_shared<std::vector<std::atomic<char>>>(static_cast<size_t>(set.n_layers));
  }
}

}  // namespace

std::string TranscoderSet::input_hook(int64_t l) const { return "blocks." + std::to_string(l) + "." + input_point; }
std::string TranscoderSet::output_hook(int64_t l) const { return "blocks." + std::to_string(l) + "." + output_point; }

const Sae& TranscoderSet::layer(int64_t l) const {
  if (l < 0 || l >= n_layers)
    throw UsageError(fmt::format("{}: layer {} is out of range (the set has {} layers)", source, l, n_layers));
  const Sae& s = layers[static_cast<size_t>(l)];
  if (encoder_checked) {
    std::atomic<char>& done = (*encoder_checked)[static_cast<size_t>(l)];
    if (!done.load()) {
      if (!detail::all_finite_in_slices(s.W_enc))
        throw FormatError(encoder_files[static_cast<size_t>(l)], fmt::format("tensor 'W_enc_{}' has NaN or infinite values", l));
      done.store(1);
    }
  }
  return s;
}

at::Tensor TranscoderSet::encode_pre(int64_t l, const at::Tensor& x) const { return layer(l).encode_pre(x); }
at::Tensor TranscoderSet::encode(int64_t l, const at::Tensor& x) const { return layer(l).encode(x); }

int64_t TranscoderSet::n_outputs(int64_t l) const {
  if (l < 0 || l >= n_layers)
    throw UsageError(fmt::format("{}: layer {} is out of range (the set has {} layers)", source, l, n_layers));
  return kind == TranscoderKind::CrossLayer ? n_layers - l : 1;
}

at::Tensor TranscoderSet::decoder_rows(int64_t l, int64_t feature) const {
  const int64_t n = n_outputs(l);
  if (feature < 0 || feature >= d_transcoder)
    throw UsageError(fmt::format("{}: feature {} is out of range (0..{})", source, feature, d_transcoder - 1));
  const at::Tensor rows = kind == TranscoderKind::CrossLayer ? clt_decoders[static_cast<size_t>(l)][feature]
                                                             : layers[static_cast<size_t>(l)].W_dec[feature].unsqueeze(0);
  at::Tensor out = rows.to(at::kFloat).reshape({n, d_out});
  if (!all_finite(out))
    throw FormatError(decoder_files[static_cast<size_t>(l)],
                      fmt::format("decoder rows of feature {} of layer {} have NaN or infinite values", feature, l));
  return out;
}

void TranscoderSet::release_pages(int64_t l) const {
  if (l < 0 || l >= static_cast<int64_t>(layers.size())) return;
  give_back(layers[static_cast<size_t>(l)]);
  if (kind == TranscoderKind::CrossLayer) give_back(clt_decoders[static_cast<size_t>(l)]);
}

at::Tensor TranscoderSet::b_dec(int64_t out) const { return layer(out).b_dec; }

at::Tensor TranscoderSet::decode(int64_t out, const std::vector<at::Tensor>& features, const at::Tensor& x_out) const {
  at::NoGradGuard ng;
  if (out < 0 || out >= n_layers)
    throw UsageError(fmt::format("{}: block {} is out of range (the set has {} layers)", source, out, n_layers));
  if (kind == TranscoderKind::PerLayer) {
    if (static_cast<int64_t>(features.size()) <= out || !features[static_cast<size_t>(out)].defined())
      throw UsageError(fmt::format("{}: decode({}) needs the features of layer {}", source, out, out));
    return layer(out).decode(features[static_cast<size_t>(out)], x_out);
  }
  if (static_cast<int64_t>(features.size()) < out + 1)
    throw UsageError(
        fmt::format("{}: decode({}) needs the features of layers 0 .. {} (got {})", source, out, out, features.size()));
  const auto t = features[0].scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor y;
  for (int64_t l = 0; l <= out; ++l) {
    const at::Tensor& f = features[static_cast<size_t>(l)];
    if (!f.defined() || f.size(-1) != d_transcoder)
      throw UsageError(fmt::format("{}: the features of layer {} must end in a dimension of {}", source, l, d_transcoder));
    at::Tensor part = at::matmul(f.to(t), clt_decoders[static_cast<size_t>(l)].select(1, out - l).to(t));
    y = y.defined() ? y + part : part;
  }
  return y + b_dec(out).to(t);
}

TranscoderSet load_transcoders(const std::string& path_in, const TranscoderLoadOptions& opts) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (!tc_exists(path)) throw FormatError(path, "no such file or folder");
  TranscoderSet set;
  const bool dir = tc_is_dir(path);
  set.source = dir ? path : (path.find('/') == std::string::npos ? "." : path.substr(0, path.find_last_of('/')));
  set.config_path = dir ? tc_join(path, "config.yaml") : path;
  json cfg;
  if (dir && !tc_exists(set.config_path) && !opts.default_input_hook.empty() && !opts.default_output_hook.empty()) {
    // the caller's hooks stand in for the missing config; messages then name the folder, not a config file
    cfg = {{"model_kind", "transcoder_set"},
           {"feature_input_hook", opts.default_input_hook},
           {"feature_output_hook", opts.default_output_hook}};
    set.config_path.clear();
  } else if (!tc_exists(set.config_path)) {
    throw FormatError(path,
                      "no config.yaml (circuit-tracer's transcoder folder: config.yaml with model_kind, "
                      "feature_input_hook and feature_output_hook, beside the weight files)");
  } else {
    cfg = detail::read_yaml_config(set.config_path);
  }
  if (!cfg.is_object()) throw FormatError(set.config_path, "expected a mapping of keys (model_kind, ...)");
  auto mk = cfg.find("model_kind");
  if (mk == cfg.end() || mk->is_null()) throw FormatError(set.config_path, "missing field 'model_kind'");
  if (!mk->is_string()) throw FormatError(set.config_path, "field 'model_kind' must be a string (got " + mk->dump() + ")");
  const std::string kind = mk->get<std::string>();
  if (kind != "transcoder_set" && kind != "cross_layer_transcoder")
    throw FormatError(set.config_path, "unknown model_kind '" + kind +
                                           "' (vocablens reads transcoder_set, "
                                           "cross_layer_transcoder)");
  set.kind = kind == "cross_layer_transcoder" ? TranscoderKind::CrossLayer : TranscoderKind::PerLayer;
  set.feature_input_hook = cfg["feature_input_hook"].is_string() ? cfg["feature_input_hook"].get<std::string>() : "";
  set.feature_output_hook = cfg["feature_output_hook"].is_string() ? cfg["feature_output_hook"].get<std::string>() : "";
  bool in_before = false;
  set.input_point = set_point(cfg, "feature_input_hook", set.config_path, &in_before);
  set.output_point = set_point(cfg, "feature_output_hook", set.config_path, &set.output_before_post_norm);
  if (set.kind == TranscoderKind::CrossLayer) {
    load_clt(set, set.source, cfg, opts);
  } else {
    load_per_layer(set, set.source, cfg);
    set.n_layers = static_cast<int64_t>(set.layers.size());
  }
  return set;
}

void check_transcoders_fit(const TranscoderSet& set, const Model& m) {
  const ModelConfig& c = m.config();
  const char* what = set.kind == TranscoderKind::CrossLayer ? "a cross-layer transcoder" : "a transcoder set";
  const std::string& where = set.config_path.empty() ? set.source : set.config_path;
  if (set.n_layers != c.n_layers)
    throw UsageError(fmt::format("{}: {} of {} layers, but {} has {}", set.source, what, set.n_layers, m.source(), c.n_layers));
  struct Side {
    const char* key;
    const std::string& name;
    std::string hook;
    const char* dim;
    int64_t width;
  };
  for (const Side& s : {Side{"feature_input_hook", set.feature_input_hook, set.input_hook(0), "d_in", set.d_in},
                        Side{"feature_output_hook", set.feature_output_hook, set.output_hook(0), "d_out", set.d_out}}) {
    // The name is one of a block's points (load_transcoders checked it); whether this model has that point:
    const std::string missing = hook_point_missing(hook_site_from_name(s.hook)->point, c);
    if (!missing.empty())
      throw UsageError(
          fmt::format("{}: {} '{}' ({}) is not a point of {}: {}", where, s.key, s.name, s.hook, m.source(), missing));
    const int64_t w = hook_width(m, s.hook);
    if (w != s.width)
      throw UsageError(
          fmt::format("{}: {} {} does not match {} of {} (width {})", set.source, s.dim, s.width, s.hook, m.source(), w));
  }
  if (set.output_before_post_norm && m.weights().layers[0].post_mlp_norm_w.defined())
    throw UsageError(where +
                     ": feature_output_hook 'mlp.hook_out' is the MLP's output before the post-MLP "
                     "norm that " +
                     m.source() +
                     " has, a point vocablens does not hook (its "
                     "hook_mlp_out is after that norm)");
}

}  // namespace vocablens
