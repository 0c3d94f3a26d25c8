// Blocked causal attention (vocablens/attention.hpp) against a float64 brute force written from the
// definition, one query row at a time: every variant the forward pass uses (causal, sliding windows that
// do and do not align with the blocks, soft-capping, ALiBi, grouped-query heads, batches, a last block
// shorter than the others), and bad shapes. Then the forward pass of every family through both paths,
// and hooks that read a pattern.
#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <vector>

#include "fixtures.hpp"
#include "random_gpt.hpp"
#include "vocablens/attention.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"

namespace {

// z[b, t, h, :] = sum_k softmax_k(score(t, k)) v[b, h / G, k, :], in double, with plain loops over the
// visible keys of each row: nothing shared with the blocked code but the definition.
at::Tensor reference(const at::Tensor& q32, const at::Tensor& k32, const at::Tensor& v32, const vocablens::AttentionSpec& s) {
  auto q = q32.to(at::kDouble).contiguous(), k = k32.to(at::kDouble).contiguous(), v = v32.to(at::kDouble).contiguous();
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), dh = q.size(3), G = H / k.size(1);
  auto qa = q.accessor<double, 4>(), ka = k.accessor<double, 4>(), va = v.accessor<double, 4>();
  at::Tensor z = at::zeros({B, T, H, dh}, at::kDouble);
  auto za = z.accessor<double, 4>();
  std::vector<double> slopes(static_cast<size_t>(H), 0.0);
  if (s.alibi_slopes.defined())
    for (int64_t h = 0; h < H; ++h) slopes[static_cast<size_t>(h)] = s.alibi_slopes[h].item<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t lo = s.window > 0 ? std::max<int64_t>(0, t - s.window + 1) : 0;
        std::vector<double> sc;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = lo; j <= t; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < dh; ++e) dot += qa[b][h][t][e] * ka[b][h / G][j][e];
          double x = dot * s.scale;
          if (s.softcap > 0) x = s.softcap * std::tanh(x / s.softcap);
          x += slopes[static_cast<size_t>(h)] * static_cast<double>(j - t);
          sc.push_back(x);
          mx = std::max(mx, x);
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t j = lo; j <= t; ++j)
          for (int64_t e = 0; e < dh; ++e) za[b][t][h][e] += sc[static_cast<size_t>(j - lo)] / sum * va[b][h / G][j][e];
      }
  return z;
}

struct AttentionVariant {
  const char* name;
  int64_t B, H, Hkv, T, dh, block, window;
  double softcap;
  bool alibi;
  bool sinks = false;  ///< one attention sink per query head (GPT-OSS)
};

struct AttentionInputs {
  at::Tensor q, k, v;
  vocablens::AttentionSpec s;
};

// Random q, k, v of a variant's shape and its spec. Scores of a few units (some rows nearly one-hot) so that
// the online rescaling matters.
AttentionInputs attention_inputs(const AttentionVariant& c, uint64_t seed) {
  at::manual_seed(seed);
  AttentionInputs in;
  in.q = at::randn({c.B, c.H, c.T, c.dh}) * 1.5;
  in.k = at::randn({c.B, c.Hkv, c.T, c.dh}) * 1.5;
  in.v = at::randn({c.B, c.Hkv, c.T, c.dh});
  in.s.scale = 1.0 / std::sqrt(static_cast<double>(c.dh));
  in.s.block = c.block;
  in.s.window = c.window;
  in.s.softcap = c.softcap;
  if (c.alibi) in.s.alibi_slopes = at::tensor(std::vector<float>{0.5f, 0.25f, 0.125f, 0.0625f}).narrow(0, 0, c.H);
  if (c.sinks) in.s.sinks = at::tensor(std::vector<float>{0.5f, -1.0f, 2.0f, 0.0f}).narrow(0, 0, c.H);
  return in;
}

}  // namespace

