// vocablens compare: two logit-lens runs. Independent expectations: a run against itself (Δ = 0, KL = 0
// exactly); hand-made runs whose distributions have a closed-form KL (uniform vs (1/2, 1/4, 1/8, 1/8):
// both KLs are ln 2 / 4); two real runs read back from disk with the KL recomputed here by torch's own
// log_softmax/exp on the saved arrays, and the final layer's saved distribution against the models' forward
// logits; the manifest check, different vocabularies, token counts and depths.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "vocablens/compare.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::NdArray;
using vocablens::Result;

// A hand-made logit_lens Result: n layers, T positions, V tokens; log-probabilities given per (layer, position).
Result fake_run(int64_t n, int64_t T, const std::vector<float>& log_probs, int64_t V, const std::string& vocab_sha = "abc",
                const std::vector<float>& prob = {}, const std::vector<int64_t>& rank = {}) {
  Result r;
  r.kind = "logit_lens";
  std::vector<float> p = prob.empty() ? std::vector<float>(static_cast<size_t>(n * T), 0.5f) : prob;
  std::vector<int64_t> k = rank.empty() ? std::vector<int64_t>(static_cast<size_t>(n * T), 1) : rank;
  r.arrays["target_prob"] = NdArray::f32({n, T}, p.data());
  r.arrays["target_rank"] = NdArray::i64({n, T}, k.data());
  if (!log_probs.empty()) r.arrays["log_probs"] = NdArray::f32({n, T, V}, log_probs.data());
  r.summary["vocab_size"] = V;
  nlohmann::json lays = nlohmann::json::array();
  for (int64_t l = 0; l < n; ++l) lays.push_back({{"label", l == 0 ? std::string("embed") : std::to_string(l - 1)}});
  r.summary["layers"] = lays;
  if (!vocab_sha.empty()) r.provenance["vocab_sha256"] = vocab_sha;
  return r;
}

std::string usage_error(const Result& a, const Result& b, const vocablens::LensCompareOptions& o = {}) {
  try {
    vocablens::compare_lens_runs(a, b, o);
  } catch (const vocablens::UsageError& e) { return e.what(); }
  return "";
}

std::vector<float> floats(const Result& r, const std::string& name) {
  const NdArray& a = r.arrays.at(name);
  REQUIRE(a.dtype == "<f4");
  std::vector<float> v(static_cast<size_t>(a.numel()));
  std::memcpy(v.data(), a.bytes.data(), v.size() * sizeof(float));
  return v;
}

at::Tensor tensor_of(const Result& r, const std::string& name) {
  const NdArray& a = r.arrays.at(name);
  return at::from_blob(const_cast<uint8_t*>(a.bytes.data()), a.shape, at::kFloat).clone();
}

}  // namespace

TEST_CASE("compare: closed-form KL on hand-made runs", "[compare]") {
  // A: uniform over 4 tokens; B: (1/2, 1/4, 1/8, 1/8). KL(A||B) = 1/4 (ln(1/2)+0+ln 2+ln 2) = ln2/4;
  // KL(B||A) = 1/2 ln 2 + 0 + 2 (1/8) ln(1/2) = ln2/4.
  const float lu = std::log(0.25f);
  std::vector<float> a = {lu, lu, lu, lu}, b = {std::log(0.5f), std::log(0.25f), std::log(0.125f), std::log(0.125f)};
  auto c = vocablens::compare_lens_runs(fake_run(1, 1, a, 4, "abc", {0.25f}, {2}), fake_run(1, 1, b, 4, "abc", {0.5f}, {1}));
  REQUIRE(c.has_kl);
  CHECK(c.kl_ab[0] == Approx(std::log(2.0) / 4).epsilon(1e-6));
  CHECK(c.kl_ba[0] == Approx(std::log(2.0) / 4).epsilon(1e-6));
  CHECK(c.delta_prob[0] == Approx(-0.25));
  CHECK(c.delta_rank[0] == 1.0f);
  // A token with probability 0 in B but not in A: KL(A||B) is infinite, never a plausible number.
  std::vector<float> z = {std::log(0.5f), std::log(0.5f), -std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  auto ci = vocablens::compare_lens_runs(fake_run(1, 1, a, 4), fake_run(1, 1, z, 4));
  CHECK(std::isinf(ci.kl_ab[0]));
  CHECK(ci.kl_ba[0] == Approx(std::log(2.0)).epsilon(1e-6));  // 2 · 1/2 ln(1/2 / 1/4)
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), lu, lu, lu};
  CHECK(std::isnan(vocablens::compare_lens_runs(fake_run(1, 1, nan, 4), fake_run(1, 1, a, 4)).kl_ab[0]));
}

