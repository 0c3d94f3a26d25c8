// vocablens/neuronpedia.hpp — SAE features as Neuronpedia's dashboard batch JSON, the file SAEDashboard's
// neuronpedia runner writes and Neuronpedia uploads (one object per feature, its field names):
//
//   {"model_id": .., "layer": .., "sae_set": .., "features": [
//     {"feature_index": f, "pos_str": [..], "pos_values": [..], "neg_str": [..], "neg_values": [..],
//      "frac_nonzero": density, "freq_hist_data_bar_values": [..], "freq_hist_data_bar_heights": [..],
//      "logits_hist_data_bar_values": [], "logits_hist_data_bar_heights": [],
//      "n_prompts_total": windows, "n_tokens_in_prompt": window, "dataset": corpus,
//      "neuron_alignment_*": [], "correlated_*": [], "decoder_weights_dist": [],
//      "activations": [{"bin_min": -1, "bin_max": max, "bin_contains": -1, "tokens": [..], "values": [..]}]}]}
//
// pos/neg: the feature's top and bottom logit weights (vocablens/features.hpp), token strings as the
// tokenizer decodes them (raw text, not the display form), values rounded to 3 decimals as SAEDashboard
// rounds them. From a corpus run (vocablens/sae_corpus.hpp), when given: frac_nonzero = firing density,
// the activation histogram (bar_values = each log-spaced bin's geometric centre, bar_heights = counts; SAEDashboard
// uses linear bins, Neuronpedia draws whatever bars it is given), and each max-activating context as one
// "TOP ACTIVATIONS" entry (bin_min -1, bin_max its activation, bin_contains -1: SAEDashboard's convention for
// that group). Without a corpus those are 0 / empty. Fields vocablens does not compute (logit histogram,
// neuron alignment, correlations) are written as empty lists so that readers find every key.
//
// Read from the Results of the declared analyses (what `vocablens features --neuronpedia` runs): feature_logits'
// arrays feature_ids, top_ids/_values, bottom_ids/_values and, from a feature_corpus Result of the same SAE,
// fire_count, histogram and the context_* arrays; a Result of another kind or without them is a UsageError.
//
//   auto logits = vocablens::run_analysis(vocablens::find_analysis("feature_logits"), model, tok.get(), opts, s);
//   auto corpus = vocablens::run_analysis(vocablens::find_analysis("feature_corpus"), model, tok.get(), copts, s);
//   nlohmann::json batch = vocablens::neuronpedia_batch(logits, &corpus, tok.get(), {"gpt2-small", "res-jb"});
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace vocablens {

class Tokenizer;
struct Result;

struct NeuronpediaOptions {
  std::string model_id;  ///< Neuronpedia's model id ("" = the model's source)
  std::string sae_set;   ///< the source set ("" = the SAE's path)
  int64_t layer = -1;    ///< -1: read from the hook name (blocks.N.…), else 0
};

/// The batch for every feature of the feature_logits Result `logits` (corpus may be null, or must be a
/// feature_corpus Result of the same SAE).
nlohmann::json neuronpedia_batch(const Result& logits, const Result* corpus, const Tokenizer* tok,
                                 const NeuronpediaOptions& o = {});

}  // namespace vocablens
