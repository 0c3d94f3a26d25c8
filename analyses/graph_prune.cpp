// circuit-tracer's pruning and scores of an attribution graph (vocablens/graph.hpp), in float64.
#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "vocablens/error.hpp"
#include "vocablens/graph.hpp"

namespace vocablens {

namespace graph_prune_detail {

// |rows| with each row divided by its sum (rows summing to 0 stay 0).
at::Tensor normalised(const at::Tensor& a) {
  at::Tensor n = a.abs().to(at::kDouble);
  return n.div_(n.sum(1, true).clamp_min(1e-10));
}

// The node of each row of g.rows.
at::Tensor row_nodes(const AttributionGraph& g) {
  return at::cat({at::arange(g.n_selected(), at::kLong), at::arange(g.n_sources(), g.n_nodes(), at::kLong)});
}

// w A + w A² + ... over the full node order, A given by its rows (those of the nodes `rn`; every other row
// is zero): the graph is acyclic, so the powers reach zero.
at::Tensor influence(const at::Tensor& rows, const at::Tensor& rn, const at::Tensor& w) {
  const int64_t N = w.size(0), S = rows.size(1);
  auto step = [&](const at::Tensor& v) {
    at::Tensor next = at::zeros({N}, at::kDouble);
    next.slice(0, 0, S).copy_(at::matmul(v.index_select(0, rn), rows));
    return next;
  };
  at::Tensor cur = step(w);
  at::Tensor total = cur.clone();
  for (int it = 0; cur.ne(0).any().item<bool>(); ++it) {
    if (it >= 1000) throw Error("graph: influence did not converge in 1000 steps (is the adjacency acyclic?)");
    cur = step(cur);
    total += cur;
  }
  return total;
}

at::Tensor logit_weights(const AttributionGraph& g) {
  at::Tensor w = at::zeros({g.n_nodes()}, at::kDouble);
  w.slice(0, g.n_nodes() - g.n_logits()).copy_(g.logit_probs.to(at::kDouble));
  return w;
}

// The score below which the smallest set of largest scores carrying `fraction` of their sum stops. Scores
// are >= 0; the zeros (most of a [N, N] adjacency's entries, which `rows` does not hold) sort last, so only
// the nonzero ones are sorted, and a cut that falls among the zeros is 0.
double threshold_of(const at::Tensor& scores, double fraction) {
  const at::Tensor flat = scores.contiguous().view(-1);
  const double* p = flat.data_ptr<double>();
  std::vector<double> s;
  for (int64_t i = 0; i < flat.size(0); ++i)
    if (p[i] != 0) s.push_back(p[i]);
  if (s.empty()) return 0.0;
  std::sort(s.begin(), s.end(), std::greater<double>());
  const double total = std::accumulate(s.begin(), s.end(), 0.0);
  // searchsorted (left): the first index whose cumulative share is >= fraction
  double cum = 0;
  for (double v : s) {
    cum += v;
    if (cum / total >= fraction) return v;
  }
  return 0.0;
}

}  // namespace graph_prune_detail

at::Tensor AttributionGraph::dense_adjacency() const {
  const int64_t N = n_nodes(), F = n_selected(), S = n_sources(), K = n_logits();
  at::Tensor adj = at::zeros({N, N}, at::kFloat);
  adj.slice(0, 0, F).slice(1, 0, S).copy_(rows.slice(0, 0, F));
  adj.slice(0, N - K).slice(1, 0, S).copy_(rows.slice(0, F));
  return adj;
}

at::Tensor AttributionGraph::between(const at::Tensor& m, const at::Tensor& nodes) const {
  const int64_t M = nodes.size(0), F = n_selected(), S = n_sources();
  std::vector<int64_t> dst, row, src, col;
  auto nd = nodes.accessor<int64_t, 1>();
  for (int64_t i = 0; i < M; ++i) {
    const int64_t n = nd[i];
    if (n < F || n >= S) {
      dst.push_back(i);
      row.push_back(n < F ? n : F + (n - S));
    }
    if (n < S) {
      src.push_back(i);
      col.push_back(n);
    }
  }
  at::Tensor out = at::zeros({M, M}, m.options());
  if (dst.empty() || src.empty()) return out;
  at::Tensor sub = m.index_select(0, at::tensor(row, at::kLong)).index_select(1, at::tensor(col, at::kLong));
  out.index_put_({at::tensor(dst, at::kLong).unsqueeze(1), at::tensor(src, at::kLong).unsqueeze(0)}, sub);
  return out;
}

GraphPruning prune_graph(const AttributionGraph& g, double node_threshold, double edge_threshold) {
  using namespace graph_prune_detail;
  if (!(node_threshold >= 0 && node_threshold <= 1))
    throw UsageError(fmt::format("graph: node_threshold must be in [0, 1] (got {})", node_threshold));
  if (!(edge_threshold >= 0 && edge_threshold <= 1))
    throw UsageError(fmt::format("graph: edge_threshold must be in [0, 1] (got {})", edge_threshold));
  const int64_t F = g.n_selected(), S = g.n_sources(), keep_from = g.n_nodes() - g.n_logits() - g.n_pos;
  const at::Tensor w = logit_weights(g), rn = row_nodes(g);
  GraphPruning p;
  p.node_influence = influence(normalised(g.rows), rn, w);
  at::Tensor node_mask = p.node_influence.ge(threshold_of(p.node_influence, node_threshold));
  node_mask.slice(0, keep_from).fill_(true);

  // the node-pruned rows, normalised in place, then turned into edge scores in place
  at::Tensor A = g.rows.to(at::kDouble);
  A.mul_(node_mask.index_select(0, rn).to(at::kDouble).unsqueeze(1));
  A.mul_(node_mask.slice(0, 0, S).to(at::kDouble).unsqueeze(0));
  A.abs_().div_(A.sum(1, true).clamp_min(1e-10));
  A.mul_((influence(A, rn, w) + w).index_select(0, rn).unsqueeze(1));
  at::Tensor edge_mask = A.ge(threshold_of(A, edge_threshold));
  A = at::Tensor();

  // features and errors need an outgoing kept edge, features an incoming one, until nothing changes
  at::Tensor old = node_mask.clone();
  for (;;) {
    at::Tensor out_edge = at::zeros({g.n_nodes()}, at::kBool);
    out_edge.slice(0, 0, S).copy_(edge_mask.any(0));
    node_mask.slice(0, 0, keep_from).logical_and_(out_edge.slice(0, 0, keep_from));
    node_mask.slice(0, 0, F).logical_and_(edge_mask.slice(0, 0, F).any(1));
    if (at::equal(node_mask, old)) break;
    old.copy_(node_mask);
    edge_mask.logical_and_(node_mask.index_select(0, rn).unsqueeze(1));
    edge_mask.logical_and_(node_mask.slice(0, 0, S).unsqueeze(0));
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
  const at::Tensor w = logit_weights(g), rn = row_nodes(g);
  const at::Tensor A = normalised(g.rows);
  const at::Tensor inf = influence(A, rn, w);
  const double tok = inf.slice(0, e1, t1).sum().item<double>(), err = inf.slice(0, e0, e1).sum().item<double>();
  GraphScores s;
  s.replacement = tok + err > 0 ? tok / (tok + err) : 0.0;
  // nodes without a row (errors, tokens) take nothing from errors
  at::Tensor non_error = at::ones({g.n_nodes()}, at::kDouble);
  non_error.index_put_({rn}, 1 - A.slice(1, e0, e1).sum(1));
  at::Tensor out = inf + w;
  s.completeness = (non_error * out).sum().item<double>() / out.sum().item<double>();
  return s;
}

}  // namespace vocablens