TEST_CASE("compare: layers of different depth, positions, vocabularies", "[compare]") {
  // 3 lens layers against 5: paired by relative depth 0->0, 1->2, 2->4; B's probabilities name the layer.
  std::vector<float> pb = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4};  // [5, 2]
  auto c = vocablens::compare_lens_runs(fake_run(3, 2, {}, 4), fake_run(5, 2, {}, 4, "abc", pb));
  CHECK(c.layer_b == std::vector<int64_t>{0, 2, 4});
  CHECK(c.prob_b == std::vector<float>{0, 0, 2, 2, 4, 4});
  CHECK(c.layers_b == std::vector<std::string>{"embed", "1", "3"});
  CHECK_FALSE(c.has_kl);
  CHECK(c.kl_missing.find("--save-probs") != std::string::npos);

  // Different token counts: one line naming both counts and the way out; --align end pairs the last ones.
  std::vector<float> p3 = {0.1f, 0.2f, 0.3f}, p2 = {0.7f, 0.9f};
  vocablens::LensCompareOptions o;
  o.name_a = "runs/a";
  o.name_b = "runs/b";
  std::string e = usage_error(fake_run(1, 3, {}, 4, "abc", p3), fake_run(1, 2, {}, 4, "abc", p2), o);
  CHECK(e.find("runs/a has 3 tokens and runs/b has 2") != std::string::npos);
  CHECK(e.find("--align") != std::string::npos);
  o.align = vocablens::LensAlign::End;
  auto ce = vocablens::compare_lens_runs(fake_run(1, 3, {}, 4, "abc", p3), fake_run(1, 2, {}, 4, "abc", p2), o);
  CHECK(ce.T == 2);
  CHECK(ce.delta_prob[0] == Approx(0.2 - 0.7));
  CHECK(ce.delta_prob[1] == Approx(0.3 - 0.9));
  o.align = vocablens::LensAlign::Start;
  CHECK(vocablens::compare_lens_runs(fake_run(1, 3, {}, 4, "abc", p3), fake_run(1, 2, {}, 4, "abc", p2), o).delta_prob[1] ==
        Approx(0.2 - 0.9));

  // Different vocabularies: by fingerprint, or by size when a run has none.
  e = usage_error(fake_run(1, 1, {}, 4, "abc"), fake_run(1, 1, {}, 4, "abd"));
  CHECK(e.find("different vocabularies") != std::string::npos);
  CHECK(e.find("cannot be compared token by token") != std::string::npos);
  e = usage_error(fake_run(1, 1, {}, 4, ""), fake_run(1, 1, {}, 5, ""));
  CHECK(e.find("4 tokens vs") != std::string::npos);
  CHECK(e.find("5 tokens") != std::string::npos);
  Result other = fake_run(1, 1, {}, 4);
  other.kind = "logit_lens_batch";
  CHECK(usage_error(other, fake_run(1, 1, {}, 4)).find("not a logit_lens run") != std::string::npos);
}

