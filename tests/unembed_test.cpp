// E⁺ on every fixture (Moore–Penrose identities), the on-disk cache, read projections and token filters
// (hidden-state projections: project_test.cpp).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "fixtures.hpp"
#include "npy_tensor.hpp"
#include "tensor_checks.hpp"
#include "vocablens/detail/hash.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/token_filter.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/unembed.hpp"

namespace {

// Relative max-abs error of X against Y.
double rel_err(const at::Tensor& X, const at::Tensor& Y) {
  return vl_test::max_abs_diff(X, Y) / std::max(1e-30, Y.abs().max().item<double>());
}

void check_penrose(const at::Tensor& E_in, const vocablens::Pinv& p, int64_t expect_rank) {
  at::Tensor E = E_in.to(at::kDouble), P = p.pinv.to(at::kDouble);
  const int64_t V = E.size(0), d = E.size(1);
  REQUIRE(p.pinv.sizes() == at::IntArrayRef({d, V}));
  CHECK(p.rank == expect_rank);
  at::Tensor PE = at::mm(P, E);                     // [d, d] (== I_d when rank d)
  CHECK(rel_err(at::mm(E, PE), E) < 1e-5);          // E E⁺ E = E
  CHECK(rel_err(at::mm(PE, P), P) < 1e-5);          // E⁺ E E⁺ = E⁺
  CHECK(vl_test::max_abs_diff(PE, PE.t()) < 1e-5);  // (E⁺ E)ᵀ = E⁺ E
  // (E E⁺)ᵀ = E E⁺, checked on 500 rows and columns (V×V is 10 GB for GPT-2).
  at::Tensor S = at::randperm(V, at::kLong).narrow(0, 0, std::min<int64_t>(V, 500));
  at::Tensor EP = at::mm(E.index_select(0, S), P.index_select(1, S));
  CHECK(vl_test::max_abs_diff(EP, EP.t()) < 1e-5);
  if (expect_rank == d) CHECK(vl_test::max_abs_diff(PE, at::eye(d, at::kDouble)) < 1e-4);
  REQUIRE(static_cast<int64_t>(p.singular_values.size()) == d);
  for (size_t i = 1; i < p.singular_values.size(); ++i) CHECK(p.singular_values[i] <= p.singular_values[i - 1]);
}

struct CacheDir {
  std::string dir = vl_test::temp_dir("pinv-cache");
  CacheDir() { ::setenv("VOCABLENS_CACHE", dir.c_str(), 1); }
};

}  // namespace

TEST_CASE("XXH64 matches the reference implementation's known values", "[unembed]") {
  CHECK(vocablens::hash_bytes("", 0) == 0xEF46DB3751D8E999ULL);
  CHECK(vocablens::hash_bytes("abc", 3) == 0x44BC2CF5AD770999ULL);
  std::string long_text(1000, 'x');
  CHECK(vocablens::hash_bytes(long_text.data(), long_text.size()) != vocablens::hash_bytes(long_text.data(), 999));
  at::Tensor a = at::arange(12, at::kFloat);
  CHECK(vocablens::hash_tensor(a.view({3, 4})) != vocablens::hash_tensor(a.view({4, 3})));
  CHECK(vocablens::hash_tensor(a.view({3, 4}).t()) == vocablens::hash_tensor(a.view({3, 4}).t().contiguous()));
}

TEST_CASE("E+ satisfies the Moore-Penrose identities on every fixture", "[unembed][pinv]") {
  vocablens::init_runtime();
  CacheDir cache;
  struct F {
    const char* path;
    int64_t d;
  };
  const F fixtures[] = {
      {"gpt2-tiny", 64},      {"gpt2-tiny-prefixed", 64}, {"gpt2-tiny-torchbin", 64}, {"stories260K/stories260K.bin", 64},
      {"stories260K-hf", 64}, {"llama2xs/model.bin", 0},  {"llama2xs/ckpt.pt", 0}};
  for (const auto& f : fixtures) {
    INFO(f.path);
    std::string path = vl_test::fixture(f.path);
    if (path.empty()) continue;
    auto m = vocablens::load_model(path);
    at::Tensor E = vocablens::unembedding_matrix(m);
    CHECK(E.sizes() == at::IntArrayRef({m.config().vocab_size, m.config().d_model}));
    auto p = vocablens::embedding_pinv(m);
    check_penrose(E, p, m.config().d_model);
    CHECK(p.cache_path.rfind(cache.dir, 0) == 0);
    if (E.size(0) <= 4096) {
      // Independent reference: LibTorch's SVD-based pinv in float64.
      at::Tensor ref = at::linalg_pinv(E.to(at::kDouble));
      CHECK(rel_err(p.pinv.to(at::kDouble), ref) < 1e-5);
    }
  }
}

