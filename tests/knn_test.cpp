// The exact k-NN graph: the blocked kernel against brute force (every pair scored by cosine64, sorted by
// cosine desc / id asc) — identical ids and bit-identical scores; exact ties; crowded rows that need the
// fallback; E⁺-space.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/knn.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using Row = std::vector<std::pair<double, int64_t>>;

// Brute force for one row: every other row scored by cosine64, full sort.
Row brute_row(const at::Tensor& X, int64_t i, int64_t k) {
  const int64_t n = X.size(0), d = X.size(1);
  const float* x = X.data_ptr<float>();
  Row all;
  for (int64_t j = 0; j < n; ++j)
    if (j != i) all.emplace_back(vocablens::cosine64(x + i * d, x + j * d, d), j);
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  all.resize(static_cast<size_t>(k));
  return all;
}

// Checks rows of a graph against brute force; returns the number of rows checked.
int64_t check_rows(const vocablens::KnnGraph& g, const at::Tensor& X, const std::vector<int64_t>& which) {
  int64_t checked = 0;
  for (int64_t r : which) {
    int64_t i = g.rows[static_cast<size_t>(r)];
    Row want = brute_row(X, i, g.k);
    bool same = true;
    for (int64_t t = 0; t < g.k; ++t) {
      same = same && g.indices[static_cast<size_t>(r * g.k + t)] == want[static_cast<size_t>(t)].second &&
             g.scores[static_cast<size_t>(r * g.k + t)] == want[static_cast<size_t>(t)].first;
    }
    INFO("row " << i);
    CHECK(same);
    ++checked;
  }
  return checked;
}

std::vector<int64_t> iota_rows(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

}  // namespace

TEST_CASE("neighbours: k-NN graph equals brute force on stories260K and llama2xs (all rows)", "[neighbours][fixtures]") {
  vocablens::init_runtime();
  for (auto [fx, file] : {std::pair<const char*, const char*>{"stories260K", "/stories260K.bin"}, {"llama2xs", "/model.bin"}}) {
    std::string dir = vl_test::fixture(fx);
    if (dir.empty()) continue;
    INFO(fx);
    auto m = vocablens::load_model(dir + file);
    at::Tensor X = m.W_E().contiguous();
    for (int64_t block : {512, 100, 37}) {
      vocablens::KnnOptions o;
      o.k = 10;
      o.block = block;
      auto g = vocablens::knn_graph(X, o);
      INFO("block " << block);
      REQUIRE(g.indices.size() == 512u * 10u);
      CHECK(check_rows(g, X, iota_rows(512)) == 512);
      // stories260K's ~220 untrained byte tokens (<0x00>..<0xFF>) are near-copies of one vector (top-1
      // cosine > 0.9999): their rows have more than k + slack candidates inside the float32 error window
      // and take the exact fallback; the lists still equal brute force.
      CHECK(g.fallback_rows < 256);
      CHECK(g.rescored >= 5120);
      int64_t total_in = 0;
      for (auto v : g.in_degree) total_in += v;
      CHECK(total_in == 5120);
    }
    // E+ space: the same kernel on the pseudo-inverse rows.
    at::Tensor W = vocablens::pseudo_inverse_rows(X);
    at::Tensor want = at::linalg_pinv(X.to(at::kDouble)).t();
    CHECK(((W.to(at::kDouble) - want).abs().max() / want.abs().max()).item<double>() < 1e-5);
    auto g = vocablens::knn_graph(W, {5, 128, 0, {}});
    CHECK(check_rows(g, W, iota_rows(512)) == 512);
  }
}

