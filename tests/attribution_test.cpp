// Direct logit attribution: the parts sum to the model's own logit (difference) within 1e-4
// on gpt2-tiny (LayerNorm, biases, learned positions), stories260K (RMSNorm, no biases, GQA) and the Gemma-2
// family fixture (post-attention/post-MLP norms frozen per layer, logits decomposed before the soft-cap), at
// several positions; per-part values recomputed here from the plain cache (attn_out, mlp_out) and the
// final norm's scale written out by hand; the CLI.
#include <catch2/catch.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/attribution.hpp"
#include "vocablens/error.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"

namespace {

using vl_test::shq;

// Contribution of one residual component c [d] through the final norm frozen at the residual x [d],
// written from the definitions (double, element by element).
double through_norm(const vocablens::Model& m, const at::Tensor& c_in, const at::Tensor& x_in, int64_t target, int64_t wrong) {
  auto c = c_in.to(at::kDouble).contiguous();
  auto x = x_in.to(at::kDouble).contiguous();
  const int64_t d = x.size(0);
  const double* xp = x.data_ptr<double>();
  const double* cp = c.data_ptr<double>();
  const bool ln = m.config().norm == vocablens::NormKind::LayerNorm;
  double mx = 0, mc = 0;
  if (ln)
    for (int64_t i = 0; i < d; ++i) mx += xp[i] / d, mc += cp[i] / d;
  double var = 0;
  for (int64_t i = 0; i < d; ++i) var += (xp[i] - mx) * (xp[i] - mx) / d;
  const double s = std::sqrt(var + m.config().norm_eps);
  auto w = m.weights().lnf_w.to(at::kDouble).contiguous();
  auto U = m.W_U().to(at::kDouble).contiguous();
  double v = 0;
  for (int64_t i = 0; i < d; ++i) {
    double u = U[i][target].item<double>() - (wrong >= 0 ? U[i][wrong].item<double>() : 0.0);
    v += (cp[i] - mc) / s * w[i].item<double>() * u;
  }
  return v;
}

// A fixture below ../shared/fixtures, or "@name": the committed family fixture tests/fixtures/families/name.
std::string fixture_or_family(const std::string& rel) {
  if (rel[0] == '@') return std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/" + rel.substr(1);
  return vl_test::fixture(rel);
}

// The logit before a final soft-cap c·tanh(x/c) (Gemma-2), from the capped one the model returns.
double uncapped(const vocablens::Model& m, double v) {
  const double c = m.config().final_softcap;
  return c > 0 ? c * std::atanh(v / c) : v;
}

}  // namespace

TEST_CASE("the parts of a logit sum to the model's logit within 1e-4 (gpt2-tiny, stories260K)") {
  struct Case {
    const char* rel;
    std::vector<int64_t> ids;
    int64_t target, wrong;
  };
  const std::vector<Case> cases = {
      {"gpt2-tiny", {2215, 1757, 290, 5335, 1816, 284, 262, 3650, 11, 5335, 2921, 257, 4144, 284}, 1757, 5335},
      {"stories260K/stories260K.bin", {1, 403, 407, 261, 378, 500, 270, 300, 280, 261}, 261, 378},
      {"stories260K-hf", {1, 403, 407, 261, 378, 500, 270, 300, 280, 261}, 270, -1},
      // Gemma-2: post-attention / post-MLP norms (frozen per layer) and a final soft-cap (decomposed before it).
      {"@gemma2", {31, 256, 77, 300, 5, 318, 64, 263, 12, 290}, 77, 300},
  };
  for (const auto& cs : cases) {
    std::string path = fixture_or_family(cs.rel);
    if (path.empty()) continue;
    auto m = vocablens::load_model(path);
    const int64_t T = static_cast<int64_t>(cs.ids.size());
    auto logits = m.forward(at::tensor(cs.ids, at::kLong)).logits[0];
    for (int64_t pos : {int64_t{-1}, int64_t{0}, int64_t{3}}) {
      for (int64_t wrong : {cs.wrong, int64_t{-1}}) {
        vocablens::AttributionOptions o;
        o.target = cs.target;
        o.wrong = wrong;
        o.position = pos;
        auto a = vocablens::attribute_logit(m, cs.ids, o);
        const int64_t p = pos < 0 ? T - 1 : pos;
        auto lg = [&](int64_t id) { return uncapped(m, logits[p][id].item<double>()); };
        const double model = lg(cs.target) - (wrong >= 0 ? lg(wrong) : 0.0);
        INFO(cs.rel << " position " << pos << " wrong " << wrong);
        // Undoing the cap in float32 (atanh) costs a few ulps, amplified near the cap.
        CHECK(a.model_value == Approx(model).margin(m.config().final_softcap > 0 ? 2e-5 : 1e-6));
        CHECK(std::fabs(a.sum - model) < 1e-4);
        CHECK(a.check < 1e-4);
        const size_t heads = static_cast<size_t>(m.config().n_layers * m.config().n_heads);
        size_t n_heads = 0;
        for (const auto& c : a.components) n_heads += c.kind == "head";
        CHECK(n_heads == heads);
      }
    }
  }
}

