// The forward memo (vocablens/forward_memo.hpp) and the caller's cancel (vocablens/interrupt.hpp's CancelScope):
// a replayed pass gives an analysis the bits its own pass gives (the lens and the attribution, on a GPT-2 and a
// llama2.c model); a pass asking for what a record lacks runs; the memo's bounds; a set flag stops the forward
// pass between two blocks and the lens between two blocks of positions, on the scope's thread only.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "fixtures.hpp"
#include "vocablens/attribution.hpp"
#include "vocablens/forward_memo.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"

namespace {

bool same_bits(const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes() && at::equal(a, b); }

void check_same_lens(const vocablens::LensResult& a, const vocablens::LensResult& b) {
  CHECK(a.top_ids == b.top_ids);
  CHECK(a.top_probs == b.top_probs);
  CHECK(a.entropy == b.entropy);
  CHECK(a.kl_final == b.kl_final);
  CHECK(a.target_rank == b.target_rank);
}

void check_same_attribution(const vocablens::AttributionResult& a, const vocablens::AttributionResult& b) {
  REQUIRE(a.components.size() == b.components.size());
  for (size_t i = 0; i < a.components.size(); ++i) CHECK(a.components[i].value == b.components[i].value);
  CHECK(a.model_value == b.model_value);
  CHECK(a.norm_scale == b.norm_scale);
}

}  // namespace

TEST_CASE("forward memo: the lens, then attributions and another lens of the same prompt replay its pass, same bits") {
  for (const char* rel : {"gpt2-tiny", "stories260K/stories260K.bin"}) {
    const std::string dir = vl_test::fixture(rel);
    if (dir.empty()) return;
    INFO(rel);
    auto m = vocablens::load_model(dir);
    const std::vector<int64_t> ids = {1, 45, 300, 12, 99, 7, 250, 31};
    vocablens::LensOptions lo;
    lo.top_k = 5;
    // References: no memo.
    const auto lens_ref = vocablens::logit_lens(m, ids, lo);
    std::vector<vocablens::AttributionResult> attr_ref;
    for (int64_t pos : {2, 7}) {
      vocablens::AttributionOptions ao;
      ao.target = lens_ref.top_id(lens_ref.n_layers() - 1, pos, 0);
      ao.position = pos;
      attr_ref.push_back(vocablens::attribute_logit(m, ids, ao));
    }

    vocablens::ForwardMemo memo(4);
    {
      vocablens::ForwardMemoScope s(memo);
      check_same_lens(vocablens::logit_lens(m, ids, lo), lens_ref);
      CHECK(s.recorded() == 1);
      CHECK(s.replayed() == 0);
    }
    size_t i = 0;
    for (int64_t pos : {2, 7}) {
      vocablens::ForwardMemoScope s(memo);
      vocablens::AttributionOptions ao = attr_ref[i].options;
      check_same_attribution(vocablens::attribute_logit(m, ids, ao), attr_ref[i++]);
      CHECK(s.replayed() == 1);  // no block of the model ran
      CHECK(s.recorded() == 0);
      (void)pos;
    }
    {
      vocablens::LensOptions lo3 = lo;
      lo3.top_k = 3;
      lo3.resid_mid = true;  // resid_mid.L: recorded too
      const auto ref3 = vocablens::logit_lens(m, ids, lo3);
      vocablens::ForwardMemoScope s(memo);
      check_same_lens(vocablens::logit_lens(m, ids, lo3), ref3);
      CHECK(s.replayed() == 1);
    }
    // A pass with logits and a cache: from the record, the same bits as the forward pass without a memo.
    vocablens::CacheSpec spec;
    spec.resid_pre = spec.resid_mid = spec.mlp_out = spec.resid_post = spec.final_norm = true;
    at::Tensor t = at::tensor(ids, at::kLong);
    auto plain = vocablens::run_with_hooks(m, t, vocablens::HookList(), spec, true);
    vocablens::ForwardMemoScope s(memo);
    auto replayed = vocablens::run_with_hooks(m, t, vocablens::HookList(), spec, true);
    CHECK(s.replayed() == 1);
    CHECK(same_bits(plain.logits, replayed.logits));
    REQUIRE(plain.cache.entries().size() == replayed.cache.entries().size());
    for (const auto& kv : plain.cache.entries()) CHECK(same_bits(kv.second, replayed.cache.get(kv.first)));
    // A hook on a point a record does not hold (the pattern): the pass runs, and is kept again.
    int calls = 0;
    vocablens::HookList pat;
    pat.add("pattern.0", [&calls](at::Tensor&) { ++calls; });
    vocablens::run_with_hooks(m, t, pat, {}, false);
    CHECK(calls == 1);
    CHECK(s.recorded() == 1);
    // A batch of two rows is not one prompt: neither replayed nor kept.
    vocablens::run_with_hooks(m, at::stack({t, t}), vocablens::HookList(), {}, false);
    CHECK(s.replayed() == 1);
    CHECK(s.recorded() == 1);
  }
}