TEST_CASE("blocked attention equals the float64 definition for every variant") {
  const std::vector<AttentionVariant> cases = {
      {"causal, one block", 1, 2, 2, 12, 8, 0, 0, 0, false},
      {"causal, 7 blocks of 16, last one short", 2, 3, 3, 100, 8, 16, 0, 0, false},
      {"grouped-query 8 over 2", 1, 8, 2, 70, 8, 16, 0, 0, false},
      {"window 5 inside a block", 1, 2, 1, 64, 8, 16, 5, 0, false},
      {"window 23 across blocks", 2, 4, 2, 90, 8, 16, 23, 0, false},
      {"window of one block exactly", 1, 2, 2, 64, 8, 16, 16, 0, false},
      {"window 1 (only the diagonal)", 1, 2, 2, 40, 8, 16, 1, 0, false},
      {"window longer than the input", 1, 2, 2, 40, 8, 16, 100, 0, false},
      {"soft-capped at 1.5", 1, 4, 2, 50, 8, 16, 0, 1.5, false},
      {"soft-cap and window (Gemma-2 sliding layer)", 1, 4, 2, 77, 8, 16, 9, 2.0, false},
      {"ALiBi", 2, 4, 4, 66, 8, 16, 0, 0, true},
      {"ALiBi and a window", 1, 4, 4, 66, 8, 16, 20, 0, true},
      {"default block (1024) over 1300 positions", 1, 2, 1, 1300, 16, 0, 0, 0, false},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      const auto [q, k, v, s] = attention_inputs(c, 7);
      at::Tensor z = vocablens::blocked_causal_attention(q, k, v, s);
      REQUIRE(z.sizes() == at::IntArrayRef({c.B, c.T, c.H, c.dh}));
      const double err = (z.to(at::kDouble) - reference(q, k, v, s)).abs().max().item<double>();
      INFO(c.name << ": max |blocked - float64| = " << err);
      CHECK(err < 5e-6);  // float32 rounding over rows of up to 1300 keys
      // A transposed (non-contiguous) q, as the forward pass passes it without rotary, gives the same.
      at::Tensor qt = q.transpose(1, 2).contiguous().transpose(1, 2);
      CHECK((vocablens::blocked_causal_attention(qt, k, v, s) - z).abs().max().item<double>() < 1e-6);
    }
  }
}

// On two threads the loop splits each query block's heads between the threads (src/model/attention.cpp), each
// running its heads' key loop alone. Per head the operations are one thread's; only where a chunk of heads
// ends inside a vector register's width does ATen's exp take its scalar path for a few elements (a last
// ulp), so the bound is float32 rounding, not zero. Slices of ALiBi slopes, sinks and grouped heads that
// went to the wrong head would be off by whole units.
TEST_CASE("blocked attention on two threads agrees with one thread, ALiBi slopes and sinks per head") {
  struct Threads {
    int saved = at::get_num_threads();
    explicit Threads(int n) { at::set_num_threads(n); }
    ~Threads() { at::set_num_threads(saved); }
  };
  const std::vector<AttentionVariant> cases = {
      {"causal, batch of two, last block short", 2, 3, 3, 100, 8, 16, 0, 0, false},
      {"grouped-query 8 over 2", 1, 8, 2, 70, 8, 16, 0, 0, false},
      {"window 23 across blocks", 2, 4, 2, 90, 8, 16, 23, 0, false},
      {"soft-cap and window", 1, 4, 2, 77, 8, 16, 9, 2.0, false},
      {"ALiBi, batch of two", 2, 4, 4, 66, 8, 16, 0, 0, true},
      {"ALiBi, grouped-query 4 over 2, sinks", 2, 4, 2, 66, 8, 16, 0, 0, true, true},
      {"16 heads of 128, blocks of 256 (the long-context bench's shape)", 1, 16, 16, 600, 128, 256, 0, 0, false},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      const auto [q, k, v, s] = attention_inputs(c, 11);
      at::Tensor one, two;
      {
        const Threads t(1);
        one = vocablens::blocked_causal_attention(q, k, v, s);
      }
      {
        const Threads t(2);
        REQUIRE(at::get_num_threads() == 2);
        two = vocablens::blocked_causal_attention(q, k, v, s);
      }
      const double err = (two - one).abs().max().item<double>();
      INFO(c.name << ": max |two threads - one| = " << err << ", max |z| = " << one.abs().max().item<double>());
      CHECK(err <= 1e-6);
      if (!c.alibi && c.B == 1 && c.window == 0 && c.softcap == 0 && c.T == 600)
        CHECK(at::equal(one, two));  // 32-aligned chunks: same bits
    }
  }
}

