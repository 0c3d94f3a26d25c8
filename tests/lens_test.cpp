// The logit lens: the last layer equals the model's own output on every fixture model; per-layer
// values equal an independent NumPy computation from the fixtures' reference residuals
// (tests/lens_reference.py); the fused kernels against brute force; exports (the CLI: lens_cli_test.cpp).
#include <catch2/catch.hpp>

#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "corpus_text.hpp"
#include "fixtures.hpp"
#include "npy_tensor.hpp"
#include "tensor_checks.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/lens_engine.hpp"
#include "vocablens/detail/sha256.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/model.hpp"
#include "vocablens/npy.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/weight.hpp"

using vl_test::load_npy_tensor;

namespace {

using vl_test::file_exists;
using vl_test::shq;

// Runs tests/lens_reference.py once per test program; returns its output directory ("" when numpy is absent).
std::string lens_reference_dir() {
  static std::string dir = [] {
    if (!vl_test::python_has("numpy")) return std::string();
    std::string root = vl_test::fixtures_root();
    if (root.empty()) return std::string();
    std::string d = vl_test::temp_dir("lensref");
    std::string out;
    int rc = vl_test::run_command("/usr/bin/python3 " + shq(std::string(VOCABLENS_SOURCE_DIR) + "/tests/lens_reference.py") +
                                      " " + shq(root) + " " + shq(d),
                                  out);
    if (rc != 0) throw std::runtime_error("lens_reference.py failed: " + out);
    return d;
  }();
  return dir;
}

// These tests make many [T, V] float32/float64 tensors (40 MB each for gpt2-tiny's 100 tokens: the model's
// logits, the reference's log-probabilities, their differences), and glibc gives each one above 32 MB a fresh
// mmap whose pages fault in, zeroed, and are unmapped when freed: ~2.5 s of system time for this file. Served
// from the heap and kept there when freed, the same pages are reused. (Process-wide; ctest runs this file's
// cases alone in their process.)
void lens_test_reuse_freed_memory() {
  static const bool done = [] {
    ::mallopt(M_MMAP_MAX, 0);
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)done;
}

// E⁺ is cached on disk by unembed.hpp: keep the tests' copies out of the user's cache.
void private_pinv_cache() {
  static bool done = false;
  if (!done) ::setenv("VOCABLENS_CACHE", vl_test::temp_dir("lenscache").c_str(), 1);
  done = true;
}

std::vector<int64_t> to_ids(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// The model's own output distribution vs the lens's last layer.
void check_last_layer_is_output(const vocablens::Model& m, const std::vector<int64_t>& ids, const vocablens::LensOptions& opt) {
  auto lens = vocablens::logit_lens(m, ids, opt);
  const int64_t T = static_cast<int64_t>(ids.size()), n = lens.n_layers(), k = lens.top_k;
  at::Tensor logits = m.forward(at::tensor(ids, at::kLong)).logits[0].to(at::kDouble);  // [T, V]
  const int64_t V = logits.size(1);
  at::Tensor logp = at::log_softmax(logits, -1).contiguous();
  at::Tensor p = logp.exp().contiguous();
  at::Tensor lse = at::logsumexp(logits, -1).contiguous();
  at::Tensor ent = (-(p * logp).sum(-1)).contiguous();
  auto [vals_t, idx_t] = at::topk(logits, k + 1, -1);
  vals_t = vals_t.contiguous();
  idx_t = idx_t.contiguous();
  const double *P = p.data_ptr<double>(), *LP = logp.data_ptr<double>(), *LSE = lse.data_ptr<double>(),
               *ENT = ent.data_ptr<double>(), *VAL = vals_t.data_ptr<double>();
  const int64_t* IDX = idx_t.data_ptr<int64_t>();
  // The full distribution: the engine's normalised last layer through W_U.
  vocablens::lens_detail::LensEngine eng(m, opt);
  at::Tensor normed = eng.normalised_stack(at::tensor(ids, at::kLong));
  at::Tensor lens_logits = m.unembed(normed[n - 1]).to(at::kDouble);
  CHECK(vl_test::max_abs_diff(at::softmax(lens_logits, -1), p) <= 1e-5);
  CHECK(vl_test::max_abs_diff(at::log_softmax(lens_logits, -1), logp) <= 1e-4);
  for (int64_t t = 0; t < T; ++t) {
    INFO("position " << t);
    const size_t a = lens.at(n - 1, t);
    CHECK(std::abs(lens.logsumexp[a] - LSE[t]) <= 1e-5 * std::max(1.0, std::abs(LSE[t])));
    CHECK(std::abs(lens.entropy[a] - ENT[t]) <= 1e-5);
    CHECK(lens.kl_final[a] == 0.0f);
    if (t + 1 < T) CHECK(std::abs(lens.cross_entropy[a] + LP[t * V + ids[t + 1]]) <= 1e-5);
    if (lens.targets[t] >= 0) CHECK(std::abs(lens.target_prob[a] - P[t * V + lens.targets[t]]) <= 1e-5);
    const double* val = VAL + t * (k + 1);
    const int64_t* idx = IDX + t * (k + 1);
    for (int64_t j = 0; j < k; ++j) {
      CHECK(std::abs(lens.top_prob(n - 1, t, j) - P[t * V + idx[j]]) <= 1e-5);
      bool clear = (j == 0 || val[j - 1] - val[j] > 1e-4) && val[j] - val[j + 1] > 1e-4;
      if (clear) CHECK(lens.top_id(n - 1, t, j) == idx[j]);
    }
  }
}

struct FixtureModel {
  const char* rel;
  const char* ids_npy;  // reference ids to feed (relative to the fixtures root)
};

const FixtureModel kModels[] = {
    {"gpt2-tiny", "gpt2-tiny/reference/seq1_eiffel_ids.npy"},
    {"gpt2-tiny-prefixed", "gpt2-tiny/reference/seq2_random100_ids.npy"},
    {"gpt2-tiny-torchbin", "gpt2-tiny/reference/seq0_hello_ids.npy"},
    {"stories260K/stories260K.bin", "stories260K/reference/ids_first32.npy"},
    {"stories260K-hf", "stories260K/reference/ids_first32.npy"},
    {"llama2xs/model.bin", "llama2xs/reference/ids_first32.npy"},
    {"llama2xs/ckpt.pt", "llama2xs/reference/ids_first32.npy"},
};

// A row's statistics by brute force, in double.
struct Brute {
  double lse, entropy, dot;
  int64_t greater;
  std::vector<int64_t> top;
};
Brute brute(const std::vector<float>& z, int64_t k, int64_t target, const std::vector<float>* pf) {
  Brute b{};
  double mx = -INFINITY;
  for (float v : z) mx = std::max(mx, static_cast<double>(v));
  double s = 0, s1 = 0;
  for (float v : z) {
    double e = std::exp(v - mx);
    s += e;
    s1 += e * (v - mx);
  }
  b.lse = mx + std::log(s);
  b.entropy = std::log(s) - s1 / s;
  b.dot = 0;
  if (pf)
    for (size_t j = 0; j < z.size(); ++j) b.dot += static_cast<double>((*pf)[j]) * z[j];
  b.greater = 0;
  if (target >= 0)
    for (float v : z) b.greater += v > z[static_cast<size_t>(target)];
  std::vector<int64_t> order(z.size());
  for (size_t j = 0; j < z.size(); ++j) order[j] = static_cast<int64_t>(j);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return z[a] > z[c]; });
  order.resize(static_cast<size_t>(k));
  b.top = order;
  return b;
}

}  // namespace

