// Hook points of the forward pass: names (TransformerLens's and ours), zero cost and no
// change when hooks only read, the per-head result path, the cache seeing hooked values, and errors.
#include <catch2/catch.hpp>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"

namespace {

const std::vector<int64_t> kIds = {464, 412, 733, 417, 8765, 318, 287};

std::vector<std::string> every_hook(const vocablens::ModelConfig& c) {
  std::vector<std::string> v = {"hook_embed", "ln_final.hook_normalized"};
  if (c.positions == vocablens::PositionKind::Learned) v.push_back("hook_pos_embed");
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (const char* p :
         {"hook_resid_pre", "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_attn_scores", "attn.hook_pattern",
          "attn.hook_z", "hook_attn_out", "hook_resid_mid", "mlp.hook_pre", "mlp.hook_post", "hook_mlp_out", "hook_resid_post",
          "ln1.hook_scale", "ln1.hook_normalized", "ln2.hook_scale", "ln2.hook_normalized", "mlp.hook_in"})
      v.push_back("blocks." + std::to_string(l) + "." + p);
  if (c.final_norm) v.push_back("ln_final.hook_scale");
  return v;
}

}  // namespace

TEST_CASE("hook names: TransformerLens's full names and our short ones name the same point") {
  vocablens::ModelConfig c;
  c.n_layers = 4;
  using vocablens::HookPoint;
  using vocablens::parse_hook_name;
  CHECK(parse_hook_name("blocks.3.hook_resid_pre", c) == parse_hook_name("resid_pre.3", c));
  CHECK(parse_hook_name("blocks.3.attn.hook_z", c) == vocablens::HookSite{HookPoint::Z, 3});
  CHECK(parse_hook_name("z.3", c) == vocablens::HookSite{HookPoint::Z, 3});
  CHECK(parse_hook_name("blocks.0.hook_attn_out", c) == vocablens::HookSite{HookPoint::AttnOut, 0});
  CHECK(parse_hook_name("blocks.2.mlp.hook_post", c) == vocablens::HookSite{HookPoint::MlpPost, 2});
  CHECK(parse_hook_name("mlp_post.2", c) == vocablens::HookSite{HookPoint::MlpPost, 2});
  CHECK(parse_hook_name("ln_final.hook_normalized", c) == vocablens::HookSite{HookPoint::FinalNorm, -1});
  CHECK(parse_hook_name("final_norm", c) == vocablens::HookSite{HookPoint::FinalNorm, -1});
  CHECK(parse_hook_name("hook_embed", c).point == HookPoint::Embed);
  CHECK(vocablens::HookSite{HookPoint::Result, 1}.tl_name() == "blocks.1.attn.hook_result");
  CHECK(vocablens::HookSite{HookPoint::Result, 1}.short_name() == "result.1");
  // Round trip of every point (on a mixture of experts with a shared expert, which has them all).
  vocablens::ModelConfig moe = c;
  moe.n_experts = 8, moe.n_experts_used = 2, moe.shared_expert = true;
  for (int p = 0; p < vocablens::kHookPointCount; ++p) {
    vocablens::HookSite s{static_cast<HookPoint>(p), 2};
    if (s.tl_name().rfind("blocks.", 0) != 0) s.layer = -1;
    CHECK(parse_hook_name(s.tl_name(), moe) == s);
    CHECK(parse_hook_name(s.short_name(), moe) == s);
  }
  // Without a model: either spelling, no layer bound; nothing for a name of neither.
  CHECK(vocablens::hook_site_from_name("blocks.40.hook_resid_pre") == vocablens::HookSite{HookPoint::ResidPre, 40});
  CHECK(vocablens::hook_site_from_name("pattern.7") == vocablens::HookSite{HookPoint::Pattern, 7});
  CHECK_FALSE(vocablens::hook_site_from_name("blocks.3.hook_resid").has_value());
  CHECK_FALSE(vocablens::hook_site_from_name("resid_pre").has_value());
  // Unknown names and layers: one error listing the valid names.
  CHECK_THROWS_AS(parse_hook_name("blocks.3.hook_resid", c), vocablens::UsageError);
  CHECK_THROWS_WITH(parse_hook_name("blocks.3.hook_resid", c), Catch::Contains("unknown hook 'blocks.3.hook_resid'") &&
                                                                   Catch::Contains("blocks.L.attn.hook_z") &&
                                                                   Catch::Contains("resid_pre.L") && Catch::Contains("L = 0..3"));
  CHECK_THROWS_WITH(parse_hook_name("blocks.4.hook_resid_pre", c), Catch::Contains("layer 4 is out of range"));
  CHECK_THAT(vocablens::hook_name_list(c), Catch::Contains("blocks.L.attn.hook_z") &&
                                               Catch::Contains("[B, T, n_heads, d_head]") && Catch::Contains("(L = 0..3)"));
  CHECK_THROWS_WITH(parse_hook_name("resid_pre.x", c), Catch::Contains("unknown hook"));
  CHECK_THROWS_WITH(parse_hook_name("hook_pos_embed",
                                    [] {
                                      vocablens::ModelConfig r;
                                      r.n_layers = 1;
                                      r.positions = vocablens::PositionKind::Rotary;
                                      return r;
                                    }()),
                    Catch::Contains("no learned position embeddings"));
}

