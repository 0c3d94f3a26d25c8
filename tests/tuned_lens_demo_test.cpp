// The tuned lens on the real trained fixtures (stories260K, llama2xs; docs/lens.md "Tuned lens"): translators
// trained on text sampled from each model (temperature 1, seed 1) read held-out text sampled with another
// seed (seed 2, never trained on) closer to the final distribution than the logit lens at every layer but the
// last, where both are the model's own output. A small run of the docs' recipe (CI budget < 2 min).
#include <catch2/catch.hpp>

#include <memory>

#include "fixtures.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens.hpp"
#include "vocablens/tuned_lens_train.hpp"

using namespace vocablens;
using namespace vl_test;

namespace {

void demonstrate(const std::string& model_path, const std::string& tag) {
  Model m = load_model(model_path);
  auto tok = load_tokenizer_for(model_path, "");
  const std::string dir = temp_dir("tuned_demo_" + tag);
  const std::string train_text = sample_corpus(m, *tok, 6000, 1, 1.0, 64);
  const std::string held_text = sample_corpus(m, *tok, 2000, 2, 1.0, 64);
  REQUIRE(train_text != held_text);
  write_file(dir + "/train.txt", train_text);
  write_file(dir + "/heldout.txt", held_text);
  TunedLensTrainOptions o;
  o.corpus = dir + "/train.txt";
  o.out_dir = dir + "/lens";
  o.window = 64;
  o.tokens_per_step = 2048;
  o.steps = 40;
  auto rep = train_tuned_lens(m, *tok, o);
  CHECK(rep.losses.back() < 0.5 * rep.losses.front());
  auto lens = std::make_shared<TunedLens>(load_tuned_lens(o.out_dir));
  TunedLensEvalOptions eo;
  eo.window = 64;
  auto e = evaluate_tuned_lens(m, *tok, lens, dir + "/heldout.txt", eo);
  const size_t n = e.logit_kl_bpb.size();
  REQUIRE(n == static_cast<size_t>(m.config().n_layers + 1));
  for (size_t l = 0; l + 1 < n; ++l) {
    INFO(tag << " layer " << e.logit.layers[l].label << ": KL logit " << e.logit_kl_bpb[l] << " tuned " << e.tuned_kl_bpb[l]
             << " bits/byte");
    CHECK(e.tuned_kl_bpb[l] < e.logit_kl_bpb[l]);
  }
  CHECK(e.tuned_kl_bpb[n - 1] == 0.0);
  CHECK(e.logit_kl_bpb[n - 1] == 0.0);
  CHECK(e.tuned_ce_bpb[n - 1] == Approx(e.logit_ce_bpb[n - 1]).epsilon(1e-9));
}

}  // namespace

TEST_CASE("tuned lens demo: stories260K, held-out sampled text, tuned KL below logit KL at every layer but the last",
          "[tuned_lens][demo]") {
  demonstrate(fixture("stories260K/stories260K.bin"), "stories260K");
}

TEST_CASE("tuned lens demo: llama2xs, held-out sampled text, tuned KL below logit KL at every layer but the last",
          "[tuned_lens][demo]") {
  demonstrate(fixture("llama2xs/model.bin"), "llama2xs");
}