TEST_CASE("neighbours: exact ties and crowded rows", "[neighbours]") {
  vocablens::init_runtime();
  at::manual_seed(5);
  at::Tensor X = at::randn({300, 16});
  // Rows 10, 20, 30, 40 are scaled copies of row 3: exact cosine ties (1.0 in float64 only up to rounding
  // of the scaling, so use exact copies for bit ties and powers of two for scaled ones).
  for (int64_t r : {10, 20, 30, 40}) X[r].copy_(X[3]);
  X[50].copy_(X[3] * 2.0);  // scaling by 2 is exact: cosine64 identical
  X[60].copy_(X[3] * 0.5);
  // 60 more copies of row 7: row 7's own list is crowded beyond k + slack (fallback path).
  for (int64_t r = 100; r < 160; ++r) X[r].copy_(X[7]);
  X[200].zero_();  // a zero row: cosine 0 with everything
  vocablens::KnnOptions o;
  o.k = 8;
  o.block = 64;
  o.slack = 4;
  auto g = vocablens::knn_graph(X, o);
  CHECK(check_rows(g, X, iota_rows(300)) == 300);
  CHECK(g.fallback_rows > 0);
  // Row 3's neighbours: the six copies first, in id order (tied cosines), then the rest.
  std::vector<int64_t> first6(g.indices.begin() + 3 * 8, g.indices.begin() + 3 * 8 + 6);
  CHECK(first6 == std::vector<int64_t>{10, 20, 30, 40, 50, 60});
  // Row 7: copies 100..107 (ids ascending among the 60 ties).
  std::vector<int64_t> r7(g.indices.begin() + 7 * 8, g.indices.begin() + 8 * 8);
  CHECK(r7 == std::vector<int64_t>{100, 101, 102, 103, 104, 105, 106, 107});
  // The zero row: everything ties at 0 -> ids 0..7.
  std::vector<int64_t> r200(g.indices.begin() + 200 * 8, g.indices.begin() + 201 * 8);
  CHECK(r200 == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  // knn_query agrees with knn_graph row for row.
  std::vector<int64_t> rows = {3, 7, 200, 299, 0};
  auto q = vocablens::knn_query(X, rows, o);
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t t = 0; t < 8; ++t) {
      CHECK(q.indices[r * 8 + static_cast<size_t>(t)] == g.indices[static_cast<size_t>(rows[r] * 8 + t)]);
      CHECK(q.scores[r * 8 + static_cast<size_t>(t)] == g.scores[static_cast<size_t>(rows[r] * 8 + t)]);
    }
  CHECK_THROWS_AS(vocablens::knn_graph(at::ones({1, 3})), vocablens::UsageError);
  at::Tensor bad = at::ones({4, 3});
  bad[1][1] = std::nan("");
  // Not a usage error (exit 1, not 2): the data holds NaN; the line names where.
  CHECK_THROWS_WITH(vocablens::knn_graph(bad), Catch::Contains("1 non-finite value of 12 (first: nan at [1, 1])"));
}

TEST_CASE("neighbours: gpt2-tiny k-NN rows equal brute force (subset of query rows vs all V)", "[neighbours][fixtures]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  at::Tensor X = m.W_E().contiguous();
  at::manual_seed(9);
  at::Tensor perm = at::randperm(50257, at::kLong).narrow(0, 0, 120);
  std::vector<int64_t> rows(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + 120);
  rows.push_back(0);
  rows.push_back(50256);
  vocablens::KnnOptions o;
  o.k = 10;
  auto g = vocablens::knn_query(X, rows, o);
  CHECK(check_rows(g, X, iota_rows(static_cast<int64_t>(rows.size()))) == static_cast<int64_t>(rows.size()));
  // Symmetric kernel on a 3000-row slice, every row checked.
  at::Tensor S = X.narrow(0, 20000, 3000).contiguous();
  auto gs = vocablens::knn_graph(S, o);
  CHECK(check_rows(gs, S, iota_rows(3000)) == 3000);
  // Independent float64 scoring by at::mm agrees (cosine to 1e-12; ids wherever the gap allows).
  at::Tensor U = S.to(at::kDouble);
  U = U / U.norm(2, 1, true);
  at::Tensor C = at::mm(U.narrow(0, 0, 50), U.t());
  for (int64_t i = 0; i < 50; ++i) {
    C[i][i] = -2.0;
    auto top = at::topk(C[i], 10);
    for (int64_t t = 0; t < 10; ++t)
      CHECK(std::abs(std::get<0>(top)[t].item<double>() - gs.scores[static_cast<size_t>(i * 10 + t)]) < 1e-12);
  }
}

// The full 50257-row graph (~160 GFLOP): hidden from the default run; ./neighbours_test "[slow]".
TEST_CASE("neighbours: full gpt2-tiny k-NN graph equals brute force on sampled rows", "[.][slow][neighbours][fixtures]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  at::Tensor X = m.W_E().contiguous();
  auto g = vocablens::knn_graph(X, {10, 2048, 0, {}});
  WARN("gpt2-tiny full graph: " << g.seconds << " s, rescored " << g.rescored << ", fallback rows " << g.fallback_rows);
  at::manual_seed(10);
  at::Tensor perm = at::randperm(50257, at::kLong).narrow(0, 0, 1000);
  std::vector<int64_t> which(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + 1000);
  CHECK(check_rows(g, X, which) == 1000);
}
