// vocablens/linalg/cosine.hpp — float64 cosines of float32 rows, reproducible bit for bit.
//
// Products and sums in double with four interleaved accumulators in a fixed order, so a score does not
// depend on threads or blocking, and a float row and its exact double copy score alike (single-token
// neighbour queries rely on it). A zero vector has cosine 0 with everything.
//
//   at::Tensor X = vocablens::as_rows_f32(W_E, "neighbours");      // [n, d] float32, finite, contiguous
//   std::vector<double> nr = vocablens::row_norms64(X);
//   double c = vocablens::cosine64(X[3].data_ptr<float>(), X[7].data_ptr<float>(), X.size(1));
#pragma once
#include "vocablens/tensor_fwd.hpp"

#include <cstdint>
#include <vector>

namespace vocablens {

/// X as contiguous float32 [rows, d]; UsageError("<what>: ...") when not 2-D, empty, or not finite.
at::Tensor as_rows_f32(const at::Tensor& X, const char* what);

/// Σ aᵢbᵢ in float64 with four interleaved accumulators (a fixed order: results are reproducible and equal
/// for a float row and its exact double copy, which single-token queries rely on).
template <class A>
inline double dot_acc(const A* a, const float* b, int64_t d) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= d; i += 4) {
    s0 += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    s1 += static_cast<double>(a[i + 1]) * static_cast<double>(b[i + 1]);
    s2 += static_cast<double>(a[i + 2]) * static_cast<double>(b[i + 2]);
    s3 += static_cast<double>(a[i + 3]) * static_cast<double>(b[i + 3]);
  }
  for (; i < d; ++i) s0 += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return (s0 + s1) + (s2 + s3);
}

inline double dot64(const float* a, const float* b, int64_t d) { return dot_acc(a, b, d); }

/// dot / (na·nb), 0 when either norm is 0.
inline double cos_from(double dot, double na, double nb) { return (na > 0 && nb > 0) ? dot / (na * nb) : 0.0; }

/// Cosine in float64 between two float32 vectors of length d (0 if either is zero).
double cosine64(const float* a, const float* b, int64_t d);

/// ‖row‖ of every row of X [n, d] (float32 contiguous), in float64 (dot64 order).
std::vector<double> row_norms64(const at::Tensor& X);

/// Unit rows in float32 (norms in float64; zero rows stay zero). [n, d].
at::Tensor unit_rows(const at::Tensor& X, const std::vector<double>& norms);

}  // namespace vocablens
