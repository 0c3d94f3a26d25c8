// Ablation and steering through hooks, checked against an independent construction: the
// forward pass of a COPY of the checkpoint whose weights were edited byte by byte in its safetensors file
// (tests/support/safetensors_edit.hpp) — zeroed W_O rows for a head, a zeroed W_out row for a neuron, a
// shifted position table for a steering vector at layer 0. Plus mean ablation's values and the CLI.
#include <catch2/catch.hpp>

#include <ATen/core/grad_mode.h>

#include "fixtures.hpp"
#include "safetensors_edit.hpp"
#include "tensor_checks.hpp"
#include "vocablens/ablation.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

const std::vector<int64_t> kIds = {464, 412, 733, 417, 8765, 318, 287, 6342, 13, 383};

using vl_test::shq;

int run_cli(const std::string& args, std::string& out) {
  return vl_test::run_command(shq(vl_test::cli_path()) + " " + args + " 2>&1", out);
}

}  // namespace

TEST_CASE("zero-ablating a head through hook_z equals the checkpoint with that head's W_O rows zeroed (gpt2-tiny)") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  const int64_t dh = m.config().d_head;
  for (int64_t layer : {0, 2})
    for (int64_t head : {1, 3}) {
      // HF Conv1D c_proj.weight is [in = H*d_head, out = d_model]: head h owns rows h*dh .. (h+1)*dh.
      auto edited = vl_test::edited_copy(
          dir, "abl-head", {{"h." + std::to_string(layer) + ".attn.c_proj.weight", [&](float* w, const std::vector<int64_t>& s) {
                               for (int64_t r = head * dh; r < (head + 1) * dh; ++r)
                                 for (int64_t c = 0; c < s[1]; ++c) w[r * s[1] + c] = 0;
                             }}});
      auto m2 = vocablens::load_model(edited);
      auto ref = m2.forward(at::tensor(kIds, at::kLong)).logits;
      vocablens::AblationSite site{vocablens::AblationSite::Kind::Head, layer, head, {}};
      auto hooks = vocablens::ablation_hooks(m, {site}, vocablens::AblationMode::Zero, {});
      auto got = vocablens::run_with_hooks(m, at::tensor(kIds, at::kLong), hooks).logits;
      auto plain = m.forward(at::tensor(kIds, at::kLong)).logits;
      INFO("layer " << layer << " head " << head);
      CHECK(vl_test::max_abs_diff(got, ref) < 1e-5);
      CHECK(vl_test::max_abs_diff(got, plain) > 1e-3);  // the ablation did something
    }
}

TEST_CASE("zero-ablating a head equals zeroed W_O columns on a Llama checkpoint with GQA (stories260K-hf)") {
  std::string dir = vl_test::fixture("stories260K-hf");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  const int64_t dh = m.config().d_head, head = 5;  // layer 3
  REQUIRE(m.config().n_kv_heads < m.config().n_heads);
  // HF Linear o_proj.weight is [out = d_model, in = H*d_head]: head h owns columns h*dh .. (h+1)*dh.
  auto edited = vl_test::edited_copy(dir, "abl-llama",
                                     {{"model.layers.3.self_attn.o_proj.weight", [&](float* w, const std::vector<int64_t>& s) {
                                         for (int64_t r = 0; r < s[0]; ++r)
                                           for (int64_t c = head * dh; c < (head + 1) * dh; ++c) w[r * s[1] + c] = 0;
                                       }}});
  auto m2 = vocablens::load_model(edited);
  const std::vector<int64_t> ids = {1, 403, 407, 261, 378, 500, 270, 300};
  auto ref = m2.forward(at::tensor(ids, at::kLong)).logits;
  vocablens::HookList h;
  h.add("blocks.3.attn.hook_z", [&](at::Tensor& z) { z.select(2, head).zero_(); });
  auto got = vocablens::run_with_hooks(m, at::tensor(ids, at::kLong), h).logits;
  CHECK(vl_test::max_abs_diff(got, ref) < 1e-5);
  CHECK(vl_test::max_abs_diff(got, m.forward(at::tensor(ids, at::kLong)).logits) > 1e-4);
  // The per-head result hook zeroing the same head gives the same logits (a second path through the block).
  vocablens::HookList h2;
  h2.add("result.3", [&](at::Tensor& r) { r.select(2, head).zero_(); });
  CHECK(vl_test::max_abs_diff(vocablens::run_with_hooks(m, at::tensor(ids, at::kLong), h2).logits, ref) < 1e-5);
}

