// The streamed top-k of a low-rank product against materialised references: bit-for-bit against the
// canonical brute force, exactly (order of ties included) against torch float32 on integer data, and
// within float32 rounding against torch on real-valued data; filters, tiling, threads, pruning.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <numeric>
#include <set>

#include "tensor_checks.hpp"
#include "vocablens/error.hpp"
#include "vocablens/linalg/topk_stream.hpp"
#include "vocablens/model.hpp"

using vocablens::TopkEntry;
using vocablens::TopkStreamOptions;

namespace {

// torch float32 materialisation of the filtered product, stable-sorted by (value desc, i asc, j asc).
std::vector<TopkEntry> torch_reference(const at::Tensor& A, const at::Tensor& B, const TopkStreamOptions& o) {
  at::Tensor M = at::mm(A, B).clone();
  const int64_t n = M.size(0), m = M.size(1);
  const float ninf = -std::numeric_limits<float>::infinity();
  if (o.rows) {
    at::Tensor keep = at::zeros({n}, at::kBool);
    keep.index_fill_(0, at::tensor(*o.rows, at::kLong), true);
    M.masked_fill_(keep.logical_not().unsqueeze(1).expand({n, m}), ninf);
  }
  if (o.cols) {
    at::Tensor keep = at::zeros({m}, at::kBool);
    keep.index_fill_(0, at::tensor(*o.cols, at::kLong), true);
    M.masked_fill_(keep.logical_not().unsqueeze(0).expand({n, m}), ninf);
  }
  if (o.exclude_diagonal) M.diagonal().fill_(ninf);
  at::Tensor flat = M.flatten();
  // Stable descending sort keeps flat index order (= i asc, j asc) among equal values.
  auto sorted = at::sort(flat, /*stable=*/true, /*dim=*/0, /*descending=*/true);
  at::Tensor vals = std::get<0>(sorted), idx = std::get<1>(sorted);
  std::vector<TopkEntry> out;
  for (int64_t q = 0; q < flat.numel() && static_cast<int64_t>(out.size()) < o.k; ++q) {
    float v = vals[q].item<float>();
    if (v == ninf) break;
    int64_t f = idx[q].item<int64_t>();
    out.push_back({f / m, f % m, v});
  }
  return out;
}

at::Tensor randn_nonuniform_rows(int64_t n, int64_t r, double spread) {
  // Rows with norms varying over `spread` orders of magnitude: exercises the norm-bound pruning.
  at::Tensor x = at::randn({n, r});
  at::Tensor scale = at::pow(10.0, at::rand({n, 1}) * spread);
  return (x * scale).contiguous();
}

}  // namespace

TEST_CASE("topk_stream equals the canonical brute force bit for bit, with either screen", "[topk_stream]") {
  vocablens::init_runtime();
  at::manual_seed(1234);
  for (int64_t r : {1, 3, 8, 16, 64}) {
    for (int64_t n : {1, 37, 300}) {
      int64_t m = n == 1 ? 5 : 411;
      at::Tensor A = randn_nonuniform_rows(n, r, r % 2 ? 0.0 : 2.0);
      at::Tensor B = randn_nonuniform_rows(m, r, 1.0).t();  // non-contiguous [r, m]
      for (int64_t k : {1, 7, 100, 5000}) {
        for (bool prune : {true, false})
          for (bool fused : {true, false}) {
            TopkStreamOptions o;
            o.k = k;
            o.prune = prune;
            o.fused_screen = fused;  // the register-blocked screen (where the CPU has AVX-512) and the BLAS one
            o.block_rows = 16;
            o.block_cols = 64;
            INFO("r=" << r << " n=" << n << " k=" << k << " prune=" << prune << " fused=" << fused);
            auto want = vocablens::topk_bruteforce(A, B, o);
            vocablens::TopkStreamStats st;
            auto got = vocablens::topk_stream(A, B, o, &st);
            vl_test::require_identical_topk(got, want);
            CHECK(static_cast<int64_t>(got.size()) == std::min(k, n * m));
            CHECK(st.dense_flops == 2.0 * n * m * r);
            if (!prune) CHECK(st.tiles_pruned == 0);
          }
      }
    }
  }
}

