// The singular spectrum of an embedding-like matrix: Spectra (Lanczos) on MᵀM, full-spectrum statistics
// from the d×d Gram, loadings. See include/vocablens/spectrum.hpp.
#include "vocablens/spectrum.hpp"

#include <ATen/Parallel.h>
#include <Eigen/Dense>
#include <Spectra/MatOp/DenseSymMatProd.h>
#include <Spectra/SymEigsSolver.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <numeric>
#include <type_traits>

#include "vocablens/error.hpp"
#include "vocablens/linalg/gram.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/model.hpp"
#include "vocablens/npy.hpp"
#include "vocablens/tokenizer.hpp"
#include "util/parallel.hpp"

namespace vocablens {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Spectra operator y = Mᵀ(M x), matrix-free: M is float32 row-major [m, n]; every row block is widened
// to float64 and its contribution accumulated in double; blocks run in parallel and are reduced in block
// order (deterministic for a given block size).
class NormalOp {
 public:
  using Scalar = double;
  NormalOp(const float* M, int64_t m, int64_t n, int64_t block) : M_(M), m_(m), n_(n), block_(block) {
    nblocks_ = (m_ + block_ - 1) / block_;
  }
  Eigen::Index rows() const { return n_; }
  Eigen::Index cols() const { return n_; }
  void perform_op(const double* x_in, double* y_out) const {
    Eigen::Map<const Eigen::VectorXd> x(x_in, n_);
    std::vector<Eigen::VectorXd> partial(static_cast<size_t>(nblocks_));
    detail::parallel_for(0, nblocks_, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        int64_t r0 = b * block_, r = std::min(block_, m_ - r0);
        Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> B(M_ + r0 * n_, r, n_);
        Eigen::MatrixXd Bd = B.cast<double>();
        Eigen::VectorXd t = Bd * x;
        partial[static_cast<size_t>(b)] = Bd.transpose() * t;
      }
    });
    Eigen::Map<Eigen::VectorXd> y(y_out, n_);
    y.setZero();
    for (auto& p : partial) y += p;
  }

 private:
  const float* M_;
  int64_t m_, n_, block_, nblocks_;
};

// numpy-style linear-interpolated quantile of sorted values.
double quantile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return std::numeric_limits<double>::quiet_NaN();
  double pos = q * static_cast<double>(s.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - static_cast<double>(lo));
}

double entropy_effective_rank(const std::vector<double>& w) {
  double total = 0;
  for (double v : w) total += std::max(v, 0.0);
  if (!(total > 0)) return std::numeric_limits<double>::quiet_NaN();
  double h = 0;
  for (double v : w) {
    double p = std::max(v, 0.0) / total;
    if (p > 0) h -= p * std::log(p);
  }
  return std::exp(h);
}

std::string row_name(const Tokenizer* tok, const std::string& row_kind, int64_t i) {
  if (row_kind == "token") return tok ? tok->display(i) : "#" + std::to_string(i);
  if (row_kind == "position") return "pos " + std::to_string(i);
  return row_kind + " " + std::to_string(i);
}

}  // namespace

const char* to_string(SpectrumMethod m) {
  switch (m) {
    case SpectrumMethod::Auto: return "auto";
    case SpectrumMethod::Gram: return "gram";
    case SpectrumMethod::Lanczos: return "lanczos";
    case SpectrumMethod::Dense: return "dense";
  }
  return "?";
}

SpectrumMethod spectrum_method_from_string(const std::string& s) {
  if (s == "auto") return SpectrumMethod::Auto;
  if (s == "gram") return SpectrumMethod::Gram;
  if (s == "lanczos" || s == "matrix-free") return SpectrumMethod::Lanczos;
  if (s == "dense") return SpectrumMethod::Dense;
  throw UsageError("unknown spectrum method '" + s + "' (expected auto, gram, lanczos or dense)");
}

