// YAML configuration files as JSON (checkpoint/yaml_config.hpp), through libyaml's document loader.
#include "checkpoint/yaml_config.hpp"

#include <yaml.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <regex>

#include <fmt/format.h>

#include "util/regular_file.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {
namespace {

using json = nlohmann::json;

constexpr int kMaxYamlDepth = 64;
constexpr size_t kMaxYamlValues = 100000;

// One line: libyaml's problems may carry control characters of the input.
std::string yaml_printable(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// A plain scalar as YAML 1.2's core schema resolves it.
json plain_scalar(const std::string& s) {
  static const std::regex int_re("[-+]?[0-9]+");
  static const std::regex float_re("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (std::regex_match(s, int_re)) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == 0 && end && *end == '\0') return static_cast<int64_t>(v);
    return s;  // out of range: kept as written
  }
  if (std::regex_match(s, float_re)) return std::strtod(s.c_str(), nullptr);
  return s;
}

struct YamlToJson {
  yaml_document_t* doc;
  const std::string& source;
  size_t values = 0;

  json convert(yaml_node_t* node, int depth) {
    if (!node) throw FormatError(source, "YAML node missing");
    if (depth > kMaxYamlDepth) throw FormatError(source, fmt::format("YAML nested deeper than {} levels", kMaxYamlDepth));
    if (++values > kMaxYamlValues)
      throw FormatError(source, fmt::format("more than {} YAML values (after aliases are expanded)", kMaxYamlValues));
    switch (node->type) {
      case YAML_SCALAR_NODE: {
        std::string s(reinterpret_cast<const char*>(node->data.scalar.value), node->data.scalar.length);
        return node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? plain_scalar(s) : json(s);
      }
      case YAML_SEQUENCE_NODE: {
        json a = json::array();
        for (yaml_node_item_t* it = node->data.sequence.items.start; it < node->data.sequence.items.top; ++it)
          a.push_back(convert(yaml_document_get_node(doc, *it), depth + 1));
        return a;
      }
      case YAML_MAPPING_NODE: {
        json o = json::object();
        for (yaml_node_pair_t* p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top; ++p) {
          yaml_node_t* k = yaml_document_get_node(doc, p->key);
          if (!k || k->type != YAML_SCALAR_NODE) throw FormatError(source, "a YAML mapping key is not a plain value");
          std::string key(reinterpret_cast<const char*>(k->data.scalar.value), k->data.scalar.length);
          if (o.contains(key)) throw FormatError(source, "key '" + yaml_printable(key) + "' appears twice");
          o[key] = convert(yaml_document_get_node(doc, p->value), depth + 1);
        }
        return o;
      }
      default: throw FormatError(source, "empty YAML node");
    }
  }
};

// libyaml's parser and document, released on every path out.
struct YamlDoc {
  yaml_parser_t parser;
  yaml_document_t doc;
  bool loaded = false;
  YamlDoc() { yaml_parser_initialize(&parser); }
  ~YamlDoc() {
    if (loaded) yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
  }
  YamlDoc(const YamlDoc&) = delete;
  YamlDoc& operator=(const YamlDoc&) = delete;
};

}  // namespace

json parse_yaml_config(const std::string& text, const std::string& source) {
  YamlDoc y;
  yaml_parser_set_input_string(&y.parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  if (!yaml_parser_load(&y.parser, &y.doc)) {
    const char* problem = y.parser.problem ? y.parser.problem : "unreadable";
    throw FormatError(source,
                      fmt::format("not valid YAML ({} at line {})", yaml_printable(problem), y.parser.problem_mark.line + 1));
  }
  y.loaded = true;
  yaml_node_t* root = yaml_document_get_root_node(&y.doc);
  if (!root) throw FormatError(source, "empty YAML file");
  YamlToJson c{&y.doc, source};
  return c.convert(root, 0);
}

json read_yaml_config(const std::string& path) {
  return parse_yaml_config(read_regular_file(path, uint64_t{1} << 20, "YAML configuration files"), path);
}

}  // namespace detail
}  // namespace vocablens
