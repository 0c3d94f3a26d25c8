// Checking and converting analysis options, whatever surface they came from (see vocablens/options.hpp).
#include "vocablens/options.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "util/nearest.hpp"
#include "vocablens/error.hpp"

namespace vocablens {

using nlohmann::json;

const char* to_string(OptionType t) {
  switch (t) {
    case OptionType::Integer: return "integer";
    case OptionType::Real: return "number";
    case OptionType::Flag: return "boolean";
    case OptionType::Text: return "string";
    case OptionType::Choice: return "choice";
    case OptionType::Indices: return "indices";
    case OptionType::Texts: return "strings";
    case OptionType::Token: return "token";
    case OptionType::Prompt: return "prompt";
    case OptionType::Model: return "model";
    case OptionType::Sae: return "sae";
    case OptionType::Matrix: return "matrix";
  }
  return "?";
}

const OptionDecl* AnalysisDecl::find(std::string_view option) const {
  for (const auto& o : options)
    if (o.name == option) return &o;
  return nullptr;
}

std::string spelling(const OptionDecl& o, Surface surface) {
  if (surface != Surface::Cli) return o.name;
  if (!o.positional.empty()) return o.positional;
  if (!o.cli.empty()) return o.cli;
  std::string s = o.name;
  std::replace(s.begin(), s.end(), '_', '-');
  if (o.type == OptionType::Flag && o.default_value.is_boolean() && o.default_value.get<bool>()) return "--no-" + s;
  return "--" + s;
}

namespace {

std::string compact(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

[[noreturn]] void fail(const AnalysisDecl& d, const OptionDecl& o, Surface s, const std::string& problem) {
  throw UsageError(d.name + ": " + spelling(o, s) + ": " + problem);
}

[[noreturn]] void fail_type(const AnalysisDecl& d, const OptionDecl& o, Surface s, const std::string& problem) {
  throw OptionTypeError(d.name + ": " + spelling(o, s) + ": " + problem);
}

int64_t as_integer(const AnalysisDecl& d, const OptionDecl& o, Surface s, const json& v) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(d, o, s, "is too large (got " + compact(v) + ")");
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::abs(x) < 9.0e15) return static_cast<int64_t>(x);
  }
  fail_type(d, o, s, std::string("must be an integer (got ") + compact(v) + ")");
}

void check_range(const AnalysisDecl& d, const OptionDecl& o, Surface s, double x, const json& shown) {
  if (o.min && x < *o.min)
    fail(d, o, s, "must be >= " + compact(json(static_cast<int64_t>(*o.min))) + " (got " + compact(shown) + ")");
  if (o.max && x > *o.max)
    fail(d, o, s, "must be <= " + compact(json(static_cast<int64_t>(*o.max))) + " (got " + compact(shown) + ")");
}