namespace {

// One pass over M [m, n]: MᵀM when `need_gram` (with the column mean and row norms), else only the column mean
// and row norms (the matrix-free solver never forms MᵀM).
GramStats first_pass(const at::Tensor& M, bool need_gram, int64_t row_block) {
  const int64_t m = M.size(0), n = M.size(1);
  GramStats g;
  if (need_gram) {
    g = gram_stats(M, row_block);
  } else {
    g.rows = m;
    g.cols = n;
    auto f64 = at::TensorOptions().dtype(at::kDouble);
    at::Tensor colsum = at::zeros({n}, f64);
    g.row_norms = at::empty({m}, f64);
    for (int64_t r0 = 0; r0 < m; r0 += row_block) {
      int64_t b = std::min(row_block, m - r0);
      at::Tensor B = M.narrow(0, r0, b).to(at::kDouble);
      colsum.add_(B.sum(0));
      g.row_norms.narrow(0, r0, b).copy_(B.square().sum(1).sqrt());
    }
    g.col_mean = colsum / static_cast<double>(m);
  }
  return g;
}

// The top-k eigenpairs of MᵀM (evals descending, evecs [n, k]) by `method`; r.solver, r.iterations and
// r.operator_products say how. A Lanczos answer that fails its check falls back to the dense solver (forming
// MᵀM into g when the matrix-free solver had not).
void top_eigenpairs(const at::Tensor& M, GramStats& g, SpectrumMethod method, int64_t k, const SpectrumOptions& opts,
                    SpectrumResult& r, std::vector<double>& evals, Eigen::MatrixXd& evecs) {
  const int64_t m = M.size(0), n = M.size(1);
  auto dense_topk = [&]() {
    std::vector<double> vals;
    at::Tensor vecs;
    symmetric_eigen(g.gram, vals, &vecs);
    evals.assign(vals.begin(), vals.begin() + k);
    evecs.resize(n, k);
    auto acc = vecs.accessor<double, 2>();
    for (int64_t j = 0; j < k; ++j)
      for (int64_t i = 0; i < n; ++i) evecs(i, j) = acc[i][j];
  };
  const int64_t ncv = opts.ncv > 0 ? std::min(std::max(opts.ncv, k + 1), n) : std::min(n, std::max(2 * k + 1, k + 20));
  // Lanczos is trusted only after its answer is checked: on a matrix of rank < k (a constant W_pos, rank 1,
  // all zeros) Spectra can report success with pairs that are not eigenpairs (sigma_1 = 315.6 for a 200 x 16
  // matrix of ones, whose only singular value is 56.57), or throw from its tridiagonal solver. Each pair must
  // satisfy |A v - lambda v| <= 1e-8 trace(A) with V orthonormal; otherwise the dense solver answers.
  auto pairs_ok = [&](const std::function<void(const double*, double*)>& apply, double trace) {
    if (static_cast<int64_t>(evals.size()) != k || evecs.cols() != k || evecs.rows() != n) return false;
    const double tol = 1e-8 * std::max(trace, 1e-300);
    Eigen::VectorXd y(n);
    for (int64_t j = 0; j < k; ++j) {
      if (!std::isfinite(evals[static_cast<size_t>(j)]) || evals[static_cast<size_t>(j)] > trace * (1 + 1e-9) + tol) return false;
      apply(evecs.col(j).data(), y.data());
      if ((y - evals[static_cast<size_t>(j)] * evecs.col(j)).norm() > tol) return false;
    }
    const Eigen::MatrixXd gram = evecs.transpose() * evecs;
    return (gram - Eigen::MatrixXd::Identity(k, k)).cwiseAbs().maxCoeff() < 1e-6;
  };
  auto run_spectra = [&](auto& op, const char* label) -> bool {
    try {
      Spectra::SymEigsSolver<std::decay_t<decltype(op)>> eigs(op, k, ncv);
      eigs.init();
      eigs.compute(Spectra::SortRule::LargestAlge, opts.max_iter, opts.tol);
      r.iterations = eigs.num_iterations();
      r.operator_products = eigs.num_operations();
      if (eigs.info() != Spectra::CompInfo::Successful) return false;
      Eigen::VectorXd v = eigs.eigenvalues();
      evals.assign(v.data(), v.data() + v.size());
      evecs = eigs.eigenvectors(k);
      r.solver = label;
      return true;
    } catch (const std::exception&) {  // Spectra's TridiagEigen / breakdown on a rank-deficient operator
      return false;
    }
  };
  if (method == SpectrumMethod::Dense) {
    dense_topk();
    r.solver = "dense";
  } else if (method == SpectrumMethod::Gram) {
    Eigen::Map<const Eigen::MatrixXd> G(g.gram.data_ptr<double>(), n, n);
    Spectra::DenseSymMatProd<double> op(G);
    const double trace = G.trace();
    auto apply = [&](const double* x, double* y) { op.perform_op(x, y); };
    if (!run_spectra(op, "gram+spectra")) {
      dense_topk();
      r.solver = "dense (Spectra did not converge)";
    } else if (!pairs_ok(apply, trace)) {
      dense_topk();
      r.solver = "dense (Spectra's pairs failed the residual check: rank-deficient matrix?)";
    }
  } else {
    NormalOp op(M.data_ptr<float>(), m, n, 1024);
    double trace = 0;  // trace(MᵀM) = the squared Frobenius norm
    const double* norms = g.row_norms.data_ptr<double>();
    for (int64_t i = 0; i < m; ++i) trace += norms[i] * norms[i];
    auto apply = [&](const double* x, double* y) { op.perform_op(x, y); };
    const bool ran = run_spectra(op, "matrix-free+spectra");
    if (!ran || !pairs_ok(apply, trace)) {
      g = gram_stats(M, opts.row_block);  // the dense fallback needs MᵀM after all
      dense_topk();
      r.solver =
          ran ? "dense (Spectra's pairs failed the residual check: rank-deficient matrix?)" : "dense (Spectra did not converge)";
    }
  }
}

// Singular values and right vectors (sign: largest-magnitude entry positive), row-norm statistics, the mean row
// and the energy ratios, from the eigenpairs and the first pass.
void singular_vectors_and_norms(const std::vector<double>& evals, const Eigen::MatrixXd& evecs, const GramStats& g, int64_t m,
                                int64_t n, int64_t k, SpectrumResult& r) {
  r.singular_values.resize(static_cast<size_t>(k));
  r.right_vectors.resize(static_cast<size_t>(k * n));
  for (int64_t j = 0; j < k; ++j) {
    r.singular_values[static_cast<size_t>(j)] = std::sqrt(std::max(evals[static_cast<size_t>(j)], 0.0));
    Eigen::Index imax = 0;
    evecs.col(j).cwiseAbs().maxCoeff(&imax);
    double sign = evecs(imax, j) < 0 ? -1.0 : 1.0;
    for (int64_t i = 0; i < n; ++i) r.right_vectors[static_cast<size_t>(j * n + i)] = sign * evecs(i, j);
  }

  // Row norms, mean row.
  const double* rn = g.row_norms.data_ptr<double>();
  r.row_norms.assign(rn, rn + m);
  {
    std::vector<double> s(rn, rn + m);
    double sum = 0, sq = 0;
    NormStats& ns = r.norms;
    ns.argmin = ns.argmax = 0;
    for (int64_t i = 0; i < m; ++i) {
      sum += rn[i];
      sq += rn[i] * rn[i];
      if (rn[i] < rn[ns.argmin]) ns.argmin = i;
      if (rn[i] > rn[ns.argmax]) ns.argmax = i;
      if (rn[i] == 0) ++ns.zero_rows;
    }
    ns.mean = sum / static_cast<double>(m);
    ns.std = std::sqrt(std::max(sq / static_cast<double>(m) - ns.mean * ns.mean, 0.0));
    std::sort(s.begin(), s.end());
    ns.min = s.front();
    ns.max = s.back();
    ns.median = quantile_sorted(s, 0.5);
    ns.p01 = quantile_sorted(s, 0.01);
    ns.p99 = quantile_sorted(s, 0.99);
    r.frobenius_norm_sq = sq;
  }
  const double* mu = g.col_mean.data_ptr<double>();
  r.mean_row.assign(mu, mu + n);
  {
    double s = 0;
    for (double v : r.mean_row) s += v * v;
    r.mean_row_norm = std::sqrt(s);
    r.total_variance = r.frobenius_norm_sq / static_cast<double>(m) - s;
  }
  r.energy_ratio.resize(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    double s = r.singular_values[static_cast<size_t>(j)];
    r.energy_ratio[static_cast<size_t>(j)] = r.frobenius_norm_sq > 0 ? s * s / r.frobenius_norm_sq : 0.0;
  }
}

// The participation ratios and total variance from MᵀM and the covariance; with `full`, every singular value,
// the covariance spectrum, explained-variance ratios and effective ranks.
void trace_statistics(const GramStats& g, bool full, int64_t m, int64_t n, SpectrumResult& r) {
  r.participation_ratio = r.participation_ratio_centred = std::numeric_limits<double>::quiet_NaN();
  if (g.gram.defined()) {
    double trG = g.gram.trace().item<double>(), fG = g.gram.square().sum().item<double>();
    r.participation_ratio = fG > 0 ? trG * trG / fG : std::numeric_limits<double>::quiet_NaN();
    at::Tensor C = covariance_from_gram(g);
    double trC = C.trace().item<double>(), fC = C.square().sum().item<double>();
    r.total_variance = trC;
    r.participation_ratio_centred = fC > 0 ? trC * trC / fC : std::numeric_limits<double>::quiet_NaN();
    if (full) {
      std::vector<double> lg, lc;
      symmetric_eigen(g.gram, lg, nullptr);
      symmetric_eigen(C, lc, nullptr);
      const int64_t p = std::min(m, n);
      r.all_singular_values.resize(static_cast<size_t>(p));
      for (int64_t j = 0; j < p; ++j)
        r.all_singular_values[static_cast<size_t>(j)] = std::sqrt(std::max(lg[static_cast<size_t>(j)], 0.0));
      r.covariance_eigenvalues.resize(static_cast<size_t>(n));
      double tot = 0;
      for (int64_t j = 0; j < n; ++j) {
        double v = std::max(lc[static_cast<size_t>(j)], 0.0);
        r.covariance_eigenvalues[static_cast<size_t>(j)] = v;
        tot += v;
      }
      r.explained_variance_ratio.resize(static_cast<size_t>(n));
      r.cumulative_explained_variance.resize(static_cast<size_t>(n));
      // The covariance is E[x xᵀ] − μ μᵀ: for rows that are all alike its entries are rounding noise of the
      // order of n ε E|x|², and ratios of noise to noise are not fractions of any variance. Below that the
      // ratios are NaN (null in JSON), never 0.0.
      const double noise = static_cast<double>(n) * 16 * std::numeric_limits<double>::epsilon() *
                           (m > 0 ? r.frobenius_norm_sq / static_cast<double>(m) : 0.0);
      const bool undefined = !(tot > noise) || !std::isfinite(tot);
      if (undefined)
        std::cerr << "vocablens: warning: spectrum: the total variance is " << tot
                  << (std::isfinite(tot) ? " (every row the same, within rounding)" : "")
                  << ": explained-variance ratios are undefined (NaN)\n";
      double cum = 0;
      for (int64_t j = 0; j < n; ++j) {
        double ratio =
            undefined ? std::numeric_limits<double>::quiet_NaN() : r.covariance_eigenvalues[static_cast<size_t>(j)] / tot;
        cum += ratio;
        r.explained_variance_ratio[static_cast<size_t>(j)] = ratio;
        r.cumulative_explained_variance[static_cast<size_t>(j)] = cum;
      }
      r.effective_rank = entropy_effective_rank(r.all_singular_values);
      std::vector<double> sc(r.covariance_eigenvalues.size());
      for (size_t j = 0; j < sc.size(); ++j) sc[j] = std::sqrt(r.covariance_eigenvalues[j]);
      r.effective_rank_centred = entropy_effective_rank(sc);
    }
  }
}

// Each direction's top rows by projection (opts.loadings each way) and, when kept, the left vectors.
void loadings_and_left_vectors(const at::Tensor& M, const SpectrumOptions& opts, int64_t m, int64_t n, int64_t k,
                               SpectrumResult& r) {
  const int64_t L = std::min<int64_t>(opts.loadings, m);
  if (L > 0 || opts.keep_left_vectors) {
    at::Tensor Vk = at::empty({n, k}, at::TensorOptions().dtype(at::kFloat));
    auto va = Vk.accessor<float, 2>();
    for (int64_t j = 0; j < k; ++j)
      for (int64_t i = 0; i < n; ++i) va[i][j] = static_cast<float>(r.right_vectors[static_cast<size_t>(j * n + i)]);
    at::Tensor P = at::mm(M, Vk).contiguous();  // [m, k]
    const float* pp = P.data_ptr<float>();
    if (opts.keep_left_vectors) {
      r.left_vectors.resize(static_cast<size_t>(m * k));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < k; ++j) {
          double s = r.singular_values[static_cast<size_t>(j)];
          r.left_vectors[static_cast<size_t>(i * k + j)] = s > 0 ? static_cast<float>(pp[i * k + j] / s) : 0.0f;
        }
    }
    if (L > 0) {
      r.top_positive.assign(static_cast<size_t>(k), {});
      r.top_negative.assign(static_cast<size_t>(k), {});
      detail::parallel_for(0, k, 1, [&](int64_t j0, int64_t j1) {
        std::vector<int64_t> idx(static_cast<size_t>(m));
        for (int64_t j = j0; j < j1; ++j) {
          auto val = [&](int64_t i) { return pp[i * k + j]; };
          std::iota(idx.begin(), idx.end(), 0);
          std::partial_sort(idx.begin(), idx.begin() + L, idx.end(),
                            [&](int64_t a, int64_t b) { return val(a) > val(b) || (val(a) == val(b) && a < b); });
          for (int64_t t = 0; t < L; ++t)
            r.top_positive[static_cast<size_t>(j)].push_back({idx[static_cast<size_t>(t)], val(idx[static_cast<size_t>(t)])});
          std::iota(idx.begin(), idx.end(), 0);
          std::partial_sort(idx.begin(), idx.begin() + L, idx.end(),
                            [&](int64_t a, int64_t b) { return val(a) < val(b) || (val(a) == val(b) && a < b); });
          for (int64_t t = 0; t < L; ++t)
            r.top_negative[static_cast<size_t>(j)].push_back({idx[static_cast<size_t>(t)], val(idx[static_cast<size_t>(t)])});
        }
      });
    }
  }
}

}  // namespace

