// `vocablens features --neuronpedia FILE [--corpus C]`: Neuronpedia's dashboard batch JSON (SAEDashboard's
// NeuronpediaDashboardBatch / Feature / Activation field names). The logit weights are checked against the dense
// float64 product W_dec · W_U formed here, rounded to 3 decimals as SAEDashboard rounds; the corpus fields
// against a corpus run of the same SAE over the same windows.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "sae_fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neuronpedia.hpp"
#include "vocablens/result.hpp"
#include "vocablens/report.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/sae_corpus.hpp"
#include "vocablens/tokenizer.hpp"

TEST_CASE("features --neuronpedia writes SAEDashboard's batch JSON", "[sae][neuronpedia][cli]") {
  vocablens::init_runtime();
  const std::string dir = vl_test::fixture("gpt2-tiny");
  REQUIRE(!dir.empty());
  const std::string tmp = vl_test::temp_dir("sae-np");
  const std::string saep = vl_test::sae_fixtures_dir() + "/saelens_jumprelu";  // made once per build directory
  vl_test::write_file(tmp + "/c.txt",
                      "The Eiffel Tower is in the city of Paris. It was built for the world fair of 1889.\n"
                      "Once upon a time there was a little girl named Lily. She liked to play outside.\n");
  std::string out;
  const int rc = vl_test::run_command(vl_test::cli_path() + " features " + dir + " --sae " + saep +
                                          " --features 0,5,17 --top-k 4 --corpus " + tmp + "/c.txt --window 16 " +
                                          "--contexts 2 --neuronpedia " + tmp + "/np.json --neuronpedia-model gpt2-tiny " +
                                          "--neuronpedia-set res-test --format json 2>&1 >/dev/null",
                                      out);
  INFO(out);
  REQUIRE(rc == 0);
  auto b = nlohmann::json::parse(vl_test::read_file(tmp + "/np.json"));
  CHECK(b["model_id"] == "gpt2-tiny");
  CHECK(b["sae_set"] == "res-test");
  CHECK(b["layer"] == 2);  // blocks.2.hook_resid_post
  REQUIRE(b["features"].size() == 3);

  auto m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  auto sae = vocablens::load_sae(saep);
  const at::Tensor L = sae.W_dec.to(at::kDouble).matmul(m.W_U().to(at::kDouble));  // dense [d_sae, V] reference
  vocablens::SaeCorpusOptions so;
  so.window = 16;
  so.contexts = 2;
  so.ce_metrics = false;
  auto st = vocablens::sae_corpus_stats(m, sae, *tok, tmp + "/c.txt", so);
  const std::set<std::string> keys = {"feature_index",
                                      "neuron_alignment_indices",
                                      "neuron_alignment_values",
                                      "neuron_alignment_l1",
                                      "correlated_neurons_indices",
                                      "correlated_neurons_l1",
                                      "correlated_neurons_pearson",
                                      "correlated_features_indices",
                                      "correlated_features_l1",
                                      "correlated_features_pearson",
                                      "neg_str",
                                      "neg_values",
                                      "pos_str",
                                      "pos_values",
                                      "frac_nonzero",
                                      "freq_hist_data_bar_values",
                                      "freq_hist_data_bar_heights",
                                      "logits_hist_data_bar_heights",
                                      "logits_hist_data_bar_values",
                                      "n_prompts_total",
                                      "n_tokens_in_prompt",
                                      "dataset",
                                      "decoder_weights_dist",
                                      "activations"};
  const int64_t feats[3] = {0, 5, 17};
  for (int q = 0; q < 3; ++q) {
    const auto& p = b["features"][q];
    const int64_t f = feats[q];
    INFO("feature " << f);
    std::set<std::string> got;
    for (auto& [k, v] : p.items()) got.insert(k);
    CHECK(got == keys);
    CHECK(p["feature_index"] == f);
    auto [tv, ti] = L[f].topk(4);
    auto [bv, bi] = L[f].topk(4, 0, /*largest=*/false);
    for (int64_t e = 0; e < 4; ++e) {
      CHECK(p["pos_str"][e] == vocablens::valid_utf8(tok->decode({ti[e].item<int64_t>()})));
      CHECK(std::abs(p["pos_values"][e].get<double>() - tv[e].item<double>()) <= 5e-4 + 1e-9);
      CHECK(p["neg_str"][e] == vocablens::valid_utf8(tok->decode({bi[e].item<int64_t>()})));
      CHECK(std::abs(p["neg_values"][e].get<double>() - bv[e].item<double>()) <= 5e-4 + 1e-9);
    }
    CHECK(p["frac_nonzero"].get<double>() == static_cast<double>(st.fire_count[f]) / static_cast<double>(st.positions));
    REQUIRE(p["freq_hist_data_bar_heights"].size() == 40);
    int64_t total = 0;
    for (auto& h : p["freq_hist_data_bar_heights"]) total += h.get<int64_t>();
    CHECK(total == st.fire_count[f]);
    CHECK(p["n_prompts_total"] == st.windows);
    CHECK(p["n_tokens_in_prompt"] == 16);
    const auto& acts = p["activations"];
    REQUIRE(acts.size() == st.top_contexts[f].size());
    for (size_t c = 0; c < acts.size(); ++c) {
      const auto& ctx = st.top_contexts[f][c];
      CHECK(acts[c]["bin_min"] == -1);
      CHECK(std::abs(acts[c]["bin_max"].get<double>() - ctx.activation) <= 5e-4 + 1e-9);
      REQUIRE(acts[c]["tokens"].size() == ctx.ids.size());
      REQUIRE(acts[c]["values"].size() == ctx.ids.size());
      CHECK(acts[c]["tokens"][ctx.at] == vocablens::valid_utf8(tok->decode({ctx.ids[ctx.at]})));
      CHECK(std::abs(acts[c]["values"][ctx.at].get<double>() - ctx.activation) <= 5e-4 + 1e-9);
    }
  }
}

