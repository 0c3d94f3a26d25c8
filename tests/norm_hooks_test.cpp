// The hook points around the norms and the MLP's input (ln1/ln2.hook_scale, ln1/ln2.hook_normalized, mlp.hook_in,
// ln_final.hook_scale) in the runner's paths: names and which models have them, the block by rows (a long input)
// and the forward memo, the cache. Their values and edits against float64 references: tests/python/test_norm_hooks.py.
#include <catch2/catch.hpp>

#include "fixtures.hpp"
#include "tensor_checks.hpp"
#include "vocablens/error.hpp"
#include "vocablens/forward_memo.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"

namespace {

// sqrt(mean((x - mean x)²) + eps) and the centred x over it, in float64, from the definitions.
std::pair<at::Tensor, at::Tensor> layer_norm_points(const at::Tensor& x, double eps) {
  at::Tensor xd = x.to(at::kDouble);
  at::Tensor c = xd - xd.mean(-1, true);
  at::Tensor scale = (c.pow(2).mean(-1, true) + eps).sqrt();
  return {scale, c / scale};
}

}  // namespace

TEST_CASE("norm hook points: both spellings, forward order, and which models have them") {
  using vocablens::HookPoint;
  using vocablens::HookSite;
  vocablens::ModelConfig c;
  c.n_layers = 2;
  CHECK(vocablens::parse_hook_name("blocks.1.ln2.hook_normalized", c) == HookSite{HookPoint::Ln2Normalized, 1});
  CHECK(vocablens::parse_hook_name("ln2_normalized.1", c) == HookSite{HookPoint::Ln2Normalized, 1});
  CHECK(vocablens::parse_hook_name("blocks.0.ln1.hook_scale", c) == HookSite{HookPoint::Ln1Scale, 0});
  CHECK(vocablens::parse_hook_name("mlp_in.1", c) == HookSite{HookPoint::MlpIn, 1});
  CHECK(HookSite{HookPoint::MlpIn, 1}.tl_name() == "blocks.1.mlp.hook_in");
  CHECK(vocablens::parse_hook_name("ln_final.hook_scale", c) == HookSite{HookPoint::FinalScale, -1});
  CHECK(vocablens::parse_hook_name("final_scale", c) == HookSite{HookPoint::FinalScale, -1});
  // forward order: ln1's points after resid_pre, ln2's and mlp_in between resid_mid and mlp_pre, the final scale
  // before final_norm; every point once per layer
  std::vector<std::string> names;
  for (const auto& s : vocablens::hook_sites(c)) names.push_back(s.tl_name());
  auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  CHECK(at("blocks.0.hook_resid_pre") + 1 == at("blocks.0.ln1.hook_scale"));
  CHECK(at("blocks.0.ln1.hook_normalized") + 1 == at("blocks.0.attn.hook_q"));
  CHECK(at("blocks.1.hook_resid_mid") + 1 == at("blocks.1.ln2.hook_scale"));
  CHECK(at("blocks.1.mlp.hook_in") + 1 == at("blocks.1.mlp.hook_pre"));
  CHECK(names.back() == "ln_final.hook_normalized");
  CHECK(names[names.size() - 2] == "ln_final.hook_scale");
  CHECK(names.size() == 2 + 19 * 2 + 2);  // embed, pos_embed; 19 per block; final scale and norm

  // Post-norm blocks and OLMo 2's have no norm before attention and MLP: their ln points are refused with the
  // reason and where the MLP's input is instead; mlp.hook_in stays.
  vocablens::ModelConfig post = c;
  post.norm_before = false;
  CHECK_THROWS_WITH(vocablens::parse_hook_name("blocks.0.ln2.hook_normalized", post),
                    Catch::Contains("hook 'blocks.0.ln2.hook_normalized': this model normalises after each sublayer "
                                    "(post-norm)") &&
                        Catch::Contains("blocks.L.mlp.hook_in") && !Catch::Contains("valid hook names"));
  vocablens::ModelConfig olmo = c;
  olmo.input_norms = false;
  CHECK_THROWS_WITH(vocablens::parse_hook_name("ln1_scale.1", olmo), Catch::Contains("no norm before its attention"));
  CHECK(vocablens::parse_hook_name("blocks.0.mlp.hook_in", olmo) == HookSite{HookPoint::MlpIn, 0});
  vocablens::ModelConfig bare = c;
  bare.final_norm = false;
  CHECK_THROWS_WITH(vocablens::parse_hook_name("ln_final.hook_scale", bare), Catch::Contains("no final norm"));
  for (const auto& s : vocablens::hook_sites(olmo))
    CHECK_FALSE((s.point == HookPoint::Ln1Scale || s.point == HookPoint::Ln2Normalized));
  CHECK(vocablens::hook_sites(olmo).size() == names.size() - 8);
  CHECK_THAT(vocablens::hook_name_list(c), Catch::Contains("blocks.L.ln2.hook_normalized") && Catch::Contains("[B, T, 1]"));
  CHECK_THAT(vocablens::hook_name_list(olmo), !Catch::Contains("ln2.hook_normalized") && Catch::Contains("mlp.hook_in"));
}

