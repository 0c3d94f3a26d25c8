// analyses/entry_common.hpp — option declarations and readers several analyses' entries share (private to
// analyses/*_entry.cpp; see vocablens/analysis_registry.hpp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocablens/options.hpp"
#include "vocablens/token_filter.hpp"
#include "vocablens/unembed.hpp"

#include <ATen/ATen.h>

namespace vocablens {
class Model;
class Tokenizer;
struct AnalysisRequest;
struct AnalysisEstimate;
struct CacheSpec;
struct Sae;
struct ExpertAblation;
struct ExpertScale;
enum class ExpertAblationMode;
class HookList;
}  // namespace vocablens

namespace vocablens::entry {

/// alpha_only, allow (CLI: --alpha-only, --allow-list FILE).
std::vector<OptionDecl> token_filter_decls();
TokenFilter token_filter_of(const nlohmann::json& o);

/// inverse (pinv | transpose | embed), pinv_rtol.
std::vector<OptionDecl> inverse_decls(const std::string& what);
InverseKind inverse_of(const nlohmann::json& o);

/// A layer option read against the model: negative counts from the end; UsageError naming the option (as the
/// request's surface spells it) when out of range.
int64_t layer_of(const AnalysisRequest& q, const char* name);

/// An Indices option of layers (or heads) checked against the model's count: UsageError
/// "<analysis>: <option>: layer 7 is out of range (0..4)".
std::vector<int64_t> indices_below(const AnalysisRequest& q, const char* name, int64_t count, const std::string& what);

/// prompt (Prompt, required) and bos (tri-state Flag): the input of a forward-pass analysis.
std::vector<OptionDecl> prompt_decls();
/// The prompt's ids: text encoded with the tokenizer (BOS as `bos` says, else the tokenizer's convention),
/// or ids checked against the vocabulary; UsageError when longer than the model's context.
std::vector<int64_t> prompt_of(const AnalysisRequest& q);
/// The prompt's text for the Result's settings: as given, or the ids decoded when given as ids (and a
/// tokenizer is there).
std::string prompt_text(const AnalysisRequest& q, const std::vector<int64_t>& ids);
/// Another Prompt option (patch's clean / corrupt, ablate's mean_over entries): as prompt_of, the value `v`
/// read for option `name`.
std::vector<int64_t> prompt_ids_of(const AnalysisRequest& q, const nlohmann::json& v, const std::string& name);

/// An Sae option: the vocablens.Sae Python handed over (q.inputs), else the file at the option's path, with
/// the hook point overridden by the Text option `hook_option` when given; checked against the model.
std::shared_ptr<const Sae> sae_of(const AnalysisRequest& q, const char* name, const char* hook_option);

/// A Matrix option: the tensor Python handed over (q.inputs; 2-D, floating), else model_matrix(model, value):
/// "W_E", "W_in.2", ... or a .npy path (refused over HTTP: a file on the server). `label` receives the name the
/// Result records ("tensor" for a tensor), `row_kind` "token", "position", "neuron" or "row".
at::Tensor matrix_of(const AnalysisRequest& q, const char* name, std::string& label, std::string& row_kind);

/// A Model option: the vocablens.Model Python handed over (q.inputs), else the model at the option's path with
/// the tokenizer beside it (tokenizer: a path, "" = found beside the model). Owns what it loaded.
struct SecondModel {
  const Model* model = nullptr;
  const Tokenizer* tok = nullptr;
  std::shared_ptr<Model> owned_model;
  std::shared_ptr<Tokenizer> owned_tok;
};
SecondModel model_of(const AnalysisRequest& q, const char* name, const std::string& tokenizer = "");

/// True when the prompt was given as token ids (the Result then also records them as settings.prompt_ids).
bool prompt_is_ids(const nlohmann::json& o);

/// One token: an id (checked against the vocabulary), "#ID", its bytes or display form, or text that the
/// tokenizer encodes to exactly one token. UsageError naming the option otherwise.
int64_t token_of(const AnalysisRequest& q, const nlohmann::json& v, const std::string& option);

/// The estimate of an analysis that is one forward pass of T tokens recording `spec` (with the logits), plus
/// `extra_bytes` held beside it (named `extra`): attribute, project, ablate, patch.
/// The runtime and the weights as stored (model_memory) plus one phase of `bytes`: the estimate of an analysis
/// that reads weights only (no forward pass).
AnalysisEstimate weights_phase_estimate(const AnalysisRequest& q, const std::string& phase, double bytes, std::string what,
                                        std::string reduce);

/// What space_vectors (vocablens/neighbours.hpp) adds for the request's `space` option: nothing for E, the
/// pseudo-inverse's SVD of [V, d] (three copies) for E+, unless its cache file is read.
double space_vectors_bytes(const AnalysisRequest& q);

AnalysisEstimate one_forward_estimate(const AnalysisRequest& q, int64_t T, const CacheSpec& spec, bool logits,
                                      const std::string& extra, double extra_bytes, bool extra_is_phase, std::string what,
                                      std::string reduce);

/// ablate_expert (Texts, "L.E"), ablate_mode (zero | reroute) and scale_expert: the experts, lens and attribute analyses' ablation of
/// mixture-of-experts experts (vocablens/experts.hpp).
std::vector<OptionDecl> expert_ablation_decls();
/// Reads them, checked against the model (UsageError naming the model when it has no experts).
void expert_ablations_of(const AnalysisRequest& q, std::vector<ExpertAblation>& out, ExpertAblationMode& mode);
/// scale_expert (Texts, "L.E=FACTOR"), declared beside them: the experts' outputs scaled where chosen.
std::vector<ExpertScale> expert_scales_of(const AnalysisRequest& q);

/// The three options of a request read once, for an analysis that runs the model's forward with them (lens,
/// attribute): `hooks` the edits, added before the analysis's own (null when none is given); `settings` what its
/// Result says of them ({"ablate_expert": ["L.E", ...], "ablate_mode", "scale_expert": ["L.E=F", ...]}, empty
/// when none), so that a result read from an edited forward says which.
struct ExpertInterventions {
  std::shared_ptr<HookList> hooks;
  nlohmann::json settings = nlohmann::json::object();
};
ExpertInterventions expert_interventions_of(const AnalysisRequest& q);

/// Appends `more` to `into` (declarations are built from shared pieces).
void append(std::vector<OptionDecl>& into, const std::vector<OptionDecl>& more);

}  // namespace vocablens::entry
