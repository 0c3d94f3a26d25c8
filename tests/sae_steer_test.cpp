// Steering with an SAE feature (vocablens/sae_steer.hpp, `generate --sae --steer-feature`): the steered forward
// equals an independent forward with scale · W_dec[f] added — through the residual-stream steering hook at the
// equivalent point, or by hand before the final norm and unembedding — and the CLI's steered text is the
// greedy continuation under that independent hook.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "sae_fixtures.hpp"
#include "tensor_checks.hpp"
#include "vocablens/ablation.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/sae_steer.hpp"

namespace {

// make_saes.py's SAEs, made once per build directory (support/sae_fixtures.hpp).
std::string steer_saes() { return vl_test::sae_fixtures_dir(); }

}  // namespace

TEST_CASE("steering with an SAE feature adds scale * W_dec[f] at the point the SAE writes", "[sae][steer]") {
  vocablens::init_runtime();
  const std::string dir = vl_test::fixture("gpt2-tiny");
  REQUIRE(!dir.empty());
  auto m = vocablens::load_model(dir);
  const at::Tensor ids = at::tensor(std::vector<int64_t>{464, 412, 733, 8765, 318, 287, 262, 1748}, at::kLong);
  const double s = 6.0;
  const int64_t f = 5;
  const at::Tensor clean = vocablens::run_with_hooks(m, ids, {}).logits;

  {  // an SAE reading blocks.1.hook_resid_pre: the same as the residual steering hook at layer 1
    auto sae = vocablens::load_sae(steer_saes() + "/saelens_standard");
    at::Tensor got = vocablens::run_with_hooks(m, ids, vocablens::feature_steering_hooks(sae, f, s)).logits;
    at::Tensor want = vocablens::run_with_hooks(m, ids, vocablens::steering_hooks(sae.W_dec[f].to(at::kFloat), 1, s)).logits;
    CHECK(vl_test::max_abs_diff(got, want) == 0.0);
    CHECK(vl_test::max_abs_diff(got, clean) > 1e-3);  // it did something
  }
  {  // a transcoder writing blocks.1.hook_mlp_out: adding there = adding to the residual entering block 2
    auto sae = vocablens::load_sae(steer_saes() + "/circuit_tracer/layer_1.safetensors");
    CHECK(vocablens::sae_write_hook(sae) == "blocks.1.hook_mlp_out");
    at::Tensor got = vocablens::run_with_hooks(m, ids, vocablens::feature_steering_hooks(sae, f, s)).logits;
    at::Tensor want = vocablens::run_with_hooks(m, ids, vocablens::steering_hooks(sae.W_dec[f].to(at::kFloat), 2, s)).logits;
    CHECK(vl_test::max_abs_diff(got, want) <= 1e-4);
    CHECK(vl_test::max_abs_diff(got, clean) > 1e-3);
  }
  {  // an SAE on the last block's output: logits = unembed(final_norm(resid_post + s * d)), by hand
    auto sae = vocablens::load_sae(steer_saes() + "/saelens_jumprelu");
    REQUIRE(sae.hook_name == "blocks.2.hook_resid_post");
    at::Tensor resid;
    vocablens::HookList cap;
    cap.add("blocks.2.hook_resid_post", [&](at::Tensor& a) { resid = a.clone(); });
    vocablens::run_with_hooks(m, ids, cap);
    at::Tensor want = m.unembed(m.final_norm(resid + s * sae.W_dec[f].to(at::kFloat)));
    at::Tensor got = vocablens::run_with_hooks(m, ids, vocablens::feature_steering_hooks(sae, f, s)).logits;
    CHECK(vl_test::max_abs_diff(got.reshape(want.sizes()), want) <= 1e-4);
  }
  auto sae = vocablens::load_sae(steer_saes() + "/saelens_standard");
  CHECK_THROWS_AS(vocablens::feature_steering_hooks(sae, 96, 1.0), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::feature_steering_hooks(sae, -1, 1.0), vocablens::UsageError);
}

TEST_CASE("generate --sae --steer-feature prints the unsteered and the steered continuation", "[sae][steer][cli]") {
  vocablens::init_runtime();
  const std::string dir = vl_test::fixture("gpt2-tiny");
  REQUIRE(!dir.empty());
  auto m = vocablens::load_model(dir);
  auto sae = vocablens::load_sae(steer_saes() + "/saelens_standard");
  const std::vector<int64_t> prompt = {464, 412, 733, 8765};
  const int64_t steps = 6, f = 7;
  const double s = -9.0;
  auto plain = m.generate_greedy(prompt, steps, -1);
  auto steered =
      vocablens::generate_greedy_with_hooks(m, prompt, steps, -1, vocablens::steering_hooks(sae.W_dec[f].to(at::kFloat), 1, s));
  REQUIRE(plain != steered);  // the test needs a feature that changes the continuation
  auto join = [](const std::vector<int64_t>& v) {
    std::ostringstream o;
    for (size_t i = 0; i < v.size(); ++i) o << (i ? " " : "") << v[i];
    return o.str();
  };
  std::string out;
  const int rc = vl_test::run_command(vl_test::cli_path() + " generate " + dir + " --prompt-ids 464,412,733,8765 --steps 6 " +
                                          "--stop-id -1 --ids --sae " + steer_saes() + "/saelens_standard " +
                                          "--steer-feature 7 --scale -9 2>&1",
                                      out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("unsteered: " + join(plain) + "\n") != std::string::npos);
  CHECK(out.find("steered (-9 x feature 7, blocks.1.hook_resid_pre): " + join(steered) + "\n") != std::string::npos);
  CHECK(out.find("added to blocks.1.hook_resid_pre") != std::string::npos);
  // --hook overrides the SAE's point, spelled as `features --hook` spells it; --sae-hook is the same option.
  std::string by_hook, by_sae_hook;
  const std::string base = vl_test::cli_path() + " generate " + dir + " --prompt-ids 464,412,733,8765 --steps 3 " +
                           "--stop-id -1 --ids --sae " + steer_saes() + "/saelens_standard --steer-feature 7 --scale -9 ";
  REQUIRE(vl_test::run_command(base + "--hook blocks.0.hook_resid_pre 2>&1", by_hook) == 0);
  REQUIRE(vl_test::run_command(base + "--sae-hook blocks.0.hook_resid_pre 2>&1", by_sae_hook) == 0);
  CHECK(by_hook.find("feature 7, blocks.0.hook_resid_pre)") != std::string::npos);
  CHECK(by_hook == by_sae_hook);
  // bad input: one clear line, exit != 0
  CHECK(vl_test::run_command(vl_test::cli_path() + " generate " + dir + " --steer-feature 7 2>&1", out) != 0);
  CHECK(out.find("--steer-feature needs --sae") != std::string::npos);
  CHECK(vl_test::run_command(
            vl_test::cli_path() + " generate " + dir + " --sae " + steer_saes() + "/saelens_standard --steer-feature 96 2>&1",
            out) != 0);
  CHECK(out.find("out of range") != std::string::npos);
}
