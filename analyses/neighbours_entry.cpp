// `neighbours`: its options, declared once, and the call every surface makes (vocablens/analysis_registry.hpp).
#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

NeighbourOptions neighbour_options(const nlohmann::json& o) {
  NeighbourOptions no;
  no.k = o.at("k").get<int64_t>();
  no.compose = compose_from_string(o.at("compose").get<std::string>());
  no.normalise_terms = !o.at("raw").get<bool>();
  no.exclude_inputs = !o.at("include_inputs").get<bool>();
  no.prefix_space = o.at("prefix_space").get<bool>();
  return no;
}

Result neighbours_of_vectors(const at::Tensor& X, const Tokenizer* tok, const nlohmann::json& o) {
  auto n = neighbours(X, tok, o.at("query").get<std::string>(), neighbour_options(o));
  n.matrix = o.at("matrix").get<std::string>();
  n.space = to_string(vector_space_from_string(o.at("space").get<std::string>()));
  return n.to_result(tok);
}

void register_neighbours_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "neighbours";
  d.summary = "Nearest tokens by cosine to a token, word or expression (\"king - man + woman\") in E- or E+-space";
  d.options = {
      OptionDecl{"query", OptionType::Text, nullptr,
                 "A token, word or expression: \"king - man + woman\", \"#464\" (an id), \"2*cat - dog\""}
          .as_required()
          .as_positional("QUERY"),
      {"k", OptionType::Integer, 20, "Number of neighbours", 1, 1e6},
      OptionDecl{"space", OptionType::Choice, "E", "E (embedding rows) or E+ (rows of pinv(W_E)^T)"}.with_choices(
          {"E", "E+", "embedding", "pinv"}),
      OptionDecl{"matrix", OptionType::Choice, "W_E", "W_E or W_U (output token directions)"}.with_choices({"W_E", "W_U"}),
      OptionDecl{"compose", OptionType::Choice, "mean", "How a multi-token word combines its pieces (weighted: by byte length)"}
          .with_choices({"mean", "sum", "weighted"}),
      {"raw", OptionType::Flag, false, "Combine raw rows instead of unit-normalised ones"},
      {"include_inputs", OptionType::Flag, false, "Keep the query's own tokens in the list"},
      {"prefix_space", OptionType::Flag, false, "Look words up with a leading space (GPT-2 word-initial tokens)"},
  };
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           const auto& o = q.options;
           parse_expression(o.at("query").get<std::string>());  // a malformed query fails before any work
           const VectorSpace space = vector_space_from_string(o.at("space").get<std::string>());
           return neighbours_of_vectors(space_vectors(q.model, space, o.at("matrix").get<std::string>()), q.tok, o);
         },
         // The vectors [V, d] and their normalised copy, one row of similarities.
         [](const AnalysisRequest& q) {
           const auto& cf = q.model.config();
           const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
           return entry::weights_phase_estimate(
               q,
               std::string("neighbours: the vectors, their normalised copy, one row of similarities") +
                   (entry::space_vectors_bytes(q) > 0 ? "; E+ and its SVD" : ""),
               (2 * V * d + V) * 4 + entry::space_vectors_bytes(q),
               "the neighbours of '" + q.options.at("query").get<std::string>() + "' in " + q.model.source(),
               q.spelled("matrix") + " (a smaller matrix; nothing else reduces it)");
         }});
}

}  // namespace vocablens::entries