TEST_CASE("lens: the last layer equals the model's output distribution on every fixture model", "[lens]") {
  vocablens::init_runtime();
  lens_test_reuse_freed_memory();
  for (const auto& fm : kModels) {
    INFO("model " << fm.rel);
    std::string path = vl_test::fixture(fm.rel), idp = vl_test::fixture(fm.ids_npy);
    if (path.empty() || idp.empty()) continue;
    auto m = vocablens::load_model(path);
    auto ids = to_ids(load_npy_tensor(idp));
    vocablens::LensOptions opt;
    check_last_layer_is_output(m, ids, opt);
    opt.resid_mid = true;
    opt.top_k = 3;
    opt.block_positions = 7;
    check_last_layer_is_output(m, ids, opt);
    // Decoder variants: with the last k blocks as decoder, the last lensed layer (the residual before
    // those blocks) run through them is exactly the model's output.
    for (int64_t kdec : {int64_t{1}, m.config().n_layers}) {
      INFO("decoder_blocks " << kdec);
      vocablens::LensOptions d;
      d.decoder_blocks = kdec;
      d.top_k = 5;
      auto lens = vocablens::logit_lens(m, ids, d);
      CHECK(lens.n_layers() == m.config().n_layers - kdec + 1);
      check_last_layer_is_output(m, ids, d);
    }
  }
}