TEST_CASE("hooks that only read change nothing: the logits are bit-identical to forward()") {
  for (const char* rel : {"gpt2-tiny", "stories260K-hf"}) {
    std::string dir = vl_test::fixture(rel);
    if (dir.empty()) continue;
    auto m = vocablens::load_model(dir);
    std::vector<int64_t> ids = kIds;
    for (auto& i : ids) i %= m.config().vocab_size;
    auto plain = m.forward(at::tensor(ids, at::kLong)).logits;
    vocablens::HookList h;
    int calls = 0;
    for (const auto& name : every_hook(m.config())) h.add(name, [&calls](at::Tensor&) { ++calls; });
    auto hooked = vocablens::run_with_hooks(m, at::tensor(ids, at::kLong), h).logits;
    INFO(rel);
    CHECK(calls == static_cast<int>(h.size()));
    CHECK(at::equal(plain, hooked));
    // The per-head result path (computed only when hooked) sums heads apart: equal within float rounding.
    vocablens::HookList r;
    for (int64_t l = 0; l < m.config().n_layers; ++l) r.add("result." + std::to_string(l), [](at::Tensor&) {});
    CHECK((vocablens::run_with_hooks(m, at::tensor(ids, at::kLong), r).logits - plain).abs().max().item<double>() < 1e-5);
  }
}

TEST_CASE("hooked activations have the documented shapes, and the cache records the hooked value") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  const auto& c = m.config();
  const int64_t T = static_cast<int64_t>(kIds.size());
  std::map<std::string, std::vector<int64_t>> shapes;
  vocablens::HookList h;
  for (const char* n : {"z.1", "result.1", "mlp_post.1", "mlp_pre.1", "pattern.1", "q.1", "resid_pre.1", "hook_pos_embed"})
    h.add(n, [&shapes, n](at::Tensor& t) { shapes[n] = t.sizes().vec(); });
  h.add("resid_post.0", [](at::Tensor& t) { t.select(1, 2).fill_(0.5); });
  vocablens::CacheSpec spec;
  spec.resid_post = true;
  spec.resid_pre = true;
  auto out = vocablens::run_with_hooks(m, at::tensor(kIds, at::kLong), h, spec);
  CHECK(shapes["z.1"] == std::vector<int64_t>{1, T, c.n_heads, c.d_head});
  CHECK(shapes["result.1"] == std::vector<int64_t>{1, T, c.n_heads, c.d_model});
  CHECK(shapes["mlp_post.1"] == std::vector<int64_t>{1, T, c.d_mlp});
  CHECK(shapes["mlp_pre.1"] == std::vector<int64_t>{1, T, c.d_mlp});
  CHECK(shapes["pattern.1"] == std::vector<int64_t>{1, c.n_heads, T, T});
  CHECK(shapes["q.1"] == std::vector<int64_t>{1, T, c.n_heads, c.d_head});
  CHECK(shapes["hook_pos_embed"] == std::vector<int64_t>{1, T, c.d_model});
  CHECK(out.cache.get("resid_post", 0)[0][2].eq(0.5).all().item<bool>());
  CHECK(out.cache.get("resid_pre", 1)[0][2].eq(0.5).all().item<bool>());
  CHECK_FALSE(out.cache.get("resid_post", 0)[0][1].eq(0.5).all().item<bool>());
  // One site, three spellings: the short name, TransformerLens's name and the HookSite find one tensor.
  const vocablens::HookSite site{vocablens::HookPoint::ResidPost, 0};
  CHECK(out.cache.has("blocks.0.hook_resid_post"));
  CHECK(out.cache.has(site));
  CHECK_FALSE(out.cache.has("blocks.0.hook_mlp_out"));
  CHECK(out.cache.get("blocks.0.hook_resid_post").data_ptr() == out.cache.get("resid_post", 0).data_ptr());
  CHECK(out.cache.get(site).data_ptr() == out.cache.get("resid_post.0").data_ptr());
  CHECK_THROWS_WITH(out.cache.get("blocks.0.attn.hook_z"), Catch::Contains("'blocks.0.attn.hook_z' was not recorded"));
  // A hook writing in place does not reach into the weights it was computed from.
  auto wpe_before = m.W_pos().clone();
  vocablens::HookList w;
  w.add("hook_pos_embed", [](at::Tensor& t) { t.zero_(); });
  w.add("hook_embed", [](at::Tensor& t) { t.zero_(); });
  vocablens::run_with_hooks(m, at::tensor(kIds, at::kLong), w);
  CHECK(at::equal(wpe_before, m.W_pos()));
}

TEST_CASE("hook errors: an unknown name lists the valid ones before any work; a hook may not change a shape") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  vocablens::HookList h;
  h.add("blocks.1.attn.hook_zz", [](at::Tensor&) {});
  CHECK_THROWS_WITH(vocablens::run_with_hooks(m, at::tensor(kIds, at::kLong), h),
                    Catch::Contains("unknown hook 'blocks.1.attn.hook_zz'") && Catch::Contains("blocks.L.mlp.hook_post") &&
                        Catch::Contains("L = 0..2"));
  vocablens::HookList s;
  s.add("resid_pre.1", [](at::Tensor& t) { t = t.narrow(1, 0, 1); });
  CHECK_THROWS_WITH(vocablens::run_with_hooks(m, at::tensor(kIds, at::kLong), s),
                    Catch::Contains("blocks.1.hook_resid_pre changed the activation's shape"));
}
