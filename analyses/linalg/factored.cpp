// Spectra of factored low-rank matrices from r×r problems (see include/vocablens/linalg/factored.hpp).
#include "vocablens/linalg/factored.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "vocablens/error.hpp"

namespace vocablens {

void FactoredMatrix::check() const {
  if (!A.defined() || !B.defined() || A.dim() != 2 || B.dim() != 2) throw UsageError("factored matrix: A and B must be matrices");
  if (A.size(1) != B.size(0))
    throw UsageError("factored matrix: inner sizes differ (" + std::to_string(A.size(1)) + " vs " + std::to_string(B.size(0)) +
                     ")");
}

at::Tensor FactoredMatrix::dense() const {
  check();
  return at::mm(A.to(at::kDouble), B.to(at::kDouble));
}

namespace {
std::vector<double> to_vector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kDouble).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}
}  // namespace

std::vector<double> singular_values(const FactoredMatrix& f) {
  f.check();
  at::NoGradGuard no_grad;
  const int64_t m = f.rows(), n = f.cols(), r = f.inner();
  const int64_t want = std::min({m, n, r});
  if (want == 0) return {};
  at::Tensor A = f.A.to(at::kDouble), B = f.B.to(at::kDouble);
  // Thin QR: R_A [min(m, r), r], R_B [min(n, r), r]; the singular values of A·B are those of R_A R_Bᵀ.
  at::Tensor RA = std::get<1>(at::linalg_qr(A, "r"));
  at::Tensor RB = std::get<1>(at::linalg_qr(B.t(), "r"));
  at::Tensor core = at::mm(RA, RB.t());
  std::vector<double> s = to_vector(at::linalg_svdvals(core));
  std::sort(s.begin(), s.end(), std::greater<double>());
  s.resize(static_cast<size_t>(want), 0.0);
  return s;
}

std::vector<std::complex<double>> eigenvalues(const FactoredMatrix& f) {
  f.check();
  if (f.rows() != f.cols())
    throw UsageError("eigenvalues: the matrix is " + std::to_string(f.rows()) + "x" + std::to_string(f.cols()) + ", not square");
  at::NoGradGuard no_grad;
  const int64_t m = f.rows(), r = f.inner();
  if (m == 0 || r == 0) return {};
  at::Tensor A = f.A.to(at::kDouble), B = f.B.to(at::kDouble);
  at::Tensor small = r <= m ? at::mm(B, A) : at::mm(A, B);
  at::Tensor ev = at::linalg_eigvals(small).contiguous();  // complex128
  const auto* p = ev.data_ptr<c10::complex<double>>();
  std::vector<std::complex<double>> out;
  out.reserve(static_cast<size_t>(ev.numel()));
  for (int64_t i = 0; i < ev.numel(); ++i) out.emplace_back(p[i].real(), p[i].imag());
  std::sort(out.begin(), out.end(), [](const std::complex<double>& a, const std::complex<double>& b) {
    double aa = std::abs(a), ab = std::abs(b);
    if (aa != ab) return aa > ab;
    if (a.real() != b.real()) return a.real() > b.real();
    return a.imag() > b.imag();
  });
  return out;
}

double copying_score(const std::vector<std::complex<double>>& ev) {
  double num = 0, den = 0;
  for (const auto& l : ev) {
    num += l.real();
    den += std::abs(l);
  }
  return den > 0 ? num / den : 0.0;
}

}  // namespace vocablens
