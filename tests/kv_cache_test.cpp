// Incremental decoding (vocablens/kv_cache.hpp) against the full forward pass, which families_test and
// model_test check against llama.cpp and float64 references: the logits of a prompt run in one call, then
// one position per call, then several positions in one call after cached ones, on every family's variant
// (Gemma-2's sliding window and soft-caps, Qwen3's q/k norms, GQA, partial rotary, learned positions, a
// llama2.c checkpoint) and on trainer GPTs with ALiBi and sinusoidal positions whose weights are scaled up so
// that a wrong position or bias shows far above rounding; batches of two. Then greedy decoding against a
// loop of full passes, and the errors that must leave a cache as it was.
#include <algorithm>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "random_gpt.hpp"
#include "vocablens/attention.hpp"
#include "vocablens/error.hpp"
#include "vocablens/kv_cache.hpp"
#include "vocablens/model.hpp"

namespace {

struct Named {
  std::string name;
  vocablens::Model model;
};

// The trainer's GPT with a 64-position context, weights scaled up (support/random_gpt.hpp).
vocablens::Model random_gpt(vocablens::PositionKind positions) {
  return vl_test::scaled_random_gpt(positions, 2, 64, 11, "random GPT");
}

std::vector<Named> every_variant() {
  std::vector<Named> out;
  for (const char* f : {"qwen2",   "qwen3",    "mistral",  "llama3", "llama_linear", "phi3", "gpt_neox", "gemma",
                        "gemma2",  "gemma3",   "stablelm", "olmo2",  "smollm3",      "phi2", "bloom",    "falcon",
                        "mixtral", "qwen3moe", "qwen2moe", "olmoe",  "gpt_oss",      "opt"})
    out.push_back({f, vocablens::load_model(std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/" + f)});
  for (const char* f : {"gpt2-tiny", "stories260K-hf", "stories260K/stories260K.bin"}) {
    const std::string dir = vl_test::fixture(f);
    REQUIRE(!dir.empty());
    out.push_back({f, vocablens::load_model(dir)});
  }
  out.push_back({"random GPT, ALiBi", random_gpt(vocablens::PositionKind::ALiBi)});
  out.push_back({"random GPT, sinusoidal", random_gpt(vocablens::PositionKind::Sinusoidal)});
  out.push_back({"random GPT, learned", random_gpt(vocablens::PositionKind::Learned)});
  return out;
}

double rel_err(const at::Tensor& got, const at::Tensor& want) {
  const double scale = std::max(1.0, want.abs().max().item<double>());
  return (got - want).abs().max().item<double>() / scale;
}

// The prompt of `first` positions in one call, then one position per call up to T - 3, then the last 3 in
// one call; each call's logits against the full pass's at the same positions.
void check_against_full(const vocablens::Model& m, const at::Tensor& ids, int64_t first) {
  const int64_t T = ids.size(1);
  const at::Tensor full = m.forward(ids).logits;
  vocablens::KVCache kv;
  int64_t p = 0;
  auto step = [&](int64_t n) {
    const auto out = vocablens::forward_cached(m, ids.narrow(1, p, n), kv);
    INFO("positions " << p << " .. " << p + n - 1);
    REQUIRE(out.logits.sizes() == at::IntArrayRef({ids.size(0), n, m.config().vocab_size}));
    CHECK(rel_err(out.logits, full.narrow(1, p, n)) <= 1e-5);
    p += n;
    CHECK(kv.length() == p);
  };
  step(first);
  while (p < T - 3) step(1);
  step(T - p);
}

}  // namespace

TEST_CASE("cached decoding gives the full pass's logits on every family's variant, one position or several per call") {
  for (const auto& [name, m] : every_variant()) {
    INFO(name);
    const int64_t T = std::min<int64_t>(m.config().n_ctx, 24);  // beyond Gemma-2's window of 4 and Mistral's
    at::manual_seed(5);
    const at::Tensor ids = at::randint(0, m.config().vocab_size, {2, T}, at::kLong);
    check_against_full(m, ids, 5);
    check_against_full(m, ids.narrow(0, 1, 1), 1);  // B = 1, from the first position on
  }
}

TEST_CASE("a prompt longer than one attention block: the blocked first call, then cached steps") {
  // The first call (offset 0) may take blocked attention; the keys it caches must be those later steps read.
  vocablens::AttentionPolicy pol;
  pol.block = 4;
  const vocablens::AttentionPolicy saved = vocablens::attention_policy();
  vocablens::set_attention_policy(pol);
  for (const char* f : {"gemma2", "qwen3", "gpt_neox"}) {
    INFO(f);
    auto m = vocablens::load_model(std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/" + f);
    at::manual_seed(9);
    const at::Tensor ids = at::randint(0, m.config().vocab_size, {2, std::min<int64_t>(m.config().n_ctx, 21)}, at::kLong);
    check_against_full(m, ids, 13);
  }
  vocablens::set_attention_policy(saved);
}

TEST_CASE("greedy decoding equals argmax over full passes, to the end of the context") {
  const std::string path = vl_test::fixture("stories260K/stories260K.bin");
  REQUIRE(!path.empty());
  std::vector<Named> models;
  models.push_back({"stories260K", vocablens::load_model(path)});
  models.push_back({"random GPT, ALiBi (context 64)", random_gpt(vocablens::PositionKind::ALiBi)});
  for (const auto& [name, m] : models) {
    for (const int64_t steps : {int64_t{40}, int64_t{70}}) {  // 70: stops at the end of a context of 64
      INFO(name << ", steps " << steps);
      std::vector<int64_t> want = {1, 43, 47};
      at::NoGradGuard ng;
      for (int64_t s = 0; s < steps && static_cast<int64_t>(want.size()) <= m.config().n_ctx; ++s)
        want.push_back(m.forward(at::tensor(want, at::kLong)).logits[0][-1].argmax().item<int64_t>());
      CHECK(m.generate_greedy({1, 43, 47}, steps) == want);
    }
  }
}

TEST_CASE("a refused call leaves the cache as it was") {
  auto m = vocablens::load_model(std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/qwen2");
  const int64_t n_ctx = m.config().n_ctx, V = m.config().vocab_size;
  at::manual_seed(2);
  const at::Tensor ids = at::randint(0, V, {2, 8}, at::kLong);
  vocablens::KVCache kv;
  vocablens::forward_cached(m, ids.narrow(1, 0, 6), kv);
  REQUIRE(kv.length() == 6);
  REQUIRE(kv.batch() == 2);
  CHECK_THROWS_WITH(vocablens::forward_cached(m, ids.narrow(0, 0, 1).narrow(1, 6, 1), kv),
                    Catch::Contains("a batch of 1 sequences, but the KV cache holds 2"));
  CHECK_THROWS_WITH(vocablens::forward_cached(m, at::zeros({2, n_ctx}, at::kLong), kv),
                    Catch::Contains("after the 6 cached ones exceed the model's context of " + std::to_string(n_ctx)));
  at::Tensor bad = ids.narrow(1, 6, 1).clone();
  bad[1][0] = V;
  CHECK_THROWS_AS(vocablens::forward_cached(m, bad, kv), vocablens::UsageError);
  CHECK(kv.length() == 6);
  // Still the full pass's continuation.
  const at::Tensor full = m.forward(ids).logits;
  const auto out = vocablens::forward_cached(m, ids.narrow(1, 6, 2), kv);
  CHECK(rel_err(out.logits, full.narrow(1, 6, 2)) <= 1e-5);
  kv.clear();
  CHECK(kv.length() == 0);
  CHECK(rel_err(vocablens::forward_cached(m, ids.narrow(0, 0, 1).narrow(1, 0, 3), kv).logits,
                full.narrow(0, 0, 1).narrow(1, 0, 3)) <= 1e-5);
}
