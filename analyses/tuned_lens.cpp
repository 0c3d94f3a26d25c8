// The tuned lens's translators (see vocablens/tuned_lens.hpp): reading a lens directory in vocablens's
// safetensors form or the tuned-lens package's params.pt + config.json, applying a translator, and checking
// that a lens belongs to a model.
#include "vocablens/tuned_lens.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/detail/sha256.hpp"
#include "vocablens/dist.hpp"
#include "vocablens/tensor_store.hpp"
#include "util/regular_file.hpp"

namespace vocablens {
namespace fs = std::filesystem;

TunedLens TunedLens::identity(const Model& m) {
  const auto& c = m.config();
  TunedLens t;
  t.config.base_model_name_or_path = m.source();
  t.config.d_model = c.d_model;
  t.config.num_hidden_layers = c.n_layers;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    t.weight.push_back(at::zeros({c.d_model, c.d_model}, at::kFloat));
    t.bias.push_back(at::zeros({c.d_model}, at::kFloat));
  }
  return t;
}

at::Tensor TunedLens::translate(const at::Tensor& h, int64_t idx) const {
  if (idx < 0 || idx >= n_translators())
    throw UsageError("tuned lens: translator " + std::to_string(idx) + " out of range (0.." +
                     std::to_string(n_translators() - 1) + ")");
  const auto& W = weight[static_cast<size_t>(idx)];
  const auto& b = bias[static_cast<size_t>(idx)];
  return at::addmm(b, h.reshape({-1, h.size(-1)}), W.t()).reshape(h.sizes()) + h;
}

void TunedLens::check_model(const Model& m) const {
  const auto& c = m.config();
  if (config.d_model != c.d_model || n_translators() != c.n_layers)
    throw UsageError("the tuned lens " + (source.empty() ? std::string("(in memory)") : source) + " was trained for d_model " +
                     std::to_string(config.d_model) + " with " + std::to_string(n_translators()) +
                     " layers, but the model " + m.source() + " has d_model " + std::to_string(c.d_model) + " and " +
                     std::to_string(c.n_layers) + " layers");
}

std::string unembedding_sha256(const Model& m) {
  Sha256 h;
  at::Tensor W = m.W_U().contiguous();
  h.update(static_cast<const char*>(W.data_ptr()), static_cast<size_t>(W.numel()) * sizeof(float));
  if (m.weights().b_U.defined()) {
    at::Tensor b = m.weights().b_U.to(at::kFloat).contiguous();
    h.update(static_cast<const char*>(b.data_ptr()), static_cast<size_t>(b.numel()) * sizeof(float));
  }
  return h.hex_digest();
}

bool TunedLens::matches_unembedding(const Model& m) const {
  return unembed_sha256.empty() || unembed_sha256 == unembedding_sha256(m);
}

namespace {

std::string read_text(const std::string& path) {
  return detail::read_regular_file(path, detail::kMaxSmallJsonBytes, "config files");  // not /dev/zero, not a FIFO
}

TunedLensConfig parse_config(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw FormatError(path, "expected a JSON object (the tuned-lens package's TunedLensConfig)");
  TunedLensConfig c;
  auto str = [&](const char* k, std::string& out) {
    if (j.contains(k) && j[k].is_string()) out = j[k].get<std::string>();
  };
  str("base_model_name_or_path", c.base_model_name_or_path);
  str("base_model_revision", c.base_model_revision);
  str("unembed_hash", c.unembed_hash);
  str("lens_type", c.lens_type);
  for (const char* k : {"d_model", "num_hidden_layers"})
    if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<int64_t>() <= 0)
      throw FormatError(path, std::string("'") + k + "' must be a positive integer");
  c.d_model = j["d_model"].get<int64_t>();
  c.num_hidden_layers = j["num_hidden_layers"].get<int64_t>();
  if (j.contains("bias") && j["bias"].is_boolean()) c.bias = j["bias"].get<bool>();
  if (c.lens_type != "linear_tuned_lens")
    throw FormatError(path, "lens_type '" + c.lens_type + "' is not supported (only linear_tuned_lens)");
  return c;
}

}  // namespace