TEST_CASE("norm hook points: the cache keeps them, a read changes no bit, SAE widths") {
  auto m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  const auto& c = m.config();
  const at::Tensor ids = at::tensor(std::vector<int64_t>{464, 412, 733, 417, 8765, 318}, at::kLong);
  vocablens::CacheSpec spec;
  spec.resid_pre = spec.resid_mid = spec.resid_post = true;
  spec.ln1_scale = spec.ln1_normalized = spec.ln2_scale = spec.ln2_normalized = spec.mlp_in = spec.final_scale = true;
  auto out = m.forward(ids, spec);
  const auto plain = m.forward(ids);
  CHECK(at::equal(out.logits, plain.logits));  // recording them changes no bit of the pass
  for (int64_t l = 0; l < c.n_layers; ++l) {
    auto [s1, n1] = layer_norm_points(out.cache.get("resid_pre", l), c.norm_eps);
    CHECK(vl_test::max_abs_diff(out.cache.get("blocks." + std::to_string(l) + ".ln1.hook_scale"), s1) < 1e-5);
    CHECK(vl_test::max_abs_diff(out.cache.get("ln1_normalized", l), n1) < 1e-5);
    auto [s2, n2] = layer_norm_points(out.cache.get("resid_mid", l), c.norm_eps);
    CHECK(vl_test::max_abs_diff(out.cache.get("ln2_scale", l), s2) < 1e-5);
    CHECK(vl_test::max_abs_diff(out.cache.get("ln2_normalized", l), n2) < 1e-5);
    const auto& L = m.weights().layers[static_cast<size_t>(l)];
    CHECK(vl_test::max_abs_diff(out.cache.get("mlp_in", l), n2 * L.ln2_w.to(at::kDouble) + L.ln2_b.to(at::kDouble)) < 1e-5);
  }
  CHECK(out.cache.get("final_scale").sizes().vec() == std::vector<int64_t>{1, 6, 1});
  auto [sf, nf] = layer_norm_points(out.cache.get("resid_post", c.n_layers - 1), c.norm_eps);
  CHECK(vl_test::max_abs_diff(out.cache.get("final_scale"), sf) < 1e-5);
  // What an SAE or a transcoder may read here: the normalised vectors and the MLP's input, not a scale.
  CHECK(vocablens::hook_width(m, "blocks.1.ln2.hook_normalized") == c.d_model);
  CHECK(vocablens::hook_width(m, "mlp_in.0") == c.d_model);
  CHECK_THROWS_WITH(vocablens::hook_width(m, "blocks.1.ln2.hook_scale"), Catch::Contains("norms' scales"));
}

TEST_CASE("norm hook points on a long input: hooked, the block runs whole; an edit reaches later positions only") {
  auto m = vocablens::load_model(vl_test::fixture("stories260K-hf"));  // a context of 512
  const int64_t T = 300;  // over one attention block (256): unhooked, the blocks run by rows
  std::vector<int64_t> v(T);
  for (int64_t t = 0; t < T; ++t) v[static_cast<size_t>(t)] = (t * 7919 + 13) % m.config().vocab_size;
  const at::Tensor ids = at::tensor(v, at::kLong);
  const at::Tensor by_rows = m.forward(ids).logits;
  std::vector<int64_t> shapes;
  vocablens::HookList read;
  read.add("blocks.1.ln2.hook_normalized", [&](at::Tensor& t) { shapes = t.sizes().vec(); });
  const at::Tensor whole = vocablens::run_with_hooks(m, ids, read).logits;
  CHECK(shapes == std::vector<int64_t>{1, T, m.config().d_model});  // the whole sequence at once
  CHECK(vl_test::max_abs_diff(whole, by_rows) < 1e-5);              // the same pass, GEMMs over other row counts
  vocablens::HookList edit;
  edit.add("blocks.1.mlp.hook_in", [](at::Tensor& t) { t.select(1, 280).mul_(3.0); });
  const at::Tensor edited = vocablens::run_with_hooks(m, ids, edit).logits;
  CHECK(vl_test::max_abs_diff(edited.narrow(1, 0, 280), whole.narrow(1, 0, 280)) < 1e-5);
  CHECK(vl_test::max_abs_diff(edited.select(1, 280), whole.select(1, 280)) > 1e-2);
  CHECK(vl_test::max_abs_diff(edited.narrow(1, 281, T - 281), whole.narrow(1, 281, T - 281)) > 1e-3);
}

