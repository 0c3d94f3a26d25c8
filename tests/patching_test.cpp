// Activation patching: patching the whole residual at a layer from the clean run reproduces
// the clean logits exactly; the first-principles values of the matrix (a patch that makes the corrupted
// input equal the clean one restores exactly 1, a patch of identical values exactly 0); the batched
// matrix equals single patched runs; errors (different lengths) and the CLI.
#include <catch2/catch.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/patching.hpp"

namespace {

// "When John and Mary went to the store, Mary gave a drink to" / the same with John giving.
const std::vector<int64_t> kClean = {2215, 1757, 290, 5335, 1816, 284, 262, 3650, 11, 5335, 2921, 257, 4144, 284};
const std::vector<int64_t> kCorrupt = {2215, 1757, 290, 5335, 1816, 284, 262, 3650, 11, 1757, 2921, 257, 4144, 284};
const int64_t kJohn = 1757, kMary = 5335;

using vl_test::shq;

}  // namespace

TEST_CASE("patching the whole residual at a layer from the clean run reproduces the clean logits exactly") {
  for (const char* rel : {"gpt2-tiny", "stories260K-hf"}) {
    std::string dir = vl_test::fixture(rel);
    if (dir.empty()) continue;
    auto m = vocablens::load_model(dir);
    std::vector<int64_t> clean = kClean, corrupt = kCorrupt;
    for (auto& i : clean) i %= m.config().vocab_size;
    for (auto& i : corrupt) i = (i * 7 + 3) % m.config().vocab_size;  // every position differs
    vocablens::CacheSpec spec;
    spec.resid_pre = true;
    auto clean_out = m.forward(at::tensor(clean, at::kLong), spec);
    for (int64_t l = 0; l < m.config().n_layers; ++l) {
      at::Tensor src = clean_out.cache.get("resid_pre", l);
      vocablens::HookList h;
      h.add("blocks." + std::to_string(l) + ".hook_resid_pre", [&](at::Tensor& x) { x.copy_(src); });
      auto patched = vocablens::run_with_hooks(m, at::tensor(corrupt, at::kLong), h).logits;
      INFO(rel << " layer " << l);
      CHECK(at::equal(patched, clean_out.logits));
    }
  }
}

TEST_CASE("resid patching matrix: 1 where the patch makes the inputs equal, 0 where it copies equal values") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  vocablens::PatchOptions o;
  o.over = vocablens::PatchOver::Resid;
  o.target = kMary;
  o.wrong = kJohn;
  auto p = vocablens::activation_patching(m, kClean, kCorrupt, o);
  const int64_t T = static_cast<int64_t>(kClean.size());
  REQUIRE(p.rows == m.config().n_layers);
  REQUIRE(p.cols == T);
  REQUIRE_FALSE(p.degenerate);
  // clean/corrupt metrics are the models' own logit differences
  auto lc = m.forward(at::tensor(kClean, at::kLong)).logits[0][T - 1];
  auto lk = m.forward(at::tensor(kCorrupt, at::kLong)).logits[0][T - 1];
  CHECK(p.clean_metric == Approx((lc[kMary] - lc[kJohn]).item<double>()).margin(1e-5));
  CHECK(p.corrupt_metric == Approx((lk[kMary] - lk[kJohn]).item<double>()).margin(1e-5));
  // The patched runs are batched (one row per position): their GEMMs round differently from the single
  // clean / corrupt runs by ~1e-7 in the metric, ~3e-6 after dividing by (clean - corrupt) here.
  const double tol = 2e-6 / std::fabs(p.clean_metric - p.corrupt_metric);
  for (int64_t t = 0; t < T; ++t) {
    // Layer 0's input differs only at position 9 (the token): patching it there IS the clean run.
    if (t == 9) CHECK(p.restored[p.at(0, t)] == Approx(1.0).margin(tol));
    else CHECK(p.restored[p.at(0, t)] == Approx(0.0).margin(tol));
    // Positions before the change carry identical activations at every layer.
    if (t < 9)
      for (int64_t l = 0; l < p.rows; ++l) CHECK(p.restored[p.at(l, t)] == Approx(0.0).margin(tol));
  }
}

