// Command-line flags from an analysis's declaration (see declared_flags.hpp).
#include "cli/declared_flags.hpp"

#include <algorithm>
#include <cctype>

#include "vocablens/error.hpp"
#include "vocablens/token_filter.hpp"

namespace vocablens::cli {

using nlohmann::json;

DeclaredFlags::DeclaredFlags(AnalysisDecl d) : decl_(std::move(d)) {
  for (const auto& o : decl_.options) {
    Slot s;
    s.opt = &o;
    slots_.push_back(std::move(s));
  }
}

namespace {
std::string type_name(const OptionDecl& o) {
  if (o.cli_reads_file) return "FILE";
  switch (o.type) {
    case OptionType::Integer: return "INT";
    case OptionType::Real: return "NUMBER";
    case OptionType::Indices: return "LIST";
    case OptionType::Choice: return "CHOICE";
    case OptionType::Token: return "TOKEN";
    case OptionType::Texts: return "TEXT ...";
    case OptionType::Model: return "MODEL";
    case OptionType::Sae: return "PATH";
    case OptionType::Matrix: return "NAME";
    default: return "TEXT";
  }
}
}  // namespace

std::string help_line(const OptionDecl& o) {
  std::string h = o.help;
  if (o.type == OptionType::Flag) {
    if (o.default_value.is_boolean() && o.default_value.get<bool>() && !h.empty()) {
      h[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(h[0])));
      h = "Leave out " + h;
    }
    return h;
  }
  if (!o.choices.empty()) {
    std::string list;
    for (const auto& c : o.choices) list += (list.empty() ? "" : ", ") + c;
    h += " (" + list + ")";
  }
  if (!o.default_value.is_null()) {
    h += " (default " + (o.default_value.is_string() ? o.default_value.get<std::string>() : o.default_value.dump()) + ")";
  }
  return h;
}

void DeclaredFlags::add_to(CLI::App& sub, const std::vector<std::string>& optional_here) {
  for (auto& s : slots_) {
    const OptionDecl& o = *s.opt;
    const std::string name = spelling(o, Surface::Cli);
    if (o.type == OptionType::Flag) {
      if (o.default_value.is_null()) {  // tri-state: --x, --no-x, or neither (the analysis decides)
        std::string base = name.substr(2);
        s.cli = sub.add_flag("--" + base, s.on, o.help);
        s.cli_off = sub.add_flag("--no-" + base, s.off, "Not: " + o.help);
        s.cli->excludes(s.cli_off);
      } else {
        s.cli = sub.add_flag(name, o.default_value.get<bool>() ? s.off : s.on, help_line(o));
      }
      continue;
    }
    if (o.type == OptionType::Texts) {
      s.cli = sub.add_option(name, s.texts, help_line(o));
    } else {
      s.cli = sub.add_option(name, s.text, help_line(o));
    }
    const bool required = o.required && std::find(optional_here.begin(), optional_here.end(), o.name) == optional_here.end();
    s.cli->type_name(type_name(o));
    if (o.type == OptionType::Prompt) {
      // The same option as token ids. Either spelling satisfies a required prompt: given() refuses both, and
      // resolve_options names the option when neither is there.
      s.cli_ids = sub.add_option(name + "-ids", s.ids,
                                 "The " + o.name +
                                     " as token ids instead of text, used exactly as given (no BOS added), "
                                     "e.g. " +
                                     name + "-ids 1,403,407")
                      ->delimiter(',')
                      ->type_name("IDS");
      continue;
    }
    if (required) s.cli->required();
  }
}

json DeclaredFlags::given() const {
  json out = json::object();
  for (const auto& s : slots_) {
    const OptionDecl& o = *s.opt;
    if (s.cli_ids && s.cli_ids->count() > 0) {
      const std::string name = spelling(o, Surface::Cli);
      if (s.cli->count() > 0) throw UsageError("give " + name + " or " + name + "-ids, not both");
      out[o.name] = s.ids;
      continue;
    }
    if (!s.cli || (s.cli->count() == 0 && (!s.cli_off || s.cli_off->count() == 0))) continue;
    if (o.type == OptionType::Flag) {
      if (o.default_value.is_null()) out[o.name] = s.on;
      else out[o.name] = o.default_value.get<bool>() ? !s.off : s.on;
      continue;
    }
    if (o.type == OptionType::Texts) {
      json list = json::array();
      for (const auto& t : s.texts) {
        if (o.cli_whole) {
          list.push_back(t);
          continue;
        }
        json part = parse_option_text(decl_, o, t);
        for (auto& p : part) list.push_back(p);
      }
      out[o.name] = list;
      continue;
    }
    if (o.cli_reads_file) {
      out[o.name] = read_token_id_list(s.text);
      continue;
    }
    out[o.name] = parse_option_text(decl_, o, s.text);
  }
  for (const auto& s : slots_)
    if (s.cli_ids && s.cli_ids->count() > 0 && out.contains("bos"))
      throw UsageError("--bos/--no-bos apply to " + spelling(*s.opt, Surface::Cli) + " text; " + spelling(*s.opt, Surface::Cli) +
                       "-ids are used exactly as given");
  return out;
}

AnalysisDecl options_not_in(AnalysisDecl d, const AnalysisDecl& base) {
  std::vector<OptionDecl> keep;
  for (auto& o : d.options)
    if (!base.find(o.name)) keep.push_back(o);
  d.options = std::move(keep);
  return d;
}

}  // namespace vocablens::cli