TEST_CASE("lens: per-layer values equal the independent NumPy lens of the reference residuals", "[lens][numpy]") {
  vocablens::init_runtime();
  lens_test_reuse_freed_memory();
  private_pinv_cache();
  if (!vl_test::require(vl_test::python_has("numpy"), "/usr/bin/python3 with numpy")) return;
  std::string root = vl_test::fixtures_root();
  if (root.empty()) {
    vl_test::fixture("gpt2-tiny");  // fails or warns loudly
    return;
  }
  std::string ref = lens_reference_dir();
  std::ifstream f(ref + "/cases.json");
  auto cases = nlohmann::json::parse(f)["cases"];
  REQUIRE(cases.size() >= 10);
  std::map<std::string, vocablens::Model> models;
  for (auto& c : cases) {
    std::string name = c["name"];
    INFO("case " << name);
    std::string mp = root + "/" + c["model"].get<std::string>();
    if (!models.count(mp)) models.emplace(mp, vocablens::load_model(mp));
    const auto& m = models.at(mp);
    std::string p = ref + "/" + name + ".";
    auto ids = to_ids(load_npy_tensor(p + "ids.npy"));
    vocablens::LensOptions opt;
    opt.top_k = c["top_k"];
    opt.resid_mid = c["resid_mid"];
    opt.unembed = c["unembed"] == "pinv" ? vocablens::LensUnembed::PseudoInverse : vocablens::LensUnembed::Model;
    if (c.contains("target")) opt.target = c["target"].get<int64_t>();
    // Both engines: the stack of every layer's residual (default), and --two-pass (one layer at a time).
    for (const bool two_pass : {false, true}) {
      INFO("two_pass " << two_pass);
      opt.two_pass = two_pass;
      auto lens = vocablens::logit_lens(m, ids, opt);
      auto hooks = c["hooks"].get<std::vector<std::string>>();
      REQUIRE(lens.n_layers() == static_cast<int64_t>(hooks.size()));
      for (size_t i = 0; i < hooks.size(); ++i) CHECK(lens.layers[i].hook == hooks[i]);
      const int64_t n = lens.n_layers(), T = lens.n_positions(), k = lens.top_k;
      auto want = [&](const char* what) { return load_npy_tensor(p + what + ".npy"); };
      at::Tensor lse = want("lse"), ent = want("entropy"), kl = want("kl"), ce = want("ce"), tp = want("target_prob"),
                 tlp = want("target_logprob"), rlo = want("rank_lo"), rhi = want("rank_hi"), tid = want("top_ids"),
                 tpr = want("top_probs"), gap = want("top_gap");
      auto cmp = [&](const std::vector<float>& got, const at::Tensor& w, double tol, const char* what) {
        const at::Tensor wd = w.to(at::kDouble).reshape({-1}).contiguous();
        const double* wp = wd.data_ptr<double>();  // (one .item() per element was seconds of this test)
        double worst = 0;
        for (int64_t i = 0; i < wd.numel(); ++i) {
          double a = got[static_cast<size_t>(i)], b = wp[i];
          if (std::isnan(b)) {
            CHECK(std::isnan(a));
            continue;
          }
          worst = std::max(worst, std::abs(a - b));
        }
        INFO(what << " worst |diff| " << worst);
        CHECK(worst <= tol);
      };
      // fp32 forward vs the float64 reference residuals: logits agree to ~2e-5 (fixture READMEs).
      cmp(lens.logsumexp, lse, 1e-4, "logsumexp");
      cmp(lens.entropy, ent, 1e-4, "entropy");
      cmp(lens.kl_final, kl, 1e-4, "kl_final");
      cmp(lens.cross_entropy, ce, 1e-4, "cross_entropy");
      cmp(lens.target_logprob, tlp, 1e-4, "target_logprob");
      cmp(lens.target_prob, tp, 2e-5, "target_prob");
      cmp(lens.top_probs, tpr.narrow(2, 0, k), 2e-5, "top_probs");
      int64_t compared = 0;
      const at::Tensor rlo64 = rlo.to(at::kLong), rhi64 = rhi.to(at::kLong), tid64 = tid.to(at::kLong),
                       gap64 = gap.to(at::kDouble);
      const auto rlo_a = rlo64.accessor<int64_t, 2>(), rhi_a = rhi64.accessor<int64_t, 2>();
      const auto tid_a = tid64.accessor<int64_t, 3>();
      const auto gap_a = gap64.accessor<double, 3>();
      for (int64_t li = 0; li < n; ++li)
        for (int64_t t = 0; t < T; ++t) {
          const size_t a = lens.at(li, t);
          int64_t lo = rlo_a[li][t], hi = rhi_a[li][t];
          if (lo < 0) {
            CHECK(lens.target_rank[a] == -1);
          } else {
            CHECK(lens.target_rank[a] >= lo);
            CHECK(lens.target_rank[a] <= hi);
          }
          for (int64_t j = 0; j < k; ++j) {
            bool clear = gap_a[li][t][j] > 1e-3 && (j == 0 || gap_a[li][t][j - 1] > 1e-3);
            if (!clear) continue;
            ++compared;
            CHECK(lens.top_id(li, t, j) == tid_a[li][t][j]);
          }
        }
      // Most ids are clear of ties; the pseudo-inverse lens is near-uniform, so fewer are there.
      CHECK(compared > (opt.unembed == vocablens::LensUnembed::PseudoInverse ? 0 : n * T));
    }
  }
}

