// MLP neurons in the report and notebook: the generic rendering (tables grouped by layer and neuron).
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
Result neurons_example(const ExampleInput&) {
  Result r;
  r.kind = "neurons";
  r.settings = {{"layer", 2}, {"neurons", "top 6 by norm"}, {"k", 5}};
  r.provenance = example_provenance("vocablens neurons fixtures/gpt2-tiny --layer 2 --out run");
  Table t{"top_k", {"layer", "neuron", "vector", "direction", "rank", "token_id", "token", "score"}, {}};
  Table nt{"norms", {"layer", "neuron", "key_norm", "gate_norm", "value_norm"}, {}};
  ExampleLcg rng{9};
  std::vector<double> vnorm;
  for (int64_t n : {3, 17, 42, 101, 200, 255}) {
    for (const char* vec : {"key", "value"})
      for (int64_t k = 0; k < 6; ++k) {
        size_t id = static_cast<size_t>((n + k * 5) % static_cast<int64_t>(kExampleVocab.size()));
        t.rows.push_back({2, n, vec, k < 3 ? "top" : "bottom", k % 3 + 1, static_cast<int64_t>(id), kExampleVocab[id],
                          (k < 3 ? 1 : -1) * (4.0 - k * 0.5 - rng.next())});
      }
    vnorm.push_back(1 + rng.next());
    nt.rows.push_back({2, n, 1 + rng.next(), nullptr, vnorm.back()});
  }
  r.tables.push_back(std::move(t));
  r.tables.push_back(std::move(nt));
  r.arrays["value_norms"] = NdArray::f64({static_cast<int64_t>(vnorm.size())}, vnorm.data());
  r.summary = {{"layer", 2}, {"d_mlp", 256}};
  return r;
}

}  // namespace

void register_neurons_report(ResultKinds& k) {
  k.add({"neurons",
         "MLP neurons in vocabulary space",
         5,
         "MLP neurons",
         nullptr,
         "",
         neurons_example,
         {{"neuron_ids", "N"}, {"key_norms", "N"}, {"gate_norms", "N"}, {"value_norms", "N"}}});
}

}  // namespace vocablens::kinds
