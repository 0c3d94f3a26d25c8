// Cosine neighbourhoods of single tokens / words / expressions. See include/vocablens/neighbours.hpp. The
// query grammar ("king - man + woman") and the resolution of its terms to tokens are in neighbour_query.cpp;
// the k-NN graph of the whole vocabulary is knn.cpp.
#include "token_label.hpp"
#include "vocablens/neighbours.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "vocablens/error.hpp"
#include "vocablens/linalg/cosine.hpp"
#include "vocablens/model.hpp"
#include "vocablens/spectrum.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/unembed.hpp"
#include "util/parallel.hpp"

namespace vocablens {

namespace {}  // namespace

// ---- vectors -----------------------------------------------------------------------------------------

at::Tensor pseudo_inverse_rows(const at::Tensor& E0) {
  at::Tensor E = as_rows_f32(E0, "pseudo_inverse_rows");
  PinvOptions po;
  po.use_cache = false;
  return pseudo_inverse(E, po).pinv.t().contiguous();
}

at::Tensor space_vectors(const Model& m, VectorSpace space, const std::string& matrix) {
  std::string kind;
  at::Tensor X = model_matrix(m, matrix, &kind);
  if (kind != "token") throw UsageError("neighbours need a matrix whose rows are tokens (W_E or W_U), not " + matrix);
  if (space == VectorSpace::Embedding) return X.to(at::kFloat).contiguous();
  // E⁺ of the model's E = W_Uᵀ comes from the shared, cached pseudo-inverse (vocablens/unembed.hpp); that
  // is also W_E's when the embeddings are tied.
  if (matrix == "W_U" || matrix == "U" || m.config().tied_embeddings) return embedding_pinv(m).pinv.t().contiguous();
  return pseudo_inverse(X.to(at::kFloat).contiguous()).pinv.t().contiguous();
}

std::vector<Neighbour> nearest_to_vector(const at::Tensor& X0, const std::vector<double>& q, int64_t k,
                                         const std::vector<int64_t>& exclude) {
  at::Tensor X = as_rows_f32(X0, "nearest_to_vector");
  const int64_t n = X.size(0), d = X.size(1);
  if (static_cast<int64_t>(q.size()) != d) throw UsageError("query vector has the wrong dimension");
  if (k < 1) throw UsageError("k must be at least 1");
  double qn = 0;
  {
    // Same accumulation as dot64, so a query that is a row's exact copy has that row's norm.
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= d; i += 4) {
      s0 += q[static_cast<size_t>(i)] * q[static_cast<size_t>(i)];
      s1 += q[static_cast<size_t>(i + 1)] * q[static_cast<size_t>(i + 1)];
      s2 += q[static_cast<size_t>(i + 2)] * q[static_cast<size_t>(i + 2)];
      s3 += q[static_cast<size_t>(i + 3)] * q[static_cast<size_t>(i + 3)];
    }
    for (; i < d; ++i) s0 += q[static_cast<size_t>(i)] * q[static_cast<size_t>(i)];
    qn = std::sqrt((s0 + s1) + (s2 + s3));
  }
  std::vector<double> score(static_cast<size_t>(n));
  const float* x = X.data_ptr<float>();
  detail::parallel_for(0, n, 1024, [&](int64_t a, int64_t b) {
    for (int64_t j = a; j < b; ++j) {
      const float* r = x + j * d;
      score[static_cast<size_t>(j)] = cos_from(dot_acc(q.data(), r, d), qn, std::sqrt(dot64(r, r, d)));
    }
  });
  std::vector<char> skip(static_cast<size_t>(n), 0);
  for (int64_t e : exclude)
    if (e >= 0 && e < n) skip[static_cast<size_t>(e)] = 1;
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    if (!skip[static_cast<size_t>(j)]) idx.push_back(j);
  const size_t kk = std::min(static_cast<size_t>(k), idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(kk), idx.end(), [&](int64_t a, int64_t b) {
    double sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
    return sa > sb || (sa == sb && a < b);
  });
  std::vector<Neighbour> out;
  for (size_t t = 0; t < kk; ++t) out.push_back({idx[t], score[static_cast<size_t>(idx[t])]});
  return out;
}

