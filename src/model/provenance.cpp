// Result provenance shared by the CLI and the Python module (see vocablens/provenance.hpp).
#include "vocablens/provenance.hpp"

#include <ctime>
#include <filesystem>
#include <fstream>

#include "vocablens/model.hpp"
#include "vocablens/sha256.hpp"

namespace vocablens {
namespace {

namespace fs = std::filesystem;

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// sha256 of what defines the architecture: config.json of a Hugging Face directory, the header of a
// llama2.c .bin (28 bytes for version 0, 256 for "ak42" version >= 1), or, for anything else (ckpt.pt),
// the canonical JSON of the parsed ModelConfig.
std::pair<std::string, std::string> config_hash(const Model& m, const nlohmann::json& model_json) {
  const std::string& src = m.source();
  std::error_code ec;
  if (fs::is_directory(src, ec)) {
    std::string cfg = (fs::path(src) / "config.json").string();
    if (fs::exists(cfg, ec)) return {sha256_file_hex(cfg), "config.json"};
  } else if (fs::is_regular_file(src, ec)) {
    std::ifstream f(src, std::ios::binary);
    char magic[4] = {0, 0, 0, 0};
    f.read(magic, 4);
    if (f.gcount() == 4 && std::string(magic, 4) == "ak42")
      return {sha256_file_hex(src, 256), "llama2.c header (256 bytes)"};
    if (fs::path(src).extension() == ".bin") return {sha256_file_hex(src, 28), "llama2.c header (28 bytes)"};
  }
  return {sha256_hex(model_json.dump()), "model config (vocablens canonical JSON)"};
}

}  // namespace

void fill_provenance(Result& r, const Model& m, const std::string& command_line) {
  const auto& c = m.config();
  nlohmann::json model = {{"architecture", c.architecture},     {"family", to_string(c.family)},
                          {"n_layers", c.n_layers},             {"d_model", c.d_model},
                          {"n_heads", c.n_heads},               {"n_kv_heads", c.n_kv_heads},
                          {"d_head", c.d_head},                 {"d_mlp", c.d_mlp},
                          {"vocab_size", c.vocab_size},         {"n_ctx", c.n_ctx},
                          {"norm", to_string(c.norm)},          {"positions", to_string(c.positions)},
                          {"activation", to_string(c.activation)}, {"gated_mlp", c.gated_mlp},
                          {"tied_embeddings", c.tied_embeddings}, {"weight_dtype", c.weight_dtype}};
  auto [hash, hashed] = config_hash(m, model);
  std::error_code ec;
  std::string abs = fs::absolute(m.source(), ec).lexically_normal().string();
  if (!r.provenance.is_object()) r.provenance = nlohmann::json::object();
  r.provenance["model_path"] = m.source();
  r.provenance["model_path_absolute"] = ec ? m.source() : abs;
  r.provenance["config_sha256"] = hash;
  r.provenance["config_hashed"] = hashed;
  r.provenance["model"] = model;
  r.provenance["vocablens_version"] = VOCABLENS_VERSION;
  r.provenance["command_line"] = command_line;
  r.provenance["created_utc"] = utc_now();
}

}  // namespace vocablens