TEST_CASE("E+ of a rank-deficient matrix keeps only the real directions", "[unembed][pinv]") {
  vocablens::init_runtime();
  at::manual_seed(4);
  at::Tensor E = at::mm(at::randn({300, 5}, at::kDouble), at::randn({5, 16}, at::kDouble)).to(at::kFloat);
  vocablens::PinvOptions o;
  o.use_cache = false;
  auto p = vocablens::pseudo_inverse(E, o);
  check_penrose(E, p, 5);
  CHECK(p.cache_note == "cache disabled");
  CHECK(p.singular_values[5] < 1e-5 * p.singular_values[0]);
  at::Tensor ref = at::linalg_pinv(E.to(at::kDouble), 1e-6, /*hermitian=*/false);
  CHECK(rel_err(p.pinv.to(at::kDouble), ref) < 1e-4);
}

TEST_CASE("the E+ cache: written atomically, read back bit-identical, corrupt files ignored", "[unembed][pinv]") {
  vocablens::init_runtime();
  at::manual_seed(8);
  at::Tensor E = at::randn({700, 24});
  std::string dir = vl_test::temp_dir("pinv-cache2");
  vocablens::PinvOptions o;
  o.cache_dir = dir + "/nested/cache";
  auto first = vocablens::pseudo_inverse(E, o);
  CHECK_FALSE(first.from_cache);
  REQUIRE_FALSE(first.cache_path.empty());
  CHECK(first.cache_note.empty());
  auto second = vocablens::pseudo_inverse(E, o);
  CHECK(second.from_cache);
  CHECK(second.cache_path == first.cache_path);
  CHECK(at::equal(first.pinv, second.pinv));
  CHECK(first.singular_values == second.singular_values);
  CHECK(first.rank == second.rank);
  // numpy-compatible: our own npy reader opens it.
  at::Tensor back = vl_test::load_npy_tensor(first.cache_path);
  CHECK(at::equal(back, first.pinv));
  // A different E (one value changed) gets a different file.
  at::Tensor E2 = E.clone();
  E2[3][4] += 1.0f;
  auto other = vocablens::pseudo_inverse(E2, o);
  CHECK_FALSE(other.from_cache);
  CHECK(other.cache_path != first.cache_path);
  // A cache file replaced by another valid matrix of the same shape (E2's E+ copied over E's): its checksum
  // no longer matches, so it is recomputed, not used.
  {
    const std::string base = first.cache_path.substr(0, first.cache_path.size() - 4);
    const std::string other_base = other.cache_path.substr(0, other.cache_path.size() - 4);
    vl_test::write_file(first.cache_path, vl_test::read_file(other.cache_path));
    vl_test::write_file(base + ".sv.npy", vl_test::read_file(other_base + ".sv.npy"));
    REQUIRE_FALSE(at::equal(vl_test::load_npy_tensor(first.cache_path), first.pinv));
    auto swapped = vocablens::pseudo_inverse(E, o);
    CHECK_FALSE(swapped.from_cache);
    CHECK(at::equal(swapped.pinv, first.pinv));
    // Recomputing rewrote the files and their checksum: the next call reads them again.
    CHECK(vocablens::pseudo_inverse(E, o).from_cache);
  }
  // Corrupt (truncated) file: recomputed, result unchanged.
  {
    std::string bytes = vl_test::read_file(first.cache_path);
    vl_test::write_file(first.cache_path, bytes.substr(0, bytes.size() / 2));
  }
  auto third = vocablens::pseudo_inverse(E, o);
  CHECK_FALSE(third.from_cache);
  CHECK(at::equal(third.pinv, first.pinv));
  // Unwritable cache directory: not an error.
  std::string ro = dir + "/readonly";
  ::mkdir(ro.c_str(), 0555);
  o.cache_dir = ro + "/sub";
  auto fourth = vocablens::pseudo_inverse(E, o);
  CHECK(at::equal(fourth.pinv, first.pinv));
  if (::geteuid() != 0) CHECK_FALSE(fourth.cache_note.empty());
  o.rtol = 2.0;
  CHECK_THROWS_AS(vocablens::pseudo_inverse(E, o), vocablens::UsageError);
}

