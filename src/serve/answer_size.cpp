// Estimating an analysis's answer before it runs (see answer_size.hpp).
#include "serve/answer_size.hpp"

#include <fmt/format.h>

#include "vocablens/analysis_registry.hpp"
#include "analyses/declared_options.hpp"
#include "vocablens/model.hpp"

namespace vocablens::serve {
namespace {

double integer_or(const nlohmann::json& o, const char* name, double fallback) {
  return o.contains(name) && o.at(name).is_number() ? o.at(name).get<double>() : fallback;
}

// The length of a list option as resolved (an array), or 1 when not given.
double list_length(const nlohmann::json& o, const std::string& name) {
  return o.contains(name) && o.at(name).is_array() ? static_cast<double>(o.at(name).size()) : 1;
}

}  // namespace

AnswerSize estimate_answer_size(const DeclaredAnalysis& a, const nlohmann::json& resolved, const Model& model,
                                const Tokenizer* tok) {
  double positions = 1;
  if (resolved.contains("prompt") && !resolved.at("prompt").is_null()) {
    AnalysisRequest q{model, tok, resolved, {}, nullptr, Surface::Http, &a.decl};
    positions = static_cast<double>(entries::prompt_ids(q).size());
  }
  if (a.decl.answer_size) return a.decl.answer_size(resolved, model.config(), positions);
  // The generic rule: top_k (or k) entries per position, for each entry of every list option given.
  const double k = integer_or(resolved, "top_k", integer_or(resolved, "k", 1));
  AnswerSize s;
  s.values = k * positions;
  s.how = fmt::format("{} {:.0f} × {:.0f} positions", resolved.contains("top_k") ? "top_k" : "k", k, positions);
  for (const auto& o : a.decl.options) {
    if (o.type != OptionType::Indices || o.name == "allow") continue;  // an allow-list narrows, never widens
    const double n = list_length(resolved, o.name);
    if (n == 1) continue;
    s.values *= n;
    s.how += fmt::format(" × {:.0f} {}", n, o.name);
  }
  return s;
}

}  // namespace vocablens::serve
