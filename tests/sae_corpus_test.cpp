// An SAE over a corpus (vocablens/sae_corpus.hpp) against brute force over the same windows: the whole text
// tokenised at once and cut into windows overlapping by one token; every scored position's activations
// computed in float64 and counted with plain loops; every max-activating context found by sorting all of
// them; MSE and explained variance by their two-pass definitions; the three forward passes (clean, with the
// reconstruction spliced in, zero-ablated) run here with their own hooks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "corpus_text.hpp"
#include "fixtures.hpp"
#include "sae_fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/result_kinds.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/sae_corpus.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

// make_saes.py's SAEs, made once per build directory (support/sae_fixtures.hpp).
std::string sae_dir() { return vl_test::sae_fixtures_dir(); }

double rel(double a, double b) { return std::abs(a - b) / std::max(1.0, std::abs(b)); }

// Mean next-token cross-entropy sum and KL(clean || other) sum over positions 0 .. T-2, float64 loops.
void ce_kl_ref(const at::Tensor& clean_logits, const at::Tensor& logits, const std::vector<int64_t>& ids, double& ce,
               double& kl) {
  const int64_t T = static_cast<int64_t>(ids.size());
  at::Tensor a = clean_logits.reshape({T, -1}).to(at::kDouble), b = logits.reshape({T, -1}).to(at::kDouble);
  const int64_t V = a.size(1);
  auto A = a.accessor<double, 2>(), B = b.accessor<double, 2>();
  for (int64_t t = 0; t + 1 < T; ++t) {
    double ma = -INFINITY, mb = -INFINITY;
    for (int64_t v = 0; v < V; ++v) ma = std::max(ma, A[t][v]), mb = std::max(mb, B[t][v]);
    double sa = 0, sb = 0;
    for (int64_t v = 0; v < V; ++v) sa += std::exp(A[t][v] - ma), sb += std::exp(B[t][v] - mb);
    const double lsa = ma + std::log(sa), lsb = mb + std::log(sb);
    ce += lsb - B[t][ids[static_cast<size_t>(t + 1)]];
    for (int64_t v = 0; v < V; ++v) {
      const double lp = A[t][v] - lsa, lq = B[t][v] - lsb;
      kl += std::exp(lp) * (lp - lq);
    }
  }
}

struct Ref {
  int64_t windows = 0, P = 0;
  std::vector<int64_t> counts, hist;
  double l0 = 0, rss = 0, tss = 0, cos = 0, ce[3] = {0, 0, 0}, kl[2] = {0, 0};
  std::vector<std::vector<std::tuple<double, int64_t, int64_t, std::vector<int64_t>, int64_t, std::vector<double>>>> ctx;
};

