// vocablens/linalg/gram.hpp — Gram matrices and dense symmetric eigen-solvers, the float64 building blocks
// of the geometry analyses (spectrum, anisotropy, neighbours' E⁺).
//
// One streamed pass over a float32 matrix M [rows, n] gives G = MᵀM, the column mean and the row norms in
// float64 (DSYRK of the BLAS LibTorch loaded when it has one, else DGEMM; VOCABLENS_NO_SYRK=1 forces DGEMM).
// symmetric_eigen() then decomposes any symmetric [n, n] float64 matrix densely (Eigen). Nothing of size
// rows² is ever formed; memory is O(n²) plus one row block.
//
//   vocablens::GramStats g = vocablens::gram_stats(W_E);            // W_E [V, d] float32
//   std::vector<double> lambda;  at::Tensor vecs;
//   vocablens::symmetric_eigen(vocablens::covariance_from_gram(g), lambda, &vecs);   // PCA, descending
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace vocablens {

/// M as a contiguous float32 2-D tensor; UsageError("<what>: expected a 2-D matrix" / "the matrix is empty").
at::Tensor as_matrix_f32(const at::Tensor& M, const char* what);

/// One streamed pass over M [rows, n] (float32, contiguous): G = MᵀM, the column mean and the row norms,
/// all accumulated in float64 (row blocks converted to double, DGEMM).
struct GramStats {
  int64_t rows = 0, cols = 0;
  at::Tensor gram;       ///< [n, n] float64
  at::Tensor col_mean;   ///< [n] float64
  at::Tensor row_norms;  ///< [rows] float64
};
GramStats gram_stats(const at::Tensor& M, int64_t row_block = 8192);

/// Centred covariance from a Gram: C = G/m − μμᵀ, [n, n] float64.
at::Tensor covariance_from_gram(const GramStats& g);

/// Eigen-decomposition of a symmetric float64 matrix A [n, n]: eigenvalues descending, eigenvectors as
/// columns in the same order (sign: largest-magnitude entry positive). Dense (Eigen).
void symmetric_eigen(const at::Tensor& A, std::vector<double>& values, at::Tensor* vectors);

}  // namespace vocablens