TEST_CASE("both screens keep float32 near-ties that float64 orders differently", "[topk_stream]") {
  vocablens::init_runtime();
  at::manual_seed(4242);
  // Every row is one vector plus a perturbation at float32's last bits: the products of a column differ
  // by less than their float32 rounding error, so a screen that trusted its float32 order would drop some.
  for (int64_t r : {5, 64, 77}) {
    at::Tensor base = at::randn({1, r});
    at::Tensor A = (base.expand({203, r}) * (1.0 + 3e-7 * at::randn({203, r}))).contiguous();
    at::Tensor B = at::randn({r, 161});
    for (int64_t k : {3, 40, 900})
      for (bool fused : {true, false}) {
        TopkStreamOptions o;
        o.k = k;
        o.fused_screen = fused;
        o.block_rows = 24;
        o.block_cols = 96;
        INFO("r=" << r << " k=" << k << " fused=" << fused);
        vl_test::require_identical_topk(vocablens::topk_stream(A, B, o), vocablens::topk_bruteforce(A, B, o));
      }
  }
  // A hand-made inversion: column 1 is 1 + 2^-30 exactly but 1 - 2^-24 in float32 summed in order
  // (1 + 2^-24 rounds to 1, then adding -2^-24 + 2^-30 rounds to 1 - 2^-24); column 0 is exactly 1. Found
  // first, column 0 sets the threshold to 1: a screen without its error margin would drop the true best.
  const float e24 = std::ldexp(1.0f, -24), e30 = std::ldexp(1.0f, -30);
  at::Tensor A = at::tensor({1.0f, e24, 1.0f}).view({1, 3});
  at::Tensor B = at::tensor({1.0f, 1.0f, 0.0f, 1.0f, 0.0f, -e24 + e30}).view({3, 2});
  REQUIRE(at::mm(A, B)[0][1].item<float>() < 1.0f);  // the float32 inversion really happens here
  for (bool fused : {true, false}) {
    TopkStreamOptions o;
    o.k = 1;
    o.prune = false;  // keep the columns in their order
    o.fused_screen = fused;
    auto got = vocablens::topk_stream(A, B, o);
    REQUIRE(got.size() == 1);
    CHECK(got[0].j == 1);
    CHECK(got[0].value == 1.0 + std::ldexp(1.0, -30));
  }
}

TEST_CASE("topk_stream is independent of tiling and thread count", "[topk_stream]") {
  vocablens::init_runtime();
  at::manual_seed(7);
  at::Tensor A = randn_nonuniform_rows(777, 24, 1.5), B = at::randn({24, 1500});
  TopkStreamOptions o;
  o.k = 250;
  auto ref = vocablens::topk_bruteforce(A, B, o);
  const std::pair<int64_t, int64_t> blocks[] = {{0, 0}, {1, 300}, {5, 1}, {5, 33}, {128, 2048}, {1000, 4096}, {64, 1500}};
  for (auto [br, bc] : blocks)
    for (int threads : {1, 2, 3}) {
      o.block_rows = br;
      o.block_cols = bc;
      o.threads = threads;
      INFO("block " << br << "x" << bc << " threads " << threads);
      vl_test::require_identical_topk(vocablens::topk_stream(A, B, o), ref);
    }
}

