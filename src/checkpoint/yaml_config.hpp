// src/checkpoint/yaml_config.hpp — a small YAML configuration file (circuit-tracer's config.yaml) as JSON, read with
// Debian's libyaml: an internal building block of the readers, not a public interface.
//
//   nlohmann::json cfg = vocablens::detail::read_yaml_config("transcoders/config.yaml");
//   cfg["model_kind"].get<std::string>();      // "transcoder_set"
//
// Mappings become objects (keys must be scalars, each once), sequences arrays; a plain scalar is null (``, `~`,
// `null`), a boolean (`true` / `false` in any case), an integer, a number, or else a string; a quoted scalar is
// always a string. Only the first document is read. Bounds (the file comes from anywhere): at most 1 MiB, 64
// levels of nesting and 100 000 values after aliases are expanded. Anything else is one FormatError line naming
// the file (and the line, for a YAML syntax error).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace vocablens {
namespace detail {

/// The YAML text of `source` (a path, for messages) as JSON.
nlohmann::json parse_yaml_config(const std::string& text, const std::string& source);

/// Reads the regular file at `path` (at most 1 MiB) and parses it as above.
nlohmann::json read_yaml_config(const std::string& path);

}  // namespace detail
}  // namespace vocablens
