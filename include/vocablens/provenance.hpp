// vocablens/provenance.hpp — where a Result came from: the model, its configuration's hash, the version.
//
// The CLI and the Python module fill Result::provenance the same way, so a run directory written by
// either says what produced it:
//   model_path, model_path_absolute, config_sha256 (sha256 of config.json, of a llama2.c header, or of the
//   canonical JSON below), config_hashed (which of those), model {architecture, family, sizes, norm,
//   positions, activation, ...}, vocablens_version, command_line, created_utc (ISO 8601).
//
//   vocablens::Result r = lens.to_result(tok.get(), prompt);
//   vocablens::fill_provenance(r, model, "vocablens lens gpt2 --prompt ...");
#pragma once
#include <string>

#include "vocablens/result.hpp"

namespace vocablens {

class Model;
struct ModelConfig;

/// Sets the fields listed above in r.provenance (other fields already there are kept).
void fill_provenance(Result& r, const Model& m, const std::string& command_line);

/// The configuration as provenance's `model` object records it (and hashes it when the checkpoint has no config
/// file): architecture, family, sizes, norm, positions, activation, gated_mlp, tied_embeddings, weight_dtype.
/// `vocablens inspect --json` starts from it.
nlohmann::json model_config_json(const ModelConfig& c);

}  // namespace vocablens
