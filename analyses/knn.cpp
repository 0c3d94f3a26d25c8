// The exact k-NN graph of a vocabulary by cosine (see include/vocablens/knn.hpp).
#include "token_label.hpp"
#include "vocablens/knn.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "vocablens/error.hpp"
#include "vocablens/linalg/cosine.hpp"
#include "vocablens/tokenizer.hpp"
#include "util/parallel.hpp"

namespace vocablens {

namespace {

// Bound on |float32 cosine of the normalised rows − exact cosine| (see the header), doubled: the candidate
// window below the k-th best float32 score.
double candidate_margin(int64_t d) {
  const double u = std::ldexp(1.0, -24);
  const double du = static_cast<double>(d) * u;
  const double gamma = du / (1.0 - du);
  const double delta = gamma * (1 + u) * (1 + u) + 2 * u + u * u + 1e-12;
  return 2.0 * delta;
}

// Per-row lists of the best `cap` float32 candidates, value descending.
struct CandidateLists {
  int64_t cap = 0;
  std::vector<float> val;
  std::vector<int64_t> idx;
  std::vector<int32_t> count;
  CandidateLists(int64_t rows, int64_t cap_)
      : cap(cap_),
        val(static_cast<size_t>(rows * cap_)),
        idx(static_cast<size_t>(rows * cap_)),
        count(static_cast<size_t>(rows), 0) {}
  float threshold(int64_t r) const {
    return count[static_cast<size_t>(r)] < cap ? -std::numeric_limits<float>::infinity()
                                               : val[static_cast<size_t>(r * cap + cap - 1)];
  }
  // Precondition: v > threshold(r).
  void insert(int64_t r, float v, int64_t j) {
    float* vv = &val[static_cast<size_t>(r * cap)];
    int64_t* ii = &idx[static_cast<size_t>(r * cap)];
    int32_t& c = count[static_cast<size_t>(r)];
    int64_t pos;
    if (c < cap) pos = c++;
    else pos = cap - 1;
    while (pos > 0 && vv[pos - 1] < v) {
      vv[pos] = vv[pos - 1];
      ii[pos] = ii[pos - 1];
      --pos;
    }
    vv[pos] = v;
    ii[pos] = j;
  }
  // Lists col0 + a .. col0 + b - 1 take columns a..b-1 of the row-major [rows, width] block `s`, row r being
  // global index row0 + r, rows in order: for each list the same sequence of inserts as scan() over the
  // transposed block (no index is skipped: the block is off the diagonal).
  void scan_columns(const float* s, int64_t rows, int64_t width, int64_t a, int64_t b, int64_t col0, int64_t row0) {
    std::vector<float> thr(static_cast<size_t>(b - a));
    for (int64_t c = a; c < b; ++c) thr[static_cast<size_t>(c - a)] = threshold(col0 + c);
    constexpr int64_t W = 16;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = s + r * width;
      int64_t c = a;
      for (; c + W <= b; c += W) {
        bool any = false;
        for (int64_t t = 0; t < W; ++t) any |= row[c + t] > thr[static_cast<size_t>(c + t - a)];
        if (!any) continue;
        for (int64_t t = 0; t < W; ++t) {
          const size_t e = static_cast<size_t>(c + t - a);
          if (row[c + t] > thr[e]) {
            insert(col0 + c + t, row[c + t], row0 + r);
            thr[e] = threshold(col0 + c + t);
          }
        }
      }
      for (; c < b; ++c) {
        const size_t e = static_cast<size_t>(c - a);
        if (row[c] > thr[e]) {
          insert(col0 + c, row[c], row0 + r);
          thr[e] = threshold(col0 + c);
        }
      }
    }
  }
  // Scans `len` scores of list r's row; column c is global index col0 + c; `skip` is never inserted.
  void scan(int64_t r, const float* s, int64_t len, int64_t col0, int64_t skip) {
    float thr = threshold(r);
    constexpr int64_t W = 16;
    int64_t c = 0;
    for (; c + W <= len; c += W) {
      float mx = s[c];
      for (int64_t t = 1; t < W; ++t) mx = s[c + t] > mx ? s[c + t] : mx;
      if (!(mx > thr)) continue;
      for (int64_t t = 0; t < W; ++t) {
        float v = s[c + t];
        if (v > thr && col0 + c + t != skip) {
          insert(r, v, col0 + c + t);
          thr = threshold(r);
        }
      }
    }
    for (; c < len; ++c) {
      float v = s[c];
      if (v > thr && col0 + c != skip) {
        insert(r, v, col0 + c);
        thr = threshold(r);
      }
    }
  }
};

// Turns candidate lists into exact top-k lists (float64 re-scoring, fallback for crowded rows).
void finalise(KnnGraph& g, const CandidateLists& L, const at::Tensor& X, const std::vector<double>& norms) {
  const int64_t q = static_cast<int64_t>(g.rows.size()), k = g.k, d = X.size(1), n = X.size(0);
  const float* x = X.data_ptr<float>();
  g.indices.assign(static_cast<size_t>(q * k), -1);
  g.scores.assign(static_cast<size_t>(q * k), 0.0);
  std::vector<int64_t> rescored(static_cast<size_t>(q), 0);
  std::vector<char> fell_back(static_cast<size_t>(q), 0);
  detail::parallel_for(0, q, 64, [&](int64_t a, int64_t b) {
    std::vector<std::pair<double, int64_t>> cand;
    for (int64_t r = a; r < b; ++r) {
      const int64_t qi = g.rows[static_cast<size_t>(r)];
      const float* vv = &L.val[static_cast<size_t>(r * L.cap)];
      const int64_t* ii = &L.idx[static_cast<size_t>(r * L.cap)];
      const int64_t c = L.count[static_cast<size_t>(r)];
      cand.clear();
      const double T = vv[k - 1];
      const double lo = T - g.margin;
      if (c == L.cap && static_cast<double>(vv[L.cap - 1]) >= lo) {
        // More near-ties than the list holds: exact scan of the whole row.
        fell_back[static_cast<size_t>(r)] = 1;
        cand.reserve(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j)
          if (j != qi)
            cand.emplace_back(
                cos_from(dot64(x + qi * d, x + j * d, d), norms[static_cast<size_t>(qi)], norms[static_cast<size_t>(j)]), j);
      } else {
        for (int64_t t = 0; t < c && static_cast<double>(vv[t]) >= lo; ++t) {
          int64_t j = ii[t];
          cand.emplace_back(
              cos_from(dot64(x + qi * d, x + j * d, d), norms[static_cast<size_t>(qi)], norms[static_cast<size_t>(j)]), j);
        }
      }
      rescored[static_cast<size_t>(r)] = static_cast<int64_t>(cand.size());
      const size_t kk = std::min(static_cast<size_t>(k), cand.size());
      std::partial_sort(
          cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(kk), cand.end(),
          [](const auto& A, const auto& B) { return A.first > B.first || (A.first == B.first && A.second < B.second); });
      for (size_t t = 0; t < kk; ++t) {
        g.indices[static_cast<size_t>(r * k) + t] = cand[t].second;
        g.scores[static_cast<size_t>(r * k) + t] = cand[t].first;
      }
    }
  });
  g.rescored = std::accumulate(rescored.begin(), rescored.end(), int64_t{0});
  g.fallback_rows = std::count(fell_back.begin(), fell_back.end(), 1);
}

// `knn --k 100000` ran until out of memory (k was clamped to n - 1 = V - 1, then n x k kept).
void check_knn_size(int64_t rows, int64_t n, int64_t k) {
  if (k > n - 1)
    throw UsageError("k " + std::to_string(k) + " is larger than the number of other rows (" + std::to_string(n - 1) + ")");
  const double gb = static_cast<double>(rows) * static_cast<double>(2 * k + 16) * 28.0 / 1e9;
  if (gb > 8.0)
    throw UsageError(
        fmt::format("k {} over {} rows would need about {:.0f} GB of memory (more than 8 GB); use a smaller k", k, rows, gb));
}

}  // namespace

