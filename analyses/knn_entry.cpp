// `knn`: its options, declared once, and the call every surface makes (vocablens/analysis_registry.hpp).
#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "declared_options.hpp"
#include "vocablens/knn.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

KnnOptions knn_options(const nlohmann::json& o) {
  KnnOptions ko;
  ko.k = o.at("k").get<int64_t>();
  ko.block = o.at("block").get<int64_t>();
  return ko;
}

void register_knn_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "knn";
  d.summary = "Exact k-nearest-neighbour graph (cosine) of every token's embedding; save it with --out DIR";
  d.options = {
      {"k", OptionType::Integer, 10, "Neighbours per token", 1, 1e6},
      OptionDecl{"space", OptionType::Choice, "E", "E (embedding rows) or E+ (rows of pinv(W_E)^T)"}.with_choices(
          {"E", "E+", "embedding", "pinv"}),
      OptionDecl{"matrix", OptionType::Choice, "W_E", "W_E or W_U"}.with_choices({"W_E", "W_U"}),
      {"block", OptionType::Integer, 2048, "Rows per GEMM block", 16, 1e9},
      {"edges", OptionType::Flag, false, "Also every edge as a table (V·k rows)"},
  };
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           const auto& o = q.options;
           KnnOptions ko = knn_options(o);
           ko.progress = q.progress;
           const VectorSpace space = vector_space_from_string(o.at("space").get<std::string>());
           const std::string matrix = o.at("matrix").get<std::string>();
           auto g = knn_graph(space_vectors(q.model, space, matrix), ko);
           g.matrix = matrix;
           g.space = to_string(space);
           return g.to_result(q.tok, o.at("edges").get<bool>());
         },
         // The vectors [V, d] and their normalised copy, one block of similarities [block, V]. The graph itself
         // (V x k) is not counted: knn_graph refuses one too large with its own message.
         [](const AnalysisRequest& q) {
           const auto& cf = q.model.config();
           const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
           const double block = static_cast<double>(knn_options(q.options).block);
           return entry::weights_phase_estimate(
               q,
               std::string("knn: the vectors, their normalised copy, one block of similarities") +
                   (entry::space_vectors_bytes(q) > 0 ? "; E+ and its SVD" : ""),
               (2 * V * d + block * V) * 4 + entry::space_vectors_bytes(q), "the k-NN graph of " + q.model.source(),
               q.spelled("block") + " (fewer rows per block)");
         }});
}

}  // namespace vocablens::entries
