// Nearest neighbours in the report and notebook: the generic rendering (the neighbours table).
// Its entry in the registry of result kinds (vocablens/result_kinds.hpp): title, order, report figures, notebook cell.
#include "notebooks-export/report_examples.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

// A synthetic result shaped like the analysis's own (for `vocablens report --example`).
Result neighbours_example(const ExampleInput&) {
  Result r;
  r.kind = "neighbours";
  r.settings = {{"query", " Paris - France + \"<script>\""}, {"k", 8}, {"space", "embedding"}, {"matrix", "W_E"}};
  r.provenance = example_provenance("vocablens neighbours fixtures/gpt2-tiny --query ' Paris' --out run");
  Table t{"neighbours", {"rank", "token_id", "token", "cosine"}, {}};
  for (int64_t k = 0; k < 8; ++k)
    t.rows.push_back(
        {k + 1, k * 11, kExampleVocab[static_cast<size_t>(k * 3) % kExampleVocab.size()], 0.9 - 0.07 * static_cast<double>(k)});
  r.tables.push_back(std::move(t));
  r.summary = {{"query", " Paris - France + \"<script>\""},
               {"space", "embedding"},
               {"matrix", "W_E"},
               {"terms", {{{"sign", "+"}, {"token", " Paris"}}, {{"sign", "-"}, {"token", " France"}}}}};
  return r;
}

}  // namespace

void register_neighbours_report(ResultKinds& k) {
  k.add({"neighbours", "Nearest neighbours", 8, "Nearest neighbours", nullptr, "", neighbours_example, {{"query_vector", "D"}}});
}

}  // namespace vocablens::kinds
