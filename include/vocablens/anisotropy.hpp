// vocablens/anisotropy.hpp — how much an embedding's rows point the same way, computed exactly in O(V·d).
//
// Definition. For the rows xᵢ with ‖xᵢ‖ > 0 (n of them; all-zero rows are excluded and counted), let
// uᵢ = xᵢ / ‖xᵢ‖. The mean pairwise cosine over ordered pairs i ≠ j is
//
//     a = (1 / (n(n−1))) Σ_{i≠j} uᵢ·uⱼ = (‖Σᵢ uᵢ‖² − n) / (n(n−1)),
//
// because ‖Σuᵢ‖² = Σᵢ Σⱼ uᵢ·uⱼ and the n diagonal terms are 1. One float64 pass over the rows gives it
// exactly (up to rounding) — no V×V matrix. The same identity holds after any row transformation, so
// the anisotropy after centring (xᵢ − μ) and after removing the top-D principal components of the
// centred rows ("all-but-the-top", Mu & Viswanath 2018) costs O(V·d·D) on top of one d×d covariance.
//
//   auto a = vocablens::anisotropy(model.W_E(), {}, "W_E");
//   a.mean_cosine;            // raw
//   a.mean_cosine_centred;    // after subtracting the mean row
//   a.mean_cosine_removed[i]; // after centring and removing the top a.removed[i] components
//
// mean_pairwise_cosine_bruteforce() sums all n² pair cosines by blocked GEMM (for tests and checks).
#pragma once
#include "vocablens/tensor_fwd.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

struct AnisotropyOptions {
  /// Numbers of top principal components (of the centred rows) to remove, each reported separately.
  std::vector<int64_t> remove_top = {1, 2, 3, 5, 10};
  int64_t row_block = 8192;  ///< rows per streamed block
};

struct AnisotropyResult {
  std::string matrix = "matrix";
  int64_t rows = 0, cols = 0;
  int64_t zero_rows = 0;                       ///< rows with ‖x‖ = 0, excluded everywhere
  double mean_cosine = 0;                      ///< raw rows
  double mean_cosine_centred = 0;              ///< rows − μ
  int64_t rows_used_centred = 0;               ///< rows with xᵢ ≠ μ
  std::vector<int64_t> removed;                ///< D values (clamped to cols − 1)
  std::vector<double> mean_cosine_removed;     ///< after centring + removing the top-D components
  std::vector<int64_t> rows_used_removed;      ///< n for each D (rows that became zero are excluded)
  double mean_norm = 0;                        ///< mean ‖xᵢ‖
  double mean_vector_norm = 0;                 ///< ‖μ‖
  double mean_vector_share = 0;                ///< ‖μ‖² / mean ‖xᵢ‖²: share of the second moment in the common mean
  double mean_cosine_to_mean = 0;              ///< mean of uᵢ·μ/‖μ‖
  std::vector<double> top_component_variance;  ///< variance share of the top principal components (≤ 10)

  /// kind "anisotropy": everything above in the summary, table "removed" (D, mean cosine, rows).
  Result to_result() const;
};

/// Anisotropy of M [rows, d] (any float dtype). Throws UsageError on an empty or non-2-D matrix.
AnisotropyResult anisotropy(const at::Tensor& M, const AnisotropyOptions& opts = {}, const std::string& name = "matrix");

/// (‖Σuᵢ‖² − n) / (n(n−1)) over the nonzero rows, float64, O(rows·d). NaN when n < 2.
double mean_pairwise_cosine(const at::Tensor& M, int64_t* rows_used = nullptr);

/// The same mean by brute force over all ordered pairs i ≠ j: rows normalised (float64 norms), every
/// block pair (I ≤ J) by one float32 GEMM, each block's sum reduced in float64, off-diagonal blocks
/// counted twice, the diagonal i = j removed. O(rows²·d); for tests.
double mean_pairwise_cosine_bruteforce(const at::Tensor& M, int64_t block = 4096);

}  // namespace vocablens