TEST_CASE("zero-ablating an MLP neuron equals the checkpoint with its W_out row zeroed (gpt2-tiny)") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  const int64_t neuron = 17;
  auto edited = vl_test::edited_copy(dir, "abl-neuron", {{"h.1.mlp.c_proj.weight", [&](float* w, const std::vector<int64_t>& s) {
                                                            for (int64_t c = 0; c < s[1]; ++c) w[neuron * s[1] + c] = 0;
                                                          }}});
  auto ref = vocablens::load_model(edited).forward(at::tensor(kIds, at::kLong)).logits;
  vocablens::AblationOptions o;
  o.sites = {vocablens::parse_ablation_site("neuron", "1.17")};
  auto hooks = vocablens::ablation_hooks(m, o.sites, vocablens::AblationMode::Zero, {});
  CHECK(vl_test::max_abs_diff(vocablens::run_with_hooks(m, at::tensor(kIds, at::kLong), hooks).logits, ref) < 1e-5);
}

TEST_CASE("zero-ablating a whole hook (mlp_out.1) equals the checkpoint with that MLP's W_out and b_out zeroed") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  auto zero = [](float* w, const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (auto d : s) n *= d;
    for (int64_t i = 0; i < n; ++i) w[i] = 0;
  };
  auto edited = vl_test::edited_copy(dir, "abl-mlp", {{"h.1.mlp.c_proj.weight", zero}, {"h.1.mlp.c_proj.bias", zero}});
  auto ref = vocablens::load_model(edited).forward(at::tensor(kIds, at::kLong)).logits;
  auto hooks = vocablens::ablation_hooks(m, {vocablens::parse_ablation_site("hook", "blocks.1.hook_mlp_out")},
                                         vocablens::AblationMode::Zero, {});
  CHECK(vl_test::max_abs_diff(vocablens::run_with_hooks(m, at::tensor(kIds, at::kLong), hooks).logits, ref) < 1e-5);
}

TEST_CASE("steering at layer 0 equals the checkpoint with the vector added to every position embedding (gpt2-tiny)") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  const int64_t plus = 1842, minus = 5465;  // " love", " hate"
  const double scale = 3.0;
  at::Tensor v = vocablens::embedding_difference(m, plus, minus);
  auto edited = vl_test::edited_copy(dir, "steer", {{"wpe.weight", [&](float* w, const std::vector<int64_t>& s) {
                                                       auto E = m.W_E();
                                                       for (int64_t r = 0; r < s[0]; ++r)
                                                         for (int64_t c = 0; c < s[1]; ++c)
                                                           w[r * s[1] + c] += static_cast<float>(
                                                               scale * (E[plus][c].item<double>() - E[minus][c].item<double>()));
                                                     }}});
  auto ref = vocablens::load_model(edited).forward(at::tensor(kIds, at::kLong)).logits;
  auto got = vocablens::run_with_hooks(m, at::tensor(kIds, at::kLong), vocablens::steering_hooks(v, 0, scale)).logits;
  CHECK(vl_test::max_abs_diff(got, ref) < 1e-4);
  CHECK(vl_test::max_abs_diff(got, m.forward(at::tensor(kIds, at::kLong)).logits) > 1e-2);
  // Greedy decoding with steering hooks: its first step is the argmax of the steered forward.
  auto gen = vocablens::generate_greedy_with_hooks(m, kIds, 1, -1, vocablens::steering_hooks(v, 0, scale));
  REQUIRE(gen.size() == kIds.size() + 1);
  CHECK(gen.back() == got[0][static_cast<int64_t>(kIds.size()) - 1].argmax().item<int64_t>());
}

