// Reading a tuned lens directory (vocablens/tuned_lens_checkpoint.hpp): tuned_lens.safetensors or the tuned-lens
// package's params.pt, config.json, and the mark of an unfinished training. The tuned lens's only file reader:
// the analysis (analyses/tuned_lens.cpp) builds its TunedLens from what this returns.
#include "vocablens/tuned_lens_checkpoint.hpp"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "util/regular_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/tensor_store.hpp"

namespace vocablens {

TunedLensCheckpoint::TunedLensCheckpoint() = default;
TunedLensCheckpoint::~TunedLensCheckpoint() = default;
TunedLensCheckpoint::TunedLensCheckpoint(const TunedLensCheckpoint&) = default;
TunedLensCheckpoint::TunedLensCheckpoint(TunedLensCheckpoint&&) noexcept = default;
TunedLensCheckpoint& TunedLensCheckpoint::operator=(const TunedLensCheckpoint&) = default;
TunedLensCheckpoint& TunedLensCheckpoint::operator=(TunedLensCheckpoint&&) noexcept = default;
namespace fs = std::filesystem;

namespace {

std::string read_text(const std::string& path) {
  return detail::read_regular_file(path, detail::kMaxSmallJsonBytes, "config files");  // not /dev/zero, not a FIFO
}

TunedLensConfig parse_config(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::exception& e) { throw FormatError(path, std::string("not valid JSON: ") + e.what()); }
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

TunedLensCheckpoint read_tuned_lens_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw FormatError(dir, fs::exists(dir, ec) ? "not a directory (a tuned lens is a directory)" : "no such directory");
  const std::string st = (fs::path(dir) / "tuned_lens.safetensors").string();
  const std::string pt = (fs::path(dir) / "params.pt").string();
  const std::string cj = (fs::path(dir) / "config.json").string();
  TensorStore store;
  TunedLensCheckpoint t;
  if (fs::exists(st, ec)) {
    store = read_safetensors(st);
    if (store.metadata.contains("unembed_sha256") && store.metadata["unembed_sha256"].is_string())
      t.unembed_sha256 = store.metadata["unembed_sha256"].get<std::string>();
  } else if (fs::exists(pt, ec)) store = read_torch_zip(pt);
  else throw FormatError(dir, "no tuned lens here (neither tuned_lens.safetensors nor params.pt)");

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
    throw FormatError(store.source, std::to_string(n) + " translators of width " + std::to_string(d) + ", but " + cj + " says " +
                                        std::to_string(t.config.num_hidden_layers) + " of " + std::to_string(t.config.d_model));
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
  return t;
}

TunedLensUnfinished tuned_lens_unfinished(const std::string& dir) {
  TunedLensUnfinished u;
  try {
    const auto j =
        nlohmann::json::parse(detail::read_regular_file(dir + "/config.json", detail::kMaxSmallJsonBytes, "config files"));
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
    // no or unreadable config.json: read_tuned_lens_checkpoint reports what is wrong with it
  }
  return u;
}

}  // namespace vocablens
