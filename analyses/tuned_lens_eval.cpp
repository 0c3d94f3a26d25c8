// `tuned-lens eval` (see vocablens/tuned_lens.hpp): the logit lens and the tuned lens over the same held-out
// windows; per-layer cross-entropy, entropy and KL in bits per byte, and KL by window position.
#include <cmath>
#include <limits>

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tuned_lens.hpp"

namespace vocablens {

TunedLensEvalResult evaluate_tuned_lens(const Model& m, const Tokenizer& tok, std::shared_ptr<const TunedLens> lens,
                                        const std::string& corpus, const TunedLensEvalOptions& o) {
  if (!lens) throw UsageError("evaluate_tuned_lens: no lens");
  lens->check_model(m);
  CorpusLensOptions co;
  co.window = o.window;
  co.max_tokens = o.max_tokens;
  co.progress = o.progress;
  co.by_position = true;
  TunedLensEvalResult r;
  r.lens_dir = lens->source;
  r.logit = logit_lens_corpus(m, tok, corpus, co);
  co.lens.tuned = lens;
  r.tuned = logit_lens_corpus(m, tok, corpus, co);
  const size_t n = r.logit.layers.size();
  const double per = r.logit.bytes ? static_cast<double>(r.logit.predicted) / (std::log(2.0) * static_cast<double>(r.logit.bytes))
                                   : std::numeric_limits<double>::quiet_NaN();
  auto bpb = [&](const std::vector<double>& mean_nats) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = mean_nats[i] * per;
    return v;
  };
  r.logit_ce_bpb = bpb(r.logit.mean_cross_entropy);
  r.tuned_ce_bpb = bpb(r.tuned.mean_cross_entropy);
  r.logit_entropy_bpb = bpb(r.logit.mean_entropy);
  r.tuned_entropy_bpb = bpb(r.tuned.mean_entropy);
  r.logit_kl_bpb = bpb(r.logit.mean_kl_final);
  r.tuned_kl_bpb = bpb(r.tuned.mean_kl_final);
  return r;
}

Result TunedLensEvalResult::to_result() const {
  const int64_t n = static_cast<int64_t>(logit.layers.size());
  Result r;
  r.kind = "tuned_lens_eval";
  r.settings = {{"corpus", logit.corpus},
                {"tuned_lens", lens_dir},
                {"window", logit.window},
                {"final_norm", "recomputed on each layer's (translated) residual"},
                {"units",
                 "bits per byte = nats summed over the predicted tokens / (ln 2 * their bytes); "
                 "kl_by_position in nats per token"}};
  Table tab;
  tab.name = "per_layer";
  tab.columns = {"layer",        "hook",         "logit_ce_bpb", "tuned_ce_bpb", "logit_entropy_bpb", "tuned_entropy_bpb",
                 "logit_kl_bpb", "tuned_kl_bpb", "logit_top1",   "tuned_top1"};
  nlohmann::json per = nlohmann::json::array();
  for (int64_t li = 0; li < n; ++li) {
    const size_t i = static_cast<size_t>(li);
    tab.rows.push_back({logit.layers[i].label, logit.layers[i].hook, logit_ce_bpb[i], tuned_ce_bpb[i], logit_entropy_bpb[i],
                        tuned_entropy_bpb[i], logit_kl_bpb[i], tuned_kl_bpb[i], logit.top1_accuracy[i], tuned.top1_accuracy[i]});
    per.push_back({{"layer", logit.layers[i].label},
                   {"logit_kl_bpb", logit_kl_bpb[i]},
                   {"tuned_kl_bpb", tuned_kl_bpb[i]},
                   {"logit_ce_bpb", logit_ce_bpb[i]},
                   {"tuned_ce_bpb", tuned_ce_bpb[i]}});
  }
  nlohmann::json lays = nlohmann::json::array();
  for (int64_t li = 0; li < n; ++li)
    lays.push_back({{"index", li},
                    {"hook", logit.layers[static_cast<size_t>(li)].hook},
                    {"label", logit.layers[static_cast<size_t>(li)].label}});
  r.summary = {{"corpus", logit.corpus},
               {"corpus_bytes", logit.corpus_bytes},
               {"predicted_tokens", logit.predicted},
               {"predicted_bytes", logit.bytes},
               {"windows", logit.windows},
               {"layers", lays},
               {"per_layer", per}};
  r.arrays["logit_ce_bpb"] = NdArray::f64({n}, logit_ce_bpb.data());
  r.arrays["tuned_ce_bpb"] = NdArray::f64({n}, tuned_ce_bpb.data());
  r.arrays["logit_entropy_bpb"] = NdArray::f64({n}, logit_entropy_bpb.data());
  r.arrays["tuned_entropy_bpb"] = NdArray::f64({n}, tuned_entropy_bpb.data());
  r.arrays["logit_kl_bpb"] = NdArray::f64({n}, logit_kl_bpb.data());
  r.arrays["tuned_kl_bpb"] = NdArray::f64({n}, tuned_kl_bpb.data());
  if (logit.positions > 0 && tuned.positions == logit.positions) {
    r.arrays["logit_kl_by_position"] = NdArray::f64({n, logit.positions}, logit.kl_by_position.data());
    r.arrays["tuned_kl_by_position"] = NdArray::f64({n, tuned.positions}, tuned.kl_by_position.data());
  }
  r.tables.push_back(std::move(tab));
  return r;
}

}  // namespace vocablens