TEST_CASE("mean ablation writes the mean over the reference positions") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  at::NoGradGuard ng;
  // The mean of z for head 2 of layer 1, computed from a plain recording of the reference run.
  const std::vector<int64_t> ref = {40, 588, 262, 3290, 290, 262, 3797, 13};
  at::Tensor zref;
  vocablens::HookList rec;
  rec.add("blocks.1.attn.hook_z", [&](at::Tensor& z) { zref = z.clone(); });
  vocablens::run_with_hooks(m, at::tensor(ref, at::kLong), rec);
  at::Tensor mean = zref[0].select(1, 2).to(at::kDouble).mean(0).to(at::kFloat);  // [d_head]

  auto hooks =
      vocablens::ablation_hooks(m, {vocablens::parse_ablation_site("head", "1.2")}, vocablens::AblationMode::Mean, {ref});
  at::Tensor seen;
  hooks.add("z.1", [&](at::Tensor& z) { seen = z.clone(); });  // runs after the ablation hook
  vocablens::run_with_hooks(m, at::tensor(kIds, at::kLong), hooks);
  for (int64_t t = 0; t < static_cast<int64_t>(kIds.size()); ++t) CHECK(vl_test::max_abs_diff(seen[0][t][2], mean) < 1e-6);
  CHECK(vl_test::max_abs_diff(seen[0].select(1, 1), zref.new_zeros({1})) > 0);  // other heads untouched (not zero)

  // ablate(): the report of one run, before vs after; the target defaults to the unablated top-1.
  vocablens::AblationOptions o;
  o.sites = {vocablens::parse_ablation_site("head", "1.2"), vocablens::parse_ablation_site("resid", "1.3")};
  o.mode = vocablens::AblationMode::Zero;
  auto a = vocablens::ablate(m, kIds, o);
  auto plain = m.forward(at::tensor(kIds, at::kLong)).logits[0][static_cast<int64_t>(kIds.size()) - 1];
  CHECK(a.target == plain.argmax().item<int64_t>());
  CHECK(a.before.target_rank == 1);
  CHECK(a.before.target_logit == Approx(plain[a.target].item<double>()).margin(1e-6));
  CHECK(a.max_logit_change > 0);
  CHECK(a.kl > 0);
}

TEST_CASE("ablation sites out of range and bad syntax are one clear error") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  CHECK_THROWS_WITH(vocablens::parse_ablation_site("head", "1-3"), Catch::Contains("LAYER.HEAD"));
  vocablens::AblationOptions o;
  o.sites = {vocablens::parse_ablation_site("head", "1.4")};
  CHECK_THROWS_WITH(vocablens::ablate(m, kIds, o), Catch::Contains("head 4 is out of range (0..3)"));
  o.sites = {vocablens::parse_ablation_site("resid", "0.10")};
  CHECK_THROWS_WITH(vocablens::ablate(m, kIds, o), Catch::Contains("outside the prompt's 10 tokens"));
  o.sites = {vocablens::parse_ablation_site("neuron", "3.0")};
  CHECK_THROWS_WITH(vocablens::ablate(m, kIds, o), Catch::Contains("layer 3 is out of range"));
}

TEST_CASE("vocablens ablate and generate --steer on the command line") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty() || vl_test::require_cli().empty()) return;
  std::string out;
  REQUIRE(run_cli("ablate " + shq(dir) + " --prompt 'The Eiffel Tower is in' --head 1.2 --head 2.0 --no-color", out) == 0);
  CHECK_THAT(out, Catch::Contains("ablation (zero) of head 1.2, head 2.0"));
  CHECK_THAT(out, Catch::Contains("KL(before || after)"));
  REQUIRE(run_cli("ablate " + shq(dir) + " --prompt 'The Eiffel Tower is in' --neuron 0.5 --mode mean --format json", out) == 0);
  auto j = nlohmann::json::parse(out);
  CHECK(j["kind"] == "ablation");
  CHECK(j["settings"]["mode"] == "mean");
  CHECK(run_cli("ablate " + shq(dir) + " --prompt 'x' --head 9.0", out) == 2);
  CHECK_THAT(out, Catch::Contains("layer 9 is out of range (0..2)"));
  // An unknown hook name: one error listing the valid names.
  CHECK(run_cli("ablate " + shq(dir) + " --prompt 'x' --hook blocks.1.hook_attn_outt", out) == 2);
  CHECK_THAT(out, Catch::Contains("unknown hook 'blocks.1.hook_attn_outt'") && Catch::Contains("blocks.L.hook_attn_out") &&
                      Catch::Contains("mlp_post.L"));
  REQUIRE(run_cli("ablate " + shq(dir) + " --prompt 'The Eiffel Tower is in' --hook attn_out.2 --mode mean --no-color", out) ==
          0);
  CHECK_THAT(out, Catch::Contains("ablation (mean) of hook attn_out.2"));
  CHECK(run_cli("ablate " + shq(dir) + " --prompt 'x'", out) == 2);
  CHECK_THAT(out, Catch::Contains("nothing to ablate"));

  std::string plain, steered;
  REQUIRE(run_cli("generate " + shq(dir) + " --prompt 'I think that' --steps 8", plain) == 0);
  REQUIRE(run_cli("generate " + shq(dir) +
                      " --prompt 'I think that' --steps 8 --steer love-hate --steer-layer 0 "
                      "--steer-scale 8",
                  steered) == 0);
  CHECK_THAT(steered, Catch::Contains("steering: +8 x (E[␣love] - E[␣hate]) added to blocks.0.hook_resid_pre"));
  CHECK(steered != plain);
  CHECK(run_cli("generate " + shq(dir) + " --steer love", out) == 2);
  CHECK_THAT(out, Catch::Contains("--steer expects PLUS-MINUS"));
  CHECK(run_cli("generate " + shq(dir) + " --steer-scale 2", out) == 2);
  CHECK_THAT(out, Catch::Contains("need --steer"));
}