TEST_CASE("lens: fused row kernels (AVX2 and scalar) agree with brute force", "[lens][kernel]") {
  using namespace vocablens::lens_detail;
  std::mt19937 rng(7);
  for (int64_t V : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{13}, int64_t{1000}, int64_t{50257}}) {
    for (int trial = 0; trial < 3; ++trial) {
      std::normal_distribution<float> nd(0.f, trial == 2 ? 20.f : 2.f);
      std::vector<float> z(static_cast<size_t>(V)), pf(static_cast<size_t>(V));
      for (auto& v : z) v = nd(rng);
      if (trial == 1 && V > 8) {  // ties: quantise, so that many logits are equal
        for (auto& v : z) v = std::round(v * 2.f) / 2.f;
      }
      std::normal_distribution<float> nd1(0.f, 1.f);
      double s = 0;
      for (auto& v : pf) s += (v = std::exp(nd1(rng)));
      for (auto& v : pf) v = static_cast<float>(v / s);
      const int64_t k = std::min<int64_t>(V, 10);
      const int64_t target = V / 3;
      Brute b = brute(z, k, target, &pf);
      for (bool scalar : {false, true}) {
        INFO("V " << V << " trial " << trial << " scalar " << scalar);
        std::vector<float> zz = z, tv(static_cast<size_t>(k));
        std::vector<int64_t> ti(static_cast<size_t>(k));
        RowRequest q;
        q.k = k;
        q.target = target;
        q.next = V - 1;
        q.pf = pf.data();
        q.write_probs = true;
        RowOut o;
        o.top_vals = tv.data();
        o.top_ids = ti.data();
        row_stats(zz.data(), V, q, o, scalar);
        CHECK(std::abs(o.lse - b.lse) <= 1e-6 * std::max(1.0, std::abs(b.lse)));
        CHECK(std::abs(o.entropy - b.entropy) <= 1e-5);
        CHECK(std::abs(o.dot_pf - b.dot) <= 1e-5 * std::max(1.0, std::abs(b.dot)));
        CHECK(o.target_greater == b.greater);
        CHECK(o.z_next == z.back());
        CHECK(o.top_n == k);
        CHECK(ti == b.top);
        double maxdiff = 0, sum = 0;
        for (int64_t j = 0; j < V; ++j) {
          double want = std::exp(z[j] - b.lse);
          // float32 logits far below the maximum lose relative precision in z - lse (|z - lse| * 6e-8).
          maxdiff = std::max(maxdiff, std::abs(zz[j] - want) / (2e-6 * want + 1e-9));
          sum += zz[j];
        }
        CHECK(maxdiff <= 1.0);
        CHECK(std::abs(sum - 1.0) <= 1e-5);
      }
    }
  }
}