TEST_CASE("the Neuronpedia batch refuses a Result it cannot read", "[sae][neuronpedia]") {
  // The batch reads the declared analyses' Results: another kind, or a features Result without its arrays (another
  // version's), is one UsageError naming what is missing, never a misread buffer.
  vocablens::Result lens;
  lens.kind = "logit_lens";
  CHECK_THROWS_AS(vocablens::neuronpedia_batch(lens, nullptr, nullptr), vocablens::UsageError);
  vocablens::Result f;
  f.kind = "features";
  f.summary = {{"d_sae", 4}, {"hook_name", "blocks.0.hook_resid_post"}};
  f.settings = {{"sae", "s"}, {"top_k", 2}};
  const int64_t ids[2] = {0, 3};
  f.arrays["feature_ids"] = vocablens::NdArray::i64({2}, ids);
  CHECK_THROWS_WITH(vocablens::neuronpedia_batch(f, nullptr, nullptr), Catch::Contains("no array 'top_ids'"));
  const double v[4] = {1, 0.5, 2, 1};
  f.arrays["top_ids"] = vocablens::NdArray::i64({2, 2}, std::vector<int64_t>{5, -1, 7, 8}.data());
  f.arrays["top_values"] = vocablens::NdArray::f64({2, 2}, v);
  const auto b = vocablens::neuronpedia_batch(f, nullptr, nullptr, {"m", "", -1});
  CHECK(b["layer"] == 0);
  CHECK(b["features"][0]["pos_str"] == nlohmann::json::array({"#5"}));  // a list ends at its first -1
  CHECK(b["features"][1]["pos_values"] == nlohmann::json::array({2.0, 1.0}));
  vocablens::Result other = f;
  other.kind = "feature_corpus";
  other.summary = {{"metrics", {{"d_sae", 5}}}};
  CHECK_THROWS_WITH(vocablens::neuronpedia_batch(f, &other, nullptr), Catch::Contains("not the same SAE"));
}
