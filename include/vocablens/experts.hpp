// vocablens/experts.hpp — the experts of a mixture-of-experts model in vocabulary space: per MoE layer, each
// expert's load, the tokens routed to it most, and what it writes through the unembedding W_U; and the ablation
// of chosen experts (`--ablate-expert L.E`), for this analysis and the lens.
//
// A forward of the prompt (or of each window of a corpus) records the router's points of every MoE layer
// (vocablens/cache.hpp: expert_indices.L [T, k], expert_weights.L [T, k], expert_out.L [T, k, d_model], each
// chosen expert's unweighted output). Per layer and expert e, over the positions t whose k chosen experts
// include e:
//   routed      = #{t}                          load = routed / positions (the k experts' loads sum to k)
//   mean_weight = mean of its router weight over those t
//   direction   = mean of its unweighted output over those t   [d_model]
//   writes      = direction @ W_U   [V]: its top and bottom tokens (as the neurons' values: W_U alone, no final norm)
//   tokens      = the input tokens at those t, by count (with how often each occurs at all: count / total is
//                 how much of that token the expert takes)
// For a prompt, per (position, slot) too: the expert's own output @ W_U, top and bottom tokens.
//
//   vocablens::ExpertsOptions o;
//   o.ablate = vocablens::parse_expert_ablations({"0.5"}, model.config());   // layer 0, expert 5
//   vocablens::ExpertsReport r = vocablens::analyze_experts(model, ids, o);
//   r.layers[0].experts[3].load;    r.to_result(tok.get());   // kind "experts"
//
// Ablation: mode Zero sets the expert's router weight to 0 where it was chosen, the other chosen experts' weights
// unchanged (not renormalised): mlp_out changes by exactly the expert's weighted output, as a zero-ablated head's
// does. Mode Reroute sets its router logit to -inf before the softmax: no token chooses it, each goes to its
// next-best expert with the weights of the softmax over the remaining experts (renormalised over the k where the
// family does) — the model as if the expert had been pruned.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "vocablens/hooks.hpp"
#include "vocablens/result.hpp"

namespace vocablens {

class Tokenizer;

struct ExpertAblation {
  int64_t layer = 0;
  int64_t expert = 0;
};

enum class ExpertAblationMode { Zero, Reroute };
ExpertAblationMode parse_expert_ablation_mode(const std::string& s);  ///< "zero" | "reroute"; UsageError otherwise
const char* to_string(ExpertAblationMode m);

/// "L.E" specs (L may be negative: from the end) checked against the model: UsageError naming the model when it
/// has no experts, and the spec when malformed or out of range (one line each).
std::vector<ExpertAblation> parse_expert_ablations(const std::vector<std::string>& specs, const ModelConfig& cfg,
                                                   const std::string& model_name);

/// Adds the hooks that ablate `a` (see above) to `hooks`. Reroute refuses, before any work, a layer left with
/// fewer than k experts.
void add_expert_ablations(HookList& hooks, const ModelConfig& cfg, const std::vector<ExpertAblation>& a, ExpertAblationMode mode);

/// `--scale-expert L.E=FACTOR`: the expert's router weight multiplied by `factor` wherever it was chosen, the
/// routing and the other experts' weights unchanged, so mlp_out changes by (factor - 1) x its weighted output
/// (factor 0 is the Zero ablation, factor 1 no change, a negative factor reverses what it writes).
struct ExpertScale {
  int64_t layer = 0;
  int64_t expert = 0;
  double factor = 1.0;
};

/// "L.E=FACTOR" specs (L may be negative) checked against the model as parse_expert_ablations does; a factor
/// that is not a finite number, or an expert given twice, is refused in one line.
std::vector<ExpertScale> parse_expert_scales(const std::vector<std::string>& specs, const ModelConfig& cfg,
                                             const std::string& model_name);

/// Adds the hooks that scale `s` (see above) to `hooks`; after add_expert_ablations when both are given, so a
/// rerouted layer's scaling reads the experts that run.
void add_expert_scales(HookList& hooks, const std::vector<ExpertScale>& s);

/// UsageError "<model>: <what> needs a mixture of experts, and this model has none (...)" unless cfg has experts.
void require_experts(const ModelConfig& cfg, const std::string& model_name, const std::string& what);

struct ExpertsOptions {
  int64_t top_k = 10;           ///< tokens per written list (top and bottom)
  int64_t top_routed = 10;      ///< routed tokens listed per expert
  bool per_token = true;        ///< a prompt's per-(position, slot) lists
  std::vector<int64_t> layers;  ///< MoE layers to report; empty = all
  std::vector<ExpertAblation> ablate;
  ExpertAblationMode mode = ExpertAblationMode::Zero;
  std::vector<ExpertScale> scale;
  // corpus form
  int64_t window = 0;      ///< tokens per window; 0 = the model's context
  int64_t max_tokens = 0;  ///< 0 = the whole file
  /// Under mpirun (vocablens/dist.hpp), share the windows over the ranks: every rank returns the whole report.
  bool distributed = true;
  std::function<void(int64_t, int64_t)> progress;
};

struct ExpertStats {
  int64_t expert = 0;
  int64_t routed = 0;
  double load = 0, mean_weight = 0, direction_norm = 0;
  std::vector<std::pair<int64_t, int64_t>> tokens;                    ///< (token id, count), most routed first
  std::vector<std::pair<int64_t, double>> writes_top, writes_bottom;  ///< (token id, score of direction @ W_U)
};

struct ExpertTokenWrite {  ///< a prompt's (position, slot)
  int64_t layer = 0, position = 0, slot = 0, expert = 0;
  double weight = 0;
  std::vector<std::pair<int64_t, double>> top, bottom;
};

struct ExpertsLayer {
  int64_t layer = 0;
  std::vector<ExpertStats> experts;  ///< all n_experts, by index
};

struct ExpertsReport {
  std::string model, source;  ///< source: the prompt's text or the corpus path
  bool corpus = false;
  int64_t positions = 0, n_experts = 0, k = 0;
  int ranks = 1;             ///< corpus form: the processes the windows were shared over (mpirun)
  std::vector<int64_t> ids;  ///< the prompt's tokens (prompt form)
  std::vector<ExpertsLayer> layers;
  std::vector<ExpertTokenWrite> per_token;
  std::map<int64_t, int64_t> token_totals;  ///< how often each token occurs among the positions
  /// Prompt form with an ablation or a scaling: the last position's top tokens, unablated and ablated, and the largest
  /// |logit change| over every position and token.
  std::vector<std::pair<int64_t, double>> next_base, next_ablated;
  double max_logit_change = 0;
  ExpertsOptions options;
  Result to_result(const Tokenizer* tok) const;
};

/// One prompt (ids [T]).
ExpertsReport analyze_experts(const Model& m, const std::vector<int64_t>& ids, const ExpertsOptions& o);
/// A text file read in windows (the corpus analyses' cut, analyses/corpus_windows.hpp): a window's first token,
/// already counted as the previous window's last, is not counted again.
ExpertsReport analyze_experts_corpus(const Model& m, const Tokenizer& tok, const std::string& path, const ExpertsOptions& o);

}  // namespace vocablens