// The same lens computed another way (block size, kernel, engine): same top-k ids; ranks within one (a near-tie
// float32 cannot order moves a rank by one: a block of one position runs OpenBLAS's gemv kernel instead of gemm,
// whose different summation order swapped the target with a token of equal logit, rank 23887 vs 23886, with
// OPENBLAS_CORETYPE=Haswell and one thread) for at most 1 % of the entries; statistics to float32 rounding.
static void check_same_lens(const vocablens::LensResult& rb, const vocablens::LensResult& ra) {
  CHECK(rb.top_ids == ra.top_ids);
  REQUIRE(rb.target_rank.size() == ra.target_rank.size());
  size_t moved = 0;
  for (size_t i = 0; i < ra.target_rank.size(); ++i) {
    CHECK(std::abs(rb.target_rank[i] - ra.target_rank[i]) <= 1);
    moved += rb.target_rank[i] != ra.target_rank[i];
  }
  CHECK(moved * 100 <= ra.target_rank.size());
  REQUIRE(rb.entropy.size() == ra.entropy.size());
  for (size_t i = 0; i < ra.entropy.size(); ++i) {
    CHECK(std::abs(rb.entropy[i] - ra.entropy[i]) <= 1e-5);
    CHECK(std::abs(rb.kl_final[i] - ra.kl_final[i]) <= 1e-5);
    CHECK(std::abs(rb.logsumexp[i] - ra.logsumexp[i]) <= 1e-5);
  }
  REQUIRE(rb.top_probs.size() == ra.top_probs.size());
  for (size_t i = 0; i < ra.top_probs.size(); ++i) CHECK(std::abs(rb.top_probs[i] - ra.top_probs[i]) <= 1e-6);
}