TEST_CASE("forward memo: bounded by passes and bytes, least recently used first") {
  const std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  vocablens::ForwardMemo memo(2);
  {
    vocablens::ForwardMemoScope s(memo);
    for (int64_t p : {10, 11, 12}) m.forward(at::tensor(std::vector<int64_t>{p, 5, 6}, at::kLong), {}, false);
  }
  auto st = memo.stats();
  CHECK(st.records == 2);
  CHECK(st.recorded == 3);
  CHECK(memo.find({10, 5, 6}, &m.weights()) == nullptr);  // the oldest left
  REQUIRE(memo.find({12, 5, 6}, &m.weights()) != nullptr);
  // gpt2-tiny (L = 3, d = H dh = 64), 3 tokens: (3 L + 2) T d + L T H dh floats each.
  CHECK(st.bytes == size_t(2) * (11 + 3) * 3 * 64 * 4);
  CHECK(memo.find({12, 5, 6}, &m) == nullptr);  // another model's (here: another object's) record never serves

  vocablens::ForwardMemo tiny(4, 1000);  // 1000 bytes: no pass fits, none is even recorded
  {
    vocablens::ForwardMemoScope s(tiny);
    m.forward(at::tensor(std::vector<int64_t>{1, 2, 3}, at::kLong), {}, false);
    CHECK(s.recorded() == 0);
  }
  CHECK(tiny.stats().records == 0);
  CHECK(tiny.stats().not_kept == 1);
}

TEST_CASE("cancel: a set flag stops the forward pass between blocks and the lens, on the scope's thread only") {
  const std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  const std::vector<int64_t> ids = {464, 412, 733, 417, 8765};
  std::atomic<bool> cancel{false};
  // Set while block 0 runs: block 1 never starts.
  int block1 = 0;
  vocablens::HookList hooks;
  hooks.add("resid_post.0", [&cancel](at::Tensor&) { cancel = true; });
  hooks.add("resid_pre.1", [&block1](at::Tensor&) { ++block1; });
  {
    vocablens::CancelScope scope(&cancel);
    CHECK_THROWS_AS(vocablens::run_with_hooks(m, at::tensor(ids, at::kLong), hooks), vocablens::Interrupted);
    CHECK(block1 == 0);
    CHECK_THROWS_WITH(vocablens::logit_lens(m, ids), Catch::Contains("cancelled"));
    vocablens::AttributionOptions ao;
    ao.target = 11;
    CHECK_THROWS_AS(vocablens::attribute_logit(m, ids, ao), vocablens::Interrupted);
    // Another thread has no scope: the same flag does not stop its work.
    bool other_ok = false;
    std::thread t([&] { other_ok = vocablens::logit_lens(m, ids).n_layers() == 4; });
    t.join();
    CHECK(other_ok);
  }
  // The scope closed: the flag is no longer polled.
  CHECK_NOTHROW(vocablens::run_with_hooks(m, at::tensor(ids, at::kLong), hooks));
  CHECK(block1 == 1);
  // A flag that stays clear costs nothing but the poll.
  std::atomic<bool> clear{false};
  vocablens::CancelScope scope(&clear);
  CHECK(vocablens::logit_lens(m, ids).n_layers() == 4);
}