TEST_CASE("per-part values: heads of a layer + b_O = attn_out's part, MLP + b_out = mlp_out's part, norm by hand") {
  for (const char* rel : {"gpt2-tiny", "stories260K/stories260K.bin", "@gemma2"}) {
    std::string path = fixture_or_family(rel);
    if (path.empty()) continue;
    auto m = vocablens::load_model(path);
    std::vector<int64_t> ids = {1, 403, 407, 261, 378, 500, 270, 300};
    const int64_t V = m.config().vocab_size;
    for (auto& i : ids) i %= V;  // gemma2's vocabulary has 320 tokens
    const int64_t T = static_cast<int64_t>(ids.size()), target = 261, wrong = 407 % V;
    vocablens::AttributionOptions o;
    o.target = target;
    o.wrong = wrong;
    auto a = vocablens::attribute_logit(m, ids, o);
    auto out = m.forward(at::tensor(ids, at::kLong), vocablens::CacheSpec::all());
    const at::Tensor x = out.cache.get("resid_post", m.config().n_layers - 1)[0][T - 1];
    std::map<std::string, double> by_name;
    for (const auto& c : a.components) by_name[c.name] = c.value;
    for (int64_t l = 0; l < m.config().n_layers; ++l) {
      double heads = 0;
      for (int64_t h = 0; h < m.config().n_heads; ++h) heads += a.heads[static_cast<size_t>(l * a.n_heads + h)];
      const std::string L = std::to_string(l);
      double attn = heads + (by_name.count("L" + L + " b_O") ? by_name["L" + L + " b_O"] : 0.0);
      double mlp = by_name["MLP" + L] + (by_name.count("MLP" + L + " b_out") ? by_name["MLP" + L + " b_out"] : 0.0);
      INFO(rel << " layer " << l);
      CHECK(attn == Approx(through_norm(m, out.cache.get("attn_out", l)[0][T - 1], x, target, wrong)).margin(1e-5));
      CHECK(mlp == Approx(through_norm(m, out.cache.get("mlp_out", l)[0][T - 1], x, target, wrong)).margin(1e-5));
    }
    double emb = by_name["embed"] + (by_name.count("pos_embed") ? by_name["pos_embed"] : 0.0);
    CHECK(emb == Approx(through_norm(m, out.cache.get("resid_pre", 0)[0][T - 1], x, target, wrong)).margin(1e-5));
  }
}

TEST_CASE("an earlier residual: the parts of blocks < layer sum to the logit lens's logit of that row") {
  // Independent of the attribution's own arithmetic: the lens engine's row R gives log p(top-1) and the
  // logsumexp of that row's logits, so logit(top-1) = log p + logsumexp, computed by its own GEMM path.
  for (const char* rel : {"gpt2-tiny", "stories260K/stories260K.bin"}) {
    std::string path = fixture_or_family(rel);
    REQUIRE(!path.empty());
    auto m = vocablens::load_model(path);
    const std::vector<int64_t> ids = {1, 403, 407, 261, 378, 500, 270, 300};
    vocablens::LensOptions lo;
    lo.top_k = 2;
    const auto lens = vocablens::logit_lens(m, ids, lo);
    const int64_t L = m.config().n_layers, T = static_cast<int64_t>(ids.size());
    REQUIRE(lens.n_layers() == L + 1);
    for (int64_t R = 0; R <= L; ++R) {
      for (int64_t p : {int64_t{0}, T - 1}) {
        vocablens::AttributionOptions o;
        o.target = lens.top_id(R, p, 0);
        o.position = p;
        o.layer = R;
        auto a = vocablens::attribute_logit(m, ids, o);
        const double lens_logit =
            std::log(static_cast<double>(lens.top_prob(R, p, 0))) + static_cast<double>(lens.logsumexp[lens.at(R, p)]);
        INFO(rel << " layer " << R << " position " << p);
        CHECK(a.layer == R);
        CHECK(a.model_value == Approx(lens_logit).margin(1e-4));
        CHECK(std::fabs(a.sum - lens_logit) < 1e-4);
        size_t n_heads = 0, n_mlps = 0;
        for (const auto& c : a.components) {
          n_heads += c.kind == "head";
          n_mlps += c.kind == "mlp";
          CHECK(c.layer < R);
        }
        CHECK(n_heads == static_cast<size_t>(R * m.config().n_heads));
        CHECK(n_mlps == static_cast<size_t>(R));
        CHECK(a.heads.size() == static_cast<size_t>(R * m.config().n_heads));
      }
    }
    vocablens::AttributionOptions bad;
    bad.target = 5;
    bad.layer = L + 1;
    CHECK_THROWS_WITH(vocablens::attribute_logit(m, ids, bad), Catch::Contains("is not a residual of this model"));
  }
}

TEST_CASE("attribution errors and the CLI") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  vocablens::AttributionOptions o;
  CHECK_THROWS_WITH(vocablens::attribute_logit(m, {464, 412}, o), Catch::Contains("needs a target"));
  o.target = 412;
  o.position = 5;
  CHECK_THROWS_WITH(vocablens::attribute_logit(m, {464, 412}, o), Catch::Contains("outside the prompt's 2 tokens"));
  if (vl_test::require_cli().empty()) return;
  const std::string cli = shq(vl_test::cli_path()) + " attribute " + shq(dir);
  std::string out;
  REQUIRE(vl_test::run_command(cli + " --prompt 'When John and Mary went to the store, Mary gave a drink to' --target "
                                     "' John' --wrong ' Mary' --format json 2>&1",
                               out) == 0);
  auto j = nlohmann::json::parse(out);
  CHECK(j["kind"] == "logit_attribution");
  CHECK(j["summary"]["check"].get<double>() < 1e-4);
  REQUIRE(vl_test::run_command(cli + " --prompt 'The Eiffel Tower is in' --target ' Paris' --no-color --show 100 2>&1", out) ==
          0);
  CHECK_THAT(out, Catch::Contains("sum of parts") && Catch::Contains("L0H0") && Catch::Contains("MLP"));
  CHECK(vl_test::run_command(cli + " --prompt 'The Eiffel Tower is in' --target ' Parisian Eiffel' 2>&1", out) == 2);
  CHECK_THAT(out, Catch::Contains("--target ' Parisian Eiffel' is"));
}
