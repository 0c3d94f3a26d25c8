// The registry of declared analyses (see vocablens/analysis_registry.hpp).
#include "vocablens/analysis_registry.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "vocablens/analysis_estimate.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "util/mapped_file.hpp"

namespace vocablens {

void AnalysisRegistry::add(DeclaredAnalysis a) {
  const auto& d = a.decl;
  if (d.name.empty() || !a.run) throw std::logic_error("analysis registry: an entry without a name or run function");
  if (find(d.name)) throw std::logic_error("analysis registry: '" + d.name + "' registered twice");
  for (size_t i = 0; i < d.options.size(); ++i) {
    const auto& o = d.options[i];
    bool ok = !o.name.empty() && std::islower(static_cast<unsigned char>(o.name[0]));
    for (char c : o.name)
      ok = ok && (std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_');
    if (!ok) throw std::logic_error("analysis registry: " + d.name + ": bad option name '" + o.name + "'");
    for (size_t j = 0; j < i; ++j)
      if (d.options[j].name == o.name) throw std::logic_error("analysis registry: " + d.name + ": option '" + o.name + "' twice");
    if (o.type == OptionType::Choice && o.choices.empty())
      throw std::logic_error("analysis registry: " + d.name + ": choice option '" + o.name + "' without choices");
    if (o.required && !o.default_value.is_null())
      throw std::logic_error("analysis registry: " + d.name + ": required option '" + o.name + "' with a default");
    if (o.server && (o.type != OptionType::Text || o.server->help.empty() || !o.server->check))
      throw std::logic_error("analysis registry: " + d.name + ": served option '" + o.name +
                             "' must be Text, with serve's help and a start-up check");
  }
  // An alias names declared options only, and a path no other analysis or alias takes.
  for (const auto& alias : d.http_aliases) {
    bool ok = !alias.path.empty() && alias.path.front() != '/' && alias.path.back() != '/';
    for (char c : alias.path) ok = ok && (std::islower(static_cast<unsigned char>(c)) || c == '_' || c == '/');
    for (const auto& k : alias.keys) ok = ok && d.find(k);
    for (const auto& k : alias.needs) ok = ok && std::find(alias.keys.begin(), alias.keys.end(), k) != alias.keys.end();
    for (auto it = alias.fixed.begin(); it != alias.fixed.end(); ++it) ok = ok && d.find(it.key());
    for (const auto& [k, most] : alias.at_most)
      ok = ok && d.find(k) && (d.find(k)->type == OptionType::Integer || d.find(k)->type == OptionType::Indices) && most >= 1;
    for (const auto& other : items_)
      for (const auto& o : other.decl.http_aliases) ok = ok && o.path != alias.path;
    if (!ok || alias.path == d.name || find(alias.path))
      throw std::logic_error("analysis registry: " + d.name + ": bad or taken HTTP alias '" + alias.path + "'");
  }
  // Every default must pass the declaration's own checks (a wrong default is a bug, found at start-up by tests).
  try {
    nlohmann::json given = nlohmann::json::object();
    for (const auto& o : d.options)
      if (o.required)
        given[o.name] = o.type == OptionType::Integer || o.type == OptionType::Real ? nlohmann::json(o.min.value_or(0))
                        : o.type == OptionType::Flag                                ? nlohmann::json(false)
                        : o.type == OptionType::Choice                              ? nlohmann::json(o.choices.front())
                        : o.type == OptionType::Indices                             ? nlohmann::json::array({0})
                        : o.type == OptionType::Texts                               ? nlohmann::json::array({"x"})
                                                                                    : nlohmann::json("x");
    resolve_options(d, given, Surface::Python);
  } catch (const UsageError& e) {
    throw std::logic_error(std::string("analysis registry: a default fails its own declaration: ") + e.what());
  }
  items_.push_back(std::move(a));
}

std::string AnalysisRequest::spelled(const std::string& name) const {
  const OptionDecl* o = decl ? decl->find(name) : nullptr;
  return o ? spelling(*o, surface) : name;
}

std::vector<const OptionDecl*> served_options() {
  std::vector<const OptionDecl*> out;
  for (const auto& a : analysis_registry().all())
    for (const auto& o : a.decl.options)
      if (o.server && std::none_of(out.begin(), out.end(), [&](const OptionDecl* s) { return s->name == o.name; }))
        out.push_back(&o);
  return out;
}

const DeclaredAnalysis* AnalysisRegistry::find(const std::string& name) const {
  for (const auto& a : items_)
    if (a.decl.name == name) return &a;
  return nullptr;
}

const AnalysisRegistry& analysis_registry() {
  static const AnalysisRegistry r = [] {
    AnalysisRegistry reg;
    detail::register_builtin_analyses(reg);
    return reg;
  }();
  return r;
}

const DeclaredAnalysis& find_analysis(const std::string& name) {
  const auto& reg = analysis_registry();
  if (const auto* a = reg.find(name)) return *a;
  std::string known;
  for (const auto& a : reg.all()) known += (known.empty() ? "" : ", ") + a.decl.name;
  std::string shown = name.size() > 60 ? name.substr(0, 57) + "..." : name;
  throw UsageError("no analysis named '" + shown + "' (known: " + known + ")");
}

Result run_analysis(const DeclaredAnalysis& a, const Model& m, const Tokenizer* tok, const nlohmann::json& given, Surface surface,
                    std::function<void(int64_t, int64_t)> progress, const std::atomic<bool>* cancel,
                    const AnalysisInputs* inputs) {
  const nlohmann::json options = resolve_options(a.decl, given, surface);
  // Analyses that read weights without a forward pass (heads, neurons, spectrum) ask too.
  MappedFile::check_all_unchanged();
  AnalysisRequest q{m, tok, options, std::move(progress), cancel, surface, &a.decl, inputs};
  return a.run(q);
}

nlohmann::json analyses_schema() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : analysis_registry().all()) out.push_back(option_schema(a.decl));
  return out;
}

MemoryEstimate model_memory(const Model& m) {
  // The forward's estimate of a one-token pass, its (tiny) block phase left out.
  MemoryEstimate e = estimate_forward_memory(m, 1, 1, CacheSpec::none(), false);
  e.phases.clear();
  return e;
}

AnalysisEstimate estimate_analysis(const DeclaredAnalysis& a, const Model& m, const Tokenizer* tok, const nlohmann::json& given,
                                   Surface surface, const AnalysisInputs* inputs) {
  const nlohmann::json options = resolve_options(a.decl, given, surface);
  AnalysisRequest q{m, tok, options, {}, nullptr, surface, &a.decl, inputs};
  if (a.estimate) return a.estimate(q);
  AnalysisEstimate e;
  e.memory = model_memory(m);
  e.what = a.decl.name + " on " + m.source();
  return e;
}

}  // namespace vocablens
