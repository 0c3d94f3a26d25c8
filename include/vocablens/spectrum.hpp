// vocablens/spectrum.hpp — the singular spectrum of an embedding-like matrix (W_E, W_U, W_pos, any [rows, n]).
//
// Top-k singular triplets with Spectra's Lanczos solver (SymEigsSolver) on MᵀM — never a dense rows×rows
// matrix — plus the full-spectrum statistics that a d×d problem affords: the centred covariance
// eigen-spectrum (PCA), explained-variance curve, effective rank, participation ratio, row-norm statistics,
// and the rows (tokens) that load most on each top singular direction.
//
//   vocablens::Model m = vocablens::load_model("fixtures/gpt2-tiny");
//   vocablens::SpectrumOptions opt;  opt.k = 16;
//   auto s = vocablens::matrix_spectrum(vocablens::model_matrix(m, "W_E"), opt, "W_E", "token");
//   double top = s.singular_values[0];
//   vocablens::Result r = s.to_result(tokenizer.get());       // for write_result / the CLI
//
// Solvers (SpectrumMethod):
//  - Gram (default): G = MᵀM [n, n] is accumulated once in float64 (blocked DGEMM over row blocks of M,
//    one pass over M, together with the column mean and the row norms); Spectra's SymEigsSolver then
//    runs Lanczos on x ↦ G x (n² flops per product). For an embedding (n = d_model ≤ a few thousand)
//    the Gram is tiny and the one pass over M is all the work that touches V.
//  - Lanczos: Spectra on the matrix-free operator x ↦ Mᵀ(M x) (float64 accumulation, row blocks in
//    parallel); nothing of size n² or rows² is formed. Each product is two passes over M, so it is
//    memory-bound and slower than Gram whenever n² fits comfortably; use it for very wide matrices.
//  - Dense: a full symmetric eigendecomposition of G (Eigen). Chosen automatically when k ≥ n − 1
//    (Spectra needs nev < n).
// Accuracy: the squared condition number of the Gram route is harmless in float64 for every singular
// value above ~1e-6 σ₁ (relative error ≈ 1e-16 σ₁²/σᵢ²); tests compare with a float64 dense SVD.
//
// Definitions (all in float64 on the float32 weights; rows = m, columns = n):
//  - singular values σ₁ ≥ σ₂ ≥ … of M itself (uncentred); right vectors vⱼ (unit, in R^n; sign: the
//    largest-magnitude entry is positive); projections pᵢⱼ = mᵢ·vⱼ = σⱼ uᵢⱼ.
//  - covariance C = (1/m) Σᵢ (mᵢ − μ)(mᵢ − μ)ᵀ, μ = mean row; eigenvalues λ₁ ≥ … ≥ λₙ ≥ 0 (PCA).
//  - explained_variance_ratio[j] = λⱼ / Σλ; energy_ratio[j] = σⱼ² / Σσ² (uncentred).
//  - effective rank (Roy & Vetterli 2007) = exp(−Σ pⱼ ln pⱼ), pⱼ = σⱼ / Σσ (uncentred) or
//    √λⱼ / Σ√λ (centred).
//  - participation ratio = (Σσ²)² / Σσ⁴ = tr(G)² / ‖G‖_F² (uncentred), (Σλ)² / Σλ² (centred); both are
//    computed from traces and need no eigenvalues.
#pragma once
#include "vocablens/tensor_fwd.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

class Model;
class Tokenizer;

enum class SpectrumMethod { Auto, Gram, Lanczos, Dense };
const char* to_string(SpectrumMethod m);
/// "auto", "gram", "lanczos", "dense"; throws UsageError otherwise.
SpectrumMethod spectrum_method_from_string(const std::string& s);

struct SpectrumOptions {
  int64_t k = 32;  ///< singular triplets wanted (clamped to min(rows, cols))
  SpectrumMethod method = SpectrumMethod::Auto;
  int64_t ncv = 0;          ///< Lanczos basis size; 0 = min(n, max(2k + 1, k + 20))
  double tol = 1e-10;       ///< Spectra's relative tolerance on the eigenvalues of MᵀM
  int64_t max_iter = 1000;  ///< Spectra restarts
  /// All singular values + the covariance spectrum (a dense n×n eigensolve, O(n³)); skipped when
  /// n > full_spectrum_max_cols. Without them effective ranks are NaN and the explained-variance curve
  /// covers only the top-k directions of M.
  bool full_spectrum = true;
  int64_t full_spectrum_max_cols = 4096;
  int64_t loadings = 10;           ///< rows listed per direction and sign (0 = none)
  bool keep_left_vectors = false;  ///< keep U_k [rows, k] (float32) in the result
  int64_t row_block = 8192;        ///< rows per block when streaming M
};