TEST_CASE("topk_stream on integer data equals torch float32 materialisation exactly, ties included", "[topk_stream]") {
  vocablens::init_runtime();
  at::manual_seed(99);
  // Small integers: every product and sum is exact in float32, so torch's values are exact too, and the
  // matrix is full of ties: the order (value desc, i asc, j asc) is the only thing that decides.
  at::Tensor A = at::randint(-3, 4, {200, 6}).to(at::kFloat);
  at::Tensor B = at::randint(-3, 4, {6, 180}).to(at::kFloat);
  for (int64_t k : {1, 10, 500, 3000}) {
    TopkStreamOptions o;
    o.k = k;
    o.block_rows = 32;
    o.block_cols = 64;
    auto got = vocablens::topk_stream(A, B, o);
    vl_test::require_identical_topk(got, torch_reference(A, B, o));
  }
  // Filters on the same tie-heavy data (the reference applies them by masking the full matrix).
  TopkStreamOptions o;
  o.k = 400;
  std::vector<int64_t> rows, cols;
  for (int64_t i = 0; i < 180; i += 3) rows.push_back(i);
  for (int64_t j = 1; j < 180; j += 2) cols.push_back(j);
  o.rows = rows;
  o.cols = cols;
  o.exclude_diagonal = true;
  at::Tensor Asq = A.narrow(0, 0, 180);
  vl_test::require_identical_topk(vocablens::topk_stream(Asq, B, o), torch_reference(Asq, B, o));
  vl_test::require_identical_topk(vocablens::topk_stream(Asq, B, o), vocablens::topk_bruteforce(Asq, B, o));
}

TEST_CASE("topk_stream agrees with torch float32 on real data up to float32 rounding", "[topk_stream]") {
  vocablens::init_runtime();
  at::manual_seed(5);
  at::Tensor A = at::randn({500, 32}), B = at::randn({32, 700});
  TopkStreamOptions o;
  o.k = 300;
  auto got = vocablens::topk_stream(A, B, o);
  auto ref = torch_reference(A, B, o);
  REQUIRE(got.size() == ref.size());
  for (size_t q = 0; q < got.size(); ++q) CHECK(std::abs(got[q].value - ref[q].value) < 1e-4);
  // Same entries, except possibly where float32 rounding reorders values closer than its error.
  size_t same = 0;
  for (size_t q = 0; q < got.size(); ++q) same += (got[q].i == ref[q].i && got[q].j == ref[q].j);
  CHECK(same >= got.size() - 2);
}

TEST_CASE("filters act inside the stream: classes, predicate, allow-lists", "[topk_stream]") {
  vocablens::init_runtime();
  at::manual_seed(11);
  const int64_t V = 300;
  at::Tensor A = randn_nonuniform_rows(V, 8, 1.0), B = at::randn({8, V});
  // Make the diagonal dominant, as in a copying head: a post-hoc filter of a small top-k would be empty.
  TopkStreamOptions base;
  base.k = 50;
  base.block_rows = 32;
  base.block_cols = 64;

  SECTION("diagonal") {
    at::Tensor E = at::randn({V, 8});
    at::Tensor Aq = E * 3.0, Bq = E.t().contiguous();  // M = 3 E Eᵀ: the diagonal dominates
    TopkStreamOptions o = base;
    auto plain = vocablens::topk_stream(Aq, Bq, o);
    size_t diag = 0;
    for (auto& e : plain) diag += (e.i == e.j);
    CHECK(diag > 25);
    o.exclude_diagonal = true;
    auto got = vocablens::topk_stream(Aq, Bq, o);
    REQUIRE(got.size() == 50);
    for (auto& e : got) CHECK(e.i != e.j);
    vl_test::require_identical_topk(got, vocablens::topk_bruteforce(Aq, Bq, o));
  }
  SECTION("classes and predicate") {
    TopkStreamOptions o = base;
    o.row_class.resize(V);
    o.col_class.resize(V);
    for (int64_t t = 0; t < V; ++t) o.row_class[t] = o.col_class[t] = t % 7 == 0 ? -1 : t / 3;
    o.keep_pair = [](int64_t i, int64_t j) { return (i + j) % 5 != 0; };
    auto got = vocablens::topk_stream(A, B, o);
    for (auto& e : got) {
      CHECK((e.i + e.j) % 5 != 0);
      if (e.i % 7 != 0) CHECK(e.i / 3 != e.j / 3);
    }
    vl_test::require_identical_topk(got, vocablens::topk_bruteforce(A, B, o));
  }
  SECTION("allow-lists with duplicates and unsorted order") {
    TopkStreamOptions o = base;
    o.rows = std::vector<int64_t>{299, 5, 5, 17, 100, 3};
    o.cols = std::vector<int64_t>{0, 299, 150, 150, 42};
    auto got = vocablens::topk_stream(A, B, o);
    CHECK(got.size() == 20);  // 5 distinct rows × 4 distinct columns
    vl_test::require_identical_topk(got, vocablens::topk_bruteforce(A, B, o));
    o.rows = std::vector<int64_t>{};
    CHECK(vocablens::topk_stream(A, B, o).empty());
  }
}

