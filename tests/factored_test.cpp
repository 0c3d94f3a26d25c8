// Factored spectra (r×r problems) against dense float64 SVD / eigendecomposition: random low-rank matrices,
// and the circuits of fixture heads (model space d×d and vocabulary space V×V on stories260K).
#include <catch2/catch.hpp>

#include <algorithm>
#include <complex>

#include <ATen/Parallel.h>

#include "fixtures.hpp"
#include "npy_tensor.hpp"
#include "tensor_checks.hpp"
#include "vocablens/error.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/linalg/factored.hpp"
#include "vocablens/model.hpp"
#include "vocablens/unembed.hpp"

namespace {

// Dense references run single-threaded: LAPACK on a few hundred rows gains nothing from threads, and on a
// busy machine OpenMP's spinning makes it far slower.
struct OneThread {
  int saved = at::get_num_threads();
  OneThread() { at::set_num_threads(1); }
  ~OneThread() { at::set_num_threads(saved); }
};

std::vector<double> dense_svals(const at::Tensor& M, size_t n) {
  OneThread one;
  at::Tensor s = at::linalg_svdvals(M.to(at::kDouble)).contiguous();
  std::vector<double> v(s.data_ptr<double>(), s.data_ptr<double>() + s.numel());
  std::sort(v.begin(), v.end(), std::greater<double>());
  v.resize(n);
  return v;
}

// Dense eigenvalues, the n of largest modulus (the rest are ~0 for a rank-n matrix).
std::vector<std::complex<double>> dense_eigs(const at::Tensor& M, size_t n) {
  OneThread one;
  at::Tensor e = at::linalg_eigvals(M.to(at::kDouble)).contiguous();
  const auto* p = e.data_ptr<c10::complex<double>>();
  std::vector<std::complex<double>> v;
  for (int64_t i = 0; i < e.numel(); ++i) v.emplace_back(p[i].real(), p[i].imag());
  std::sort(v.begin(), v.end(), [](auto a, auto b) { return std::abs(a) > std::abs(b); });
  v.resize(n);
  return v;
}

// Every eigenvalue of `got` has a distinct partner in `want` within tol (scale-relative).
void check_same_spectrum(std::vector<std::complex<double>> got, std::vector<std::complex<double>> want, double tol) {
  REQUIRE(got.size() == want.size());
  double scale = 1e-30;
  for (auto& w : want) scale = std::max(scale, std::abs(w));
  std::vector<bool> used(want.size(), false);
  for (auto& g : got) {
    double best = 1e300;
    size_t bi = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (!used[i] && std::abs(g - want[i]) < best) {
        best = std::abs(g - want[i]);
        bi = i;
      }
    INFO("eigenvalue " << g << " nearest " << want[bi]);
    CHECK(best / scale < tol);
    used[bi] = true;
  }
}

void check_same_svals(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  double scale = std::max(1e-30, want.empty() ? 0.0 : want[0]);
  for (size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) / scale < tol);
}

}  // namespace