TEST_CASE("compare: real runs from disk (self, two prompts, two models)", "[compare][fixtures]") {
  vocablens::init_runtime();
  auto s_dir = vl_test::fixture("stories260K");
  auto x_dir = vl_test::fixture("llama2xs");
  if (s_dir.empty() || x_dir.empty()) return;
  const std::string sp = s_dir + "/stories260K.bin", xp = x_dir + "/model.bin";
  vocablens::Model ms = vocablens::load_model(sp), mx = vocablens::load_model(xp);
  auto ts = vocablens::load_tokenizer_for(sp), tx = vocablens::load_tokenizer_for(xp);
  CHECK(vocablens::vocabulary_sha256(*ts) == vocablens::vocabulary_sha256(*tx));  // both tok512
  vocablens::LensOptions lo;
  lo.top_k = 3;
  lo.save_log_probs = true;
  const std::string root = vl_test::temp_dir("compare");
  auto save = [&](const vocablens::Model& m, const vocablens::Tokenizer& tok, const std::string& prompt,
                  const std::string& name) {
    auto ids = tok.encode(prompt);
    Result r = vocablens::logit_lens(m, ids, lo).to_result(&tok, prompt);
    r.provenance["vocab_sha256"] = vocablens::vocabulary_sha256(tok);
    vocablens::write_result(r, root + "/" + name);
    return ids;
  };
  auto ids_a = save(ms, *ts, "Lily went to the park", "a");
  auto ids_b = save(ms, *ts, "Lily ran to the park", "b");
  auto ids_x = save(mx, *tx, "Lily went to the park", "x");
  REQUIRE(ids_a.size() == ids_b.size());  // two prompts of equal length on one model
  Result a = vocablens::read_lens_run(root + "/a"), b = vocablens::read_lens_run(root + "/b"),
         x = vocablens::read_lens_run(root + "/x");

  SECTION("a run against itself: every difference and both KLs are exactly 0") {
    auto c = vocablens::compare_lens_runs(a, a);
    REQUIRE(c.has_kl);
    for (size_t q = 0; q < c.delta_prob.size(); ++q) {
      if (c.rank_a[q] > 0) {
        CHECK(c.delta_prob[q] == 0.0f);
        CHECK(c.delta_rank[q] == 0.0f);
      }
      CHECK(c.kl_ab[q] == 0.0f);
      CHECK(c.kl_ba[q] == 0.0f);
    }
  }

  SECTION("two prompts on one model: KL and differences recomputed from the saved arrays") {
    auto c = vocablens::compare_lens_runs(a, b);
    at::Tensor la = tensor_of(a, "log_probs").to(at::kDouble), lb = tensor_of(b, "log_probs").to(at::kDouble);
    at::Tensor kl = (la.exp() * (la - lb)).sum(-1);  // [n, T]
    at::Tensor kl2 = (lb.exp() * (lb - la)).sum(-1);
    const int64_t n = la.size(0), T = la.size(1);
    REQUIRE(c.n == n);
    REQUIRE(c.T == T);
    double worst = 0;
    for (int64_t l = 0; l < n; ++l)
      for (int64_t t = 0; t < T; ++t) {
        worst = std::max(worst, std::fabs(c.kl_ab[c.at(l, t)] - kl[l][t].item<double>()));
        worst = std::max(worst, std::fabs(c.kl_ba[c.at(l, t)] - kl2[l][t].item<double>()));
      }
    CHECK(worst < 1e-5);
    // Δp against the two runs' own target_prob arrays; and target_prob against the saved distribution.
    std::vector<float> pa = floats(a, "target_prob"), pb = floats(b, "target_prob");
    for (int64_t t = 0; t + 1 < T; ++t) {
      CHECK(c.delta_prob[c.at(n - 1, t)] ==
            Approx(pa[static_cast<size_t>((n - 1) * T + t)] - pb[static_cast<size_t>((n - 1) * T + t)]).margin(1e-7));
      const double p_saved = std::exp(la[n - 1][t][ids_a[static_cast<size_t>(t + 1)]].item<double>());
      CHECK(pa[static_cast<size_t>((n - 1) * T + t)] == Approx(p_saved).margin(1e-5));
    }
    CHECK(c.to_result().tables.at(1).rows.size() == static_cast<size_t>(n * T));
  }

  SECTION("one prompt on two models sharing tok512: the final layer's KL from the models' own logits") {
    auto c = vocablens::compare_lens_runs(a, x);
    at::Tensor ta = at::tensor(ids_a, at::kLong);
    at::Tensor za = ms.forward(ta).logits[0].to(at::kDouble), zx = mx.forward(ta).logits[0].to(at::kDouble);
    at::Tensor pa = at::log_softmax(za, -1), px = at::log_softmax(zx, -1);
    at::Tensor kl = (pa.exp() * (pa - px)).sum(-1);  // [T]
    const int64_t last = c.n - 1, last_b = c.layer_b.back();
    CHECK(last_b == static_cast<int64_t>(x.arrays.at("target_prob").shape[0]) - 1);
    for (int64_t t = 0; t < c.T; ++t) CHECK(c.kl_ab[c.at(last, t)] == Approx(kl[t].item<double>()).epsilon(1e-4).margin(1e-5));
    CHECK((c.layers != c.layers_b || ms.config().n_layers == mx.config().n_layers));
  }

  SECTION("the manifest is verified: a changed side file is refused, naming it") {
    const std::string f = root + "/b/logit_lens.target_prob.npy";
    std::string bytes = vl_test::read_file(f);
    bytes[bytes.size() - 1] ^= 0x01;
    std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
    try {
      vocablens::read_lens_run(root + "/b");
      FAIL("a tampered run was read");
    } catch (const vocablens::FormatError& e) {
      CHECK(std::string(e.what()).find("logit_lens.target_prob.npy") != std::string::npos);
    }
    std::string e;
    try {
      vocablens::read_lens_run(vl_test::temp_dir("compare-empty"));
    } catch (const vocablens::UsageError& err) { e = err.what(); }
    CHECK(e.find("no results in this directory") != std::string::npos);
  }
}