json check_value(const AnalysisDecl& d, const OptionDecl& o, Surface s, const json& v) {
  switch (o.type) {
    case OptionType::Integer: {
      const int64_t i = as_integer(d, o, s, v);
      check_range(d, o, s, static_cast<double>(i), v);
      return i;
    }
    case OptionType::Real: {
      if (!v.is_number()) fail_type(d, o, s, "must be a number (got " + compact(v) + ")");
      const double x = v.get<double>();
      if (!std::isfinite(x)) fail(d, o, s, "must be finite (got " + compact(v) + ")");
      if (o.min && x < *o.min) fail(d, o, s, "must be >= " + compact(json(*o.min)) + " (got " + compact(v) + ")");
      if (o.max && x > *o.max) fail(d, o, s, "must be <= " + compact(json(*o.max)) + " (got " + compact(v) + ")");
      return x;
    }
    case OptionType::Flag:
      if (!v.is_boolean()) fail_type(d, o, s, "must be true or false (got " + compact(v) + ")");
      return v;
    case OptionType::Text:
      if (!v.is_string()) fail_type(d, o, s, "must be a string (got " + compact(v) + ")");
      return v;
    case OptionType::Model:
    case OptionType::Sae:
    case OptionType::Matrix:
      if (!v.is_string()) fail_type(d, o, s, "must be a path or name (got " + compact(v) + ")");
      if (v.get<std::string>().empty()) fail(d, o, s, "is empty");
      return v;
    case OptionType::Choice: {
      if (!v.is_string()) fail_type(d, o, s, "must be a string (got " + compact(v) + ")");
      const std::string x = v.get<std::string>();
      if (std::find(o.choices.begin(), o.choices.end(), x) == o.choices.end()) {
        std::string list;
        for (const auto& c : o.choices) list += (list.empty() ? "" : ", ") + c;
        fail(d, o, s, "must be one of " + list + " (got '" + x + "')");
      }
      return v;
    }
    case OptionType::Indices: {
      std::vector<int64_t> out;
      if (v.is_string()) {
        try {
          out = parse_index_list(v.get<std::string>());
        } catch (const UsageError& e) { fail(d, o, s, e.what()); }
      } else if (v.is_number()) {
        out.push_back(as_integer(d, o, s, v));
      } else if (v.is_array()) {
        if (v.size() > static_cast<size_t>(kMaxIndexListEntries))
          fail(d, o, s, "has more than " + std::to_string(kMaxIndexListEntries) + " entries");
        for (const auto& e : v) out.push_back(as_integer(d, o, s, e));
      } else {
        fail_type(d, o, s, "must be a list of integers or a string such as \"0,5,10-20\" (got " + compact(v) + ")");
      }
      for (int64_t i : out) check_range(d, o, s, static_cast<double>(i), json(i));
      return out;
    }
    case OptionType::Texts: {
      if (v.is_string() || v.is_number_integer()) return json::array({v});
      if (!v.is_array()) fail_type(d, o, s, "must be a list of strings (got " + compact(v) + ")");
      for (const auto& e : v)  // strings; integers too (token ids where the option lists tokens)
        if (!e.is_string() && !e.is_number_integer()) fail_type(d, o, s, "must hold strings (got " + compact(e) + ")");
      return v;
    }
    case OptionType::Token:
      if (v.is_string()) {
        if (v.get<std::string>().empty()) fail(d, o, s, "is empty: give a token's text or its id");
        return v;
      }
      if (v.is_number()) {
        const int64_t i = as_integer(d, o, s, v);
        if (i < 0) fail(d, o, s, "a token id must be >= 0 (got " + std::to_string(i) + ")");
        return i;
      }
      fail_type(d, o, s, "must be a token (its text) or a token id (got " + compact(v) + ")");
    case OptionType::Prompt:
      if (v.is_string()) {
        if (v.get<std::string>().empty()) fail(d, o, s, "is empty: it needs at least one character of text");
        return v;
      }
      if (v.is_array()) {
        if (v.empty()) fail(d, o, s, "is an empty list of token ids");
        if (v.size() > static_cast<size_t>(kMaxIndexListEntries)) fail(d, o, s, "is too long");
        json ids = json::array();
        for (const auto& e : v) {
          const int64_t i = as_integer(d, o, s, e);
          if (i < 0) fail(d, o, s, "a token id must be >= 0 (got " + std::to_string(i) + ")");
          ids.push_back(i);
        }
        return ids;
      }
      fail_type(d, o, s, "must be text or a list of token ids (got " + compact(v) + ")");
  }
  fail(d, o, s, "has an unknown type");
}

}  // namespace

std::vector<int64_t> parse_index_list(const std::string& spec, int64_t limit, const std::string& what) {
  std::vector<int64_t> out;
  size_t i = 0;
  auto bad = [&]() { return UsageError("cannot read index list '" + spec + "' (expected e.g. 0,5,10-20)"); };
  auto number = [&](int64_t& v) {
    size_t start = i;
    v = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
      v = v * 10 + (spec[i] - '0');
      if (v > (int64_t{1} << 40)) throw bad();
      ++i;
    }
    if (i == start) throw bad();
  };
  while (i < spec.size()) {
    while (i < spec.size() && spec[i] == ' ') ++i;
    int64_t a, b;
    number(a);
    b = a;
    if (i < spec.size() && spec[i] == '-') {
      ++i;
      number(b);
      if (b < a) throw bad();
    }
    // Bounds before expanding: "0-99999999999" would otherwise allocate gigabytes first.
    if (limit >= 0 && b >= limit)
      throw UsageError(what + " " + std::to_string(b) + " in '" + spec + "' is out of range (0.." + std::to_string(limit - 1) +
                       ")");
    if (b - a + 1 > kMaxIndexListEntries - static_cast<int64_t>(out.size()))
      throw UsageError("index list '" + spec + "' has more than " + std::to_string(kMaxIndexListEntries) + " entries");
    for (int64_t v = a; v <= b; ++v) out.push_back(v);
    while (i < spec.size() && spec[i] == ' ') ++i;
    if (i < spec.size()) {
      if (spec[i] != ',') throw bad();
      ++i;
      if (i == spec.size()) throw bad();
    }
  }
  if (out.empty()) throw bad();
  return out;
}