TEST_CASE("blocked attention refuses shapes that do not fit together") {
  vocablens::AttentionSpec s;
  auto q = at::randn({1, 4, 10, 8}), k = at::randn({1, 3, 10, 8});
  CHECK_THROWS_WITH(vocablens::blocked_causal_attention(q, k, k, s), Catch::Contains("multiple of the key/value heads"));
  CHECK_THROWS_WITH(vocablens::blocked_causal_attention(q, at::randn({1, 2, 9, 8}), at::randn({1, 2, 9, 8}), s),
                    Catch::Contains("q's batch, length and head size"));
  CHECK_THROWS_WITH(vocablens::blocked_causal_attention(q.view({4, 10, 8}), k, k, s),
                    Catch::Contains("expected q [B, H, T, d_head]"));
  s.alibi_slopes = at::ones({3});
  CHECK_THROWS_AS(vocablens::blocked_causal_attention(q, at::randn({1, 2, 10, 8}), at::randn({1, 2, 10, 8}), s),
                  vocablens::UsageError);
}

namespace {

// Sets the forward's attention policy for one scope.
struct PolicyScope {
  vocablens::AttentionPolicy saved = vocablens::attention_policy();
  explicit PolicyScope(const vocablens::AttentionPolicy& p) { vocablens::set_attention_policy(p); }
  ~PolicyScope() { vocablens::set_attention_policy(saved); }
};

at::Tensor logits_with(const vocablens::Model& m, const at::Tensor& ids, bool blocked, int64_t block = 1024) {
  vocablens::AttentionPolicy p;
  p.blocked = blocked;
  p.block = block;
  PolicyScope s(p);
  return m.forward(ids).logits;
}

}  // namespace