TEST_CASE("read projections and inverse kinds", "[unembed]") {
  vocablens::init_runtime();
  CacheDir cache;
  std::string dir = vl_test::fixture("stories260K");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir + "/stories260K.bin");
  CHECK(vocablens::parse_inverse_kind("pinv") == vocablens::InverseKind::Pinv);
  CHECK(vocablens::parse_inverse_kind("transpose") == vocablens::InverseKind::Transpose);
  CHECK(vocablens::parse_inverse_kind("embed") == vocablens::InverseKind::Embed);
  CHECK_THROWS_AS(vocablens::parse_inverse_kind("inverse"), vocablens::UsageError);
  CHECK(std::string(vocablens::to_string(vocablens::InverseKind::Transpose)) == "transpose");
  at::Tensor Rp = vocablens::read_projection(m, vocablens::InverseKind::Pinv);
  at::Tensor Rt = vocablens::read_projection(m, vocablens::InverseKind::Transpose);
  at::Tensor Re = vocablens::read_projection(m, vocablens::InverseKind::Embed);
  CHECK(Rp.sizes() == at::IntArrayRef({64, 512}));
  CHECK(at::equal(Rt, m.W_U()));
  CHECK(at::equal(Re, m.W_E().t()));
  // Reading through E⁺ undoes writing through E: E⁺ E = I_d (rank d).
  at::Tensor I = at::mm(Rp, vocablens::unembedding_matrix(m));
  CHECK(vl_test::max_abs_diff(I, at::eye(64)) < 1e-4);
}

TEST_CASE("project_topk equals torch topk of the full projection", "[unembed]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  at::manual_seed(2);
  at::Tensor X = at::randn({7, 64});
  auto top = vocablens::project_topk(X, m.W_U(), 20);
  at::Tensor logits = at::mm(X, m.W_U());
  auto ref = at::topk(logits, 20, 1);
  REQUIRE(top.size() == 7);
  for (int64_t r = 0; r < 7; ++r) {
    REQUIRE(top[r].size() == 20);
    for (int64_t q = 0; q < 20; ++q) {
      CHECK(top[r][q].i == r);
      CHECK(std::abs(top[r][q].value - std::get<0>(ref)[r][q].item<double>()) < 1e-4);
      CHECK(top[r][q].j == std::get<1>(ref)[r][q].item<int64_t>());  // random data: no near-ties at the top
    }
  }
  CHECK_THROWS_AS(vocablens::project_topk(X, m.W_U().t(), 3), vocablens::UsageError);
}

TEST_CASE("token filters: alphabetic tokens, normalised classes, allow-list files", "[unembed]") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto tok = vocablens::load_tokenizer_for(dir);
  int64_t paris = tok->require_token_id(" Paris"), paris2 = tok->require_token_id("Paris");
  CHECK(vocablens::is_alphabetic_token(*tok, paris));
  CHECK(vocablens::is_alphabetic_token(*tok, tok->require_token_id("the")));
  CHECK_FALSE(vocablens::is_alphabetic_token(*tok, tok->require_token_id(" 123")));
  CHECK_FALSE(vocablens::is_alphabetic_token(*tok, tok->require_token_id(",")));
  CHECK_FALSE(vocablens::is_alphabetic_token(*tok, tok->require_token_id(" ")));
  CHECK_FALSE(vocablens::is_alphabetic_token(*tok, 50256));  // <|endoftext|>
  auto cls = vocablens::normalized_token_classes(*tok, 50257);
  CHECK(cls[paris] == cls[paris2]);
  CHECK(cls[paris] >= 0);
  CHECK(cls[tok->require_token_id(" The")] == cls[tok->require_token_id("the")]);
  CHECK(cls[tok->require_token_id(" London")] != cls[paris]);
  vocablens::TokenFilter f;
  CHECK_FALSE(vocablens::allowed_tokens(50257, f, tok.get()).has_value());
  f.alpha_only = true;
  auto alpha = vocablens::allowed_tokens(50257, f, tok.get());
  REQUIRE(alpha);
  CHECK(alpha->size() > 20000);
  CHECK(alpha->size() < 50257);
  CHECK_THROWS_AS(vocablens::allowed_tokens(50257, f, nullptr), vocablens::UsageError);
  f.allow = std::vector<int64_t>{paris, 11, 13};  // 11 = ",", 13 = "."
  CHECK(*vocablens::allowed_tokens(50257, f, tok.get()) == std::vector<int64_t>{paris});
  f.allow = std::vector<int64_t>{50257};
  CHECK_THROWS_AS(vocablens::allowed_tokens(50257, f, tok.get()), vocablens::UsageError);

  std::string tmp = vl_test::temp_dir("allow");
  vl_test::write_file(tmp + "/ids.txt", "# an allow-list\n1 2 3\n\n  42 # the answer\n7\n");
  CHECK(vocablens::read_token_id_list(tmp + "/ids.txt") == std::vector<int64_t>{1, 2, 3, 42, 7});
  vl_test::write_file(tmp + "/bad.txt", "1 2 Paris\n");
  CHECK_THROWS_AS(vocablens::read_token_id_list(tmp + "/bad.txt"), vocablens::FormatError);
  CHECK_THROWS_AS(vocablens::read_token_id_list(tmp + "/missing.txt"), vocablens::FormatError);
}
