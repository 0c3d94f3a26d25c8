// Spectrum of embedding matrices against a float64 dense SVD (LAPACK via ATen) on every fixture:
// singular values to 1e-5 relative (observed ~1e-13), singular subspaces, covariance spectrum, effective
// rank, participation ratio, loadings, norm statistics.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/linalg/gram.hpp"
#include "vocablens/model.hpp"
#include "vocablens/spectrum.hpp"

namespace {

struct Reference {
  at::Tensor S;   // all singular values, descending (float64)
  at::Tensor Vh;  // [p, n] right singular vectors (float64)
};

Reference dense_svd(const at::Tensor& M) {
  auto [U, S, Vh] = at::linalg_svd(M.to(at::kDouble), /*full_matrices=*/false);
  return {S, Vh};
}

// Largest sine of the principal angles between span(rows of A [k, n]) and span(rows of B [k, n]).
double max_principal_sine(const at::Tensor& A, const at::Tensor& B) {
  at::Tensor c = at::linalg_svdvals(at::mm(A, B.t()));
  double cmin = c.min().item<double>();
  return std::sqrt(std::max(0.0, 1.0 - cmin * cmin));
}

// Rows of V are unit vectors.
bool max_abs_diff_unit_rows(const at::Tensor& V) { return (V.norm(2, 1) - 1).abs().max().item<double>() < 1e-10; }

void check_against_dense(const at::Tensor& M, const std::string& what, int64_t k, vocablens::SpectrumMethod method,
                         const Reference* given = nullptr) {
  INFO(what << " k=" << k << " method=" << vocablens::to_string(method));
  vocablens::SpectrumOptions o;
  o.k = k;
  o.method = method;
  o.loadings = 0;
  o.full_spectrum = false;
  auto t0 = std::chrono::steady_clock::now();
  auto s = vocablens::matrix_spectrum(M, o, what);
  if (std::getenv("VL_TIMING"))
    std::fprintf(stderr, "%s k=%d %s: %.3f s (%s)\n", what.c_str(), (int)k, vocablens::to_string(method),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), s.solver.c_str());
  Reference ref = given ? *given : dense_svd(M);
  const int64_t n = M.size(1);
  REQUIRE(s.k == std::min<int64_t>(k, std::min(M.size(0), n)));
  double worst = 0;
  for (int64_t j = 0; j < s.k; ++j) {
    double want = ref.S[j].item<double>();
    worst = std::max(worst, std::abs(s.singular_values[static_cast<size_t>(j)] - want) / want);
  }
  INFO("worst relative singular-value error " << worst);
  CHECK(worst < 1e-5);
  CHECK(worst < 1e-9);  // what the float64 Gram actually achieves on these matrices

  // Subspace: compare the top-k right singular subspace where σ_k is separated from σ_{k+1}.
  at::Tensor V = at::from_blob(s.right_vectors.data(), {s.k, n}, at::TensorOptions().dtype(at::kDouble)).clone();
  CHECK(max_abs_diff_unit_rows(V));
  const int64_t p = ref.S.size(0);
  double gap = s.k < p ? (ref.S[s.k - 1].item<double>() - ref.S[s.k].item<double>()) / ref.S[0].item<double>() : 1.0;
  double sine = max_principal_sine(V, ref.Vh.narrow(0, 0, s.k));
  INFO("relative gap " << gap << ", max principal sine " << sine);
  CHECK(sine < 1e-9 / std::max(gap, 1e-12) + 1e-7);
  CHECK(sine < 1e-4);
}

}  // namespace

