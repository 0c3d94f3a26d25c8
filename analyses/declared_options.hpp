// analyses/declared_options.hpp — internal (not installed): an analysis's typed options (HeadsOptions, LensOptions,
// ...) read from the options its declaration resolved (vocablens/analysis_registry.hpp), the one conversion the
// entries share, and the few entry-level compositions a surface calls where run_analysis cannot (no Model: a
// word-vector directory's spectrum and neighbours, `compare` of two run directories).
//
// run_analysis() does the conversion inside the analysis's entry; the CLI and the Python module reach this header
// (as "analyses/declared_options.hpp", the repository root on their include path) only for those compositions and
// for the few readers a command needs before the run (the `features` command's SAE and prompt):
//
//   nlohmann::json o = vocablens::resolve_options(vocablens::entries::compare_declaration(), given, Surface::Cli);
//   vocablens::Result r = vocablens::entries::compare_run_results(run_a, run_b, "runs/fr", "runs/it", o);
//
// Guarantees: the readers check what needs the model (layer and head ranges, tokens, the tuned lens) and throw
// UsageError naming the option as q.surface spells it; they never change the options' declared defaults.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocablens/options.hpp"
#include "vocablens/tensor_fwd.hpp"

namespace vocablens {

struct AnalysisRequest;
struct AnalysisEstimate;
struct AnalysisInputs;
struct HeadsOptions;
struct LensOptions;
struct CorpusLensOptions;
struct AttributionOptions;
struct NeighbourOptions;
struct KnnOptions;
struct PositionOptions;
struct TunedLensEvalOptions;
struct Sae;
struct MemoryEstimate;
struct FeatureLogitsOptions;
struct FeatureLensOptions;
struct SaeCorpusOptions;
struct PatchOptions;
struct AblationOptions;
struct SpectrumOptions;
struct SpectrumResult;
struct AnisotropyOptions;
struct AnisotropyResult;
struct Result;
class Tokenizer;
struct HiddenProjectionOptions;
struct CompareEmbeddingsResult;
struct LensCompareOptions;
class Model;

namespace entries {

/// The `prompt` option of a forward-pass analysis as token ids: text encoded (BOS as `bos` says), ids checked
/// against the vocabulary, the length against the model's context.
std::vector<int64_t> prompt_ids(const AnalysisRequest& q);
/// The prompt as the Result's settings record it: the text given, or the ids decoded.
std::string prompt_text(const AnalysisRequest& q, const std::vector<int64_t>& ids);

/// `heads`: kinds, layers and heads (checked against the model), tokens resolved with the tokenizer, filter.
HeadsOptions heads_options(const AnalysisRequest& q);
/// `lens` (and the reading options of `lens_corpus`, `lens_batch`): top_k, unembed, target (resolved), tuned
/// (loaded and checked against the model). Not the prompt.
LensOptions lens_options(const AnalysisRequest& q);
/// `lens_corpus`: the lens options, window, max_tokens (not the path, not the progress).
CorpusLensOptions corpus_options(const AnalysisRequest& q);
/// `attribute`: target and wrong (resolved), position. Not the prompt.
AttributionOptions attribution_options(const AnalysisRequest& q);
/// `neighbours`: k, compose, raw, include_inputs, prefix_space, from the resolved options alone (the CLI also
/// reads word-vector directories, which have no Model); the query, space and matrix are read as given.
NeighbourOptions neighbour_options(const nlohmann::json& resolved);
/// `neighbours` over given rows X [V, d] (the entry's run once it has the space's vectors; the CLI's path for a
/// word-vector directory, which has no Model): the query, matrix and space labels as resolved.
Result neighbours_of_vectors(const at::Tensor& X, const Tokenizer* tok, const nlohmann::json& resolved);
/// `knn`: k, block (the space, matrix and edges are read as given).
KnnOptions knn_options(const nlohmann::json& resolved);
/// `positions`: kind, max_positions, k, components.
PositionOptions position_options(const nlohmann::json& resolved);
/// `tuned_lens_eval`: window, max_tokens (the path and the tuned lens are read as given).
TunedLensEvalOptions tuned_lens_eval_options(const nlohmann::json& resolved);

/// `feature_logits`, `feature_lens`, `feature_corpus`: the SAE (`sae`, with `hook` overriding its hook point; the
/// vocablens.Sae in q.inputs, else loaded from the path), checked against the model.
std::shared_ptr<const Sae> sae_option(const AnalysisRequest& q);
/// `features --neuronpedia FILE --corpus PATH`: the corpus statistics (`corpus_given`, feature_corpus's options),
/// then the feature logits (`logits_given`, feature_logits'), on one model and SAE: the pair's estimate from the
/// two declared estimates, the logits' working set one more phase of the corpus pass's.
AnalysisEstimate neuronpedia_corpus_estimate(const Model& m, const Tokenizer* tok, const nlohmann::json& logits_given,
                                             const nlohmann::json& corpus_given, Surface surface, const AnalysisInputs* inputs);
/// `feature_logits`: top_k, features, bottom, final_norm, the token filter, q.progress (not the SAE, not encoder).
FeatureLogitsOptions feature_logits_options(const AnalysisRequest& q);
/// `feature_lens`: top_features, top_k, final_norm (not the SAE, not the prompt).
FeatureLensOptions feature_lens_options(const nlohmann::json& resolved);
/// `feature_corpus`: window, max_tokens, contexts, ce (not the SAE, not the path, not the progress).
SaeCorpusOptions feature_corpus_options(const nlohmann::json& resolved);
/// `patch`: over, position, target and wrong (resolved with the tokenizer), q.progress. Not the prompts.
PatchOptions patch_options(const AnalysisRequest& q);
/// `patch`: the clean and corrupt prompts as ids; UsageError naming both when their token counts differ.
std::pair<std::vector<int64_t>, std::vector<int64_t>> patch_prompts(const AnalysisRequest& q);
/// `ablate`: the sites (UsageError when none), mode, the mean_over prompts as ids, target, position, top_k.
AblationOptions ablation_options(const AnalysisRequest& q);
/// `spectrum`: k, method, ncv, loadings, left_vectors (the matrix is read as given).
SpectrumOptions spectrum_options(const nlohmann::json& resolved);
/// `spectrum`: remove_top.
AnisotropyOptions anisotropy_options(const nlohmann::json& resolved);
/// `spectrum`'s Result: the spectrum's, with the anisotropy (when computed) as summary.anisotropy and its table.
Result spectrum_result(const SpectrumResult& s, const AnisotropyResult* a, const Tokenizer* tok, const nlohmann::json& resolved);
/// `spectrum` of the rows of M (what the entry runs once it has the matrix; the CLI's path for a word-vector
/// directory, which has no Model): the spectrum, the anisotropy when asked, as spectrum_result. `tok` names the
/// rows when row_kind is "token".
Result spectrum_of_matrix(const at::Tensor& M, const std::string& label, const std::string& row_kind, const Tokenizer* tok,
                          const nlohmann::json& resolved);
/// `project`: hook (NAME or NAME.LAYER) and layer, top_k, positions, final_norm, read, inverse, filter. Not the prompt.
HiddenProjectionOptions projection_options(const AnalysisRequest& q);
/// `compare_embeddings`: the comparison of q.model (aligned) onto `b`, with the resolved matrix, k, moved, spectra,
/// spectrum_k; UsageError when a model has no tokenizer (tokens are matched by their bytes).
CompareEmbeddingsResult compare_two_models(const AnalysisRequest& q, const Model& b, const Tokenizer* tok_b);
/// `compare` (two lens runs, no model: declared, not registered; analyses/compare_options.cpp): its declaration,
/// from which `vocablens compare`'s flags and vocablens.compare()'s keywords are made.
const AnalysisDecl& compare_declaration();
/// `compare`: align (not the runs' names).
LensCompareOptions compare_options(const nlohmann::json& resolved);
/// `compare` as every surface runs it: runs `a` and `b` (read_lens_run, or lens Results in memory) compared with the
/// resolved options; the Result's provenance is A's, with both runs' under run_a / run_b (`dir`: the directory, ""
/// for a Result in memory). A non-empty dir also names the run in messages and the report.
Result compare_run_results(const Result& a, const Result& b, const std::string& dir_a, const std::string& dir_b,
                           const nlohmann::json& resolved);

}  // namespace entries
}  // namespace vocablens
