// Float64 cosines of float32 rows (see include/vocablens/linalg/cosine.hpp).
#include "vocablens/linalg/cosine.hpp"

#include <ATen/Parallel.h>

#include <cmath>
#include <string>

#include "vocablens/error.hpp"
#include "vocablens/nonfinite.hpp"
#include "util/parallel.hpp"

namespace vocablens {

at::Tensor as_rows_f32(const at::Tensor& X, const char* what) {
  if (!X.defined() || X.dim() != 2) throw UsageError(std::string(what) + ": expected a 2-D matrix [rows, d]");
  if (X.size(0) < 1 || X.size(1) < 1) throw UsageError(std::string(what) + ": the matrix is empty");
  at::Tensor Xf = X.to(at::kFloat).contiguous();
  require_finite(Xf, std::string(what) + ": the matrix", "cosines with NaN are undefined");
  return Xf;
}

double cosine64(const float* a, const float* b, int64_t d) {
  return cos_from(dot64(a, b, d), std::sqrt(dot64(a, a, d)), std::sqrt(dot64(b, b, d)));
}

std::vector<double> row_norms64(const at::Tensor& X) {
  const int64_t n = X.size(0), d = X.size(1);
  const float* p = X.data_ptr<float>();
  std::vector<double> out(static_cast<size_t>(n));
  detail::parallel_for(0, n, 1024, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) out[static_cast<size_t>(i)] = std::sqrt(dot64(p + i * d, p + i * d, d));
  });
  return out;
}

// Unit rows in float32 (norms in float64; zero rows stay zero).
at::Tensor unit_rows(const at::Tensor& X, const std::vector<double>& norms) {
  const int64_t n = X.size(0), d = X.size(1);
  at::Tensor U = at::empty({n, d}, at::TensorOptions().dtype(at::kFloat));
  const float* x = X.data_ptr<float>();
  float* u = U.data_ptr<float>();
  detail::parallel_for(0, n, 1024, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      double nr = norms[static_cast<size_t>(i)];
      double inv = nr > 0 ? 1.0 / nr : 0.0;
      for (int64_t c = 0; c < d; ++c) u[i * d + c] = static_cast<float>(static_cast<double>(x[i * d + c]) * inv);
    }
  });
  return U;
}

}  // namespace vocablens
