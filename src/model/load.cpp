// load_model: find the checkpoint, read its config, map tensor names to roles (model/hf_map.cpp), check shapes.
#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>

#include "model/gguf_model.hpp"
#include "model/hf_map.hpp"
#include "model/llama2c.hpp"
#include "model/validate.hpp"
#include "util/regular_file.hpp"
#include "vocablens/arch.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/timings.hpp"

namespace vocablens {
namespace detail {
namespace fs = std::filesystem;

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
    throw FormatError(dir.string(),
                      "no config.json in this directory (not a Hugging Face model directory)" + checkpoints_hint(dir.string()));
  auto read_store = [&] {
    if (fs::exists(dir / "model.safetensors")) return read_safetensors((dir / "model.safetensors").string(), false);
    if (fs::exists(dir / "model.safetensors.index.json"))
      return read_safetensors_index((dir / "model.safetensors.index.json").string(), false);
    if (fs::exists(dir / "pytorch_model.bin")) return read_torch_zip((dir / "pytorch_model.bin").string(), false);
    if (fs::exists(dir / "pytorch_model.bin.index.json"))
      return read_torch_zip_index((dir / "pytorch_model.bin.index.json").string(), false);
    throw FormatError(dir.string(),
                      "no weights found (expected model.safetensors, model.safetensors.index.json, "
                      "pytorch_model.bin or pytorch_model.bin.index.json)");
  };
  ModelConfig cfg;
  try {
    cfg = read_hf_config(cp);
  } catch (const FormatError& e) {
    // An architecture we do not run: name the family whose tensor table fits its checkpoint best and what
    // differs (read_hf_config's message starts so; the weights' names are only read for this message).
    if (e.problem().rfind("unknown architecture", 0) != 0) throw;
    std::string hint;
    try {
      std::vector<std::string> names;
      for (const auto& kv : read_store().tensors) names.push_back(kv.first);
      hint = nearest_architecture_hint(names, false);
    } catch (const Error&) {
      // no readable weights: the architecture alone is the message
    }
    throw FormatError(e.path(), e.problem() + (hint.empty() ? "" : "; " + hint));
  }
  TensorStore st = read_store();
  if (!st.stored_dtype.empty()) cfg.weight_dtype = st.stored_dtype;
  ModelWeights w = map_hf_weights(st, cfg, cp);
  attach_segments(cp, st, cfg, w);      // "vocablens_segments": W_seg (segments.cpp)
  check_all_tensors_used(st, cfg, cp);  // Every tensor used or reported
  check_store_finite(st);               // NaN/Inf weights named at load
  return Model(std::move(cfg), std::move(w), dir.string());
}

}  // namespace detail

Model load_model(const std::string& path, const LoadOptions& opts) {
  namespace fs = std::filesystem;
  timings::Phase phase("load");
  std::error_code ec;
  fs::path p(path);
  if (!fs::exists(p, ec)) throw FormatError(path, "no such file or directory");
  if (!fs::is_directory(p, ec) && !fs::is_regular_file(p, ec))  // A FIFO blocked, /dev/zero
    throw FormatError(path, "is " + detail::file_kind(path) + ", not a model file or directory");
  if (fs::is_directory(p, ec)) return detail::load_hf_dir(p);
  // A single file: a PyTorch zip (llama2.c ckpt.pt, or pytorch_model.bin beside a config.json), a
  // safetensors file beside a config.json, or a llama2.c .bin.
  if (is_gguf_file(path)) return load_gguf_model(path);
  if (detail::starts_with_zip_magic(path)) {
    if (fs::exists(p.parent_path() / "config.json") && p.filename() == "pytorch_model.bin")
      return detail::load_hf_dir(p.parent_path());
    return load_llama2c_ckpt(path);
  }
  if (p.extension() == ".safetensors") {
    if (p.filename() == "model.safetensors")
      return detail::load_hf_dir(p.parent_path().empty() ? fs::path(".") : p.parent_path());
    throw FormatError(path, "a bare .safetensors file needs its Hugging Face directory (config.json): pass the directory");
  }
  if (p.extension() == ".json") throw FormatError(path, "pass the model directory, not its JSON file");
  return load_llama2c_bin(path);
}

}  // namespace vocablens