TEST_CASE("batched patching equals one patched run per site (heads and mlp)") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  const int64_t T = static_cast<int64_t>(kClean.size());
  for (auto over : {vocablens::PatchOver::Heads, vocablens::PatchOver::Mlp}) {
    vocablens::PatchOptions o;
    o.over = over;
    o.target = kMary;
    o.wrong = kJohn;
    auto p = vocablens::activation_patching(m, kClean, kCorrupt, o);
    const std::string hook = over == vocablens::PatchOver::Heads ? "attn.hook_z" : "hook_mlp_out";
    for (int64_t l = 0; l < p.rows; ++l)
      for (int64_t c : {int64_t{0}, p.cols - 1}) {
        at::Tensor src;
        vocablens::HookList cap;
        cap.add("blocks." + std::to_string(l) + "." + hook, [&](at::Tensor& t) { src = t.clone(); });
        vocablens::run_with_hooks(m, at::tensor(kClean, at::kLong), cap);
        vocablens::HookList h;
        h.add("blocks." + std::to_string(l) + "." + hook, [&](at::Tensor& t) {
          if (over == vocablens::PatchOver::Heads) t.select(2, c).copy_(src.select(2, c));
          else t.select(1, c).copy_(src.select(1, c));
        });
        auto lg = vocablens::run_with_hooks(m, at::tensor(kCorrupt, at::kLong), h).logits[0][T - 1];
        const double metric = (lg[kMary] - lg[kJohn]).item<double>();
        INFO(vocablens::patch_over_name(over) << " layer " << l << " col " << c);
        CHECK(p.metric[p.at(l, c)] == Approx(metric).margin(1e-4));
        CHECK(p.restored[p.at(l, c)] == Approx((metric - p.corrupt_metric) / (p.clean_metric - p.corrupt_metric)).margin(1e-3));
      }
  }
  auto r = vocablens::activation_patching(m, kClean, kCorrupt,
                                          [] {
                                            vocablens::PatchOptions o;
                                            o.over = vocablens::PatchOver::Heads;
                                            o.target = kMary;
                                            return o;
                                          }())
               .to_result(nullptr);
  CHECK(r.kind == "activation_patching");
  CHECK(r.arrays.at("restored").shape == std::vector<int64_t>{3, 4});
  CHECK(r.settings["metric"] == "logit[target]");
}

TEST_CASE("patching errors: different token lengths, equal runs, bad tokens") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  vocablens::PatchOptions o;
  o.target = kMary;
  std::vector<int64_t> longer = kCorrupt;
  longer.push_back(13);
  CHECK_THROWS_WITH(vocablens::activation_patching(m, kClean, longer, o),
                    Catch::Contains("the clean prompt is 14 tokens and the corrupt prompt is 15 tokens") &&
                        Catch::Contains("same number of tokens"));
  auto same = vocablens::activation_patching(m, kClean, kClean, o);
  CHECK(same.degenerate);
  CHECK(std::isnan(same.restored[0]));
  o.target = 60000;
  CHECK_THROWS_WITH(vocablens::activation_patching(m, kClean, kCorrupt, o), Catch::Contains("outside the vocabulary"));
  o.target = kMary;
  o.wrong = kMary;
  CHECK_THROWS_WITH(vocablens::activation_patching(m, kClean, kCorrupt, o), Catch::Contains("same token"));
}

TEST_CASE("vocablens patch on the command line") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  REQUIRE(!dir.empty());
  REQUIRE(!vl_test::require_cli().empty());
  const std::string cli = shq(vl_test::cli_path()) + " patch " + shq(dir);
  std::string out;
  REQUIRE(vl_test::run_command(cli + " --clean 'When John and Mary went to the store, Mary gave a drink to' --corrupt "
                                     "'When John and Mary went to the store, John gave a drink to' --target ' John' "
                                     "--wrong ' Mary' --over heads --format json 2>&1",
                               out) == 0);
  // stderr comes first: the warning that this pair barely moves the metric on the tiny model.
  CHECK_THAT(out, Catch::Contains("warning: the clean and corrupt runs differ by only"));
  auto j = nlohmann::json::parse(out.substr(out.find('{')));
  CHECK(j["kind"] == "activation_patching");
  CHECK(j["summary"]["column_kind"] == "head");
  REQUIRE(vl_test::run_command(cli + " --clean 'When John and Mary went' --corrupt 'When Mary and John went' "
                                     "--target ' to' --no-color 2>&1",
                               out) == 0);
  CHECK_THAT(out, Catch::Contains("activation patching") && Catch::Contains("0 = corrupt, 1 = clean"));
  // The same table from --clean-ids / --corrupt-ids (the declared prompts' id spelling): the ids the texts encode to.
  std::string by_ids;
  REQUIRE(vl_test::run_command(cli + " --clean-ids 2215,1757,290,5335,1816 --corrupt-ids 2215,5335,290,1757,1816 "
                                     "--target ' to' --no-color 2>&1",
                               by_ids) == 0);
  CHECK(by_ids == out);
  // Different lengths: one line with both lengths and how to fix it, exit 2.
  CHECK(vl_test::run_command(cli + " --clean 'When John went' --corrupt 'When Christopher Columbus went' --target ' to' 2>&1",
                             out) == 2);
  CHECK_THAT(out, Catch::Contains("--clean is 3 tokens and --corrupt is 4 tokens") && Catch::Contains("reword one"));
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  CHECK(vl_test::run_command(cli + " --clean 'a b' --corrupt 'a c' --target ' to' --over layers 2>&1", out) != 0);
  CHECK_THAT(out, Catch::Contains("resid"));
}
