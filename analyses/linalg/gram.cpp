// Gram matrices and dense symmetric eigen-solvers (see include/vocablens/linalg/gram.hpp).
#include "vocablens/linalg/gram.hpp"

#include <ATen/Parallel.h>
#include <Eigen/Dense>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "vocablens/error.hpp"
#include "util/parallel.hpp"

namespace vocablens {

namespace {

// Fortran DSYRK of the BLAS that LibTorch loaded (OpenBLAS on Debian), looked up at run time so that no
// extra link dependency is needed; null when absent or when VOCABLENS_NO_SYRK is set (then DGEMM).
// The two trailing lengths are gfortran's hidden CHARACTER lengths (ignored by OpenBLAS's C entry point).
using dsyrk_fn = void (*)(const char*, const char*, const int*, const int*, const double*, const double*, const int*,
                          const double*, double*, const int*, size_t, size_t);
dsyrk_fn blas_dsyrk() {
  static const dsyrk_fn found = reinterpret_cast<dsyrk_fn>(dlsym(RTLD_DEFAULT, "dsyrk_"));
  const char* off = std::getenv("VOCABLENS_NO_SYRK");
  return (off && *off && std::string(off) != "0") ? nullptr : found;
}

}  // namespace

at::Tensor as_matrix_f32(const at::Tensor& M, const char* what) {
  if (!M.defined() || M.dim() != 2) throw UsageError(std::string(what) + ": expected a 2-D matrix");
  if (M.size(0) < 1 || M.size(1) < 1) throw UsageError(std::string(what) + ": the matrix is empty");
  return M.to(at::kFloat).contiguous();
}

GramStats gram_stats(const at::Tensor& M0, int64_t row_block) {
  at::Tensor M = as_matrix_f32(M0, "gram_stats");
  if (row_block < 1) row_block = 8192;
  GramStats g;
  g.rows = M.size(0);
  g.cols = M.size(1);
  auto f64 = at::TensorOptions().dtype(at::kDouble);
  g.gram = at::zeros({g.cols, g.cols}, f64);
  at::Tensor colsum = at::zeros({g.cols}, f64);
  g.row_norms = at::empty({g.rows}, f64);
  // G += BᵀB per row block: the BLAS's DSYRK when the process has one (half the flops of a GEMM; found at
  // run time in the BLAS LibTorch loaded, see blas_dsyrk()), else a DGEMM.
  const int64_t n = g.cols;
  dsyrk_fn syrk = blas_dsyrk();
  const bool use_syrk = syrk && n <= std::numeric_limits<int>::max() && row_block <= std::numeric_limits<int>::max();
  // One float64 buffer for every block (a fresh 50 MB tensor per block costs its page faults each time);
  // the float32 -> float64 conversion, the row norms and the column sums are one fused pass over the block.
  const int64_t buf_rows = std::min(row_block, g.rows);
  at::Tensor buf = at::empty({std::max<int64_t>(buf_rows, 1), n}, f64);
  const float* src = M.data_ptr<float>();
  double* rn = g.row_norms.data_ptr<double>();
  const int64_t nthreads = std::max<int64_t>(1, at::get_num_threads());
  std::vector<std::vector<double>> col_partial(static_cast<size_t>(nthreads), std::vector<double>(static_cast<size_t>(n), 0.0));
  for (int64_t r0 = 0; r0 < g.rows; r0 += row_block) {
    int64_t r = std::min(row_block, g.rows - r0);
    at::Tensor B = buf.narrow(0, 0, r);
    double* dst = B.data_ptr<double>();
    detail::parallel_for(0, r, 256, [&](int64_t i0, int64_t i1) {
      // ATen hands each thread one contiguous chunk, so a slot per thread is never shared.
      std::vector<double>& cs = col_partial[static_cast<size_t>(at::get_thread_num() % nthreads)];
      for (int64_t i = i0; i < i1; ++i) {
        const float* a = src + (r0 + i) * n;
        double* b = dst + i * n;
        double sq = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double v = a[j];
          b[j] = v;
          sq += v * v;
        }
        rn[r0 + i] = std::sqrt(sq);
      }
      // column sums of this chunk (a second pass over rows still in cache)
      for (int64_t i = i0; i < i1; ++i) {
        const double* b = dst + i * n;
        for (int64_t j = 0; j < n; ++j) cs[static_cast<size_t>(j)] += b[j];
      }
    });
    if (use_syrk) {
      // B row-major [r, n] is the column-major n×r matrix A = Bᵀ; C = A Aᵀ = BᵀB. 'U' fills C's upper
      // triangle in column-major order, i.e. the lower triangle of the row-major tensor.
      const int ni = static_cast<int>(n), ki = static_cast<int>(r), lda = static_cast<int>(n), ldc = static_cast<int>(n);
      const double one = 1.0;
      syrk("U", "N", &ni, &ki, &one, B.data_ptr<double>(), &lda, &one, g.gram.data_ptr<double>(), &ldc, 1, 1);
    } else {
      g.gram.addmm_(B.t(), B);
    }
  }
  {
    double* c = colsum.data_ptr<double>();
    for (auto& cs : col_partial)
      for (int64_t j = 0; j < n; ++j) c[j] += cs[static_cast<size_t>(j)];
  }
  if (use_syrk) g.gram = (at::tril(g.gram) + at::tril(g.gram, -1).t()).contiguous();
  else g.gram = (g.gram + g.gram.t()).mul_(0.5).contiguous();  // exactly symmetric
  g.col_mean = colsum / static_cast<double>(g.rows);
  return g;
}

at::Tensor covariance_from_gram(const GramStats& g) {
  at::Tensor C = g.gram / static_cast<double>(g.rows) - at::outer(g.col_mean, g.col_mean);
  return ((C + C.t()) * 0.5).contiguous();
}

void symmetric_eigen(const at::Tensor& A0, std::vector<double>& values, at::Tensor* vectors) {
  at::Tensor A = A0.to(at::kDouble).contiguous();
  const int64_t n = A.size(0);
  // Row-major storage of a symmetric matrix read as column-major is the same matrix.
  Eigen::Map<const Eigen::MatrixXd> Am(A.data_ptr<double>(), n, n);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(Am, vectors ? Eigen::ComputeEigenvectors : Eigen::EigenvaluesOnly);
  if (es.info() != Eigen::Success) throw Error("symmetric eigendecomposition failed");
  values.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = es.eigenvalues()[n - 1 - i];
  if (vectors) {
    *vectors = at::empty({n, n}, at::TensorOptions().dtype(at::kDouble));
    auto acc = vectors->accessor<double, 2>();
    for (int64_t j = 0; j < n; ++j) {
      const auto col = es.eigenvectors().col(n - 1 - j);
      Eigen::Index imax = 0;
      col.cwiseAbs().maxCoeff(&imax);
      double sign = col[imax] < 0 ? -1.0 : 1.0;
      for (int64_t i = 0; i < n; ++i) acc[i][j] = sign * col[i];
    }
  }
}

}  // namespace vocablens
