// compare-embeddings: a constructed exact case (E_B = E_A·Q, Q random orthogonal: Procrustes recovers Q, CKA 1,
// neighbours agree), CKA against an independent n×n Gram-matrix formula in float64, the neighbour agreement
// against brute-force cosine lists, too few shared tokens, and token matching on the fixtures' vocabularies.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "fixtures.hpp"
#include "vocablens/compare_embeddings.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

at::Tensor gaussian(int64_t n, int64_t d, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g;
  at::Tensor t = at::empty({n, d}, at::kDouble);
  double* p = t.data_ptr<double>();
  for (int64_t i = 0; i < n * d; ++i) p[i] = g(rng);
  return t;
}

std::vector<std::pair<int64_t, int64_t>> identity_pairs(int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> p;
  for (int64_t i = 0; i < n; ++i) p.emplace_back(i, i);
  return p;
}

// CKA from the n×n Gram matrices K = XXᵀ, L = YYᵀ with the centring matrix H (Kornblith et al. eq. 1-3),
// plain loops in double: HSIC(K, L) ∝ tr(K H L H).
double cka_gram(const at::Tensor& X64, const at::Tensor& Y64) {
  const int64_t n = X64.size(0);
  auto gram = [n](const at::Tensor& Z) {
    const int64_t d = Z.size(1);
    const double* z = Z.data_ptr<double>();
    std::vector<double> K(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t c = 0; c < d; ++c) s += z[i * d + c] * z[j * d + c];
        K[static_cast<size_t>(i * n + j)] = s;
      }
    // H K H: subtract row and column means, add the grand mean.
    std::vector<double> rm(static_cast<size_t>(n), 0.0);
    double all = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) rm[static_cast<size_t>(i)] += K[static_cast<size_t>(i * n + j)];
      all += rm[static_cast<size_t>(i)];
      rm[static_cast<size_t>(i)] /= static_cast<double>(n);
    }
    all /= static_cast<double>(n * n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        K[static_cast<size_t>(i * n + j)] += all - rm[static_cast<size_t>(i)] - rm[static_cast<size_t>(j)];
    return K;
  };
  auto Kc = gram(X64), Lc = gram(Y64);
  auto hsic = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];  // tr(aᵀb), both symmetric
    return s;
  };
  return hsic(Kc, Lc) / std::sqrt(hsic(Kc, Kc) * hsic(Lc, Lc));
}

}  // namespace

TEST_CASE("compare-embeddings: E_B = E_A·Q is recovered exactly", "[compare_embeddings]") {
  vocablens::init_runtime();
  const int64_t n = 400, d = 24;
  at::Tensor A64 = gaussian(n, d, 7);
  at::Tensor Q = std::get<0>(at::linalg_qr(gaussian(d, d, 11)));  // random orthogonal
  at::Tensor A = A64.to(at::kFloat);
  at::Tensor B = at::matmul(A64, Q).to(at::kFloat);
  vocablens::CompareEmbeddingsOptions o;
  o.k = 10;
  auto c = vocablens::compare_embeddings(A, B, identity_pairs(n), o);
  REQUIRE(c.shared == n);
  REQUIRE(c.rotation.size() == static_cast<size_t>(d * d));
  at::Tensor R = at::from_blob(c.rotation.data(), {d, d}, at::kDouble);
  CHECK((R - Q).abs().max().item<double>() < 1e-5);
  CHECK(c.procrustes_residual < 1e-5);
  CHECK(std::abs(c.scale - 1.0) < 1e-5);
  CHECK(std::abs(c.cka - 1.0) < 1e-9);
  CHECK(c.knn_overlap_mean == 1.0);
  CHECK(c.knn_overlap_histogram[static_cast<size_t>(c.k)] == n);
  CHECK(*std::min_element(c.aligned_cosine.begin(), c.aligned_cosine.end()) > 1 - 1e-6);
  vocablens::Result r = c.to_result(nullptr);
  CHECK(r.kind == "compare_embeddings");
  CHECK(r.summary["shared_tokens"] == n);
}