SpectrumResult matrix_spectrum(const at::Tensor& M0, const SpectrumOptions& opts, const std::string& name,
                               const std::string& row_kind) {
  at::Tensor M = as_matrix_f32(M0, name.c_str());
  require_finite(M, name,
                 "its singular values are undefined (--allow-nonfinite lets NaN through, "
                 "it cannot make a spectrum of NaN defined)");
  if (opts.k < 1) throw UsageError("spectrum: k must be at least 1");
  if (opts.loadings < 0) throw UsageError("spectrum: the number of loadings must be >= 0");
  SpectrumResult r;
  r.matrix = name;
  r.row_kind = row_kind;
  r.rows = M.size(0);
  r.cols = M.size(1);
  const int64_t m = r.rows, n = r.cols;
  const int64_t k = std::min<int64_t>(opts.k, std::min(m, n));
  r.k = k;

  SpectrumMethod method = opts.method;
  if (method == SpectrumMethod::Auto) method = SpectrumMethod::Gram;
  if (method != SpectrumMethod::Dense && k >= n - 1) method = SpectrumMethod::Dense;  // Spectra: nev < n
  const bool full = opts.full_spectrum && n <= opts.full_spectrum_max_cols;
  const bool need_gram = method != SpectrumMethod::Lanczos || full;

  auto t0 = Clock::now();
  GramStats g = first_pass(M, need_gram, opts.row_block);
  r.seconds_gram = seconds_since(t0);

  t0 = Clock::now();
  std::vector<double> evals;  // k, descending
  Eigen::MatrixXd evecs;      // n x k
  top_eigenpairs(M, g, method, k, opts, r, evals, evecs);
  r.seconds_solve = seconds_since(t0);

  singular_vectors_and_norms(evals, evecs, g, m, n, k, r);
  trace_statistics(g, full, m, n, r);
  loadings_and_left_vectors(M, opts, m, n, k, r);
  return r;
}

