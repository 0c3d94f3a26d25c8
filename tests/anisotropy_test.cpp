// Anisotropy: the O(V·d) mean pairwise cosine (‖Σuᵢ‖² − n)/(n(n−1)) against brute force over all
// ordered pairs (stories260K, llama2xs, gpt2-tiny: all 50257² pairs by blocked GEMM), and the centred /
// top-components-removed variants against explicitly transformed matrices.
#include <catch2/catch.hpp>

#include <cmath>

#include "fixtures.hpp"
#include "vocablens/anisotropy.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/spectrum.hpp"

namespace {

// Brute force in float64: every ordered pair, explicitly (small matrices only).
double bruteforce64(const at::Tensor& M) {
  at::Tensor X = M.to(at::kDouble);
  at::Tensor nr = X.norm(2, 1);
  at::Tensor keep = nr > 0;
  X = X.index({keep}) / nr.index({keep}).unsqueeze(1);
  const double n = static_cast<double>(X.size(0));
  at::Tensor S = at::mm(X, X.t());
  return (S.sum().item<double>() - S.diagonal().sum().item<double>()) / (n * (n - 1));
}

// (X − μ) with the top-D principal directions of the centred rows projected out, in float64.
at::Tensor remove_top(const at::Tensor& M, int64_t D) {
  at::Tensor X = M.to(at::kDouble);
  at::Tensor Xc = X - X.mean(0, true);
  if (D == 0) return Xc;
  at::Tensor C = at::mm(Xc.t(), Xc) / static_cast<double>(X.size(0));
  at::Tensor Q = std::get<1>(at::linalg_eigh(C)).flip(1).narrow(1, 0, D);
  return Xc - at::mm(at::mm(Xc, Q), Q.t());
}

}  // namespace

TEST_CASE("anisotropy: closed form on synthetic matrices", "[anisotropy]") {
  vocablens::init_runtime();
  // Identical directions: every cosine is 1.
  at::Tensor same = at::ones({10, 4}) * at::arange(1, 11, at::kFloat).unsqueeze(1);
  CHECK(vocablens::mean_pairwise_cosine(same) == Approx(1.0).epsilon(1e-14));
  // Orthonormal rows: 0.
  CHECK(std::abs(vocablens::mean_pairwise_cosine(at::eye(6))) < 1e-15);
  // u, −u alternating (n = 4): pairs: 2 of +1 ... ordered pairs: each row has 1 equal and 2 opposite → −1/3.
  at::Tensor alt = at::tensor({1.f, 2.f, -1.f, -2.f, 2.f, 4.f, -3.f, -6.f}).reshape({4, 2});
  CHECK(vocablens::mean_pairwise_cosine(alt) == Approx(-1.0 / 3.0).epsilon(1e-14));
  // Zero rows are excluded (and counted).
  at::Tensor withzero = at::cat({alt, at::zeros({3, 2})});
  int64_t used = 0;
  CHECK(vocablens::mean_pairwise_cosine(withzero, &used) == Approx(-1.0 / 3.0).epsilon(1e-14));
  CHECK(used == 4);
  auto a = vocablens::anisotropy(withzero, {{0, 1}});
  CHECK(a.zero_rows == 3);
  CHECK(a.mean_cosine == Approx(-1.0 / 3.0).epsilon(1e-14));
  // Random Gaussian rows: O(V d) equals brute force, and is near 0.
  at::manual_seed(3);
  at::Tensor R = at::randn({700, 20}) + 0.3;
  double fast = vocablens::mean_pairwise_cosine(R);
  CHECK(fast == Approx(bruteforce64(R)).epsilon(1e-12));
  CHECK(vocablens::mean_pairwise_cosine_bruteforce(R, 128) == Approx(fast).margin(1e-9));
  CHECK(std::isnan(vocablens::mean_pairwise_cosine(at::ones({1, 3}))));
}