KnnGraph knn_graph(const at::Tensor& X0, const KnnOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  at::Tensor X = as_rows_f32(X0, "knn_graph");
  const int64_t n = X.size(0), d = X.size(1);
  if (opts.k < 1) throw UsageError("k must be at least 1");
  if (n < 2) throw UsageError("knn_graph: need at least 2 rows");
  check_knn_size(n, n, opts.k);
  KnnGraph g;
  g.n = n;
  g.dim = d;
  g.k = std::min<int64_t>(opts.k, n - 1);
  g.rows.resize(static_cast<size_t>(n));
  std::iota(g.rows.begin(), g.rows.end(), 0);
  g.margin = candidate_margin(d);
  const int64_t cap = std::min<int64_t>(n - 1, g.k + (opts.slack > 0 ? opts.slack : g.k + 16));
  const int64_t B = std::max<int64_t>(opts.block, 16);
  std::vector<double> norms = row_norms64(X);
  at::Tensor U = unit_rows(X, norms);
  CandidateLists L(n, cap);
  // Progress in units of block pairs (the work is a triangle of them), reported as rows.
  const int64_t nb = (n + B - 1) / B, pairs = nb * (nb + 1) / 2;
  int64_t pairs_done = 0;
  for (int64_t i0 = 0; i0 < n; i0 += B) {
    const int64_t bi = std::min(B, n - i0);
    at::Tensor A = U.narrow(0, i0, bi);
    if (opts.progress) opts.progress(n * pairs_done / pairs, n);
    pairs_done += nb - i0 / B;
    for (int64_t j0 = i0; j0 < n; j0 += B) {
      const int64_t bj = std::min(B, n - j0);
      at::Tensor S = at::mm(A, U.narrow(0, j0, bj).t()).contiguous();  // [bi, bj]
      const float* s = S.data_ptr<float>();
      detail::parallel_for(0, bi, 16, [&](int64_t a, int64_t b) {
        for (int64_t r = a; r < b; ++r) L.scan(i0 + r, s + r * bj, bj, j0, i0 + r);
      });
      if (j0 != i0) {
        // The same block read by columns: list j0 + c takes column c, row by row, i.e. the candidates i0 + r in
        // the order a scan of the transposed block gives them (hence the same lists), without materialising
        // S^T (a strided copy of 16 MB per block pair: a fifth of the run).
        detail::parallel_for(0, bj, 64, [&](int64_t a, int64_t b) { L.scan_columns(s, bi, bj, a, b, j0, i0); });
      }
    }
  }
  finalise(g, L, X, norms);
  g.compute_statistics();
  if (opts.progress) opts.progress(n, n);
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return g;
}