// The forward pass takes the blocked path only beyond `block` positions (256 by default), longer than these
// fixtures' contexts; a block of 4 sends their short inputs through it, tile edges, windows and all. The
// materialising path is the one checked against llama.cpp and float64 references (families_test,
// model_test); here both paths must agree on every family's variant: Gemma-2's window of 4 on even layers
// and soft-caps, Gemma 3's local and global rotary tables, OLMo 2's whole-width q/k norms, SmolLM3's layer
// without rotary, Phi-2's one norm for attention and MLP, BLOOM's ALiBi and embedding norm, Falcon's
// multi-query, Qwen3's q/k norms, Phi-3, partial rotary (GPT-NeoX), learned positions (GPT-2, OPT), GQA, the
// mixtures of experts (routing per row, Qwen2-MoE's shared expert), GPT-OSS's attention sinks.
TEST_CASE("every family's forward gives the same logits through blocked and materialised attention") {
  std::vector<std::string> dirs;
  for (const char* f :
       {"qwen2",   "qwen3", "mistral", "llama3", "llama_linear", "phi3",     "gpt_neox", "gemma", "gemma2",  "gemma3", "olmo2",
        "smollm3", "phi2",  "bloom",   "falcon", "mixtral",      "qwen3moe", "qwen2moe", "olmoe", "gpt_oss", "opt"})
    dirs.push_back(std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/" + f);
  for (const char* f : {"gpt2-tiny", "stories260K-hf"}) dirs.push_back(vl_test::fixture(f));
  for (const auto& dir : dirs) {
    REQUIRE(!dir.empty());
    auto m = vocablens::load_model(dir);
    const int64_t T = std::min<int64_t>(m.config().n_ctx, 45);  // 11 full blocks of 4 and a short one
    at::manual_seed(3);
    at::Tensor ids = at::randint(0, m.config().vocab_size, {2, T}, at::kLong);  // a batch of two
    at::Tensor plain = logits_with(m, ids, false);
    at::Tensor blocked = logits_with(m, ids, true, 4);
    const double err = (plain - blocked).abs().max().item<double>(), scale = plain.abs().max().item<double>();
    INFO(dir << ": max |blocked - materialised| = " << err << " (max |logit| " << scale << ")");
    CHECK(err <= 1e-5 * std::max(1.0, scale));
    // At a block of 1024 (> T) the forward materialises: the same bits as without blocked attention.
    CHECK(at::equal(logits_with(m, ids, true), plain));
  }
}

// Without hooks inside a block, a block longer than one attention block runs by rows (the one recipe
// of src/model/forward.cpp by rows: q, k, v projected per block of rows, z through W_O per query
// block, the MLP added in place); a no-op hook on z keeps the step-by-step path with the same blocked
// attention. Both must give the same logits and the same recorded residuals on every family's variant,
// a batch of two, and ALiBi (a GPT of the trainer's, whose weights are scaled up so that a wrong bias
// or position would show far above rounding).
TEST_CASE("the block by rows gives the whole block's logits and residuals on every family, post-norm OPT included") {
  std::vector<vocablens::Model> models;
  for (const char* f :
       {"qwen2", "qwen3",   "mistral", "llama3", "phi3",   "gpt_neox", "gemma",    "gemma2",   "gemma3", "opt",    "stablelm",
        "olmo2", "smollm3", "phi2",    "bloom",  "falcon", "mixtral",  "qwen3moe", "qwen2moe", "olmoe",  "gpt_oss"})
    models.push_back(vocablens::load_model(std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/" + f));
  models.push_back(vl_test::scaled_random_gpt(vocablens::PositionKind::ALiBi, 2, 64, 7, "random ALiBi"));
  vocablens::AttentionPolicy pol;
  pol.block = 4;
  PolicyScope scope(pol);
  for (const auto& m : models) {
    const int64_t T = std::min<int64_t>(m.config().n_ctx, 45);  // 11 full blocks of 4 and a short one
    at::manual_seed(5);
    at::Tensor ids = at::randint(0, m.config().vocab_size, {2, T}, at::kLong);
    vocablens::CacheSpec spec;
    spec.resid_pre = spec.resid_post = true;
    vocablens::ForwardOutput streamed;
    {
      at::NoGradGuard ng;
      streamed = m.forward(ids, spec);
    }
    vocablens::HookList noop;
    for (int64_t l = 0; l < m.config().n_layers; ++l) noop.add("z." + std::to_string(l), [](at::Tensor&) {});
    vocablens::ForwardOutput stepwise = vocablens::run_with_hooks(m, ids, noop, spec);
    const double scale = stepwise.logits.abs().max().item<double>();
    const double err = (streamed.logits - stepwise.logits).abs().max().item<double>();
    INFO(m.source() << ": max |streamed - step by step| = " << err << " (max |logit| " << scale << ")");
    CHECK(err <= 1e-5 * std::max(1.0, scale));
    for (int64_t l = 0; l < m.config().n_layers; ++l) {
      const at::Tensor a = streamed.cache.get("resid_post", l), b = stepwise.cache.get("resid_post", l);
      INFO("resid_post." << l);
      CHECK((a - b).abs().max().item<double>() <= 1e-5 * std::max(1.0, b.abs().max().item<double>()));
    }
  }
}

TEST_CASE("a hook on one layer's pattern materialises that layer only, and the logits agree") {
  auto m = vocablens::load_model(std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/gemma2");
  at::Tensor ids = at::randint(0, m.config().vocab_size, {1, 40}, at::kLong);
  vocablens::AttentionPolicy p;
  p.block = 4;
  PolicyScope s(p);
  const at::Tensor plain = m.forward(ids).logits;
  std::vector<int64_t> shape;
  vocablens::HookList h;
  h.add("pattern.0", [&](at::Tensor& t) { shape = t.sizes().vec(); });
  const at::Tensor hooked = vocablens::run_with_hooks(m, ids, h).logits;
  CHECK(shape == std::vector<int64_t>{1, m.config().n_heads, 40, 40});
  CHECK((hooked - plain).abs().max().item<double>() < 1e-5);
  // The cache's pattern is the materialised softmax: rows sum to one, zero above the diagonal and, on
  // Gemma-2's sliding layer 0, at distance >= the window.
  vocablens::CacheSpec spec;
  spec.pattern = true;
  auto out = m.forward(ids, spec);
  const at::Tensor pat = out.cache.get("pattern", 0)[0];
  CHECK((pat.sum(-1) - 1).abs().max().item<double>() < 1e-5);
  CHECK(pat[0][10].narrow(0, 0, 10 - m.config().sliding_window + 1).abs().max().item<double>() == 0);
  CHECK((out.logits - plain).abs().max().item<double>() < 1e-5);
}

TEST_CASE("the attention policy refuses a block below one") {
  vocablens::AttentionPolicy p;
  p.block = 0;
  CHECK_THROWS_AS(vocablens::set_attention_policy(p), vocablens::UsageError);
}