TEST_CASE("anisotropy: O(V d) equals brute force on stories260K and llama2xs (all pairs, float64)", "[anisotropy][fixtures]") {
  vocablens::init_runtime();
  for (auto [fx, file] : {std::pair<const char*, const char*>{"stories260K", "/stories260K.bin"}, {"llama2xs", "/model.bin"}}) {
    std::string dir = vl_test::fixture(fx);
    if (dir.empty()) continue;
    INFO(fx);
    auto m = vocablens::load_model(dir + file);
    at::Tensor E = m.W_E();
    auto a = vocablens::anisotropy(E, {{0, 1, 2, 3, 5, 10}}, "W_E");
    CHECK(a.rows == 512);
    CHECK(a.mean_cosine == Approx(bruteforce64(E)).epsilon(1e-11));
    CHECK(a.mean_cosine == Approx(vocablens::mean_pairwise_cosine_bruteforce(E, 100)).margin(1e-8));
    CHECK(a.mean_cosine_centred == Approx(bruteforce64(remove_top(E, 0))).epsilon(1e-10));
    REQUIRE(a.removed == std::vector<int64_t>{0, 1, 2, 3, 5, 10});
    for (size_t t = 0; t < a.removed.size(); ++t) {
      INFO("removed " << a.removed[t]);
      CHECK(a.mean_cosine_removed[t] == Approx(bruteforce64(remove_top(E, a.removed[t]))).margin(1e-10));
    }
    auto r = a.to_result();
    CHECK(r.kind == "anisotropy");
    CHECK(r.summary["after_removing_top_components"].size() == 6u);
  }
}

// All 50257^2 pairs cost ~160 GFLOP: hidden from the default run (2-core CI); run it with
//   ./anisotropy_test "[slow]"
TEST_CASE("anisotropy: O(V d) equals brute force over all 50257^2 pairs of gpt2-tiny", "[.][slow][anisotropy][fixtures]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  at::Tensor E = m.W_E();
  int64_t used = 0;
  double fast = vocablens::mean_pairwise_cosine(E, &used);
  CHECK(used == 50257);
  // All ordered pairs: 25 x 25 / 2 float32 GEMM blocks of 2048 x 2048 x 64, block sums in float64.
  double brute = vocablens::mean_pairwise_cosine_bruteforce(E, 2048);
  INFO("fast " << fast << " brute " << brute);
  // Each float32 cosine is within ~5e-6 of the truth; summed over 2.5e9 pairs the errors average out:
  // observed difference ~1e-11.
  CHECK(fast == Approx(brute).margin(1e-9));
  // The centred and removed variants against the O(V d) identity on explicitly transformed rows.
  auto a = vocablens::anisotropy(E, {{1, 3}}, "W_E");
  CHECK(a.mean_cosine == Approx(fast).epsilon(1e-14));
  CHECK(a.mean_cosine_centred == Approx(vocablens::mean_pairwise_cosine(remove_top(E, 0).to(at::kFloat))).margin(1e-7));
  for (size_t t = 0; t < a.removed.size(); ++t)
    CHECK(a.mean_cosine_removed[t] ==
          Approx(vocablens::mean_pairwise_cosine(remove_top(E, a.removed[t]).to(at::kFloat))).margin(1e-7));
}

TEST_CASE("anisotropy: O(V d) equals brute force over all pairs of 4000 random gpt2-tiny rows", "[anisotropy][fixtures]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  at::manual_seed(11);
  at::Tensor rows = at::randperm(50257, at::kLong).narrow(0, 0, 4000);
  at::Tensor E = m.W_E().index_select(0, rows);
  double fast = vocablens::mean_pairwise_cosine(E);
  CHECK(fast == Approx(bruteforce64(E)).epsilon(1e-10));
  CHECK(fast == Approx(vocablens::mean_pairwise_cosine_bruteforce(E, 1000)).margin(1e-9));
  auto a = vocablens::anisotropy(m.W_E(), {{2}}, "W_E");
  CHECK(a.mean_cosine == Approx(vocablens::mean_pairwise_cosine(m.W_E())).epsilon(1e-14));
  CHECK(a.mean_cosine_removed[0] == Approx(vocablens::mean_pairwise_cosine(remove_top(m.W_E(), 2).to(at::kFloat))).margin(1e-7));
}