KnnGraph knn_query(const at::Tensor& X0, const std::vector<int64_t>& rows, const KnnOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  at::Tensor X = as_rows_f32(X0, "knn_query");
  const int64_t n = X.size(0), d = X.size(1);
  if (opts.k < 1) throw UsageError("k must be at least 1");
  if (n < 2) throw UsageError("knn_query: need at least 2 rows");
  for (int64_t r : rows)
    if (r < 0 || r >= n) throw UsageError("knn_query: row " + std::to_string(r) + " out of range");
  check_knn_size(static_cast<int64_t>(rows.size()), n, opts.k);
  KnnGraph g;
  g.n = n;
  g.dim = d;
  g.k = std::min<int64_t>(opts.k, n - 1);
  g.rows = rows;
  g.margin = candidate_margin(d);
  const int64_t cap = std::min<int64_t>(n - 1, g.k + (opts.slack > 0 ? opts.slack : g.k + 16));
  const int64_t B = std::max<int64_t>(opts.block, 16);
  std::vector<double> norms = row_norms64(X);
  at::Tensor U = unit_rows(X, norms);
  const int64_t q = static_cast<int64_t>(rows.size());
  at::Tensor Q = U.index_select(0, at::tensor(rows, at::kLong)).contiguous();
  CandidateLists L(q, cap);
  for (int64_t i0 = 0; i0 < q; i0 += B) {
    const int64_t bi = std::min(B, q - i0);
    at::Tensor A = Q.narrow(0, i0, bi);
    for (int64_t j0 = 0; j0 < n; j0 += B) {
      const int64_t bj = std::min(B, n - j0);
      at::Tensor S = at::mm(A, U.narrow(0, j0, bj).t()).contiguous();
      const float* s = S.data_ptr<float>();
      detail::parallel_for(0, bi, 16, [&](int64_t a, int64_t b) {
        for (int64_t r = a; r < b; ++r) L.scan(i0 + r, s + r * bj, bj, j0, rows[static_cast<size_t>(i0 + r)]);
      });
    }
  }
  finalise(g, L, X, norms);
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return g;
}

void KnnGraph::compute_statistics() {
  in_degree.assign(static_cast<size_t>(n), 0);
  const int64_t q = static_cast<int64_t>(rows.size());
  for (int64_t v : indices)
    if (v >= 0) ++in_degree[static_cast<size_t>(v)];
  // Mutual edges: only meaningful when every row is a query in row order.
  if (q == n) {
    int64_t mutual = 0, edges = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t t = 0; t < k; ++t) {
        int64_t j = indices[static_cast<size_t>(i * k + t)];
        if (j < 0) continue;
        ++edges;
        const int64_t* lj = &indices[static_cast<size_t>(j * k)];
        if (std::find(lj, lj + k, i) != lj + k) ++mutual;
      }
    mutual_fraction = edges > 0 ? static_cast<double>(mutual) / static_cast<double>(edges) : 0.0;
  }
  double mean = 0, m2 = 0, m3 = 0;
  for (int64_t v : in_degree) mean += static_cast<double>(v);
  mean /= static_cast<double>(n);
  for (int64_t v : in_degree) {
    double dv = static_cast<double>(v) - mean;
    m2 += dv * dv;
    m3 += dv * dv * dv;
  }
  m2 /= static_cast<double>(n);
  m3 /= static_cast<double>(n);
  in_degree_skewness = m2 > 0 ? m3 / std::pow(m2, 1.5) : 0.0;
  anti_hubs = std::count(in_degree.begin(), in_degree.end(), 0);
}

