// Two embedding spaces on their shared tokens: Procrustes, linear CKA, k-NN agreement, moved tokens, spectra.
#include "vocablens/compare_embeddings.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "vocablens/error.hpp"
#include "vocablens/knn.hpp"
#include "vocablens/linalg/cosine.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {

std::vector<std::pair<int64_t, int64_t>> shared_tokens(const Tokenizer& a, const Tokenizer& b) {
  std::unordered_map<std::string, int64_t> in_b;
  for (int64_t j = 0; j < b.vocab_size(); ++j) {
    if (b.is_special(j)) continue;
    std::string s = b.token_bytes(j);
    if (!s.empty()) in_b.emplace(std::move(s), j);  // emplace keeps the lowest id
  }
  std::vector<std::pair<int64_t, int64_t>> out;
  std::unordered_map<std::string, bool> seen_a;
  for (int64_t i = 0; i < a.vocab_size(); ++i) {
    if (a.is_special(i)) continue;
    std::string s = a.token_bytes(i);
    if (s.empty() || !seen_a.emplace(s, true).second) continue;
    auto it = in_b.find(s);
    if (it != in_b.end()) out.emplace_back(i, it->second);
  }
  return out;
}

namespace {

std::vector<double> to_vec(const at::Tensor& t) {
  at::Tensor c = t.contiguous().to(at::kDouble);
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

}  // namespace

CompareEmbeddingsResult compare_embeddings(const at::Tensor& E_a, const at::Tensor& E_b,
                                           const std::vector<std::pair<int64_t, int64_t>>& pairs,
                                           const CompareEmbeddingsOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  at::Tensor Fa = as_rows_f32(E_a, "compare-embeddings (A)");
  at::Tensor Fb = as_rows_f32(E_b, "compare-embeddings (B)");
  if (opts.k < 1) throw UsageError("compare-embeddings: k must be at least 1");
  CompareEmbeddingsResult r;
  r.rows_a = Fa.size(0);
  r.rows_b = Fb.size(0);
  r.dim_a = Fa.size(1);
  r.dim_b = Fb.size(1);
  r.shared = static_cast<int64_t>(pairs.size());
  const int64_t need = std::max(r.dim_a, r.dim_b);
  if (r.shared < need)
    throw UsageError(
        fmt::format("compare-embeddings: only {} tokens are shared by both vocabularies, fewer than "
                    "the dimension {} (the alignment would be under-determined)",
                    r.shared, need));
  for (const auto& [i, j] : pairs) {
    if (i < 0 || i >= r.rows_a || j < 0 || j >= r.rows_b)
      throw UsageError(fmt::format("compare-embeddings: pair ({}, {}) out of range [{}] x [{}]", i, j, r.rows_a, r.rows_b));
    r.ids_a.push_back(i);
    r.ids_b.push_back(j);
  }
  const int64_t n = r.shared;
  at::Tensor ia = at::from_blob(r.ids_a.data(), {n}, at::kLong).clone();
  at::Tensor ib = at::from_blob(r.ids_b.data(), {n}, at::kLong).clone();
  at::Tensor As = Fa.index_select(0, ia).contiguous();  // float32 [n, d_a]
  at::Tensor Bs = Fb.index_select(0, ib).contiguous();
  at::Tensor A = As.to(at::kDouble), B = Bs.to(at::kDouble);

  // Orthogonal Procrustes.
  at::Tensor M = at::matmul(A.t(), B);  // [d_a, d_b]
  auto [U, S, Vh] = at::linalg_svd(M, /*full_matrices=*/false);
  at::Tensor R = at::matmul(U, Vh);  // [d_a, d_b]
  at::Tensor AR = at::matmul(A, R);  // [n, d_b]
  const double nb = B.norm().item<double>(), na2 = A.pow(2).sum().item<double>();
  r.procrustes_residual = nb > 0 ? (AR - B).norm().item<double>() / nb : 0.0;
  r.scale = na2 > 0 ? S.sum().item<double>() / na2 : 1.0;
  r.scaled_residual = nb > 0 ? (AR * r.scale - B).norm().item<double>() / nb : 0.0;
  r.rotation = to_vec(R);
  r.procrustes_singular = to_vec(S);

  // Linear CKA on centred columns (d×d products).
  at::Tensor Ac = A - A.mean(0, true), Bc = B - B.mean(0, true);
  const double hsic = at::matmul(Bc.t(), Ac).pow(2).sum().item<double>();
  const double xa = at::matmul(Ac.t(), Ac).norm().item<double>();
  const double xb = at::matmul(Bc.t(), Bc).norm().item<double>();
  r.cka = (xa > 0 && xb > 0) ? hsic / (xa * xb) : std::nan("");

  // Aligned cosine and distance per token.
  at::Tensor bn = B.norm(2, 1);
  at::Tensor arn = AR.norm(2, 1);
  at::Tensor cosv = (AR * B).sum(1) / (arn * bn).clamp_min(1e-300);
  at::Tensor dist = (AR * r.scale - B).norm(2, 1) / bn.clamp_min(1e-300);
  r.aligned_cosine = to_vec(cosv);
  r.aligned_distance = to_vec(dist);

  // k-NN agreement among the shared tokens.
  KnnOptions ko;
  ko.k = std::min<int64_t>(opts.k, n - 1);
  r.k = ko.k;
  KnnGraph ga = knn_graph(As, ko), gb = knn_graph(Bs, ko);
  r.knn_overlap.assign(static_cast<size_t>(n), 0.0);
  r.knn_overlap_histogram.assign(static_cast<size_t>(r.k + 1), 0);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t* x = ga.indices.data() + i * r.k;
    const int64_t* y = gb.indices.data() + i * r.k;
    std::vector<int64_t> sx(x, x + r.k), sy(y, y + r.k), both;
    std::sort(sx.begin(), sx.end());
    std::sort(sy.begin(), sy.end());
    std::set_intersection(sx.begin(), sx.end(), sy.begin(), sy.end(), std::back_inserter(both));
    r.knn_overlap[static_cast<size_t>(i)] = static_cast<double>(both.size()) / static_cast<double>(r.k);
    r.knn_overlap_histogram[both.size()] += 1;
    total += r.knn_overlap[static_cast<size_t>(i)];
  }
  r.knn_overlap_mean = total / static_cast<double>(n);
  r.moved = opts.moved;

