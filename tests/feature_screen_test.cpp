// The int8 screen of feature logit weights (analyses/features.cpp) on adversarial data: exact ties, ties at one
// ulp, huge and tiny norms, zero rows and columns, rows and columns that int8 represents exactly, BF16 and
// untied (strided) unembeddings, the final-norm scale and an allow-list. The lists must equal, entry for entry
// (ids and float64 values, ==), a brute force written from the definition here: every token's canonical value
// (topk_stream's float64 dot product in index order) sorted by value, then token id — and the float32 screen's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "vocablens/error.hpp"
#include "vocablens/features.hpp"
#include "vocablens/linalg/topk_stream.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"

namespace {

constexpr int64_t V = 3000, D = 64, N = 300;

// W_E [V, D] with ties, near-ties and extreme columns (float32).
at::Tensor adversarial_embedding() {
  at::manual_seed(3);
  at::Tensor E = at::randn({V, D});
  for (int64_t t = 0; t < 10; ++t) E[10 + t].copy_(E[t]);  // exact ties: tokens 10..19 repeat 0..9
  auto a = E.accessor<float, 2>();
  for (int64_t t = 20; t < 30; ++t) {  // ties at one ulp: tokens 20..29 are 0..9 with one entry moved by an ulp
    for (int64_t i = 0; i < D; ++i) a[t][i] = a[t - 20][i];
    a[t][t % D] = std::nextafter(a[t][t % D], 1e30f);
  }
  E[30].mul_(1e8);                                     // huge
  E[31].mul_(1e-8);                                    // tiny
  E[32].zero_();                                       // zero
  E[33] = at::randint(-127, 128, {D}).to(at::kFloat);  // exactly representable in int8 (e_p = 0)
  E[34].fill_(1.0f);                                   // every entry equal
  E[35].fill_(-1.0f);
  for (int64_t t = 36; t < 40; ++t) E[t] = at::randint(-3, 4, {D}).to(at::kFloat);  // small integers: many ties
  for (int64_t t = 40; t < 100; ++t) E[t] = at::randint(-2, 3, {D}).to(at::kFloat);
  return E;
}

// W_dec [N, D]: random, duplicated rows, huge / tiny / zero rows, integer rows, one-hot rows.
at::Tensor adversarial_decoder() {
  at::manual_seed(4);
  at::Tensor W = at::randn({N, D});
  W.div_(W.norm(2, {1}, true));
  for (int64_t f = 0; f < 5; ++f) W[5 + f].copy_(W[f]);
  W[10].mul_(1e20);
  W[11].mul_(1e-20);
  W[12].mul_(1e-33);  // quantisation scale below the float32 normal range: the exact fallback (e_x = x)
  W[13].zero_();
  W[14] = at::randint(-127, 128, {D}).to(at::kFloat);
  W[15].fill_(1.0f);
  W[16].zero_();
  W[16][7] = 1.0f;  // one-hot: the values are column 7 of W_U (the integer tokens tie in groups)
  W[17].zero_();
  W[17][3] = -2.5f;
  for (int64_t f = 18; f < 40; ++f) W[f] = at::randint(-2, 3, {D}).to(at::kFloat);  // integer rows × integer tokens: ties
  W[40] = W[40] * 1e-3f + at::ones({D});                                            // nearly parallel to token 34
  return W;
}

struct Setup {
  vocablens::Model model;
  vocablens::Sae sae;
};

// A one-layer model whose unembedding is E (tied: W_U = E.t(), as stored), E in bf16 (tied), or an untied
// contiguous [D, V] copy (columns strided).
Setup make(const std::string& storage) {
  vocablens::ModelConfig c;
  c.architecture = "adversarial";
  c.n_layers = 1;
  c.d_model = D;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.d_head = D / 4;
  c.d_mlp = 4 * D;
  c.vocab_size = V;
  c.n_ctx = 16;
  vocablens::ModelWeights w;
  at::Tensor E = adversarial_embedding();
  if (storage == "bf16") {
    E = E.to(at::kBFloat16);
    E[30] = at::randn({D}).mul_(1e8).to(at::kBFloat16);  // (bf16 keeps float32's range)
  }
  w.W_E = E;
  w.W_U = storage == "untied" ? E.t().contiguous() : E.t();
  at::manual_seed(5);
  w.lnf_w = at::rand({D}) + 0.5;
  w.layers.resize(1);
  Setup s{vocablens::Model(c, w, "adversarial"), {}};
  s.sae.source = "adversarial SAE";
  s.sae.d_in = s.sae.d_out = D;
  s.sae.d_sae = N;
  s.sae.W_dec = adversarial_decoder();
  s.sae.W_enc = s.sae.W_dec.t();
  s.sae.b_enc = at::zeros({N});
  s.sae.b_dec = at::zeros({D});
  return s;
}

// The definition: for each feature, every allowed token's canonical value, sorted (value desc, id asc) for
// the top and (value asc, id asc) for the bottom, first k.
void brute_force(const Setup& s, int64_t k, bool norm, const std::vector<int64_t>& allow,
                 std::vector<std::vector<vocablens::TopkEntry>>& top, std::vector<std::vector<vocablens::TopkEntry>>& bot) {
  at::Tensor P = s.model.weights().W_U.to(at::kFloat).t().contiguous();  // [V, D]: row t = token t's column
  at::Tensor X = s.sae.W_dec.clone();
  if (norm) X = X * s.model.weights().lnf_w.to(at::kFloat);  // float32 product, as the library rounds it
  X = X.contiguous();
  std::vector<int64_t> cols = allow;
  if (cols.empty())
    for (int64_t t = 0; t < V; ++t) cols.push_back(t);
  top.assign(N, {});
  bot.assign(N, {});
  const float* xp = X.data_ptr<float>();  // (data_ptr checks the dtype on every call: not in the inner loop)
  const float* pp = P.data_ptr<float>();
  for (int64_t f = 0; f < N; ++f) {
    std::vector<std::pair<double, int64_t>> all;
    for (int64_t t : cols) {
      double acc = 0;
      for (int64_t i = 0; i < D; ++i) acc += static_cast<double>(xp[f * D + i]) * static_cast<double>(pp[t * D + i]);
      all.emplace_back(acc, t);
    }
    // (value, id) is a total order: the first k of a partial sort are the first k of the full sort.
    auto hi = all, lo = all;
    std::partial_sort(hi.begin(), hi.begin() + k, hi.end(),
                      [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    std::partial_sort(lo.begin(), lo.begin() + k, lo.end(),
                      [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second < b.second; });
    for (int64_t q = 0; q < k; ++q) {
      top[f].push_back({f, hi[q].second, hi[q].first});
      bot[f].push_back({f, lo[q].second, lo[q].first});
    }
  }
}

}  // namespace

TEST_CASE("int8-screened feature logit weights equal the brute-force definition on adversarial data", "[sae][features][screen]") {
  // The screen runs where oneDNN has an exact int8 kernel (AVX-512 VNNI / AMX); elsewhere "int8" falls back to
  // the float32 screen and this test checks that one against the definition.
  const bool int8 = vocablens::feature_logits_int8_available();
  std::vector<int64_t> allow;
  for (int64_t t = 0; t < V; t += 3) allow.push_back(t);
  // The definition's ordering does not depend on k: one brute force per (storage, norm, allow-list) with the
  // largest k, whose first k entries are the sorted list's first k for every smaller k.
  constexpr int64_t k_max = 40;
  for (const std::string storage : {"tied", "bf16", "untied"})
    for (const bool norm : {false, true})
      for (const bool filtered : {false, true}) {
        if (filtered && norm) continue;  // (a subset of the combinations)
        std::vector<std::vector<vocablens::TopkEntry>> rt, rb;
        brute_force(make(storage), k_max, norm, filtered ? allow : std::vector<int64_t>{}, rt, rb);
        for (const int64_t k : {1, 7, 40}) {
          if (filtered && k == 7) continue;  // (a subset of the combinations)
          INFO("storage " << storage << " norm " << norm << " k " << k << " allow-list " << filtered);
          Setup s = make(storage);  // a fresh model per case, as the screen sees it first (the same seeded data)
          for (const std::string screen : {"int8", "float32"}) {
            INFO("screen " << screen);
            vocablens::FeatureLogitsOptions o;
            o.top_k = k;
            o.final_norm_scale = norm;
            o.screen = screen;
            if (filtered) o.filter.allow = allow;
            auto a = vocablens::feature_logits(s.model, s.sae, o);
            CHECK(a.screen == (screen == "int8" && int8 ? "int8" : "float32"));
            int64_t bad = 0;
            for (int64_t f = 0; f < N; ++f) {
              REQUIRE(a.top[f].size() == static_cast<size_t>(k));
              REQUIRE(a.bottom[f].size() == static_cast<size_t>(k));
              for (int64_t q = 0; q < k; ++q) {
                bad += a.top[f][q].j != rt[f][q].j || a.top[f][q].value != rt[f][q].value;
                bad += a.bottom[f][q].j != rb[f][q].j || a.bottom[f][q].value != rb[f][q].value;
              }
            }
            CHECK(bad == 0);
          }
        }
      }
}

TEST_CASE("the int8 screen keeps far fewer tokens than it rejects, and rejects bad input", "[sae][features][screen]") {
  Setup s = make("tied");
  vocablens::FeatureLogitsOptions o;
  o.top_k = 5;
  o.screen = "int8";
  o.features = {100, 101, 102, 103, 104, 105, 106, 107};  // plain random rows
  auto a = vocablens::feature_logits(s.model, s.sae, o);
  if (vocablens::feature_logits_int8_available()) {
    REQUIRE(a.screen == "int8");
    // survivors per feature and end: a small fraction of V (the bound is Cauchy–Schwarz, not a heuristic)
    CHECK(a.survivors < static_cast<int64_t>(o.features.size()) * 2 * V / 5);
    CHECK(a.finalists >= static_cast<int64_t>(o.features.size()) * 2 * o.top_k);
  }
  // a feature list whose first and last ids span exactly its length, out of order: rows must not be taken as
  // one slice of W_dec
  o.features = {0, 2, 1, 3, 4, 6, 5, 7};
  auto b = vocablens::feature_logits(s.model, s.sae, o);
  o.screen = "float32";
  auto c = vocablens::feature_logits(s.model, s.sae, o);
  for (size_t q = 0; q < o.features.size(); ++q)
    for (size_t e = 0; e < 5; ++e) {
      CHECK(b.top[q][e].j == c.top[q][e].j);
      CHECK(b.top[q][e].value == c.top[q][e].value);
      CHECK(b.bottom[q][e].j == c.bottom[q][e].j);
    }
  o.screen = "fast";
  CHECK_THROWS_AS(vocablens::feature_logits(s.model, s.sae, o), vocablens::UsageError);
  // NaN in the decoder: one line naming the SAE (the reader rejects it first; the analysis checks again)
  o.screen = "int8";
  o.features = {100, 101, 102};
  s.sae.W_dec[101][3] = std::nanf("");
  try {
    vocablens::feature_logits(s.model, s.sae, o);
    FAIL("a NaN decoder row was accepted");
  } catch (const vocablens::UsageError& e) {
    CHECK(std::string(e.what()).find("adversarial SAE: non-finite decoder rows") != std::string::npos);
  }
}