Result KnnGraph::to_result(const Tokenizer* tok, bool edges) const {
  Result res;
  res.kind = "knn";
  res.settings = {{"k", k}, {"matrix", matrix}, {"space", space}};
  const int64_t q = static_cast<int64_t>(rows.size());
  double mean_first = 0, mean_kth = 0;
  for (int64_t r = 0; r < q; ++r) {
    mean_first += scores[static_cast<size_t>(r * k)];
    mean_kth += scores[static_cast<size_t>(r * k + k - 1)];
  }
  nlohmann::json s = {{"rows", n},
                      {"queries", q},
                      {"k", k},
                      {"dim", dim},
                      {"matrix", matrix},
                      {"space", space},
                      {"score", "cosine in float64; order cosine desc, id asc; self excluded"},
                      {"candidate_margin", margin},
                      {"rescored_candidates", rescored},
                      {"fallback_rows", fallback_rows},
                      {"seconds", seconds},
                      {"mean_top1_cosine", q > 0 ? mean_first / static_cast<double>(q) : 0.0},
                      {"mean_kth_cosine", q > 0 ? mean_kth / static_cast<double>(q) : 0.0}};
  std::vector<int64_t> order;
  if (!in_degree.empty()) {
    s["mutual_fraction"] = mutual_fraction;
    s["in_degree_skewness"] = in_degree_skewness;
    s["anti_hubs"] = anti_hubs;
    order.resize(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    const size_t top = std::min<size_t>(100, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(), [&](int64_t a, int64_t b) {
      return in_degree[static_cast<size_t>(a)] > in_degree[static_cast<size_t>(b)] ||
             (in_degree[static_cast<size_t>(a)] == in_degree[static_cast<size_t>(b)] && a < b);
    });
    order.resize(top);
    nlohmann::json hubs = nlohmann::json::array();
    Table ht{"hubs", {"rank", "token_id", "token", "in_degree"}, {}};
    for (size_t i = 0; i < order.size(); ++i) {
      int64_t id = order[i];
      if (i < 20)
        hubs.push_back({{"id", id}, {"token", token_label(tok, id)}, {"in_degree", in_degree[static_cast<size_t>(id)]}});
      ht.rows.push_back({i + 1, id, token_label(tok, id), in_degree[static_cast<size_t>(id)]});
    }
    s["top_hubs"] = hubs;
    res.tables.push_back(std::move(ht));
  }
  nlohmann::json sample = nlohmann::json::array();
  for (int64_t r = 0; r < std::min<int64_t>(q, 5); ++r) {
    nlohmann::json nb = nlohmann::json::array();
    for (int64_t t = 0; t < k; ++t) {
      int64_t j = indices[static_cast<size_t>(r * k + t)];
      nb.push_back({{"id", j}, {"token", token_label(tok, j)}, {"cosine", scores[static_cast<size_t>(r * k + t)]}});
    }
    int64_t src = rows[static_cast<size_t>(r)];
    sample.push_back({{"id", src}, {"token", token_label(tok, src)}, {"neighbours", nb}});
  }
  s["first_rows"] = sample;
  res.summary = s;

  res.arrays["indices"] = NdArray::i64({q, k}, indices.data());
  std::vector<float> sf(scores.begin(), scores.end());
  res.arrays["scores"] = NdArray::f32({q, k}, sf.data());
  if (q != n) res.arrays["rows"] = NdArray::i64({q}, rows.data());
  if (!in_degree.empty()) res.arrays["in_degree"] = NdArray::i64({n}, in_degree.data());
  if (edges) {
    Table et{"edges", {"source", "source_token", "rank", "target", "target_token", "cosine"}, {}};
    et.rows.reserve(static_cast<size_t>(q * k));
    for (int64_t r = 0; r < q; ++r) {
      int64_t src = rows[static_cast<size_t>(r)];
      std::string sname = token_label(tok, src);
      for (int64_t t = 0; t < k; ++t) {
        int64_t j = indices[static_cast<size_t>(r * k + t)];
        et.rows.push_back({src, sname, t + 1, j, token_label(tok, j), scores[static_cast<size_t>(r * k + t)]});
      }
    }
    res.tables.push_back(std::move(et));
  }
  return res;
}

}  // namespace vocablens