  if (opts.spectra) {
    SpectrumOptions so = opts.spectrum;
    so.loadings = 0;
    SpectrumOptions sa = so, sb = so;
    sa.k = std::min(so.k, std::min(r.rows_a, r.dim_a));
    sb.k = std::min(so.k, std::min(r.rows_b, r.dim_b));
    r.spectrum_a = matrix_spectrum(Fa, sa, "A", "token");
    r.spectrum_b = matrix_spectrum(Fb, sb, "B", "token");
    r.has_spectra = true;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Result CompareEmbeddingsResult::to_result(const Tokenizer* tok) const {
  Result res;
  res.kind = "compare_embeddings";
  res.settings = {{"matrix", matrix}, {"k", k}, {"model_a", model_a}, {"model_b", model_b}, {"moved", moved}};
  auto name = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  nlohmann::json s = {{"rows_a", rows_a},
                      {"rows_b", rows_b},
                      {"dim_a", dim_a},
                      {"dim_b", dim_b},
                      {"shared_tokens", shared},
                      {"procrustes_residual", procrustes_residual},
                      {"scaled_residual", scaled_residual},
                      {"scale", scale},
                      {"cka", cka},
                      {"k", k},
                      {"knn_overlap_mean", knn_overlap_mean},
                      {"knn_overlap_histogram", knn_overlap_histogram},
                      {"seconds", seconds}};
  if (!aligned_cosine.empty()) {
    std::vector<double> c = aligned_cosine;
    std::sort(c.begin(), c.end());
    s["aligned_cosine_median"] = c[c.size() / 2];
    s["aligned_cosine_mean"] = std::accumulate(c.begin(), c.end(), 0.0) / static_cast<double>(c.size());
  }
  if (has_spectra) {
    s["effective_rank_a"] = spectrum_a.effective_rank;
    s["effective_rank_b"] = spectrum_b.effective_rank;
    s["effective_rank_centred_a"] = spectrum_a.effective_rank_centred;
    s["effective_rank_centred_b"] = spectrum_b.effective_rank_centred;
  }
  res.summary = s;
  res.arrays["rotation"] = NdArray::f64({dim_a, dim_b}, rotation.data());
  res.arrays["procrustes_singular_values"] =
      NdArray::f64({static_cast<int64_t>(procrustes_singular.size())}, procrustes_singular.data());
  res.arrays["ids_a"] = NdArray::i64({shared}, ids_a.data());
  res.arrays["ids_b"] = NdArray::i64({shared}, ids_b.data());
  res.arrays["knn_overlap"] = NdArray::f64({shared}, knn_overlap.data());
  res.arrays["aligned_cosine"] = NdArray::f64({shared}, aligned_cosine.data());
  res.arrays["aligned_distance"] = NdArray::f64({shared}, aligned_distance.data());

  std::vector<int64_t> order(static_cast<size_t>(shared));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return aligned_cosine[static_cast<size_t>(x)] < aligned_cosine[static_cast<size_t>(y)];
  });
  Table mv{"moved", {"rank", "id_a", "id_b", "token", "aligned_cosine", "aligned_distance", "knn_overlap"}, {}};
  for (int64_t t = 0; t < std::min<int64_t>(moved, shared); ++t) {
    const size_t i = static_cast<size_t>(order[static_cast<size_t>(t)]);
    mv.rows.push_back({t + 1, ids_a[i], ids_b[i], name(ids_b[i]), aligned_cosine[i], aligned_distance[i], knn_overlap[i]});
  }
  res.tables.push_back(std::move(mv));
  Table h{"overlap_histogram", {"agreeing_neighbours", "share", "tokens"}, {}};
  for (size_t a = 0; a < knn_overlap_histogram.size(); ++a)
    h.rows.push_back({static_cast<int64_t>(a), static_cast<double>(a) / static_cast<double>(k), knn_overlap_histogram[a]});
  res.tables.push_back(std::move(h));
  if (has_spectra) {
    const auto& sa = spectrum_a.all_singular_values.empty() ? spectrum_a.singular_values : spectrum_a.all_singular_values;
    const auto& sb = spectrum_b.all_singular_values.empty() ? spectrum_b.singular_values : spectrum_b.all_singular_values;
    res.arrays["singular_values_a"] = NdArray::f64({static_cast<int64_t>(sa.size())}, sa.data());
    res.arrays["singular_values_b"] = NdArray::f64({static_cast<int64_t>(sb.size())}, sb.data());
    Table sp{"spectra", {"j", "sigma_a", "sigma_b", "explained_variance_a", "explained_variance_b"}, {}};
    const size_t m = std::max(sa.size(), sb.size());
    auto cell = [](const std::vector<double>& v, size_t j) -> nlohmann::json {
      return j < v.size() ? nlohmann::json(v[j]) : nlohmann::json();
    };
    for (size_t j = 0; j < m; ++j)
      sp.rows.push_back({static_cast<int64_t>(j + 1), cell(sa, j), cell(sb, j), cell(spectrum_a.explained_variance_ratio, j),
                         cell(spectrum_b.explained_variance_ratio, j)});
    res.tables.push_back(std::move(sp));
  }
  return res;
}

}  // namespace vocablens
