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

// The length of a list option as resolved (an array), or `all` when not given (null: every layer, head, ...).
double list_length(const nlohmann::json& o, const char* name, double all) {
  return o.contains(name) && o.at(name).is_array() ? static_cast<double>(o.at(name).size()) : all;
}

}  // namespace

AnswerSize estimate_answer_size(const DeclaredAnalysis& a, const nlohmann::json& resolved, const Model& model,
                                const Tokenizer* tok) {
  const auto& cfg = model.config();
  const std::string& name = a.decl.name;
  AnswerSize s;
  const double k = integer_or(resolved, "top_k", integer_or(resolved, "k", 1));
  double positions = 1;
  if (resolved.contains("prompt") && !resolved.at("prompt").is_null()) {
    AnalysisRequest q{model, tok, resolved, {}, nullptr, Surface::Http, &a.decl};
    positions = static_cast<double>(entries::prompt_ids(q).size());
  }
  if (name == "heads") {
    const double layers = list_length(resolved, "layers", static_cast<double>(cfg.n_layers));
    const double heads = list_length(resolved, "heads", static_cast<double>(cfg.n_heads));
    const double kinds = resolved.value("kind", std::string("both")) == "both" ? 2 : 1;
    const double per_token = integer_or(resolved, "per_token_k", 0) > 0 ? integer_or(resolved, "per_token_k", 0) : k;
    const double tokens = list_length(resolved, "tokens", 0);
    s.values = 2 * (k + tokens * per_token) * layers * heads * kinds;  // a pair is two token ids
    s.how = tokens > 0 ? fmt::format("2 × (top_k {:.0f} + {:.0f} tokens × {:.0f})", k, tokens, per_token)
                       : fmt::format("2 × top_k {:.0f}", k);
    s.how += fmt::format(" × {:.0f} layers × {:.0f} heads × {:.0f} kinds", layers, heads, kinds);
    return s;
  }
  if (name == "lens") {
    const double layers = static_cast<double>(cfg.n_layers + 1) * (resolved.value("resid_mid", false) ? 2 : 1);
    s.values = k * positions * layers;
    s.how = fmt::format("top_k {:.0f} × {:.0f} positions × {:.0f} layers", k, positions, layers);
    return s;
  }
  s.values = k * positions;
  s.how = fmt::format("{} {:.0f} × {:.0f} positions", resolved.contains("top_k") ? "top_k" : "k", k, positions);
  for (const auto& o : a.decl.options) {
    if (o.type != OptionType::Indices || o.name == "allow") continue;  // an allow-list narrows, never widens
    const double n = list_length(resolved, o.name.c_str(), 1);
    if (n == 1) continue;
    s.values *= n;
    s.how += fmt::format(" × {:.0f} {}", n, o.name);
  }
  return s;
}

}  // namespace vocablens::serve
