// The encoder side of SAE features through a read projection (vocablens/feature_encoder.hpp) against the dense
// float64 product formed here: w_f · W_Eᵀ (embed), w_f · W_U (transpose), and w_f · pinv(W_Uᵀ) with the
// pseudo-inverse computed here in float64 by torch (pinv: within the pseudo-inverse's rounding).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "fixtures.hpp"
#include "sae_fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/feature_encoder.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"

TEST_CASE("feature encoder directions read through E+, W_U and W_E equal the dense float64 products", "[sae][encoder]") {
  vocablens::init_runtime();
  const std::string dir = vl_test::fixture("gpt2-tiny");
  REQUIRE(!dir.empty());
  const std::string saes = vl_test::sae_fixtures_dir();  // make_saes.py's, made once per build directory
  auto m = vocablens::load_model(dir);
  const int64_t k = 6;
  const std::vector<int64_t> feats = {0, 3, 41, 95};
  for (const char* name : {"saelens_standard", "llamascope"}) {
    INFO(name);
    auto sae = vocablens::load_sae(saes + "/" + name);
    const at::Tensor Wenc = sae.W_enc.to(at::kDouble);  // [d, d_sae]
    const at::Tensor WU = m.W_U().to(at::kDouble);      // [d, V]
    const at::Tensor E = WU.t();
    struct Case {
      vocablens::InverseKind kind;
      at::Tensor R;
      double tol;
    };
    for (const Case& c :
         {Case{vocablens::InverseKind::Embed, m.W_E().to(at::kDouble).t(), 1e-9},
          Case{vocablens::InverseKind::Transpose, WU, 1e-9}, Case{vocablens::InverseKind::Pinv, at::linalg_pinv(E), 1e-4}}) {
      INFO(vocablens::to_string(c.kind));
      auto e = vocablens::feature_encoder_tokens(m, sae, feats, k, c.kind);
      REQUIRE(e.top.size() == feats.size());
      for (size_t q = 0; q < feats.size(); ++q) {
        const at::Tensor s = Wenc.select(1, feats[q]).matmul(c.R);  // [V] reference scores
        auto [tv, ti] = s.topk(k);
        const double scale = std::abs(tv[0].item<double>());  // relative to the best score
        REQUIRE(e.top[q].size() == static_cast<size_t>(k));
        for (int64_t r = 0; r < k; ++r) {
          const auto& x = e.top[q][static_cast<size_t>(r)];
          // each returned token has its reference score, and the list is as good as the reference's top-k
          CHECK(std::abs(x.value - s[x.j].item<double>()) <= c.tol * scale);
          CHECK(x.value >= tv[r].item<double>() - c.tol * scale);
          if (c.tol < 1e-6) CHECK(x.j == ti[r].item<int64_t>());
        }
      }
    }
  }
  auto sae = vocablens::load_sae(saes + "/saelens_standard");
  CHECK_THROWS_AS(vocablens::feature_encoder_tokens(m, sae, {96}, 3, vocablens::InverseKind::Embed), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::feature_encoder_tokens(m, sae, {0}, 0, vocablens::InverseKind::Embed), vocablens::UsageError);
  std::string out;
  REQUIRE(vl_test::run_command(vl_test::cli_path() + " features " + dir + " --sae " + saes +
                                   "/saelens_standard --features 0,3 --top-k 3 --encoder embed 2>&1",
                               out) == 0);
  CHECK(out.find("enc (embed)") != std::string::npos);
}
