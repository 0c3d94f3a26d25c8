// The k-NN graph in the report and notebook: the generic rendering (hubs, in-degree).
// Its entry in the registry of result kinds (vocablens/result_kinds.hpp): title, order, report figures, notebook cell.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "notebooks-export/report_examples.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

// A synthetic result shaped like the analysis's own (for `vocablens report --example`).
Result knn_example(const ExampleInput&) {
  Result r;
  r.kind = "knn";
  r.settings = {{"k", 3}, {"matrix", "W_E"}, {"space", "embedding"}};
  r.provenance = example_provenance("vocablens knn fixtures/gpt2-tiny -k 3 --out run");
  Table e{"edges", {"source", "source_token", "rank", "target", "target_token", "cosine"}, {}};
  for (int64_t src = 0; src < 6; ++src)
    for (int64_t k = 0; k < 3; ++k)
      e.rows.push_back({src, kExampleVocab[static_cast<size_t>(src)], k + 1, (src + k + 1) % 24,
                        kExampleVocab[static_cast<size_t>((src + k + 1) % 24)], 0.8 - 0.1 * static_cast<double>(k)});
  Table h{"hubs", {"rank", "token_id", "token", "in_degree"}, {{1, 4, ",", 9}, {2, 0, " the", 7}}};
  r.tables.push_back(std::move(e));
  r.tables.push_back(std::move(h));
  std::vector<int64_t> idx(18);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i % 24);
  r.arrays["indices"] = NdArray::i64({6, 3}, idx.data());
  r.summary = {{"rows", 24}, {"k", 3}};
  return r;
}

}  // namespace

void register_knn_report(ResultKinds& k) {
  k.add({"knn",
         "Nearest-neighbour graph",
         9,
         "Nearest neighbours",
         nullptr,
         "",
         knn_example,
         {{"indices", "Q K"}, {"scores", "Q K"}, {"rows", "Q"}, {"in_degree", "N"}}});
}

}  // namespace vocablens::kinds
