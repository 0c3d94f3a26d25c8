// Neuronpedia's dashboard batch JSON from feature logit weights and a corpus run (see vocablens/neuronpedia.hpp).
#include "vocablens/neuronpedia.hpp"

#include <algorithm>
#include <cmath>
#include <regex>

#include "vocablens/error.hpp"
#include "vocablens/report.hpp"
#include "vocablens/result.hpp"
#include "vocablens/sae_corpus.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {
namespace {

double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

// Array `name` of a Result, with the dtype and size its kind writes (a Result of another kind or version is a
// UsageError naming the array, never a misread buffer).
template <class T>
const T* np_array(const Result& r, const char* name, const char* dtype, size_t numel) {
  auto it = r.arrays.find(name);
  if (it == r.arrays.end() || it->second.dtype != dtype || static_cast<size_t>(it->second.numel()) != numel)
    throw UsageError("neuronpedia: the " + r.kind + " result has no array '" + std::string(name) + "' of " +
                     std::to_string(numel) + " " + dtype + " values");
  return reinterpret_cast<const T*>(it->second.bytes.data());
}

size_t np_rows(const Result& r, const char* name) {
  auto it = r.arrays.find(name);
  return it == r.arrays.end() || it->second.shape.empty() ? 0 : static_cast<size_t>(it->second.shape[0]);
}

}  // namespace

