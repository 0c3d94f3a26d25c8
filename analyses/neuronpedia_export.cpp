// Neuronpedia's dashboard batch JSON from feature logit weights and a corpus run (see vocablens/neuronpedia.hpp).
#include "vocablens/neuronpedia.hpp"

#include <cmath>
#include <regex>

#include "vocablens/error.hpp"
#include "vocablens/features.hpp"
#include "vocablens/report.hpp"
#include "vocablens/sae_corpus.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {
namespace {

double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

}  // namespace

nlohmann::json neuronpedia_batch(const FeatureLogits& a, const SaeCorpusStats* corpus, const Tokenizer* tok,
                                 const NeuronpediaOptions& o) {
  if (corpus && corpus->d_sae != a.d_sae)
    throw UsageError("the corpus run has " + std::to_string(corpus->d_sae) + " features, the SAE " +
                     std::to_string(a.d_sae) + ": not the same SAE");
  // Raw token text (what SAEDashboard's vocab dict holds), made valid UTF-8 (a byte token's partial character
  // becomes U+FFFD), "#id" without a tokenizer.
  auto text = [&](int64_t id) -> std::string {
    if (!tok) return "#" + std::to_string(id);
    try {
      return valid_utf8(tok->decode({id}));
    } catch (const Error&) {
      return tok->display(id);
    }
  };
  int64_t layer = o.layer;
  if (layer < 0) {
    std::smatch m;
    layer = std::regex_search(a.hook_name, m, std::regex("blocks\\.(\\d+)\\.")) ? std::stoll(m[1].str()) : 0;
  }
  nlohmann::json features = nlohmann::json::array();
  for (size_t q = 0; q < a.features.size(); ++q) {
    const int64_t f = a.features[q];
    nlohmann::json ps = nlohmann::json::array(), pv = nlohmann::json::array(), ns = nlohmann::json::array(),
                   nv = nlohmann::json::array();
    for (const auto& e : a.top[q]) ps.push_back(text(e.j)), pv.push_back(round3(e.value));
    if (!a.bottom.empty())
      for (const auto& e : a.bottom[q]) ns.push_back(text(e.j)), nv.push_back(round3(e.value));
    nlohmann::json page = {{"feature_index", f},
                           {"pos_str", ps},
                           {"pos_values", pv},
                           {"neg_str", ns},
                           {"neg_values", nv},
                           {"frac_nonzero", 0.0},
                           {"freq_hist_data_bar_values", nlohmann::json::array()},
                           {"freq_hist_data_bar_heights", nlohmann::json::array()},
                           {"logits_hist_data_bar_values", nlohmann::json::array()},
                           {"logits_hist_data_bar_heights", nlohmann::json::array()},
                           {"n_prompts_total", 0},
                           {"n_tokens_in_prompt", 0},
                           {"dataset", ""},
                           {"neuron_alignment_indices", nlohmann::json::array()},
                           {"neuron_alignment_values", nlohmann::json::array()},
                           {"neuron_alignment_l1", nlohmann::json::array()},
                           {"correlated_neurons_indices", nlohmann::json::array()},
                           {"correlated_neurons_l1", nlohmann::json::array()},
                           {"correlated_neurons_pearson", nlohmann::json::array()},
                           {"correlated_features_indices", nlohmann::json::array()},
                           {"correlated_features_l1", nlohmann::json::array()},
                           {"correlated_features_pearson", nlohmann::json::array()},
                           {"decoder_weights_dist", nlohmann::json::array()},
                           {"activations", nlohmann::json::array()}};
    if (corpus) {
      const size_t fi = static_cast<size_t>(f);
      page["frac_nonzero"] = corpus->positions ? static_cast<double>(corpus->fire_count[fi]) /
                                                     static_cast<double>(corpus->positions)
                                               : 0.0;
      nlohmann::json bv = nlohmann::json::array(), bh = nlohmann::json::array();
      for (int b = 0; b < kHistogramBins; ++b) {
        bv.push_back(round3(std::pow(10.0, -3.0 + (b + 0.5) / 5.0)));  // the bin's geometric centre
        bh.push_back(corpus->histogram[fi * kHistogramBins + static_cast<size_t>(b)]);
      }
      page["freq_hist_data_bar_values"] = bv;
      page["freq_hist_data_bar_heights"] = bh;
      page["n_prompts_total"] = corpus->windows;
      page["n_tokens_in_prompt"] = corpus->window;
      page["dataset"] = corpus->corpus;
      if (fi < corpus->top_contexts.size())
        for (const auto& c : corpus->top_contexts[fi]) {
          nlohmann::json toks = nlohmann::json::array(), vals = nlohmann::json::array();
          for (size_t k = 0; k < c.ids.size(); ++k) {
            toks.push_back(text(c.ids[k]));
            vals.push_back(k < c.values.size() ? round3(c.values[k]) : 0.0);
          }
          page["activations"].push_back(
              {{"bin_min", -1}, {"bin_max", round3(c.activation)}, {"bin_contains", -1}, {"tokens", toks}, {"values", vals}});
        }
    }
    features.push_back(std::move(page));
  }
  return {{"model_id", o.model_id}, {"layer", layer}, {"sae_set", o.sae_set.empty() ? a.sae_source : o.sae_set},
          {"features", features}};
}

}  // namespace vocablens