TEST_CASE("lens: results do not depend on the block size or kernel", "[lens]") {
  vocablens::init_runtime();
  lens_test_reuse_freed_memory();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  auto ids = to_ids(load_npy_tensor(dir + "/reference/seq2_random100_ids.npy"));
  vocablens::LensOptions a;
  a.resid_mid = true;
  auto ra = vocablens::logit_lens(m, ids, a);
  for (int64_t P : {int64_t{1}, int64_t{33}, int64_t{100}}) {
    for (bool scalar : {false, true}) {
      INFO("block " << P << " scalar " << scalar);
      vocablens::LensOptions b = a;
      b.block_positions = P;
      b.scalar_kernel = scalar;
      check_same_lens(vocablens::logit_lens(m, ids, b), ra);
    }
  }
  // --two-pass (the final distribution kept, each other layer read as its hook produces it), at several block
  // sizes and with decoder blocks (which act on a whole layer): the same statistics as the stacked engine.
  for (int64_t decoder : {int64_t{0}, int64_t{1}}) {
    vocablens::LensOptions base = a;
    base.decoder_blocks = decoder;
    auto one = decoder ? vocablens::logit_lens(m, ids, base) : ra;
    for (int64_t P : {int64_t{0}, int64_t{33}}) {
      INFO("two-pass, block " << P << " decoder blocks " << decoder);
      vocablens::LensOptions b = base;
      b.two_pass = true;
      b.block_positions = P;
      check_same_lens(vocablens::logit_lens(m, ids, b), one);
    }
  }
  // The lens really re-normalises each layer (TransformerLens #1076): the embedding layer's distribution is
  // far from uniform, unlike with the last layer's cached scale.
  double uniform = std::log(50257.0);
  CHECK(ra.entropy[ra.at(0, 5)] < uniform - 0.05);
}

TEST_CASE("lens: bad inputs are clear errors", "[lens][errors]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("stories260K");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir + "/stories260K.bin");
  using vocablens::UsageError;
  CHECK_THROWS_WITH(vocablens::logit_lens(m, {}), Catch::Contains("empty input"));
  CHECK_THROWS_WITH(vocablens::logit_lens(m, std::vector<int64_t>(513, 5)),
                    Catch::Contains("513 tokens is longer than the model's context of 512"));
  CHECK_THROWS_AS(vocablens::logit_lens(m, {1, 512}), UsageError);
  vocablens::LensOptions o;
  o.top_k = 513;
  CHECK_THROWS_WITH(vocablens::logit_lens(m, {1, 2}, o), Catch::Contains("larger than the vocabulary"));
  o = {};
  o.decoder_blocks = 6;
  CHECK_THROWS_WITH(vocablens::logit_lens(m, {1, 2}, o), Catch::Contains("--decoder-blocks"));
  o = {};
  o.target = 9999;
  CHECK_THROWS_WITH(vocablens::logit_lens(m, {1, 2}, o), Catch::Contains("outside the vocabulary"));
  o = {};
  o.two_pass = o.save_log_probs = true;
  CHECK_THROWS_WITH(vocablens::logit_lens(m, {1, 2}, o), Catch::Contains("--two-pass cannot be combined with --save-probs"));
  // k = 0 is allowed: statistics without top-k.
  o = {};
  o.top_k = 0;
  auto r = vocablens::logit_lens(m, {1, 403, 407}, o);
  CHECK(r.top_ids.empty());
  CHECK(r.entropy.size() == 6 * 3);
}

TEST_CASE("lens: to_result carries tokens, settings, arrays and the top-k table", "[lens][export]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  auto ids = tok->encode("The Eiffel Tower is in the city of");
  vocablens::LensOptions o;
  o.top_k = 4;
  o.target = tok->require_token_id(" Paris");
  auto lens = vocablens::logit_lens(m, ids, o);
  auto r = lens.to_result(tok.get(), "The Eiffel Tower is in the city of");
  CHECK(r.kind == "logit_lens");
  CHECK(r.settings["top_k"] == 4);
  CHECK(r.settings["target"]["id"] == 6342);
  CHECK(r.settings["target"]["token"] == "␣Paris");
  // Which engine read the layers is a setting like the others (the statistics agree either way).
  CHECK(r.settings.at("two_pass") == false);
  o.two_pass = true;
  CHECK(vocablens::logit_lens(m, ids, o).to_result(tok.get()).settings.at("two_pass") == true);
  // So is whether every layer's log-probabilities were kept.
  CHECK(r.settings.at("save_probs") == false);
  o.two_pass = false;
  o.save_log_probs = true;
  CHECK(vocablens::logit_lens(m, ids, o).to_result(tok.get()).settings.at("save_probs") == true);
  CHECK(r.summary["prompt"] == "The Eiffel Tower is in the city of");
  REQUIRE(r.summary["tokens"].size() == ids.size());
  CHECK(r.summary["tokens"][1]["token"] == "␣E");
  CHECK(r.summary["layers"].size() == 4);
  CHECK(r.arrays.at("top_ids").shape == std::vector<int64_t>{4, 10, 4});
  CHECK(r.arrays.at("top_ids").dtype == "<i8");
  CHECK(r.arrays.at("top_probs").dtype == "<f4");
  CHECK(r.arrays.at("entropy").shape == std::vector<int64_t>{4, 10});
  CHECK(r.arrays.at("target_rank").dtype == "<i8");
  REQUIRE(r.tables.size() == 1);
  CHECK(r.tables[0].rows.size() == 4 * 10 * 4);
  CHECK(r.tables[0].columns.size() == r.tables[0].rows[0].size());
  // values round-trip through the exporter's JSON
  auto j = nlohmann::json::parse(vocablens::result_to_json(r, true));
  CHECK(j["kind"] == "logit_lens");
}

