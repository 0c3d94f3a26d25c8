// vocablens/detail/config_hash.hpp — the sha256 of what defines a checkpoint's architecture, for provenance.
//
// Hugging Face directory: its config.json. llama2.c .bin: its header (256 bytes for the "ak42" version >= 1
// export, 28 for the legacy version 0). Anything else (ckpt.pt, ...) has no such bytes: nullopt, and the
// caller hashes the parsed ModelConfig instead. Only the checkpoint layer knows these formats.
//
//   if (auto h = vocablens::checkpoint_config_sha256("fixtures/gpt2-tiny"))
//     fmt::print("{} of {}\n", h->sha256, h->what);        // "<64 hex digits> of config.json"
#pragma once
#include <optional>
#include <string>

namespace vocablens {

struct ConfigHash {
  std::string sha256;  ///< lowercase hex
  std::string what;    ///< "config.json", "llama2.c header (256 bytes)", "llama2.c header (28 bytes)"
};

/// The hash of the architecture-defining bytes of the checkpoint at `source` (a directory or a file), or
/// nullopt when the format has none. Throws what sha256_file_hex throws when such a file cannot be read.
std::optional<ConfigHash> checkpoint_config_sha256(const std::string& source);

}  // namespace vocablens