TEST_CASE("norm hook points and the forward memo: a record holds none of them, so the pass runs") {
  auto m = vocablens::load_model(vl_test::fixture("stories260K-hf"));
  const at::Tensor ids = at::tensor(std::vector<int64_t>{1, 403, 407, 261, 378}, at::kLong);
  vocablens::CacheSpec spec;
  spec.ln2_normalized = spec.mlp_in = true;
  const auto plain = vocablens::run_with_hooks(m, ids, vocablens::HookList(), spec, true);
  vocablens::ForwardMemo memo(4);
  {
    vocablens::ForwardMemoScope s(memo);
    vocablens::run_with_hooks(m, ids, vocablens::HookList(), vocablens::CacheSpec(), true);
    CHECK(s.recorded() == 1);
  }
  vocablens::ForwardMemoScope s(memo);
  const auto again = vocablens::run_with_hooks(m, ids, vocablens::HookList(), spec, true);
  CHECK(s.replayed() == 0);
  REQUIRE(again.cache.has("ln2_normalized.3"));
  CHECK(at::equal(again.cache.get("ln2_normalized.3"), plain.cache.get("ln2_normalized.3")));
  CHECK(at::equal(again.cache.get("mlp_in.0"), plain.cache.get("mlp_in.0")));
  int calls = 0;
  vocablens::HookList h;
  h.add("blocks.2.ln1.hook_scale", [&](at::Tensor&) { ++calls; });
  vocablens::run_with_hooks(m, ids, h, vocablens::CacheSpec(), true);
  CHECK(calls == 1);
  CHECK(s.replayed() == 0);
}

TEST_CASE("norm hook points in every family: reading them changes no bit; mlp_in is what the MLP reads") {
  const std::string root = std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/";
  int families = 0, with_norms = 0;
  for (const char* f : {"llama3", "llama_linear", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "gpt_neox",
                        "opt", "stablelm", "olmo2", "smollm3", "phi2", "bloom", "falcon"}) {
    INFO(f);
    const auto m = vocablens::load_model(root + f);
    const auto& c = m.config();
    ++families;
    const at::Tensor ids = at::tensor(std::vector<int64_t>{1, 5, 9, 13, 17, 21}, at::kLong);
    vocablens::HookList read;
    int calls = 0;
    for (const auto& s : vocablens::hook_sites(c))
      if (s.point != vocablens::HookPoint::Result)  // summed per head: equal within rounding only (hooks_test)
        read.add(s.tl_name(), [&calls](at::Tensor&) { ++calls; });
    CHECK(at::equal(vocablens::run_with_hooks(m, ids, read).logits, m.forward(ids).logits));
    CHECK(calls == static_cast<int>(read.size()));
    vocablens::CacheSpec spec = vocablens::CacheSpec::all();
    const auto out = m.forward(ids, spec);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const auto& L = m.weights().layers[static_cast<size_t>(l)];
      const at::Tensor mlp_in = out.cache.get("mlp_in", l).to(at::kDouble);
      if (!out.cache.has("ln2_normalized", l)) {  // no norm before the MLP: it reads the stream itself
        CHECK_FALSE((c.norm_before && c.input_norms));
        CHECK(at::equal(out.cache.get("mlp_in", l), out.cache.get("resid_mid", l)));
        continue;
      }
      ++with_norms;
      // the norm's output from its own points, in float64: normalized * w + b, and normalized * scale = the centred input
      at::Tensor want = out.cache.get("ln2_normalized", l).to(at::kDouble);
      if (L.ln2_w.defined()) want = want * L.ln2_w.to(at::kFloat).to(at::kDouble);
      if (L.ln2_b.defined()) want = want + L.ln2_b.to(at::kFloat).to(at::kDouble);
      CHECK(vl_test::max_abs_diff(mlp_in, want) < 1e-4 * std::max(1.0, want.abs().max().item<double>()));
      const at::Tensor x = out.cache.get(c.parallel_residual ? "resid_pre" : "resid_mid", l).to(at::kDouble);
      const at::Tensor centred = c.norm == vocablens::NormKind::LayerNorm ? x - x.mean(-1, true) : x;
      const at::Tensor back = out.cache.get("ln2_normalized", l).to(at::kDouble) * out.cache.get("ln2_scale", l).to(at::kDouble);
      CHECK(vl_test::max_abs_diff(back, centred) < 1e-4 * std::max(1.0, centred.abs().max().item<double>()));
    }
  }
  CHECK(families == 17);
  CHECK(with_norms > 0);
}