json resolve_options(const AnalysisDecl& d, const json& given, Surface surface) {
  if (!given.is_null() && !given.is_object())
    throw UsageError(d.name + ": options must be a JSON object of name: value (got " + compact(given) + ")");
  json out = json::object();
  if (given.is_object()) {
    for (auto it = given.begin(); it != given.end(); ++it) {
      if (d.find(it.key())) continue;
      std::vector<std::string> names;
      for (const auto& o : d.options) names.push_back(o.name);
      const std::vector<std::string> close = detail::nearest_names(it.key(), names);
      const std::string best = close.empty() ? std::string() : spelling(*d.find(close.front()), surface);
      std::string key = it.key();
      if (key.size() > 60) key = key.substr(0, 57) + "...";
      throw UsageError(d.name + ": unknown option '" + key + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
    }
  }
  for (const auto& o : d.options) {
    const json* v = nullptr;
    if (given.is_object()) {
      auto it = given.find(o.name);
      if (it != given.end() && !it->is_null()) v = &*it;
    }
    if (!v) {
      if (o.required)
        fail(d, o, surface,
             o.type == OptionType::Prompt && surface == Surface::Cli
                 ? "is required (text, or token ids as " + spelling(o, surface) + "-ids)"
                 : std::string("is required"));
      out[o.name] = o.default_value.is_null() ? json(nullptr) : check_value(d, o, surface, o.default_value);
      continue;
    }
    out[o.name] = check_value(d, o, surface, *v);
  }
  return out;
}

bool forward_replayable(const AnalysisDecl& d, const json& resolved) {
  if (!d.reads_forward_only) return false;
  for (const auto& o : d.options)
    if (o.edits_forward && resolved.contains(o.name) && !resolved.at(o.name).is_null()) return false;
  return true;
}

json alias_request(const HttpAlias& alias, const json& body) {
  if (!body.is_null() && !body.is_object())
    throw UsageError(alias.path + ": options must be a JSON object of name: value (got " + compact(body) + ")");
  json out = body.is_object() ? body : json::object();
  for (auto it = out.begin(); it != out.end(); ++it) {
    if (std::find(alias.keys.begin(), alias.keys.end(), it.key()) != alias.keys.end()) continue;
    std::string list;
    for (const auto& k : alias.keys) list += (list.empty() ? "" : ", ") + k;
    std::string key = it.key();
    if (key.size() > 60) key = key.substr(0, 57) + "...";
    throw UsageError(alias.path + ": unknown option '" + key + "' (known: " + list + ")");
  }
  for (const auto& k : alias.needs)
    if (!out.contains(k) || out.at(k).is_null()) throw UsageError(alias.path + ": " + k + ": is required");
  for (auto it = alias.fixed.begin(); it != alias.fixed.end(); ++it) out[it.key()] = it.value();
  return out;
}

void check_alias_bounds(const AnalysisDecl& d, const HttpAlias& alias, const json& resolved) {
  for (const auto& [name, most] : alias.at_most) {
    const OptionDecl* o = d.find(name);
    if (!o || !resolved.contains(name) || resolved.at(name).is_null()) continue;
    const json& v = resolved.at(name);
    if (o->type == OptionType::Indices && v.is_array() && (v.empty() || v.size() > static_cast<size_t>(most)))
      throw UsageError(alias.path + ": " + name + ": give 1 to " + std::to_string(most) + " per request (got " +
                       std::to_string(v.size()) + ")");
    if (o->type == OptionType::Integer && v.is_number_integer() && v.get<int64_t>() > most)
      throw UsageError(alias.path + ": " + name + ": must be <= " + std::to_string(most) + " on this route (got " +
                       std::to_string(v.get<int64_t>()) + ")");
  }
}

json parse_option_text(const AnalysisDecl& d, const OptionDecl& o, const std::string& text) {
  const Surface s = Surface::Cli;
  switch (o.type) {
    case OptionType::Integer: {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(text, &used);
      } catch (const std::exception&) { used = 0; }
      if (used == 0 || used != text.size()) fail(d, o, s, "must be an integer (got '" + text + "')");
      return static_cast<int64_t>(v);
    }
    case OptionType::Real: {
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(text, &used);
      } catch (const std::exception&) { used = 0; }
      if (used == 0 || used != text.size()) fail(d, o, s, "must be a number (got '" + text + "')");
      return v;
    }
    case OptionType::Flag:
      if (text == "true" || text == "1" || text == "yes") return true;
      if (text == "false" || text == "0" || text == "no") return false;
      fail(d, o, s, "must be true or false (got '" + text + "')");
    case OptionType::Token:
    case OptionType::Prompt: return text;
    case OptionType::Texts: {
      json out = json::array();
      size_t start = 0;
      while (start <= text.size()) {
        size_t comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        if (comma > start) out.push_back(text.substr(start, comma - start));
        start = comma + 1;
      }
      return out;
    }
    case OptionType::Text:
    case OptionType::Choice:
    case OptionType::Indices:
    case OptionType::Model:
    case OptionType::Sae:
    case OptionType::Matrix: return text;
  }
  return text;
}

