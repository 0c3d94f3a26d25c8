// Anisotropy: the mean pairwise cosine in O(V·d) from the sum of unit vectors, raw, centred and with the
// top principal components removed. See include/vocablens/anisotropy.hpp.
#include "vocablens/anisotropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "vocablens/error.hpp"
#include "vocablens/linalg/gram.hpp"
#include "vocablens/spectrum.hpp"

namespace vocablens {

namespace {

double mean_from_sum(const at::Tensor& s, int64_t n) {
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  double sq = s.square().sum().item<double>();
  double nn = static_cast<double>(n);
  return (sq - nn) / (nn * (nn - 1.0));
}

}  // namespace

double mean_pairwise_cosine(const at::Tensor& M0, int64_t* rows_used) {
  at::Tensor M = as_matrix_f32(M0, "mean_pairwise_cosine");
  const int64_t m = M.size(0), d = M.size(1), blk = 8192;
  at::Tensor s = at::zeros({d}, at::TensorOptions().dtype(at::kDouble));
  int64_t n = 0;
  for (int64_t r0 = 0; r0 < m; r0 += blk) {
    at::Tensor B = M.narrow(0, r0, std::min(blk, m - r0)).to(at::kDouble);
    at::Tensor nrm = B.square().sum(1).sqrt();
    at::Tensor nz = nrm > 0;
    n += nz.sum().item<int64_t>();
    at::Tensor w = at::where(nz, 1.0 / nrm, at::zeros_like(nrm));
    s.add_(at::mv(B.t(), w));
  }
  if (rows_used) *rows_used = n;
  return mean_from_sum(s, n);
}

double mean_pairwise_cosine_bruteforce(const at::Tensor& M0, int64_t block) {
  at::Tensor M = as_matrix_f32(M0, "mean_pairwise_cosine_bruteforce");
  if (block < 1) block = 4096;
  const int64_t m = M.size(0);
  at::Tensor nrm = M.to(at::kDouble).square().sum(1).sqrt();
  at::Tensor nz = nrm > 0;
  const int64_t n = nz.sum().item<int64_t>();
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  at::Tensor U = (M.to(at::kDouble) * at::where(nz, 1.0 / nrm, at::zeros_like(nrm)).unsqueeze(1)).to(at::kFloat).contiguous();
  double total = 0;
  for (int64_t i0 = 0; i0 < m; i0 += block) {
    at::Tensor A = U.narrow(0, i0, std::min(block, m - i0));
    for (int64_t j0 = i0; j0 < m; j0 += block) {
      at::Tensor B = U.narrow(0, j0, std::min(block, m - j0));
      at::Tensor S = at::mm(A, B.t());
      double sum = S.sum(at::kDouble).item<double>();
      if (j0 == i0) sum -= S.diagonal().sum(at::kDouble).item<double>();
      else sum *= 2.0;
      total += sum;
    }
  }
  double nn = static_cast<double>(n);
  return total / (nn * (nn - 1.0));
}

AnisotropyResult anisotropy(const at::Tensor& M0, const AnisotropyOptions& opts, const std::string& name) {
  at::Tensor M = as_matrix_f32(M0, name.c_str());
  AnisotropyResult r;
  r.matrix = name;
  r.rows = M.size(0);
  r.cols = M.size(1);
  const int64_t m = r.rows, d = r.cols;
  const int64_t blk = opts.row_block > 0 ? opts.row_block : 8192;
  for (int64_t D : opts.remove_top) {
    if (D < 0) throw UsageError("anisotropy: the number of removed components must be >= 0");
    int64_t Dc = std::min<int64_t>(D, d - 1);
    if (std::find(r.removed.begin(), r.removed.end(), Dc) == r.removed.end()) r.removed.push_back(Dc);
  }
  std::sort(r.removed.begin(), r.removed.end());
  const int64_t Dmax = r.removed.empty() ? 0 : r.removed.back();

  // Pass 1: Gram, mean, norms. Principal directions of the centred rows.
  GramStats g = gram_stats(M, blk);
  at::Tensor mu = g.col_mean;
  at::Tensor C = covariance_from_gram(g);
  std::vector<double> lam;
  at::Tensor Q;
  symmetric_eigen(C, lam, Dmax > 0 ? &Q : nullptr);
  double lam_tot = 0;
  for (double& v : lam) lam_tot += (v = std::max(v, 0.0));
  for (int64_t j = 0; j < std::min<int64_t>(10, d); ++j)
    r.top_component_variance.push_back(lam_tot > 0 ? lam[static_cast<size_t>(j)] / lam_tot : 0.0);
  at::Tensor QD = Dmax > 0 ? Q.narrow(1, 0, Dmax).contiguous() : at::Tensor();

  // Pass 2: weighted sums of rows.
  auto f64 = at::TensorOptions().dtype(at::kDouble);
  at::Tensor s_raw = at::zeros({d}, f64), s_c = at::zeros({d}, f64);
  std::vector<at::Tensor> a(r.removed.size()), b(r.removed.size());
  for (size_t t = 0; t < r.removed.size(); ++t) {
    a[t] = at::zeros({d}, f64);
    b[t] = at::zeros({std::max<int64_t>(r.removed[t], 1)}, f64);
  }
  std::vector<int64_t> n_rem(r.removed.size(), 0);
  int64_t n_raw = 0, n_c = 0;
  double sum_norm = 0, sum_sq = 0, cos_mu = 0;
  const double mu_norm = mu.norm().item<double>();
  at::Tensor mu_hat = mu_norm > 0 ? mu / mu_norm : at::zeros_like(mu);
  for (int64_t r0 = 0; r0 < m; r0 += blk) {
    at::Tensor B = M.narrow(0, r0, std::min(blk, m - r0)).to(at::kDouble);
    at::Tensor nrm2 = B.square().sum(1), nrm = nrm2.sqrt();
    at::Tensor nz = nrm > 0;
    n_raw += nz.sum().item<int64_t>();
    sum_norm += nrm.sum().item<double>();
    sum_sq += nrm2.sum().item<double>();
    at::Tensor w = at::where(nz, 1.0 / nrm, at::zeros_like(nrm));
    s_raw.add_(at::mv(B.t(), w));
    cos_mu += (at::mv(B, mu_hat) * w).sum().item<double>();

    at::Tensor Bc = B - mu;
    at::Tensor c2 = Bc.square().sum(1);
    at::Tensor cn = c2.sqrt();
    at::Tensor cnz = cn > 0;
    n_c += cnz.sum().item<int64_t>();
    s_c.add_(at::mv(Bc.t(), at::where(cnz, 1.0 / cn, at::zeros_like(cn))));

    if (Dmax > 0) {
      at::Tensor Z = at::mm(Bc, QD);         // [b, Dmax] coordinates on the top components
      at::Tensor zc = Z.square().cumsum(1);  // [b, Dmax] energy in the top-D components
      for (size_t t = 0; t < r.removed.size(); ++t) {
        const int64_t D = r.removed[t];
        if (D == 0) continue;
        at::Tensor r2 = (c2 - zc.select(1, D - 1)).clamp_min(0);
        // A row left with (relatively) nothing after the projection is excluded like a zero row.
        at::Tensor ok = r2 > c2 * 1e-24;
        at::Tensor rn = r2.sqrt();
        at::Tensor w2 = at::where(ok, 1.0 / rn, at::zeros_like(rn));
        n_rem[t] += ok.sum().item<int64_t>();
        a[t].add_(at::mv(Bc.t(), w2));
        b[t].add_(at::mv(Z.narrow(1, 0, D).t(), w2));
      }
    }
  }
  r.zero_rows = m - n_raw;
  r.mean_cosine = mean_from_sum(s_raw, n_raw);
  r.mean_cosine_centred = mean_from_sum(s_c, n_c);
  r.rows_used_centred = n_c;
  for (size_t t = 0; t < r.removed.size(); ++t) {
    const int64_t D = r.removed[t];
    if (D == 0) {
      r.mean_cosine_removed.push_back(r.mean_cosine_centred);
      r.rows_used_removed.push_back(n_c);
      continue;
    }
    at::Tensor s = a[t] - at::mv(QD.narrow(1, 0, D), b[t]);
    r.mean_cosine_removed.push_back(mean_from_sum(s, n_rem[t]));
    r.rows_used_removed.push_back(n_rem[t]);
  }
  r.mean_norm = n_raw > 0 ? sum_norm / static_cast<double>(n_raw) : 0.0;
  r.mean_vector_norm = mu_norm;
  double mean_sq = sum_sq / static_cast<double>(m);
  r.mean_vector_share = mean_sq > 0 ? mu_norm * mu_norm / mean_sq : 0.0;
  r.mean_cosine_to_mean = n_raw > 0 ? cos_mu / static_cast<double>(n_raw) : 0.0;
  return r;
}

Result AnisotropyResult::to_result() const {
  Result res;
  res.kind = "anisotropy";
  res.settings = {{"matrix", matrix}, {"remove_top", removed}};
  nlohmann::json s;
  s["matrix"] = matrix;
  s["shape"] = {rows, cols};
  s["definition"] =
      "mean over ordered pairs i != j of cos(x_i, x_j) = (|sum_i u_i|^2 - n) / (n (n - 1)), u_i = x_i/|x_i|, zero rows excluded";
  s["zero_rows"] = zero_rows;
  s["mean_cosine"] = mean_cosine;
  s["mean_cosine_centred"] = mean_cosine_centred;
  nlohmann::json rem = nlohmann::json::array();
  for (size_t t = 0; t < removed.size(); ++t)
    rem.push_back({{"removed_components", removed[t]}, {"mean_cosine", mean_cosine_removed[t]}, {"rows", rows_used_removed[t]}});
  s["after_removing_top_components"] = rem;
  s["mean_norm"] = mean_norm;
  s["mean_vector_norm"] = mean_vector_norm;
  s["mean_vector_share"] = mean_vector_share;
  s["mean_cosine_to_mean"] = mean_cosine_to_mean;
  s["top_component_variance"] = top_component_variance;
  res.summary = s;
  Table t{"removed", {"removed_components", "mean_cosine", "rows"}, {}};
  t.rows.push_back({"raw", mean_cosine, rows - zero_rows});
  t.rows.push_back({"centred", mean_cosine_centred, rows_used_centred});
  for (size_t i = 0; i < removed.size(); ++i) t.rows.push_back({removed[i], mean_cosine_removed[i], rows_used_removed[i]});
  res.tables.push_back(std::move(t));
  return res;
}

}  // namespace vocablens
