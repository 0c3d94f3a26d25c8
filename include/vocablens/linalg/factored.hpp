// vocablens/linalg/factored.hpp — a low-rank matrix kept as two factors, and its spectrum from small matrices.
//
// The idea of TransformerLens's FactoredMatrix: a head's circuit W_VO = W_V W_O ([d, d], rank d_head) or its
// vocabulary-space form (V×V, rank d_head) is never formed; everything spectral comes from r×r matrices
// (r = the inner dimension), in float64:
//  * singular values: A = Q_A R_A and Bᵀ = Q_B R_B (thin QR), so A·B = Q_A (R_A R_Bᵀ) Q_Bᵀ and the singular
//    values of A·B are those of the small R_A R_Bᵀ;
//  * eigenvalues (square A·B): the nonzero eigenvalues of A·B equal those of B·A (r×r), with multiplicity;
//  * copying score (Elhage et al. 2021): Σλ / Σ|λ| over those eigenvalues, in [-1, 1]; near 1 when the
//    circuit maps tokens to themselves (a copying OV head), near -1 for anti-copying.
//
//   vocablens::FactoredMatrix ov{W_V_h, W_O_h};                // [d, r] · [r, d]
//   auto sv = vocablens::singular_values(ov);                  // r values, descending
//   auto ev = vocablens::eigenvalues(ov);                      // r complex values
//   double c = vocablens::copying_score(ev);
#pragma once
#include <ATen/ATen.h>

#include <complex>
#include <cstdint>
#include <vector>

namespace vocablens {

/// M = A·B with A [m, r] and B [r, n] (any float dtype; computations are float64).
struct FactoredMatrix {
  at::Tensor A;
  at::Tensor B;
  int64_t rows() const { return A.size(0); }
  int64_t cols() const { return B.size(1); }
  int64_t inner() const { return A.size(1); }
  /// A·B as a dense float64 matrix (small matrices and tests only).
  at::Tensor dense() const;
  /// Throws UsageError unless A and B are matrices with matching inner sizes.
  void check() const;
};

/// The min(m, n, r) largest singular values of A·B, descending (exactly-zero ones included).
std::vector<double> singular_values(const FactoredMatrix& f);

/// For square A·B (m == n): its min(m, r) eigenvalues that can be nonzero (the eigenvalues of B·A when
/// r <= m, else of A·B itself), ordered by |λ| descending, then real part, then imaginary part descending.
/// Throws UsageError when A·B is not square.
std::vector<std::complex<double>> eigenvalues(const FactoredMatrix& f);

/// Σλ / Σ|λ| (the imaginary parts of conjugate pairs cancel); 0 when every λ is 0.
double copying_score(const std::vector<std::complex<double>>& eigenvalues);

}  // namespace vocablens
