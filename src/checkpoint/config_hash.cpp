// The sha256 of a checkpoint's architecture-defining bytes (see include/vocablens/detail/config_hash.hpp).
#include "vocablens/detail/config_hash.hpp"

#include <filesystem>
#include <fstream>

#include "vocablens/detail/sha256.hpp"

namespace vocablens {

std::optional<ConfigHash> checkpoint_config_sha256(const std::string& src) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(src, ec)) {
    std::string cfg = (fs::path(src) / "config.json").string();
    if (fs::exists(cfg, ec)) return ConfigHash{sha256_file_hex(cfg), "config.json"};
  } else if (fs::is_regular_file(src, ec)) {
    std::ifstream f(src, std::ios::binary);
    char magic[4] = {0, 0, 0, 0};
    f.read(magic, 4);
    if (f.gcount() == 4 && std::string(magic, 4) == "ak42")
      return ConfigHash{sha256_file_hex(src, 256), "llama2.c header (256 bytes)"};
    if (fs::path(src).extension() == ".bin") return ConfigHash{sha256_file_hex(src, 28), "llama2.c header (28 bytes)"};
  }
  return std::nullopt;
}

}  // namespace vocablens
