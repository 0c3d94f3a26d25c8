// vocablens/declared_options.hpp — an analysis's typed options (HeadsOptions, LensOptions, ...) read from the
// options its declaration resolved (vocablens/analysis_registry.hpp): the one conversion every surface shares.
//
// run_analysis() does this inside the analysis's entry; a surface that needs the typed result itself (the CLI's
// table printers read HeadsAnalysis, LensResult, ...) resolves the options, then calls the same reader:
//
//   const auto& a = vocablens::find_analysis("heads");
//   nlohmann::json o = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
//   vocablens::AnalysisRequest q{model, tok.get(), o, {}, nullptr, vocablens::Surface::Cli, &a.decl};
//   vocablens::HeadsOptions ho = vocablens::entries::heads_options(q);   // checked against the model
//   auto heads = vocablens::analyze_heads(model, ho, tok.get());        // == what run_analysis returns
//
// Guarantees: the readers check what needs the model (layer and head ranges, tokens, the tuned lens) and throw
// UsageError naming the option as q.surface spells it; they never change the options' declared defaults.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vocablens {

struct AnalysisRequest;
struct HeadsOptions;
struct LensOptions;
struct CorpusLensOptions;
struct AttributionOptions;
struct NeighbourOptions;
struct KnnOptions;
struct PositionOptions;
struct TunedLensEvalOptions;

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
/// `knn`: k, block (the space, matrix and edges are read as given).
KnnOptions knn_options(const nlohmann::json& resolved);
/// `positions`: kind, max_positions, k, components.
PositionOptions position_options(const nlohmann::json& resolved);
/// `tuned_lens_eval`: window, max_tokens (the path and the tuned lens are read as given).
TunedLensEvalOptions tuned_lens_eval_options(const nlohmann::json& resolved);

}  // namespace entries
}  // namespace vocablens