Result SpectrumResult::to_result(const Tokenizer* tok) const {
  Result res;
  res.kind = "spectrum";
  res.settings = {{"matrix", matrix}, {"k", k}, {"solver", solver}};
  nlohmann::json s;
  s["matrix"] = matrix;
  s["row_kind"] = row_kind;
  s["shape"] = {rows, cols};
  s["solver"] = solver;
  s["spectra_restarts"] = iterations;
  s["operator_products"] = operator_products;
  s["seconds"] = {{"gram", seconds_gram}, {"solve", seconds_solve}};
  s["singular_values"] = singular_values;
  s["energy_ratio"] = energy_ratio;
  s["frobenius_norm_sq"] = frobenius_norm_sq;
  s["effective_rank"] = effective_rank;
  s["effective_rank_centred"] = effective_rank_centred;
  s["participation_ratio"] = participation_ratio;
  s["participation_ratio_centred"] = participation_ratio_centred;
  s["total_variance"] = total_variance;
  s["mean_row_norm"] = mean_row_norm;
  if (!cumulative_explained_variance.empty()) {
    nlohmann::json cev = nlohmann::json::object();
    for (int64_t c : {1, 2, 3, 5, 10, 20, 50, 100, 200, 500})
      if (c <= cols) cev[std::to_string(c)] = cumulative_explained_variance[static_cast<size_t>(c - 1)];
    s["cumulative_explained_variance"] = cev;
    // Components needed for 50 / 90 / 99 % of the variance.
    nlohmann::json need = nlohmann::json::object();
    for (auto [q, label] : {std::pair<double, const char*>{0.5, "50%"}, {0.9, "90%"}, {0.99, "99%"}}) {
      if (!std::isfinite(cumulative_explained_variance.back())) {  // no variance to explain: no count either
        need[label] = nullptr;
        continue;
      }
      int64_t c = 0;
      while (c < cols && cumulative_explained_variance[static_cast<size_t>(c)] < q) ++c;
      need[label] = std::min(c + 1, cols);
    }
    s["components_for_variance"] = need;
  }
  s["row_norms"] = {{"mean", norms.mean},
                    {"std", norms.std},
                    {"min", norms.min},
                    {"max", norms.max},
                    {"median", norms.median},
                    {"p01", norms.p01},
                    {"p99", norms.p99},
                    {"argmin", norms.argmin},
                    {"argmax", norms.argmax},
                    {"zero_rows", norms.zero_rows},
                    {"argmin_name", row_name(tok, row_kind, norms.argmin)},
                    {"argmax_name", row_name(tok, row_kind, norms.argmax)}};
  nlohmann::json loads = nlohmann::json::array();
  for (size_t j = 0; j < top_positive.size(); ++j) {
    nlohmann::json pos = nlohmann::json::array(), neg = nlohmann::json::array();
    for (auto& l : top_positive[j])
      pos.push_back({{"row", l.row}, {"name", row_name(tok, row_kind, l.row)}, {"projection", l.projection}});
    for (auto& l : top_negative[j])
      neg.push_back({{"row", l.row}, {"name", row_name(tok, row_kind, l.row)}, {"projection", l.projection}});
    loads.push_back({{"component", j}, {"positive", pos}, {"negative", neg}});
  }
  s["loadings"] = loads;
  res.summary = s;

  res.arrays["singular_values"] = NdArray::f64({k}, singular_values.data());
  res.arrays["right_vectors"] = NdArray::f64({k, cols}, right_vectors.data());
  res.arrays["energy_ratio"] = NdArray::f64({k}, energy_ratio.data());
  res.arrays["row_norms"] = NdArray::f32({rows}, row_norms.data());
  res.arrays["mean_row"] = NdArray::f64({cols}, mean_row.data());
  if (!left_vectors.empty()) res.arrays["left_vectors"] = NdArray::f32({rows, k}, left_vectors.data());
  if (!all_singular_values.empty()) {
    res.arrays["all_singular_values"] =
        NdArray::f64({static_cast<int64_t>(all_singular_values.size())}, all_singular_values.data());
    res.arrays["covariance_eigenvalues"] = NdArray::f64({cols}, covariance_eigenvalues.data());
    res.arrays["explained_variance_ratio"] = NdArray::f64({cols}, explained_variance_ratio.data());
  }

  Table sv{"singular_values", {"component", "sigma", "energy_ratio"}, {}};
  for (int64_t j = 0; j < k; ++j)
    sv.rows.push_back({j, singular_values[static_cast<size_t>(j)], energy_ratio[static_cast<size_t>(j)]});
  res.tables.push_back(std::move(sv));
  if (!covariance_eigenvalues.empty()) {
    Table ev{"explained_variance", {"component", "eigenvalue", "ratio", "cumulative", "singular_value"}, {}};
    for (int64_t j = 0; j < cols; ++j)
      ev.rows.push_back({j, covariance_eigenvalues[static_cast<size_t>(j)], explained_variance_ratio[static_cast<size_t>(j)],
                         cumulative_explained_variance[static_cast<size_t>(j)],
                         j < static_cast<int64_t>(all_singular_values.size())
                             ? nlohmann::json(all_singular_values[static_cast<size_t>(j)])
                             : nlohmann::json()});
    res.tables.push_back(std::move(ev));
  }
  if (!top_positive.empty()) {
    Table lt{"loadings", {"component", "sign", "rank", "row", "name", "projection"}, {}};
    for (size_t j = 0; j < top_positive.size(); ++j) {
      for (size_t t = 0; t < top_positive[j].size(); ++t)
        lt.rows.push_back({j, "+", t + 1, top_positive[j][t].row, row_name(tok, row_kind, top_positive[j][t].row),
                           top_positive[j][t].projection});
      for (size_t t = 0; t < top_negative[j].size(); ++t)
        lt.rows.push_back({j, "-", t + 1, top_negative[j][t].row, row_name(tok, row_kind, top_negative[j][t].row),
                           top_negative[j][t].projection});
    }
    res.tables.push_back(std::move(lt));
  }
  return res;
}