TunedLens load_tuned_lens(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw FormatError(dir, fs::exists(dir, ec) ? "not a directory (a tuned lens is a directory)" : "no such directory");
  const std::string st = (fs::path(dir) / "tuned_lens.safetensors").string();
  const std::string pt = (fs::path(dir) / "params.pt").string();
  const std::string cj = (fs::path(dir) / "config.json").string();
  TensorStore store;
  TunedLens t;
  if (fs::exists(st, ec)) {
    store = read_safetensors(st);
    if (store.metadata.contains("unembed_sha256") && store.metadata["unembed_sha256"].is_string())
      t.unembed_sha256 = store.metadata["unembed_sha256"].get<std::string>();
  }
  else if (fs::exists(pt, ec)) store = read_torch_zip(pt);
  else throw FormatError(dir, "no tuned lens here (neither tuned_lens.safetensors nor params.pt)");

  t.source = dir;
  const bool have_config = fs::exists(cj, ec);
  if (have_config) t.config = parse_config(cj);
  // Count translators: "<l>.weight" for l = 0, 1, ...
  int64_t n = 0;
  while (store.has(std::to_string(n) + ".weight")) ++n;
  if (n == 0) throw FormatError(store.source, "no translator '0.weight' (expected keys '<layer>.weight', '<layer>.bias')");
  for (const auto& [name, tensor] : store.tensors) {
    const auto dot = name.find('.');
    bool ok = dot != std::string::npos && dot > 0 && name.find_first_not_of("0123456789") == dot;
    if (ok) {
      const int64_t l = std::stoll(name.substr(0, dot));
      const std::string what = name.substr(dot + 1);
      ok = l < n && (what == "weight" || what == "bias");
    }
    if (!ok) throw FormatError(store.source, "unexpected tensor '" + name + "' (translators 0.." + std::to_string(n - 1) + ")");
  }
  const int64_t d = store.get("0.weight").dim() == 2 ? store.get("0.weight").size(1) : -1;
  if (have_config && (t.config.num_hidden_layers != n || t.config.d_model != d))
    throw FormatError(store.source, std::to_string(n) + " translators of width " + std::to_string(d) + ", but " + cj +
                                        " says " + std::to_string(t.config.num_hidden_layers) + " of " +
                                        std::to_string(t.config.d_model));
  if (!have_config) {
    t.config.d_model = d;
    t.config.num_hidden_layers = n;
  }
  for (int64_t l = 0; l < n; ++l) {
    const std::string wn = std::to_string(l) + ".weight", bn = std::to_string(l) + ".bias";
    at::Tensor W = store.get(wn);
    if (W.dim() != 2 || W.size(0) != d || W.size(1) != d)
      throw FormatError(store.source, "'" + wn + "' has shape " + std::string(c10::str(W.sizes())) + ", expected [" +
                                          std::to_string(d) + ", " + std::to_string(d) + "]");
    at::Tensor b;
    if (store.has(bn)) {
      b = store.get(bn);
      if (b.dim() != 1 || b.size(0) != d)
        throw FormatError(store.source, "'" + bn + "' has shape " + std::string(c10::str(b.sizes())) + ", expected [" +
                                            std::to_string(d) + "]");
    } else if (t.config.bias) {
      throw FormatError(store.source, "missing tensor '" + bn + "' (config.json says bias: true)");
    } else {
      b = at::zeros({d}, at::kFloat);
    }
    W = W.to(at::kFloat).contiguous().clone();
    b = b.to(at::kFloat).contiguous().clone();
    if (!at::isfinite(W).all().item<bool>() || !at::isfinite(b).all().item<bool>())
      throw FormatError(store.source, "translator " + std::to_string(l) + " has non-finite values");
    t.weight.push_back(W);
    t.bias.push_back(b);
  }
  // A lens whose training stopped early (--stop-after, Ctrl-C) reads like a finished one; say so, on every
  // path that loads it (lens --tuned, tuned-lens eval, serve, Python).
  if (const auto u = tuned_lens_unfinished(dir); u && dist::rank() == 0)
    std::cerr << "vocablens: warning: " << dir << " is an unfinished tuned lens: trained " << u.trained_steps << " of "
              << u.steps << " steps (stopped by --stop-after or Ctrl-C), so its translators are only partly trained; "
              << "finish it with the same `vocablens tuned-lens train` command and --resume\n";
  return t;
}

TunedLensUnfinished tuned_lens_unfinished(const std::string& dir) {
  TunedLensUnfinished u;
  try {
    const auto j = nlohmann::json::parse(detail::read_regular_file(dir + "/config.json", detail::kMaxSmallJsonBytes, "config files"));
    if (!j.is_object() || !j.contains("vocablens_unfinished")) return u;
    const auto& m = j["vocablens_unfinished"];
    if (m.is_object() && m.value("steps", nlohmann::json()).is_number_integer() &&
        m.value("trained_steps", nlohmann::json()).is_number_integer()) {
      u.trained_steps = m["trained_steps"].get<int64_t>();
      u.steps = std::max<int64_t>(1, m["steps"].get<int64_t>());
    } else {
      u.steps = 1;  // marked, but the counts are unreadable: still unfinished
    }
  } catch (const std::exception&) {
    // no or unreadable config.json: load_tuned_lens reports what is wrong with it
  }
  return u;
}

}  // namespace vocablens