NeighbourResult neighbours(const at::Tensor& X0, const Tokenizer* tok, const std::string& expr, const NeighbourOptions& opts) {
  at::Tensor X = as_rows_f32(X0, "neighbours");
  if (opts.k < 1) throw UsageError("k must be at least 1");
  const int64_t n = X.size(0), d = X.size(1);
  NeighbourResult r;
  r.query = expr;
  r.options = opts;
  r.terms = resolve_terms(parse_expression(expr), tok, n, opts);
  const float* x = X.data_ptr<float>();
  std::vector<double> q(static_cast<size_t>(d), 0.0);
  if (r.terms.size() == 1 && r.terms[0].pieces.size() == 1 && r.terms[0].term.weight > 0) {
    // A single token: its own row, so the scores equal cosine64 / the k-NN graph bit for bit.
    const float* row = x + r.terms[0].pieces[0] * d;
    for (int64_t c = 0; c < d; ++c) q[static_cast<size_t>(c)] = static_cast<double>(row[c]);
  } else {
    for (const auto& t : r.terms) {
      for (size_t i = 0; i < t.pieces.size(); ++i) {
        const float* row = x + t.pieces[i] * d;
        double scale = t.term.weight * t.piece_weights[i];
        if (opts.normalise_terms) {
          double nr = std::sqrt(dot64(row, row, d));
          scale = nr > 0 ? scale / nr : 0.0;
        }
        for (int64_t c = 0; c < d; ++c) q[static_cast<size_t>(c)] += scale * static_cast<double>(row[c]);
      }
    }
  }
  // "1e308*king + 1e308*queen" overflowed (|q|^2 = inf: every cosine 0, neighbours 0, 1, 2 ...).
  // Cosines do not depend on the query's length, so the query is scaled by its largest |entry| for scoring;
  // an entry that is itself beyond double's range is refused.
  double qmax = 0;
  for (double v : q) {
    if (!std::isfinite(v))
      throw UsageError("the query vector of '" + expr + "' overflows (an entry is " + (std::isnan(v) ? "nan" : "inf") +
                       "): the term weights are too large; neighbours depend only on their ratios");
    qmax = std::max(qmax, std::abs(v));
  }
  if (!(qmax > 0)) throw UsageError("the query vector of '" + expr + "' is zero");
  std::vector<double> q_scaled(q.size());
  for (size_t i = 0; i < q.size(); ++i) q_scaled[i] = q[i] / qmax;
  if (opts.exclude_inputs)
    for (const auto& t : r.terms)
      for (int64_t p : t.pieces)
        if (std::find(r.excluded.begin(), r.excluded.end(), p) == r.excluded.end()) r.excluded.push_back(p);
  r.query_vector = q;
  // A single-token query keeps its exact row (bit-for-bit equal to cosine64); others are scored scaled.
  r.neighbours = nearest_to_vector(X, qmax >= 1e-30 && qmax <= 1e30 ? q : q_scaled, opts.k, r.excluded);
  return r;
}

Result NeighbourResult::to_result(const Tokenizer* tok) const {
  Result res;
  res.kind = "neighbours";
  res.settings = {{"query", query},
                  {"k", options.k},
                  {"space", space},
                  {"matrix", matrix},
                  {"compose", to_string(options.compose)},
                  {"normalise_terms", options.normalise_terms},
                  {"exclude_inputs", options.exclude_inputs},
                  {"prefix_space", options.prefix_space}};
  nlohmann::json terms_j = nlohmann::json::array();
  for (const auto& t : terms) {
    nlohmann::json pieces = nlohmann::json::array();
    for (size_t i = 0; i < t.pieces.size(); ++i)
      pieces.push_back({{"id", t.pieces[i]}, {"token", token_label(tok, t.pieces[i])}, {"weight", t.piece_weights[i]}});
    nlohmann::json tj = {{"weight", t.term.weight}, {"pieces", pieces}, {"single_token", t.single_token}};
    if (t.term.id >= 0) tj["id"] = t.term.id;
    else tj["text"] = t.term.text;
    terms_j.push_back(tj);
  }
  nlohmann::json nb = nlohmann::json::array();
  Table table{"neighbours", {"rank", "token_id", "token", "cosine"}, {}};
  for (size_t i = 0; i < neighbours.size(); ++i) {
    const auto& x = neighbours[i];
    nb.push_back({{"rank", i + 1}, {"id", x.id}, {"token", token_label(tok, x.id)}, {"cosine", x.cosine}});
    table.rows.push_back({i + 1, x.id, token_label(tok, x.id), x.cosine});
  }
  res.summary = {{"query", query},   {"space", space},       {"matrix", matrix},
                 {"terms", terms_j}, {"excluded", excluded}, {"neighbours", nb}};
  res.tables.push_back(std::move(table));
  res.arrays["query_vector"] = NdArray::f64({static_cast<int64_t>(query_vector.size())}, query_vector.data());
  return res;
}

}  // namespace vocablens