TEST_CASE("norm-bound pruning skips work and stays exact", "[topk_stream]") {
  vocablens::init_runtime();
  at::manual_seed(3);
  at::Tensor A = randn_nonuniform_rows(4000, 16, 3.0), B = randn_nonuniform_rows(3000, 16, 3.0).t();
  TopkStreamOptions o;
  o.k = 100;
  vocablens::TopkStreamStats pruned, full;
  auto a = vocablens::topk_stream(A, B, o, &pruned);
  o.prune = false;
  auto b = vocablens::topk_stream(A, B, o, &full);
  vl_test::require_identical_topk(a, b);
  vl_test::require_identical_topk(a, vocablens::topk_bruteforce(A, B, o));
  CHECK(pruned.tiles_pruned > 0);
  CHECK(pruned.gemm_flops < 0.2 * full.gemm_flops);
  CHECK(full.gemm_flops == full.dense_flops);
  CHECK(pruned.candidates < 100000);
}

TEST_CASE("topk_rows: per-row top-k equals brute force per row", "[topk_stream]") {
  vocablens::init_runtime();
  at::manual_seed(21);
  at::Tensor A = randn_nonuniform_rows(150, 12, 1.0), B = randn_nonuniform_rows(900, 12, 1.0).t();
  for (bool prune : {true, false}) {
    TopkStreamOptions o;
    o.k = 15;
    o.prune = prune;
    o.block_rows = 16;
    o.block_cols = 100;
    o.rows = std::vector<int64_t>{7, 3, 149, 3, 0};
    o.exclude_diagonal = true;
    auto got = vocablens::topk_rows(A, B, o);
    REQUIRE(got.size() == 5);
    for (size_t q = 0; q < got.size(); ++q) {
      TopkStreamOptions one = o;
      one.rows = std::vector<int64_t>{(*o.rows)[q]};
      INFO("row " << (*o.rows)[q]);
      vl_test::require_identical_topk(got[q], vocablens::topk_bruteforce(A, B, one));
    }
    o.rows.reset();
    o.cols = std::vector<int64_t>{1, 2, 3, 899};
    auto all = vocablens::topk_rows(A, B, o);
    REQUIRE(all.size() == 150);
    CHECK(all[2].size() == 3);  // column 2 excluded by the diagonal
    CHECK(all[10].size() == 4);
  }
}

TEST_CASE("topk_stream rejects bad operands", "[topk_stream]") {
  TopkStreamOptions o;
  CHECK_THROWS_AS(vocablens::topk_stream(at::randn({3, 4}), at::randn({5, 6}), o), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::topk_stream(at::randn({3, 4}).to(at::kDouble), at::randn({4, 6}), o), vocablens::UsageError);
  at::Tensor bad = at::randn({3, 4});
  bad[1][2] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(vocablens::topk_stream(bad, at::randn({4, 6}), o), vocablens::UsageError);
  o.rows = std::vector<int64_t>{3};
  CHECK_THROWS_AS(vocablens::topk_stream(at::randn({3, 4}), at::randn({4, 6}), o), vocablens::UsageError);
  o.rows.reset();
  o.row_class = {1, 2};
  CHECK_THROWS_AS(vocablens::topk_stream(at::randn({3, 4}), at::randn({4, 6}), o), vocablens::UsageError);
  TopkStreamOptions z;
  z.k = 0;
  CHECK(vocablens::topk_stream(at::randn({3, 4}), at::randn({4, 6}), z).empty());
  CHECK(vocablens::topk_stream(at::randn({0, 4}), at::randn({4, 6}), TopkStreamOptions{}).empty());
}
