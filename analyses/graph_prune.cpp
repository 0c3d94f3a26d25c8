// circuit-tracer's pruning and scores of an attribution graph (vocablens/graph.hpp), in float64.
#include <algorithm>

#include <fmt/format.h>

#include "vocablens/error.hpp"
#include "vocablens/graph.hpp"

namespace vocablens {

namespace graph_prune_detail {

// |A| with each row divided by its sum (rows summing to 0 stay 0).
at::Tensor normalised(const at::Tensor& a) {
  at::Tensor n = a.abs().to(at::kDouble);
  return n / n.sum(1, true).clamp_min(1e-10);
}

// w A + w A² + ...: the graph is acyclic, so the powers reach zero.
at::Tensor influence(const at::Tensor& A, const at::Tensor& w) {
  at::Tensor cur = at::matmul(w, A);
  at::Tensor total = cur.clone();
  for (int it = 0; cur.ne(0).any().item<bool>(); ++it) {
    if (it >= 1000) throw Error("graph: influence did not converge in 1000 steps (is the adjacency acyclic?)");
    cur = at::matmul(cur, A);
    total += cur;
  }
  return total;
}

at::Tensor logit_weights(const AttributionGraph& g) {
  at::Tensor w = at::zeros({g.n_nodes()}, at::kDouble);
  w.slice(0, g.n_nodes() - g.n_logits()).copy_(g.logit_probs.to(at::kDouble));
  return w;
}

// The score below which the smallest set of largest scores carrying `fraction` of their sum stops.
double threshold_of(const at::Tensor& scores, double fraction) {
  at::Tensor s = std::get<0>(at::sort(scores.flatten(), 0, /*descending=*/true));
  at::Tensor cum = at::cumsum(s, 0) / s.sum();
  // searchsorted (left): the first index whose cumulative share is >= fraction
  int64_t i = at::lt(cum, fraction).sum().item<int64_t>();
  i = std::min(i, s.size(0) - 1);
  return s[i].item<double>();
}

}  // namespace graph_prune_detail

GraphPruning prune_graph(const AttributionGraph& g, double node_threshold, double edge_threshold) {
  using namespace graph_prune_detail;
  if (!(node_threshold >= 0 && node_threshold <= 1))
    throw UsageError(fmt::format("graph: node_threshold must be in [0, 1] (got {})", node_threshold));
  if (!(edge_threshold >= 0 && edge_threshold <= 1))
    throw UsageError(fmt::format("graph: edge_threshold must be in [0, 1] (got {})", edge_threshold));
  const int64_t N = g.n_nodes(), F = g.n_selected(), keep_from = N - g.n_logits() - g.n_pos;
  const at::Tensor w = logit_weights(g);
  GraphPruning p;
  p.node_influence = influence(normalised(g.adjacency), w);
  at::Tensor node_mask = p.node_influence.ge(threshold_of(p.node_influence, node_threshold));
  node_mask.slice(0, keep_from).fill_(true);

  at::Tensor pruned = g.adjacency.to(at::kDouble).clone();
  pruned.index_put_({node_mask.logical_not()}, 0);
  pruned.index_put_({at::indexing::Slice(), node_mask.logical_not()}, 0);
  at::Tensor A = normalised(pruned);
  at::Tensor edge_scores = A * (influence(A, w) + w).unsqueeze(1);
  at::Tensor edge_mask = edge_scores.ge(threshold_of(edge_scores, edge_threshold));

  // features and errors need an outgoing kept edge, features an incoming one, until nothing changes
  at::Tensor old = node_mask.clone();
  for (;;) {
    node_mask.slice(0, 0, keep_from).logical_and_(edge_mask.slice(1, 0, keep_from).any(0));
    node_mask.slice(0, 0, F).logical_and_(edge_mask.slice(0, 0, F).any(1));
    if (at::equal(node_mask, old)) break;
    old.copy_(node_mask);
    edge_mask.index_put_({node_mask.logical_not()}, false);
    edge_mask.index_put_({at::indexing::Slice(), node_mask.logical_not()}, false);
  }
  p.node_mask = node_mask;
  p.edge_mask = edge_mask;

  auto sorted = at::sort(p.node_influence, 0, /*descending=*/true);
  at::Tensor cum = at::cumsum(std::get<0>(sorted), 0) / std::get<0>(sorted).sum();
  p.cumulative_scores = at::zeros_like(p.node_influence);
  p.cumulative_scores.index_put_({std::get<1>(sorted)}, cum);
  return p;
}

GraphScores graph_scores(const AttributionGraph& g) {
  using namespace graph_prune_detail;
  const int64_t F = g.n_selected(), e0 = F, e1 = F + g.n_layers * g.n_pos, t1 = e1 + g.n_pos;
  const at::Tensor w = logit_weights(g);
  const at::Tensor A = normalised(g.adjacency);
  const at::Tensor inf = influence(A, w);
  const double tok = inf.slice(0, e1, t1).sum().item<double>(), err = inf.slice(0, e0, e1).sum().item<double>();
  GraphScores s;
  s.replacement = tok + err > 0 ? tok / (tok + err) : 0.0;
  at::Tensor non_error = 1 - A.slice(1, e0, e1).sum(1);
  at::Tensor out = inf + w;
  s.completeness = (non_error * out).sum().item<double>() / out.sum().item<double>();
  return s;
}

}  // namespace vocablens
