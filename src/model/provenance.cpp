// Result provenance shared by the CLI and the Python module (see vocablens/provenance.hpp).
#include "vocablens/provenance.hpp"

#include <ctime>
#include <filesystem>

#include "vocablens/detail/config_hash.hpp"
#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"
#include "vocablens/detail/sha256.hpp"

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

}  // namespace

nlohmann::json model_config_json(const ModelConfig& c) {
  return {{"architecture", c.architecture},
          {"family", c.family},
          {"n_layers", c.n_layers},
          {"d_model", c.d_model},
          {"n_heads", c.n_heads},
          {"n_kv_heads", c.n_kv_heads},
          {"d_head", c.d_head},
          {"d_mlp", c.d_mlp},
          {"vocab_size", c.vocab_size},
          {"n_ctx", c.n_ctx},
          {"norm", to_string(c.norm)},
          {"positions", to_string(c.positions)},
          {"activation", to_string(c.activation)},
          {"gated_mlp", c.gated_mlp},
          {"tied_embeddings", c.tied_embeddings},
          {"weight_dtype", c.weight_dtype}};
}

void fill_provenance(Result& r, const Model& m, const std::string& command_line) {
  const nlohmann::json model = model_config_json(m.config());
  // sha256 of what defines the architecture: what the checkpoint layer names (config.json, a llama2.c
  // header), or else the canonical JSON of the parsed ModelConfig.
  auto ch = checkpoint_config_sha256(m.source());
  std::string hash = ch ? ch->sha256 : sha256_hex(model.dump());
  std::string hashed = ch ? ch->what : "model config (vocablens canonical JSON)";
  std::error_code ec;
  std::string abs = fs::absolute(m.source(), ec).lexically_normal().string();
  if (!r.provenance.is_object()) r.provenance = nlohmann::json::object();
  r.provenance["model_path"] = m.source();
  r.provenance["model_path_absolute"] = ec ? m.source() : abs;
  r.provenance["config_sha256"] = hash;
  r.provenance["config_hashed"] = hashed;
  r.provenance["model"] = model;
  // How the products with stored (F16 / BF16 / quantized) weights were computed: float32, bfloat16 or int8.
  r.provenance["compute"] = compute_dtype_name(compute_dtype());
  r.provenance["vocablens_version"] = VOCABLENS_VERSION;
  r.provenance["command_line"] = command_line;
  r.provenance["created_utc"] = utc_now();
}

}  // namespace vocablens
