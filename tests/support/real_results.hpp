// What every analysis really produces on a fixture model, as Results: what the report and notebook tests
// render (instead of hand-made JSON, so that renaming an array in an analysis breaks a test). Header-only:
// include it from LibTorch tests only (vocablens_test_main links vocablens_core alone).
//
//   auto results = vl_test::real_results(vl_test::fixture("gpt2-tiny"));   // one Result per analysis
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "vocablens/ablation.hpp"
#include "vocablens/anisotropy.hpp"
#include "vocablens/attribution.hpp"
#include "vocablens/compare.hpp"
#include "vocablens/compare_embeddings.hpp"
#include "vocablens/features.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/knn.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/lens_batch.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/patching.hpp"
#include "vocablens/positions.hpp"
#include "vocablens/project.hpp"
#include "vocablens/result.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/sae_corpus.hpp"
#include "vocablens/spectrum.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens.hpp"

namespace vl_test {

/// Every analysis on the GPT-2-layout model in `dir` (small settings: seconds in all), through the same
/// public functions the commands call. The prompt carries markup and quotes (the report must show it as text).
inline std::vector<vocablens::Result> real_results(const std::string& dir) {
  using namespace vocablens;
  init_runtime();
  Model m = load_model(dir);
  auto tok = load_tokenizer_for(dir);
  const std::string prompt = "The \"Eiffel\" Tower <b>is</b> in the city of";
  const auto ids = tok->encode(prompt);
  PinvOptions pinv;
  pinv.use_cache = false;
  std::vector<Result> out;

  LensOptions lo;
  lo.top_k = 5;
  lo.target = tok->require_token_id(" Paris");
  out.push_back(logit_lens(m, ids, lo).to_result(tok.get(), prompt));

  const std::string corpus = temp_dir("real-results") + "/corpus.txt";
  write_file(corpus, prompt + " Paris.\nOnce upon a time there was a little girl named Lily.\n");
  CorpusLensOptions co;
  co.window = 16;
  out.push_back(logit_lens_corpus(m, *tok, corpus, co).to_result());
  TunedLensEvalOptions teo;
  teo.window = 16;
  out.push_back(evaluate_tuned_lens(m, *tok, std::make_shared<TunedLens>(TunedLens::identity(m)), corpus, teo).to_result());

  HiddenProjectionOptions po;
  po.apply_final_norm = true;
  po.top_k = 3;
  po.pinv = pinv;
  out.push_back(project_hidden(m, ids, po, tok.get()).to_result(tok.get()));

  HeadsOptions ho;
  ho.layers = {0};
  ho.heads = {0, 1};
  ho.top_k = 5;
  ho.pinv = pinv;
  out.push_back(analyze_heads(m, ho, tok.get()).to_result(tok.get()));

  NeuronsOptions no;
  no.layer = 0;
  no.neurons = {0, 1, 2};
  no.top_k = 5;
  no.pinv = pinv;
  out.push_back(analyze_neurons(m, no, tok.get()).to_result(tok.get()));

  SpectrumOptions so;
  so.k = 8;
  out.push_back(matrix_spectrum(model_matrix(m, "W_E"), so, "W_E", "token").to_result(tok.get()));
  out.push_back(anisotropy(model_matrix(m, "W_E"), {}, "W_E").to_result());

  const at::Tensor X = space_vectors(m, VectorSpace::Embedding);
  NeighbourOptions nbo;
  nbo.k = 5;
  out.push_back(neighbours(X, tok.get(), "' king' - ' man' + ' woman'", nbo).to_result(tok.get()));
  KnnOptions ko;
  ko.k = 5;
  out.push_back(knn_query(X, {0, 1, 2, 3, 4, 5, 6, 7}, ko).to_result(tok.get(), true));

  out.push_back(position_structure(m, {}).to_result());

  std::vector<int64_t> corrupt = ids;  // interventions: the same prompt with one token changed
  corrupt[1] = tok->require_token_id(" A");
  PatchOptions pa;
  pa.target = tok->require_token_id(" Paris");
  pa.wrong = tok->require_token_id(" London");
  out.push_back(activation_patching(m, ids, corrupt, pa).to_result(tok.get(), prompt, prompt));
  AttributionOptions at;
  at.target = pa.target;
  at.wrong = pa.wrong;
  out.push_back(attribute_logit(m, ids, at).to_result(tok.get(), prompt));
  AblationOptions ab;
  ab.sites = {parse_ablation_site("head", "1.2")};
  out.push_back(ablate(m, ids, ab).to_result(tok.get(), prompt));
  LensOptions lbo;
  lbo.top_k = 3;
  out.push_back(logit_lens_batch(m, *tok, {{prompt, " Paris", 1}, {"<i>Once</i> upon a time", "", 2}}, lbo).to_result(tok.get()));
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (int64_t i = 0; i < 300; ++i) pairs.emplace_back(i, 299 - i);
  CompareEmbeddingsOptions ceo;
  ceo.k = 5;
  ceo.spectrum.k = 8;
  out.push_back(compare_embeddings(model_matrix(m, "W_E"), model_matrix(m, "W_E"), pairs, ceo).to_result(tok.get()));
  LensOptions lca = lo, lcb = lo;  // two lens runs of one prompt (targets " Paris" / " London", B with resid_mid)
  lca.save_log_probs = lcb.save_log_probs = true;
  lcb.resid_mid = true;
  lcb.target = tok->require_token_id(" London");
  out.push_back(compare_lens_runs(logit_lens(m, ids, lca).to_result(tok.get(), prompt),
                                  logit_lens(m, ids, lcb).to_result(tok.get(), prompt))
                    .to_result());
  {  // an SAE built in memory (deterministic decoder rows), read through the unembedding
    Sae sae;
    const int64_t d = m.config().d_model, n = 12;
    sae.source = "in-memory SAE";
    sae.layout = "saelens";
    sae.d_in = sae.d_out = d;
    sae.d_sae = n;
    sae.W_dec = at::sin(at::arange(n * d, at::kFloat).reshape({n, d}) * 0.37f);
    sae.W_enc = sae.W_dec.t().contiguous();
    sae.b_enc = at::zeros({n});
    sae.b_dec = at::zeros({d});
    sae.hook_name = "blocks.1.hook_resid_pre";
    FeatureLogitsOptions fo;
    fo.top_k = 5;
    out.push_back(feature_logits(m, sae, fo, tok.get()).to_result(tok.get()));
    SaeCorpusOptions sco;  // the same SAE over the corpus
    sco.window = 8;
    sco.contexts = 2;
    out.push_back(sae_corpus_stats(m, sae, *tok, corpus, sco).to_result(tok.get()));
  }
  return out;
}

}  // namespace vl_test