Ref brute_force(const vocablens::Model& m, const vocablens::Sae& sae, const std::vector<int64_t>& all, int64_t W, int64_t n,
                int64_t before, int64_t after) {
  Ref r;
  const int64_t D = sae.d_sae;
  const std::string target = sae.hook_name_out.empty() ? sae.hook_name : sae.hook_name_out;
  r.counts.assign(static_cast<size_t>(D), 0);
  r.hist.assign(static_cast<size_t>(D * 40), 0);
  r.ctx.resize(static_cast<size_t>(D));
  std::vector<double> edges;
  for (int b = 0; b <= 40; ++b) edges.push_back(std::pow(10.0, -3.0 + b / 5.0));
  std::vector<at::Tensor> xs;
  for (size_t s = 0; s + 1 < all.size(); s += static_cast<size_t>(W - 1)) {
    std::vector<int64_t> ids(all.begin() + static_cast<std::ptrdiff_t>(s),
                             all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), s + static_cast<size_t>(W))));
    const int64_t T = static_cast<int64_t>(ids.size());
    at::Tensor tids = at::tensor(ids, at::kLong), xin, xout;
    vocablens::HookList h;
    h.add(sae.hook_name, [&](at::Tensor& a) { xin = a.clone(); });
    if (target != sae.hook_name) h.add(target, [&](at::Tensor& a) { xout = a.clone(); });
    at::Tensor clean = vocablens::run_with_hooks(m, tids, h).logits;
    at::Tensor x = xin.reshape({T, -1}).to(at::kDouble);
    at::Tensor y = target != sae.hook_name ? xout.reshape({T, -1}).to(at::kDouble) : x;
    at::Tensor f = sae.encode(x), xh = sae.decode(f, x);
    auto F = f.accessor<double, 2>();
    for (int64_t p = 0; p + 1 < T; ++p) {
      ++r.P;
      for (int64_t j = 0; j < D; ++j) {
        const double v = F[p][j];
        if (v <= 0) continue;
        r.l0 += 1;
        r.counts[static_cast<size_t>(j)] += 1;
        int b = 0;
        while (b < 39 && v >= edges[static_cast<size_t>(b + 1)]) ++b;
        r.hist[static_cast<size_t>(j * 40 + b)] += 1;
        const int64_t s0 = std::max<int64_t>(0, p - before), e0 = std::min(T, p + after + 1);
        std::vector<double> vals;
        for (int64_t q = s0; q < e0; ++q) vals.push_back(F[q][j]);
        r.ctx[static_cast<size_t>(j)].emplace_back(v, r.windows, p, std::vector<int64_t>(ids.begin() + s0, ids.begin() + e0),
                                                   p - s0, vals);
      }
      at::Tensor yp = y[p], hp = xh[p];
      r.rss += (yp - hp).pow(2).sum().item<double>();
      r.cos += (yp * hp).sum().item<double>() / (yp.norm().item<double>() * hp.norm().item<double>());
    }
    xs.push_back(y.narrow(0, 0, T - 1));
    at::Tensor xhf = xh.to(at::kFloat);
    vocablens::HookList splice, zero;
    splice.add(target, [&](at::Tensor& a) { a.copy_(xhf.reshape(a.sizes())); });
    zero.add(target, [](at::Tensor& a) { a.zero_(); });
    double dummy = 0;
    ce_kl_ref(clean, clean, ids, r.ce[0], dummy);
    ce_kl_ref(clean, vocablens::run_with_hooks(m, tids, splice).logits, ids, r.ce[1], r.kl[0]);
    ce_kl_ref(clean, vocablens::run_with_hooks(m, tids, zero).logits, ids, r.ce[2], r.kl[1]);
    ++r.windows;
  }
  at::Tensor X = at::cat(xs, 0);
  r.tss = (X - X.mean(0)).pow(2).sum().item<double>();  // two passes: the mean, then the deviations
  for (auto& c : r.ctx) {
    std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
      return std::make_tuple(-std::get<0>(a), std::get<1>(a), std::get<2>(a)) <
             std::make_tuple(-std::get<0>(b), std::get<1>(b), std::get<2>(b));
    });
    if (static_cast<int64_t>(c.size()) > n) c.resize(static_cast<size_t>(n));
  }
  return r;
}

}  // namespace