// On the families of the architecture table: hooks sit in the shared attention()/mlp()/
// block(), so ablation through hook_z must equal the edited checkpoint for families whose blocks differ
// from GPT-2's and Llama's: GPT-NeoX (fused per-head query_key_value, partial rotary, parallel residual,
// untied embed_out) and Gemma-2 (GQA, norms after attention and MLP, attention and final soft-caps, sliding
// window). Both fixtures are nn.Linear layouts: o_proj / dense [d_model, H*d_head], head h owns columns
// h*dh .. (h+1)*dh.
TEST_CASE("zero-ablating a head through hook_z equals zeroed W_O columns for GPT-NeoX and Gemma-2 fixtures") {
  const std::string root = std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/";
  const std::vector<int64_t> ids = {31, 256, 77, 300, 5, 318, 64, 263, 12, 290, 101, 7};
  struct Case {
    const char* family;
    const char* tensor;  // layer 1's output projection
  };
  for (const Case& c :
       {Case{"gpt_neox", "gpt_neox.layers.1.attention.dense.weight"}, Case{"gemma2", "model.layers.1.self_attn.o_proj.weight"}}) {
    const std::string dir = root + c.family;
    auto m = vocablens::load_model(dir);
    const int64_t dh = m.config().d_head, head = 2;
    auto edited = vl_test::edited_copy(dir, std::string("abl-") + c.family,
                                       {{c.tensor, [&](float* w, const std::vector<int64_t>& s) {
                                           for (int64_t r = 0; r < s[0]; ++r)
                                             for (int64_t col = head * dh; col < (head + 1) * dh; ++col) w[r * s[1] + col] = 0;
                                         }}});
    auto ref = vocablens::load_model(edited).forward(at::tensor(ids, at::kLong)).logits;
    vocablens::HookList h;
    h.add("blocks.1.attn.hook_z", [&](at::Tensor& z) { z.select(2, head).zero_(); });
    auto got = vocablens::run_with_hooks(m, at::tensor(ids, at::kLong), h).logits;
    auto plain = m.forward(at::tensor(ids, at::kLong)).logits;
    INFO(c.family << ": max |hooked - edited| = " << vl_test::max_abs_diff(got, ref) << ", effect "
                  << vl_test::max_abs_diff(got, plain));
    CHECK(vl_test::max_abs_diff(got, ref) < 1e-5);
    CHECK(vl_test::max_abs_diff(got, plain) > 1e-4);  // the ablation did something
    // The per-head route (attn.hook_result) gives the same logits as hook_z.
    vocablens::HookList hr;
    hr.add("blocks.1.attn.hook_result", [&](at::Tensor& r) { r.select(2, head).zero_(); });
    CHECK(vl_test::max_abs_diff(vocablens::run_with_hooks(m, at::tensor(ids, at::kLong), hr).logits, ref) < 1e-5);
  }
}
