// An attribution graph (kind "graph", vocablens/graph.hpp) in the report and notebook: rendered generically
// (summary with the scores and logits, the kept nodes' table with their vocabulary labels, the arrays); the
// Neuronpedia graph JSON beside it is what a graph viewer reads.
// Its entry in the registry of result kinds (vocablens/result_kinds.hpp): title, order, array shapes.
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {

void register_graph_report(ResultKinds& k) {
  k.add({"graph",
         "Attribution graph",
         17,
         "Attribution graph",
         nullptr,
         "",
         nullptr,
         {{"ids", "T"},
          {"nodes", "M"},
          {"adjacency", "M M"},
          {"node_influence", "N"},
          {"active_features", "A 3"},
          {"activations", "A"},
          {"selected", "F"},
          {"full_adjacency", "N N"}}});
}

}  // namespace vocablens::kinds
