// vocablens/compare_embeddings.hpp — two embedding spaces (two models, or two checkpoints of one run)
// compared on the tokens their vocabularies share (the `compare-embeddings` command).
//
//   auto pairs = vocablens::shared_tokens(*tok_a, *tok_b);              // rows of A and B with equal bytes
//   auto c = vocablens::compare_embeddings(E_a, E_b, pairs, {});        // E_a [V_a, d_a], E_b [V_b, d_b]
//   double r = c.procrustes_residual, cka = c.cka, share = c.knn_overlap_mean;
//   vocablens::Result res = c.to_result(tok_b.get());                   // kind "compare_embeddings"
//
// Shapes: A = E_a restricted to the n shared rows [n, d_a], B = E_b's [n, d_b] (row i of A and of B are the
// same token). Definitions (all in float64 on the float32 weights):
//  - Orthogonal Procrustes (Schönemann 1966): R = U Vᵀ from the SVD AᵀB = U Σ Vᵀ, R [d_a, d_b] with
//    orthonormal rows or columns (d_a ≠ d_b allowed); it minimises ‖A R − B‖_F over such R.
//    procrustes_residual = ‖A R − B‖_F / ‖B‖_F (uncentred). scaled_residual uses the best scale s = tr Σ / ‖A‖_F²
//    as well: ‖s A R − B‖_F / ‖B‖_F (the two models' norms need not agree).
//  - Linear CKA (Kornblith et al. 2019) on column-centred A, B: ‖BᵀA‖_F² / (‖AᵀA‖_F ‖BᵀB‖_F), in [0, 1],
//    invariant to orthogonal maps and isotropic scale; computed from d×d products (never n×n).
//  - k-NN agreement: for every shared token, its k nearest shared tokens by cosine in A and in B (exact,
//    vocablens/knn.hpp, self excluded); knn_overlap[i] = |N_A(i) ∩ N_B(i)| / k. Neighbours are searched
//    among the shared tokens only, so both lists can agree fully.
//  - moved: for every shared token, the cosine between its aligned vector aᵢR and bᵢ, and the distance
//    ‖s aᵢR − bᵢ‖ / ‖bᵢ‖; "moved most" = lowest cosine.
// Guarantees: E_b = E_a·Q for an orthogonal Q gives R = Q (to float32 rounding), residual ≈ 0, CKA = 1 and
// overlap 1. Throws UsageError when n < max(d_a, d_b) (the alignment would be under-determined), naming n.
#pragma once
#include "vocablens/tensor_fwd.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "vocablens/result.hpp"
#include "vocablens/spectrum.hpp"

namespace vocablens {

class Tokenizer;

/// Pairs (id in A, id in B) of tokens whose bytes (Tokenizer::token_bytes) are equal, in A's id order.
/// Special tokens and empty byte strings are left out; when several ids of one side share bytes the
/// lowest id is kept.
std::vector<std::pair<int64_t, int64_t>> shared_tokens(const Tokenizer& a, const Tokenizer& b);

struct CompareEmbeddingsOptions {
  int64_t k = 10;            ///< neighbours per token for the agreement
  int64_t moved = 50;        ///< tokens listed in the "moved" table
  bool spectra = true;       ///< spectra of the full E_a and E_b (vocablens/spectrum.hpp)
  SpectrumOptions spectrum;  ///< options for them (k clamped per matrix)
};

struct CompareEmbeddingsResult {
  std::string matrix = "W_E";
  std::string model_a, model_b;
  int64_t rows_a = 0, rows_b = 0, dim_a = 0, dim_b = 0, shared = 0, k = 0;
  std::vector<int64_t> ids_a, ids_b;        ///< [shared] the pairs
  std::vector<double> rotation;             ///< [dim_a, dim_b] R
  std::vector<double> procrustes_singular;  ///< [min(d_a, d_b)] Σ of AᵀB
  double procrustes_residual = 0, scaled_residual = 0, scale = 1;
  double cka = 0;
  std::vector<double> knn_overlap;  ///< [shared]
  double knn_overlap_mean = 0;
  std::vector<int64_t> knn_overlap_histogram;  ///< [k + 1] tokens with 0..k agreeing neighbours
  std::vector<double> aligned_cosine;          ///< [shared] cos(aᵢR, bᵢ)
  std::vector<double> aligned_distance;        ///< [shared] ‖s aᵢR − bᵢ‖ / ‖bᵢ‖
  int64_t moved = 50;
  bool has_spectra = false;
  SpectrumResult spectrum_a, spectrum_b;
  double seconds = 0;

  /// kind "compare_embeddings": summary (sizes, residuals, CKA, overlap mean and histogram, effective
  /// ranks), arrays rotation, ids_a, ids_b, knn_overlap, aligned_cosine, aligned_distance, singular values
  /// of both; tables "moved" (token, cosine, distance, overlap), "overlap_histogram", "spectra" (j, σ_A, σ_B,
  /// explained variance of both). `tok` names tokens (B's ids); null: "#id".
  Result to_result(const Tokenizer* tok = nullptr) const;
};

/// Compares E_a [V_a, d_a] and E_b [V_b, d_b] on `pairs` (rows of each). Throws UsageError on fewer shared
/// tokens than max(d_a, d_b), non-finite or non-2-D matrices, or a pair out of range.
CompareEmbeddingsResult compare_embeddings(const at::Tensor& E_a, const at::Tensor& E_b,
                                           const std::vector<std::pair<int64_t, int64_t>>& pairs,
                                           const CompareEmbeddingsOptions& opts = {});

}  // namespace vocablens