TEST_CASE("factored singular values and eigenvalues equal dense ones on random low-rank matrices", "[factored]") {
  vocablens::init_runtime();
  at::manual_seed(17);
  struct Shape {
    int64_t m, r, n;
  };
  for (Shape s : {Shape{40, 5, 40}, Shape{200, 16, 200}, Shape{64, 8, 100}, Shape{30, 50, 30}, Shape{1, 3, 1}}) {
    INFO("m=" << s.m << " r=" << s.r << " n=" << s.n);
    vocablens::FactoredMatrix f{at::randn({s.m, s.r}, at::kDouble), at::randn({s.r, s.n}, at::kDouble)};
    at::Tensor M = f.dense();
    const size_t k = static_cast<size_t>(std::min({s.m, s.n, s.r}));
    auto sv = vocablens::singular_values(f);
    REQUIRE(sv.size() == k);
    check_same_svals(sv, dense_svals(M, k), 1e-10);
    if (s.m == s.n) {
      auto ev = vocablens::eigenvalues(f);
      REQUIRE(ev.size() == static_cast<size_t>(std::min(s.m, s.r)));
      check_same_spectrum(ev, dense_eigs(M, ev.size()), 1e-8);
      // The copying score is Σλ/Σ|λ| = trace / Σ|λ|.
      double trace = M.trace().item<double>(), abs_sum = 0;
      for (auto& l : ev) abs_sum += std::abs(l);
      CHECK(std::abs(vocablens::copying_score(ev) - trace / abs_sum) < 1e-9);
      CHECK(std::abs(vocablens::copying_score(ev)) <= 1.0 + 1e-12);
    } else {
      CHECK_THROWS_AS(vocablens::eigenvalues(f), vocablens::UsageError);
    }
  }
  // Known spectra: P diag(λ) P⁻¹ restricted to rank 3 — symmetric PSD → copying score 1; negated → -1.
  at::Tensor Q = std::get<0>(at::linalg_qr(at::randn({50, 3}, at::kDouble)));
  vocablens::FactoredMatrix psd{Q * at::tensor({3.0, 2.0, 1.0}, at::kDouble), Q.t()};
  auto ev = vocablens::eigenvalues(psd);
  CHECK(std::abs(ev[0].real() - 3.0) < 1e-12);
  CHECK(std::abs(ev[2].real() - 1.0) < 1e-12);
  CHECK(std::abs(vocablens::copying_score(ev) - 1.0) < 1e-12);
  vocablens::FactoredMatrix neg{-psd.A, psd.B};
  CHECK(std::abs(vocablens::copying_score(vocablens::eigenvalues(neg)) + 1.0) < 1e-12);
  CHECK(vocablens::copying_score({}) == 0.0);
  // Exactly rank-deficient factors: trailing singular values are zero.
  at::Tensor A = at::randn({30, 2}, at::kDouble);
  vocablens::FactoredMatrix def{at::cat({A, A}, 1), at::randn({4, 30}, at::kDouble)};
  auto sv = vocablens::singular_values(def);
  REQUIRE(sv.size() == 4);
  CHECK(sv[2] < 1e-10 * sv[0]);
  CHECK_THROWS_AS(vocablens::singular_values({at::randn({3, 4}), at::randn({5, 3})}), vocablens::UsageError);
}

TEST_CASE("factored spectra of fixture heads equal dense ones", "[factored][heads]") {
  vocablens::init_runtime();
  ::setenv("VOCABLENS_CACHE", vl_test::temp_dir("factored-cache").c_str(), 1);
  for (const char* fx : {"stories260K/stories260K.bin", "gpt2-tiny"}) {
    INFO(fx);
    std::string path = vl_test::fixture(fx);
    if (path.empty()) continue;
    auto m = vocablens::load_model(path);
    const auto& c = m.config();
    const bool small_vocab = c.vocab_size <= 1024;
    at::Tensor R = vocablens::read_projection(m, vocablens::InverseKind::Pinv);
    for (int64_t l = 0; l < c.n_layers; ++l)
      for (int64_t h = 0; h < c.n_heads; ++h)
        for (auto kind : {vocablens::CircuitKind::OV, vocablens::CircuitKind::QK}) {
          INFO("layer " << l << " head " << h << " " << vocablens::to_string(kind));
          const size_t r = static_cast<size_t>(c.d_head);
          auto w = vocablens::head_weight_circuit(m, l, h, kind);
          at::Tensor W = w.dense();  // d×d
          at::Tensor ref = kind == vocablens::CircuitKind::OV
                               ? at::mm(m.W_V(l)[h].to(at::kDouble), m.W_O(l)[h].to(at::kDouble))
                               : at::mm(m.W_Q(l)[h].to(at::kDouble), m.W_K(l)[h].to(at::kDouble).t());
          CHECK(vl_test::max_abs_diff(W, ref) < 1e-12);
          check_same_svals(vocablens::singular_values(w), dense_svals(W, r), 1e-9);
          check_same_spectrum(vocablens::eigenvalues(w), dense_eigs(W, r), 1e-7);
          // Dense V×V references are costly (LAPACK geev on 512×512): six heads spread over the layers.
          if (small_vocab && (l + h) % 7 == 0) {
            // The V×V vocabulary circuit, dense (512² on stories260K).
            auto f = vocablens::head_vocab_circuit(m, R, l, h, kind);
            at::Tensor M = f.dense();
            check_same_svals(vocablens::singular_values(f), dense_svals(M, r), 1e-9);
            check_same_spectrum(vocablens::eigenvalues(f), dense_eigs(M, r), 1e-7);
            // With E⁺ the OV eigenvalues equal W_VO's (E⁺ᵀ W_VO Eᵀ is similar to W_VO on its range).
            if (kind == vocablens::CircuitKind::OV)
              check_same_spectrum(vocablens::eigenvalues(f), vocablens::eigenvalues(w), 1e-4);
          }
        }
  }
}