TEST_CASE("SAE corpus statistics equal brute force over the same windows", "[sae][corpus]") {
  vocablens::init_runtime();
  const std::string dir = vl_test::fixture("gpt2-tiny");
  REQUIRE(!dir.empty());
  auto m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  const std::string path = vl_test::temp_dir("saecorpus") + "/corpus.txt";
  vl_test::write_file(path, vl_test::kShortCorpus);
  const auto all = tok->encode(vl_test::kShortCorpus);
  REQUIRE(all.size() > 40);

  for (const char* name : {"saelens_standard", "saelens_jumprelu", "circuit_tracer/layer_1.safetensors"}) {
    INFO(name);
    vocablens::Sae sae = vocablens::load_sae(sae_dir() + "/" + name);
    vocablens::SaeCorpusOptions o;
    o.window = 16;
    o.chunk_bytes = 64;  // many chunk boundaries: the tokens must still be the whole text's
    o.contexts = 4;
    o.context_before = 3;
    o.context_after = 2;
    o.float64 = true;
    auto s = vocablens::sae_corpus_stats(m, sae, *tok, path, o);
    Ref ref = brute_force(m, sae, all, 16, 4, 3, 2);
    CHECK(s.windows == ref.windows);
    REQUIRE(s.positions == ref.P);
    CHECK(s.positions == static_cast<int64_t>(all.size()) - 1);
    CHECK(s.fire_count == ref.counts);
    CHECK(s.histogram == ref.hist);
    CHECK(rel(s.mean_l0, ref.l0 / ref.P) <= 1e-12);
    const double d = static_cast<double>(s.d);
    CHECK(rel(s.mse, ref.rss / (ref.P * d)) <= 1e-9);
    CHECK(rel(s.explained_variance, 1 - ref.rss / ref.tss) <= 1e-9);
    CHECK(rel(s.cossim, ref.cos / ref.P) <= 1e-9);
    CHECK(rel(s.ce_clean, ref.ce[0] / ref.P) <= 1e-9);
    CHECK(rel(s.ce_sae, ref.ce[1] / ref.P) <= 1e-9);
    CHECK(rel(s.ce_zero, ref.ce[2] / ref.P) <= 1e-9);
    CHECK(rel(s.kl_sae, ref.kl[0] / ref.P) <= 1e-8);
    CHECK(rel(s.kl_zero, ref.kl[1] / ref.P) <= 1e-8);
    CHECK(rel(s.ce_loss_score, (ref.ce[2] - ref.ce[1]) / (ref.ce[2] - ref.ce[0])) <= 1e-7);
    CHECK(s.ce_sae != s.ce_clean);  // the splice changed the forward (a random SAE on a random model)
    int64_t dead = 0;
    for (auto c : ref.counts) dead += c == 0;
    CHECK(s.dead() == dead);
    REQUIRE(s.top_contexts.size() == ref.ctx.size());
    for (size_t f = 0; f < ref.ctx.size(); ++f) {
      const auto& a = s.top_contexts[f];
      const auto& b = ref.ctx[f];
      REQUIRE(a.size() == b.size());
      for (size_t q = 0; q < a.size(); ++q) {
        CHECK(a[q].activation == std::get<0>(b[q]));
        CHECK(a[q].window == std::get<1>(b[q]));
        CHECK(a[q].position == std::get<2>(b[q]));
        CHECK(a[q].ids == std::get<3>(b[q]));
        CHECK(a[q].at == std::get<4>(b[q]));
        CHECK(a[q].values == std::get<5>(b[q]));
      }
    }
    // float32 (the default) agrees with the float64 run up to features at the margin of firing.
    o.float64 = false;
    auto s32 = vocablens::sae_corpus_stats(m, sae, *tok, path, o);
    int64_t off = 0;
    for (size_t f = 0; f < ref.counts.size(); ++f) off += std::abs(s32.fire_count[f] - ref.counts[f]);
    CHECK(off <= 2);
    CHECK(std::abs(s32.mse - s.mse) <= 1e-5 * std::max(1.0, s.mse));
    CHECK(std::abs(s32.ce_sae - s.ce_sae) <= 1e-4);
    // The result: kind, shapes as registered, one page per feature.
    auto r = s.to_result(tok.get());
    CHECK(r.kind == "feature_corpus");
    CHECK(r.arrays.at("histogram").shape == std::vector<int64_t>{s.d_sae, 40});
    CHECK(r.arrays.at("context_ids").shape[1] == 6);
    CHECK(vocablens::result_kinds().find("feature_corpus") != nullptr);
  }

  // max_tokens bounds the scored positions; bad input is a clear error.
  vocablens::Sae sae = vocablens::load_sae(sae_dir() + "/saelens_standard");
  vocablens::SaeCorpusOptions o;
  o.window = 8;
  o.max_tokens = 10;
  o.ce_metrics = false;
  CHECK(vocablens::sae_corpus_stats(m, sae, *tok, path, o).positions == 10);
  CHECK_THROWS_AS(vocablens::sae_corpus_stats(m, sae, *tok, path + ".missing", o), vocablens::FormatError);
  o.window = 1;
  CHECK_THROWS_AS(vocablens::sae_corpus_stats(m, sae, *tok, path, o), vocablens::UsageError);
}

TEST_CASE("histogram bins are the documented log-spaced edges", "[sae][corpus]") {
  CHECK(vocablens::histogram_bin(1e-9) == 0);
  CHECK(vocablens::histogram_bin(0.0015) == 0);
  CHECK(vocablens::histogram_bin(0.0016) == 1);  // 10^-2.8 = 0.001585
  CHECK(vocablens::histogram_bin(1.0) == 15);
  CHECK(vocablens::histogram_bin(1.5) == 15);
  CHECK(vocablens::histogram_bin(1.6) == 16);  // 10^0.2 = 1.585
  CHECK(vocablens::histogram_bin(1e9) == 39);
}