TEST_CASE("spectrum: synthetic matrix with a known spectrum", "[spectrum]") {
  vocablens::init_runtime();
  at::manual_seed(7);
  const int64_t m = 3000, n = 48;
  at::Tensor U = std::get<0>(at::linalg_qr(at::randn({m, n}, at::kDouble)));
  at::Tensor Vq = std::get<0>(at::linalg_qr(at::randn({n, n}, at::kDouble)));
  at::Tensor s = at::pow(0.8, at::arange(n, at::kDouble)) * 100;
  at::Tensor M = at::mm(U * s.unsqueeze(0), Vq.t()).to(at::kFloat);
  for (auto method : {vocablens::SpectrumMethod::Gram, vocablens::SpectrumMethod::Lanczos, vocablens::SpectrumMethod::Dense})
    check_against_dense(M, "synthetic", 10, method);
  vocablens::SpectrumOptions o;
  o.k = 5;
  auto r = vocablens::matrix_spectrum(M, o);
  CHECK(r.solver == "gram+spectra");
  CHECK(r.operator_products > 0);
  // The full spectrum: all singular values, effective rank, participation ratio by their definitions.
  at::Tensor ref = at::linalg_svdvals(M.to(at::kDouble));
  REQUIRE(r.all_singular_values.size() == static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    CHECK(std::abs(r.all_singular_values[static_cast<size_t>(j)] - ref[j].item<double>()) <= 1e-6 * ref[0].item<double>());
  at::Tensor p = ref / ref.sum();
  double erank = std::exp(-(p * p.log()).sum().item<double>());
  CHECK(r.effective_rank == Approx(erank).epsilon(1e-9));
  at::Tensor s2 = ref.square();
  CHECK(r.participation_ratio == Approx(std::pow(s2.sum().item<double>(), 2) / s2.square().sum().item<double>()).epsilon(1e-9));
  CHECK(r.frobenius_norm_sq == Approx(s2.sum().item<double>()).epsilon(1e-9));

  // The Gram by the BLAS's DSYRK (default) and by DGEMM (VOCABLENS_NO_SYRK=1) agree, with odd block sizes.
  at::Tensor R = at::randn({1000, 70});
  auto g1 = vocablens::gram_stats(R, 333);
  ::setenv("VOCABLENS_NO_SYRK", "1", 1);
  auto g2 = vocablens::gram_stats(R, 333);
  ::unsetenv("VOCABLENS_NO_SYRK");
  at::Tensor want = at::mm(R.to(at::kDouble).t(), R.to(at::kDouble));
  CHECK((g1.gram - want).abs().max().item<double>() < 1e-11);
  CHECK((g2.gram - want).abs().max().item<double>() < 1e-11);
  CHECK(at::equal(g1.gram, g1.gram.t()));
  CHECK(at::equal(g1.row_norms, g2.row_norms));
}

TEST_CASE("spectrum: no variance gives NaN ratios, not 0.0 ratios and a full-rank count", "[spectrum]") {
  vocablens::init_runtime();
  // Rows all alike (a constant matrix, and a non-constant row repeated): the covariance is 0 up to rounding,
  // so λⱼ / Σλ is 0/0. It used to be reported as ratios 0.0 and 8 of 8 components for 50 / 90 / 99 %.
  at::Tensor constant = at::full({100, 8}, 0.37f);
  at::Tensor repeated = at::arange(8, at::kFloat).mul(0.3).add(-1.1).unsqueeze(0).repeat({100, 1});
  for (const at::Tensor& M : {constant, repeated}) {
    vocablens::SpectrumOptions o;
    o.k = 3;
    auto r = vocablens::matrix_spectrum(M, o);
    REQUIRE(r.explained_variance_ratio.size() == 8);
    for (double v : r.explained_variance_ratio) CHECK(std::isnan(v));
    for (double v : r.cumulative_explained_variance) CHECK(std::isnan(v));
    CHECK(std::abs(r.total_variance) < 1e-9);
    const auto j = r.to_result(nullptr).summary;
    for (const char* q : {"50%", "90%", "99%"}) CHECK(j["components_for_variance"][q].is_null());
    CHECK(j["cumulative_explained_variance"]["1"].dump() == "null");  // a NaN, written as null
  }
  // A small but real variance (1e-3 around a large mean) is still measured: ratios sum to 1.
  at::manual_seed(3);
  at::Tensor small = at::full({100, 8}, 50.0f) + 1e-3f * at::randn({100, 8});
  auto r = vocablens::matrix_spectrum(small, {});
  double sum = 0;
  for (double v : r.explained_variance_ratio) sum += v;
  CHECK(sum == Approx(1.0).epsilon(1e-9));
  CHECK(r.to_result(nullptr).summary["components_for_variance"]["99%"].is_number());
}

TEST_CASE("spectrum: every fixture's matrices equal a dense SVD", "[spectrum][fixtures]") {
  vocablens::init_runtime();
  struct Case {
    const char* fixture;
    const char* file;
  };
  for (Case c : {Case{"gpt2-tiny", ""}, Case{"gpt2-tiny-prefixed", ""}, Case{"gpt2-tiny-torchbin", ""},
                 Case{"stories260K", "/stories260K.bin"}, Case{"stories260K-hf", ""}, Case{"llama2xs", "/model.bin"},
                 Case{"llama2xs", "/ckpt.pt"}}) {
    std::string dir = vl_test::fixture(c.fixture);
    if (dir.empty()) continue;
    auto m = vocablens::load_model(dir + c.file);
    std::string tag = std::string(c.fixture) + c.file;
    std::vector<std::string> mats = {"W_E"};
    if (!m.config().tied_embeddings) mats.push_back("W_U");
    if (m.W_pos().defined()) mats.push_back("W_pos");
    mats.push_back("W_out.0");
    for (const auto& name : mats) {
      at::Tensor M = vocablens::model_matrix(m, name);
      Reference ref = dense_svd(M);
      // gpt2-tiny-prefixed / -torchbin hold gpt2-tiny's weights bit for bit: one solve each is enough.
      const bool copy = std::string(c.fixture) == "gpt2-tiny-prefixed" || std::string(c.fixture) == "gpt2-tiny-torchbin";
      for (int64_t k : {1, 16, 48})
        if (!copy || k == 16) check_against_dense(M, tag + ":" + name, k, vocablens::SpectrumMethod::Gram, &ref);
      if (copy) continue;
      check_against_dense(M, tag + ":" + name, 16, vocablens::SpectrumMethod::Lanczos, &ref);
      check_against_dense(M, tag + ":" + name, 64, vocablens::SpectrumMethod::Auto, &ref);  // k >= n - 1: dense
    }
  }
}

TEST_CASE("spectrum: covariance spectrum, loadings and norms on gpt2-tiny", "[spectrum][fixtures]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  at::Tensor E = m.W_E();
  vocablens::SpectrumOptions o;
  o.k = 8;
  o.loadings = 5;
  o.keep_left_vectors = true;
  auto s = vocablens::matrix_spectrum(E, o, "W_E", "token");
  CHECK(s.rows == 50257);
  CHECK(s.cols == 64);

  // Centred covariance eigenvalues (1/m normalisation) against torch.
  at::Tensor Ed = E.to(at::kDouble);
  at::Tensor Xc = Ed - Ed.mean(0, true);
  at::Tensor C = at::mm(Xc.t(), Xc) / static_cast<double>(E.size(0));
  at::Tensor lam = std::get<0>(at::linalg_eigh(C)).flip(0);
  REQUIRE(s.covariance_eigenvalues.size() == 64u);
  for (int64_t j = 0; j < 64; ++j)
    CHECK(std::abs(s.covariance_eigenvalues[static_cast<size_t>(j)] - lam[j].item<double>()) <= 1e-10 * lam[0].item<double>());
  CHECK(s.total_variance == Approx(lam.sum().item<double>()).epsilon(1e-10));
  CHECK(s.cumulative_explained_variance.back() == Approx(1.0).epsilon(1e-12));
  CHECK(s.participation_ratio_centred ==
        Approx(std::pow(lam.sum().item<double>(), 2) / lam.square().sum().item<double>()).epsilon(1e-9));

  // Loadings: the rows with the largest / smallest projections on each direction, ties by row.
  at::Tensor V = at::from_blob(s.right_vectors.data(), {8, 64}, at::TensorOptions().dtype(at::kDouble)).to(at::kFloat);
  at::Tensor P = at::mm(E, V.t());
  for (int64_t j = 0; j < 8; ++j) {
    auto top = std::get<1>(at::topk(P.select(1, j), 5));
    auto bottom = std::get<1>(at::topk(P.select(1, j), 5, 0, /*largest=*/false));
    for (int64_t t = 0; t < 5; ++t) {
      CHECK(s.top_positive[static_cast<size_t>(j)][static_cast<size_t>(t)].row == top[t].item<int64_t>());
      CHECK(s.top_negative[static_cast<size_t>(j)][static_cast<size_t>(t)].row == bottom[t].item<int64_t>());
    }
  }
  // Left vectors: U = E V / σ, orthonormal columns.
  at::Tensor Ul = at::from_blob(s.left_vectors.data(), {50257, 8}, at::TensorOptions().dtype(at::kFloat)).to(at::kDouble);
  CHECK((at::mm(Ul.t(), Ul) - at::eye(8, at::kDouble)).abs().max().item<double>() < 1e-4);

  // Norm statistics.
  at::Tensor norms = Ed.norm(2, 1);
  CHECK(s.norms.mean == Approx(norms.mean().item<double>()).epsilon(1e-12));
  CHECK(s.norms.max == Approx(norms.max().item<double>()).epsilon(1e-12));
  CHECK(s.norms.argmax == norms.argmax().item<int64_t>());
  CHECK(s.norms.argmin == norms.argmin().item<int64_t>());
  CHECK(s.norms.median == Approx(at::quantile(norms, 0.5).item<double>()).epsilon(1e-12));
  CHECK(s.norms.p99 == Approx(at::quantile(norms, 0.99).item<double>()).epsilon(1e-12));

  auto res = s.to_result(nullptr);
  CHECK(res.kind == "spectrum");
  CHECK(res.arrays.count("singular_values") == 1);
  CHECK(res.arrays.at("right_vectors").shape == std::vector<int64_t>{8, 64});
  CHECK(res.summary["loadings"].size() == 8u);
}

TEST_CASE("spectrum: model_matrix names and errors", "[spectrum]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("stories260K");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir + "/stories260K.bin");
  std::string kind;
  CHECK(vocablens::model_matrix(m, "W_E", &kind).sizes() == at::IntArrayRef({512, 64}));
  CHECK(kind == "token");
  CHECK(vocablens::model_matrix(m, "W_U", &kind).sizes() == at::IntArrayRef({512, 64}));
  CHECK(vocablens::model_matrix(m, "W_in.2", &kind).sizes() == at::IntArrayRef({172, 64}));
  CHECK(kind == "neuron");
  CHECK(vocablens::model_matrix(m, "W_gate.4").sizes() == at::IntArrayRef({172, 64}));
  CHECK_THROWS_AS(vocablens::model_matrix(m, "W_pos"), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::model_matrix(m, "W_in.5"), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::model_matrix(m, "W_nope"), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::matrix_spectrum(at::zeros({0, 3})), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::spectrum_method_from_string("qr"), vocablens::UsageError);
}