// ---- corpus mode (the engine: lens_corpus_test.cpp; here the CLI) ----------------------------------------

// ---- int8 compute: the lens multiplies a quantized W_U as the model does ---------------------------------------
TEST_CASE("lens under int8 compute: the last layer is the model's own int8 logits, W_U never copied to float32") {
  auto m = vocablens::load_model(std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/llamak-q8_0.gguf");
  const auto ids = vl_test::read_ids_txt(std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/ids-llama.txt");
  vocablens::LensOptions o;
  o.top_k = 5;
  struct Mode {  // the process-wide compute mode, restored whatever happens
    explicit Mode(vocablens::ComputeDtype d) { vocablens::set_compute_dtype(d); }
    ~Mode() { vocablens::set_compute_dtype(vocablens::ComputeDtype::Float32); }
  };
  auto last_probs = [&](const at::Tensor& logits) {
    return at::softmax(logits.reshape({-1, logits.size(-1)}).to(at::kDouble), -1);  // [T, V]
  };
  const at::Tensor x = at::tensor(ids, at::kLong);
  const at::Tensor exact = last_probs(m.forward(x, vocablens::CacheSpec{}).logits);
  Mode int8(vocablens::ComputeDtype::Int8);
  REQUIRE(vocablens::int8_product(m.weights().W_U));
  const at::Tensor p8 = last_probs(m.forward(x, vocablens::CacheSpec{}).logits);
  // The two modes' distributions differ (so the comparison below can tell which W_U the lens used) ...
  REQUIRE((exact - p8).abs().max().item<double>() > 1e-4);
  for (bool two_pass : {false, true}) {
    INFO("two_pass " << two_pass);
    o.two_pass = two_pass;
    const auto lens = vocablens::logit_lens(m, ids, o);
    const int64_t L = lens.n_layers() - 1, T = static_cast<int64_t>(ids.size());
    double worst = 0, exact_gap = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < o.top_k; ++r) {
        const int64_t id = lens.top_ids[static_cast<size_t>((L * T + t) * o.top_k + r)];
        worst = std::max(worst, std::abs(lens.top_prob(L, t, r) - p8[t][id].item<double>()));
        exact_gap = std::max(exact_gap, std::abs(exact[t][id].item<double>() - p8[t][id].item<double>()));
      }
    // ... and the lens's last layer is the int8 forward's (float32 softmax against float64: 1e-6), where the
    // exact path's is measurably not.
    CHECK(worst < 1e-6);
    CHECK(exact_gap > 1e-5);
  }
  // The estimate holds no float32 copy of W_U under int8 compute.
  const auto& a = vocablens::find_analysis("lens");
  const nlohmann::json given = {{"prompt", ids}};
  const auto est = vocablens::estimate_analysis(a, m, nullptr, given, vocablens::Surface::Python);
  REQUIRE(!est.memory.items.empty());
  for (const auto& item : est.memory.items) CHECK(item.what.find("W_U as float32") == std::string::npos);
}