json option_schema(const AnalysisDecl& d) {
  json opts = json::array();
  for (const auto& o : d.options) {
    json j = {{"name", o.name}, {"type", to_string(o.type)}, {"default", o.default_value},
              {"help", o.help}, {"required", o.required},    {"cli", spelling(o, Surface::Cli)}};
    if (o.min) j["min"] = *o.min;
    if (o.max) j["max"] = *o.max;
    if (!o.choices.empty()) j["choices"] = o.choices;
    opts.push_back(std::move(j));
  }
  return {{"name", d.name}, {"summary", d.summary}, {"command", d.command}, {"input", d.input}, {"options", opts}};
}

namespace {

std::string python_type(const OptionDecl& o) {
  switch (o.type) {
    case OptionType::Integer: return "int";
    case OptionType::Real: return "float";
    case OptionType::Flag: return "bool";
    case OptionType::Text: return "str";
    case OptionType::Choice: {
      std::string s = "Literal[";
      for (size_t i = 0; i < o.choices.size(); ++i) s += (i ? ", " : "") + json(o.choices[i]).dump();
      return s + "]";
    }
    case OptionType::Indices: return "Union[int, Sequence[int], str]";
    case OptionType::Texts: return "Union[str, Sequence[str]]";
    case OptionType::Token: return "Union[str, int]";
    case OptionType::Prompt: return "Union[str, Sequence[int]]";
    case OptionType::Model: return "Model";
    case OptionType::Sae: return "Sae";
    case OptionType::Matrix: return "Union[str, torch.Tensor]";
  }
  return "object";
}

std::string python_literal(const json& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  return v.dump();
}

}  // namespace

std::string python_signature(const AnalysisDecl& d) {
  std::string s = d.name + "(model";
  bool star = false;
  for (const auto& o : d.options) {
    if (o.required) {
      s += ", " + o.name + ": " + python_type(o);
      continue;
    }
  }
  for (const auto& o : d.options) {
    if (o.required) continue;
    if (!star) s += ", *", star = true;
    const bool optional = o.default_value.is_null();
    s += ", " + o.name + ": " + (optional ? "Optional[" + python_type(o) + "]" : python_type(o)) + " = " +
         python_literal(o.default_value);
  }
  return s + ") -> Result";
}

}  // namespace vocablens
