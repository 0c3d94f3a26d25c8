// Nesting-depth check for untrusted JSON (see json_depth.hpp).
#include "util/json_depth.hpp"

#include "vocablens/error.hpp"

namespace vocablens::detail {

void check_json_depth(std::string_view text, const std::string& path, int max_depth) {
  int depth = 0;
  bool in_str = false, esc = false;
  for (char c : text) {
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '{' || c == '[') {
      if (++depth > max_depth) throw FormatError(path, "JSON nested deeper than " + std::to_string(max_depth) + " levels");
    } else if (c == '}' || c == ']') --depth;
  }
}

}  // namespace vocablens::detail