TEST_CASE("compare-embeddings: CKA, residual and neighbour agreement against independent formulas", "[compare_embeddings]") {
  vocablens::init_runtime();
  const int64_t n = 300, da = 10, db = 14;
  at::Tensor A64 = gaussian(n, da, 3);
  at::Tensor W = gaussian(da, db, 5);
  at::Tensor B64 = at::tanh(at::matmul(A64, W) * 0.3) + gaussian(n, db, 9) * 0.5 + 0.7;  // non-linear, offset, noisy
  at::Tensor A = A64.to(at::kFloat), B = B64.to(at::kFloat);
  vocablens::CompareEmbeddingsOptions o;
  o.k = 5;
  o.spectra = false;
  auto c = vocablens::compare_embeddings(A, B, identity_pairs(n), o);
  const double want = cka_gram(A.to(at::kDouble).contiguous(), B.to(at::kDouble).contiguous());
  INFO("cka " << c.cka << " gram formula " << want);
  CHECK(want > 0.05);
  CHECK(want < 0.95);
  CHECK(std::abs(c.cka - want) < 1e-9);

  // R has orthonormal rows (d_a < d_b) and beats random semi-orthogonal maps.
  at::Tensor R = at::from_blob(c.rotation.data(), {da, db}, at::kDouble).clone();
  CHECK((at::matmul(R, R.t()) - at::eye(da, at::kDouble)).abs().max().item<double>() < 1e-10);
  at::Tensor Ad = A.to(at::kDouble), Bd = B.to(at::kDouble);
  const double res = (at::matmul(Ad, R) - Bd).norm().item<double>() / Bd.norm().item<double>();
  CHECK(std::abs(res - c.procrustes_residual) < 1e-12);
  for (unsigned s = 0; s < 20; ++s) {
    at::Tensor P = std::get<0>(at::linalg_qr(gaussian(db, da, 100 + s))).t();  // [da, db], orthonormal rows
    CHECK((at::matmul(Ad, P) - Bd).norm().item<double>() / Bd.norm().item<double>() >= res);
  }

  // Neighbour agreement: brute-force cosine lists in double.
  auto lists = [&](const at::Tensor& X) {
    at::Tensor U = X.to(at::kDouble);
    U = U / U.norm(2, 1, true);
    at::Tensor S = at::matmul(U, U.t());
    S.fill_diagonal_(-10.0);
    return std::get<1>(S.topk(o.k, 1));
  };
  at::Tensor la = lists(A), lb = lists(B);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::set<int64_t> sa, sb;
    for (int64_t t = 0; t < o.k; ++t) {
      sa.insert(la[i][t].item<int64_t>());
      sb.insert(lb[i][t].item<int64_t>());
    }
    int64_t both = 0;
    for (int64_t x : sa) both += sb.count(x);
    CHECK(c.knn_overlap[static_cast<size_t>(i)] == static_cast<double>(both) / static_cast<double>(o.k));
    total += static_cast<double>(both) / static_cast<double>(o.k);
  }
  CHECK(std::abs(c.knn_overlap_mean - total / n) < 1e-12);
  CHECK(c.knn_overlap_mean < 0.9);
}

TEST_CASE("compare-embeddings: fewer shared tokens than the dimension is one clear error", "[compare_embeddings]") {
  vocablens::init_runtime();
  at::Tensor A = gaussian(50, 16, 1).to(at::kFloat), B = gaussian(50, 32, 2).to(at::kFloat);
  try {
    vocablens::compare_embeddings(A, B, identity_pairs(20), {});
    FAIL("no error");
  } catch (const vocablens::UsageError& e) {
    std::string m = e.what();
    CHECK(m.find("only 20 tokens are shared") != std::string::npos);
    CHECK(m.find("dimension 32") != std::string::npos);
  }
}

TEST_CASE("compare-embeddings: tokens matched by bytes on the fixtures' vocabularies", "[compare_embeddings][fixtures]") {
  vocablens::init_runtime();
  auto s = vl_test::fixture("stories260K");
  auto x = vl_test::fixture("llama2xs");
  auto g = vl_test::fixture("gpt2-tiny");
  if (s.empty() || x.empty() || g.empty()) return;
  auto ts = vocablens::load_tokenizer_for(s + "/stories260K.bin");
  auto tx = vocablens::load_tokenizer_for(x + "/model.bin");
  auto tg = vocablens::load_tokenizer_for(g);
  auto p = vocablens::shared_tokens(*ts, *tx);
  REQUIRE(!p.empty());
  for (const auto& [i, j] : p) CHECK(ts->token_bytes(i) == tx->token_bytes(j));
  // Every pair across tok512 and GPT-2 has equal bytes, and each id appears at most once per side.
  auto q = vocablens::shared_tokens(*ts, *tg);
  REQUIRE(q.size() > 50);
  std::set<int64_t> ua, ub;
  for (const auto& [i, j] : q) {
    CHECK(ts->token_bytes(i) == tg->token_bytes(j));
    ua.insert(i);
    ub.insert(j);
  }
  CHECK(ua.size() == q.size());
  CHECK(ub.size() == q.size());
}