nlohmann::json neuronpedia_batch(const Result& logits, const Result* corpus, const Tokenizer* tok, const NeuronpediaOptions& o) {
  if (logits.kind != "features") throw UsageError("neuronpedia: expected a feature_logits result, not " + logits.kind);
  if (corpus && corpus->kind != "feature_corpus")
    throw UsageError("neuronpedia: expected a feature_corpus result, not " + corpus->kind);
  const int64_t d_sae = logits.summary.at("d_sae").get<int64_t>();
  if (corpus && corpus->summary.at("metrics").at("d_sae").get<int64_t>() != d_sae)
    throw UsageError("the corpus run has " + std::to_string(corpus->summary["metrics"]["d_sae"].get<int64_t>()) +
                     " features, the SAE " + std::to_string(d_sae) + ": not the same SAE");
  const std::string hook_name = logits.summary.at("hook_name").get<std::string>();
  const std::string sae_source = logits.settings.at("sae").get<std::string>();
  const size_t N = np_rows(logits, "feature_ids"), k = static_cast<size_t>(logits.settings.at("top_k").get<int64_t>());
  const int64_t* feature_ids = np_array<int64_t>(logits, "feature_ids", "<i8", N);
  const int64_t* top_ids = np_array<int64_t>(logits, "top_ids", "<i8", N * k);
  const double* top_values = np_array<double>(logits, "top_values", "<f8", N * k);
  const bool bottom = logits.arrays.count("bottom_ids") > 0;
  const int64_t* bottom_ids = bottom ? np_array<int64_t>(logits, "bottom_ids", "<i8", N * k) : nullptr;
  const double* bottom_values = bottom ? np_array<double>(logits, "bottom_values", "<f8", N * k) : nullptr;
  // The corpus run's arrays: firing counts and histograms per feature, its contexts one row each, [R, C].
  const int64_t* fire_count = nullptr;
  const int64_t* histogram = nullptr;
  const int64_t *context_features = nullptr, *context_ids = nullptr;
  const double *context_activations = nullptr, *context_values = nullptr;
  size_t R = 0, C = 0;
  int64_t positions = 0;
  if (corpus) {
    const size_t D = static_cast<size_t>(d_sae);
    positions = corpus->summary["metrics"].at("positions").get<int64_t>();
    fire_count = np_array<int64_t>(*corpus, "fire_count", "<i8", D);
    histogram = np_array<int64_t>(*corpus, "histogram", "<i8", D * kHistogramBins);
    R = np_rows(*corpus, "context_features");
    const auto ids = corpus->arrays.find("context_ids");
    C = ids == corpus->arrays.end() || ids->second.shape.size() != 2 ? 0 : static_cast<size_t>(ids->second.shape[1]);
    context_features = np_array<int64_t>(*corpus, "context_features", "<i8", R);
    context_activations = np_array<double>(*corpus, "context_activations", "<f8", R);
    context_ids = np_array<int64_t>(*corpus, "context_ids", "<i8", R * C);
    context_values = np_array<double>(*corpus, "context_values", "<f8", R * C);
  }
  // Raw token text (what SAEDashboard's vocab dict holds), made valid UTF-8 (a byte token's partial character
  // becomes U+FFFD), "#id" without a tokenizer.
  auto text = [&](int64_t id) -> std::string {
    if (!tok) return "#" + std::to_string(id);
    try {
      return valid_utf8(tok->decode({id}));
    } catch (const Error&) { return tok->display(id); }
  };
  int64_t layer = o.layer;
  if (layer < 0) {
    std::smatch m;
    layer = std::regex_search(hook_name, m, std::regex("blocks\\.(\\d+)\\.")) ? std::stoll(m[1].str()) : 0;
  }
  nlohmann::json features = nlohmann::json::array();
  for (size_t q = 0; q < N; ++q) {
    const int64_t f = feature_ids[q];
    nlohmann::json ps = nlohmann::json::array(), pv = nlohmann::json::array(), ns = nlohmann::json::array(),
                   nv = nlohmann::json::array();
    for (size_t e = q * k; e < (q + 1) * k && top_ids[e] >= 0; ++e)
      ps.push_back(text(top_ids[e])), pv.push_back(round3(top_values[e]));
    if (bottom)
      for (size_t e = q * k; e < (q + 1) * k && bottom_ids[e] >= 0; ++e)
        ns.push_back(text(bottom_ids[e])), nv.push_back(round3(bottom_values[e]));
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
      page["frac_nonzero"] = positions ? static_cast<double>(fire_count[fi]) / static_cast<double>(positions) : 0.0;
      nlohmann::json bv = nlohmann::json::array(), bh = nlohmann::json::array();
      for (int b = 0; b < kHistogramBins; ++b) {
        bv.push_back(round3(std::pow(10.0, -3.0 + (b + 0.5) / 5.0)));  // the bin's geometric centre
        bh.push_back(histogram[fi * kHistogramBins + static_cast<size_t>(b)]);
      }
      page["freq_hist_data_bar_values"] = bv;
      page["freq_hist_data_bar_heights"] = bh;
      page["n_prompts_total"] = corpus->summary["metrics"].at("windows");
      page["n_tokens_in_prompt"] = corpus->settings.at("window");
      page["dataset"] = corpus->settings.at("corpus");
      // The feature's contexts, strongest first: rows sorted by feature, so one binary search finds them (a
      // context's ids end at -1).
      const auto rows = std::equal_range(context_features, context_features + R, f);
      for (size_t c = static_cast<size_t>(rows.first - context_features); c < static_cast<size_t>(rows.second - context_features);
           ++c) {
        nlohmann::json toks = nlohmann::json::array(), vals = nlohmann::json::array();
        for (size_t j = c * C; j < (c + 1) * C && context_ids[j] >= 0; ++j) {
          toks.push_back(text(context_ids[j]));
          vals.push_back(round3(context_values[j]));
        }
        page["activations"].push_back({{"bin_min", -1},
                                       {"bin_max", round3(context_activations[c])},
                                       {"bin_contains", -1},
                                       {"tokens", toks},
                                       {"values", vals}});
      }
    }
    features.push_back(std::move(page));
  }
  return {{"model_id", o.model_id},
          {"layer", layer},
          {"sae_set", o.sae_set.empty() ? sae_source : o.sae_set},
          {"features", features}};
}

}  // namespace vocablens