/// Summary statistics of the rows' Euclidean norms.
struct NormStats {
  double mean = 0, std = 0, min = 0, max = 0, median = 0, p01 = 0, p99 = 0;
  int64_t argmin = -1, argmax = -1;
  int64_t zero_rows = 0;
};

/// One row's loading on a singular direction.
struct Loading {
  int64_t row = -1;
  double projection = 0;  ///< mᵢ·vⱼ
};

struct SpectrumResult {
  std::string matrix = "matrix";  ///< "W_E", "W_U", "W_pos", a file name, ...
  std::string row_kind = "row";   ///< what a row is: "token", "position", "row"
  int64_t rows = 0, cols = 0, k = 0;
  std::string solver;             ///< "gram+spectra", "matrix-free+spectra", "dense"
  int64_t iterations = 0;         ///< Spectra restarts (0 for dense)
  int64_t operator_products = 0;  ///< Spectra operator applications (0 for dense)
  double seconds_gram = 0, seconds_solve = 0;

  std::vector<double> singular_values;  ///< [k] σ descending
  std::vector<double> right_vectors;    ///< [k, cols] row j = vⱼ
  std::vector<float> left_vectors;      ///< [rows, k] uⱼ (only with keep_left_vectors)
  std::vector<double> energy_ratio;     ///< [k] σⱼ² / ‖M‖_F²

  // Full-spectrum statistics (empty / NaN when not computed).
  std::vector<double> all_singular_values;            ///< [min(rows, cols)] descending
  std::vector<double> covariance_eigenvalues;         ///< [cols] λ descending
  std::vector<double> explained_variance_ratio;       ///< [cols] λⱼ / Σλ
  std::vector<double> cumulative_explained_variance;  ///< [cols]
  double effective_rank = std::numeric_limits<double>::quiet_NaN();
  double effective_rank_centred = std::numeric_limits<double>::quiet_NaN();
  double participation_ratio = 0;          ///< tr(G)² / ‖G‖_F²
  double participation_ratio_centred = 0;  ///< tr(C)² / ‖C‖_F²
  double frobenius_norm_sq = 0;            ///< ‖M‖_F² = Σσ²
  double total_variance = 0;               ///< tr(C)
  std::vector<double> mean_row;            ///< [cols] μ
  double mean_row_norm = 0;                ///< ‖μ‖
  std::vector<float> row_norms;            ///< [rows]
  NormStats norms;
  std::vector<std::vector<Loading>> top_positive;  ///< [k][loadings], projection descending (ties: row asc)
  std::vector<std::vector<Loading>> top_negative;  ///< [k][loadings], projection ascending (ties: row asc)

  /// kind "spectrum": summary (shape, solver, σ, ranks, norms, loadings with token strings), arrays
  /// singular_values, right_vectors, energy_ratio, row_norms, mean_row, and with the full spectrum
  /// all_singular_values, covariance_eigenvalues, explained_variance_ratio; left_vectors if kept; tables
  /// "singular_values", "explained_variance", "loadings". `tok` names the rows when row_kind is "token"
  /// (null: "#id").
  Result to_result(const Tokenizer* tok = nullptr) const;
};

/// The spectrum of M [rows, n] (any float dtype; converted to contiguous float32). Throws UsageError on an
/// empty or non-2-D matrix or bad options.
SpectrumResult matrix_spectrum(const at::Tensor& M, const SpectrumOptions& opts = {}, const std::string& name = "matrix",
                               const std::string& row_kind = "row");

/// A model matrix by name, rows first: "W_E" [V, d], "W_U" (as W_Uᵀ, [V, d]: rows are output tokens),
/// "W_pos" [n_ctx, d], "W_in.L" / "W_gate.L" (transposed: [d_mlp, d] neuron input directions),
/// "W_out.L" [d_mlp, d] (neuron output directions), or the path of a 2-D .npy file. `row_kind` receives
/// "token", "position", "neuron" or "row". Throws UsageError for an unknown or absent matrix.
at::Tensor model_matrix(const Model& m, const std::string& name, std::string* row_kind = nullptr);
/// Whether model_matrix's rows for `name` are tokens ("W_E", "W_U" and their short names): the rows a tokenizer
/// names, so a caller knows before reading the matrix whether it needs one.
bool token_matrix(const std::string& name);

}  // namespace vocablens