bool token_matrix(const std::string& name) { return name == "W_E" || name == "E" || name == "W_U" || name == "U"; }

at::Tensor model_matrix(const Model& m, const std::string& name, std::string* row_kind) {
  auto kind = [&](const char* k) {
    if (row_kind) *row_kind = k;
  };
  if (token_matrix(name)) {
    kind("token");
    return name.back() == 'E' ? m.W_E() : m.W_U().t();
  }
  if (name == "W_seg" || name == "seg") {
    if (!m.W_seg().defined())
      throw UsageError("this model has no segment embeddings W_seg (they come from `vocablens train --model gpt --segments`)");
    kind("segment");
    return m.W_seg();
  }
  if (name == "W_pos" || name == "pos") {
    if (!m.W_pos().defined())
      throw UsageError(std::string("this model has no learned position matrix W_pos (positions: ") +
                       to_string(m.config().positions) + ")");
    kind("position");
    return m.W_pos();
  }
  auto dot = name.find('.');
  if (dot != std::string::npos) {
    std::string base = name.substr(0, dot), ls = name.substr(dot + 1);
    int64_t layer = -1;
    try {
      size_t used = 0;
      layer = std::stoll(ls, &used);
      if (used != ls.size()) layer = -1;
    } catch (...) { layer = -1; }
    if (layer >= 0 && (base == "W_in" || base == "W_gate" || base == "W_out")) {
      if (layer >= m.config().n_layers)
        throw UsageError("layer " + ls + " out of range (the model has " + std::to_string(m.config().n_layers) + " layers)");
      kind("neuron");
      if (base == "W_in") return m.W_in(layer).t();
      if (base == "W_out") return m.W_out(layer);
      if (!m.W_gate(layer).defined()) throw UsageError("this model's MLP is not gated (no W_gate)");
      return m.W_gate(layer).t();
    }
  }
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) {
    NdArray a = read_npy(name);
    if (a.shape.size() != 2) throw FormatError(name, "expected a 2-D array");
    at::ScalarType t;
    if (a.dtype == "<f4") t = at::kFloat;
    else if (a.dtype == "<f8") t = at::kDouble;
    else if (a.dtype == "<f2") t = at::kHalf;
    else throw FormatError(name, "expected a float array, got dtype " + a.dtype);
    at::Tensor out = at::empty(a.shape, at::TensorOptions().dtype(t));
    std::memcpy(out.data_ptr(), a.bytes.data(), a.bytes.size());
    kind("row");
    return out.to(at::kFloat);
  }
  throw UsageError("unknown matrix '" + name + "' (expected W_E, W_U, W_pos, W_in.L, W_gate.L, W_out.L or a .npy file)");
}

}  // namespace vocablens
